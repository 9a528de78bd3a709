"""The lean in-process Task Execution API of the ``dag.test()`` runs (``akf_devtools.sandbox.dag_test``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from akf_devtools.sandbox.dag_test import main_block

pytestmark = pytest.mark.slow  # a Python process of its own, importing Airflow's API server


def test_the_api_serves_the_sdks_version_and_only_it():
    # In a process of its own: the function changes Airflow's module state for the rest of the process.
    script = textwrap.dedent(
        """
        import json

        from airflow.api_fastapi.execution_api.app import InProcessExecutionAPI
        from airflow.sdk.api.datamodels._generated import API_VERSION
        from akf_devtools.sandbox.dag_test import serve_only_the_sdk_api_version

        assert serve_only_the_sdk_api_version() is True
        app = InProcessExecutionAPI().app
        app._cadwyn_initialize()
        served = sorted(str(version) for version in app.router.versioned_routers)
        paths = {route.path for route in app.router.versioned_routers[API_VERSION].routes}
        print("RESULT", json.dumps([served, API_VERSION, "/task-instances/{task_instance_id}/run" in paths]))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    served, sdk_version, has_run_route = json.loads(line.removeprefix("RESULT "))
    assert served == [sdk_version], f"the API serves {served}, the SDK speaks {sdk_version}"
    assert has_run_route, "the route that starts a task is missing"


def test_the_main_block_runs_the_dag_once_with_its_conf_and_prints_the_state():
    block = main_block({"force": True})
    assert block.startswith("if __name__ == '__main__':\n")
    assert "serve_only_the_sdk_api_version()" in block and "preload_in_background()" in block
    assert "dag.test(run_conf={'force': True})" in block
    compile(block, "<main>", "exec")


def test_preloading_imports_the_modules_and_leaves_a_missing_one_to_its_task():
    from akf_devtools.sandbox.dag_test import PRELOADED, preload_in_background

    assert PRELOADED == ("airflow.providers.apache.spark.hooks.spark_submit",)
    sys.modules.pop("colorsys", None)
    preload_in_background(("no_such_module_akf", "colorsys")).join(timeout=30)
    assert "colorsys" in sys.modules and "no_such_module_akf" not in sys.modules

"""The Airflow side installs without pyspark (the provider's ``spark`` extra): no module of the provider, and
none of the DAGs the DAG file builds, imports pyspark or delta when loaded. Only a running driver does."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a Python process of its own, importing Airflow

REPO = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent(
    """
    import importlib, pkgutil, sys

    class NoSpark:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("pyspark", "delta"):
                raise ImportError(f"{name} is not installed (blocked by the test)")
            return None

    sys.meta_path.insert(0, NoSpark())
    import airflow_kafka_failover

    failed = []
    for module in pkgutil.walk_packages(airflow_kafka_failover.__path__, "airflow_kafka_failover."):
        try:
            importlib.import_module(module.name)
        except ImportError as exc:
            failed.append(f"{module.name}: {exc}")
    from airflow_kafka_failover.workflows.factory import build_dags

    dags = build_dags(sys.argv[1])
    print(f"{len(dags)} dags")
    print("\\n".join(failed))
    sys.exit(1 if failed else 0)
    """
)


def test_every_module_and_the_dags_load_without_pyspark(tmp_path):
    config = REPO / "examples" / "pairs.yaml"
    run = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(config)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " dags" in run.stdout, run.stdout

"""Running a DAG file with ``dag.test()`` in its own process, as the tests and the demo do.

``dag.test()`` serves Airflow's Task Execution API inside the process. On its first request that API builds
its routes for every API version it still supports (ten on Airflow 3.3, through cadwyn): about 4 s of CPU on
a quiet 2-core machine and 10 to 15 s while the test suite loads it, paid by every run, though the task
runner in the same process speaks only the newest version. :func:`serve_only_the_sdk_api_version` builds the
routes of that one version, so a run starts its first task in about a second. The routes, the task runner
and everything they do are Airflow's own; only the older API versions nobody in the process asks for are
not built. Where the installed Airflow is shaped differently, the API is left as it is (and a run is only
slower).

All the tasks of a ``dag.test()`` run share its process, so a module one task imports is loaded once per run.
The Spark provider's ``spark_submit`` module, which a run's ``submit`` task needs, imports the Kubernetes
clients when the cncf-kubernetes provider is installed (as it is in this checkout): 2 s of CPU on the quiet
machine, paid in the middle of every switch. :func:`preload_in_background` imports it on a thread while the
run's first tasks and sensors work and wait, so the switch does not wait for it. A deployment's ``submit``
task is a process of its own and pays it there (the step figures of ``bench_rto.py`` leave it out, as they
leave out the start of each task's process).
"""

from __future__ import annotations

import importlib
import logging
import threading

log = logging.getLogger(__name__)


def serve_only_the_sdk_api_version() -> bool:
    """Make the in-process Task Execution API serve only the version the installed Task SDK speaks.

    Call it before ``dag.test()``. It leaves the API as it is (returning False) when Airflow's modules are
    not where Airflow 3.3 has them, or not shaped as there, or when the SDK speaks another version than the
    API's newest.
    """
    try:
        from airflow.api_fastapi.execution_api import routes, versions
        from airflow.sdk.api.datamodels._generated import API_VERSION
        from cadwyn import HeadVersion, Version, VersionBundle
        from cadwyn.route_generation import _DELETED_ROUTE_TAG
    except ImportError as error:
        log.debug("the Task Execution API serves all its versions: %s", error)
        return False
    newest = getattr(getattr(versions, "bundle", None), "versions", [None])[0]
    newest = getattr(newest, "value", None)
    router = getattr(routes, "execution_api_router", None)
    if newest != API_VERSION or not isinstance(getattr(router, "routes", None), list):
        log.debug("the Task SDK speaks %s, the API's newest is %s: serving all versions", API_VERSION, newest)
        return False
    versions.bundle = VersionBundle(HeadVersion(), Version(newest))
    # Routes that only older versions have are restored by those versions' changes, gone here.
    router.routes = [route for route in router.routes if _DELETED_ROUTE_TAG not in getattr(route, "tags", ())]
    return True


PRELOADED = ("airflow.providers.apache.spark.hooks.spark_submit",)
"""The modules :func:`main_block` has a run import ahead of the task that needs them."""


def preload_in_background(modules: tuple[str, ...] = PRELOADED) -> threading.Thread:
    """Import ``modules`` on a daemon thread (Python's import locks make a task that imports one of them
    meanwhile wait for it); a module that fails to import is left for the task to import and report."""

    def load() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as error:  # the task that needs it imports it again and fails there
                log.debug("preloading %s failed: %s", name, error)

    thread = threading.Thread(target=load, name="akf-preload", daemon=True)
    thread.start()
    return thread


def main_block(run_conf: dict | None) -> str:
    """The ``__main__`` block a DAG file ends with to run itself once with ``dag.test()``.

    It prints ``DAG_RUN_STATE <state>`` last, which the callers read.
    """
    return (
        "if __name__ == '__main__':\n"
        "    from akf_devtools.sandbox import dag_test\n"
        "    dag_test.serve_only_the_sdk_api_version()\n"
        "    dag_test.preload_in_background()\n"
        f"    run = dag.test(run_conf={run_conf!r})\n"
        "    print('DAG_RUN_STATE', run.state)\n"
    )

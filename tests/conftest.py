"""Test-wide settings: an isolated Airflow home, the property tests' profile, and the markers of the tests
that need Kafka or Airflow."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import tests.property_examples  # noqa: F401 - the property tests' counts, loaded before any test module

REPO = Path(__file__).resolve().parents[1]

# Airflow reads these at import time, so they are set before any test module imports airflow.
os.environ.setdefault("AIRFLOW_HOME", str(REPO / ".airflow" / "test"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
# The stories' DAG runs fork from a warm process that imported Airflow once (sandbox/forked_runs.py).
os.environ.setdefault("AKF_FORK_DAG_RUNS", "1")

# The longest files, longest first (seconds of test time in a quiet run of `make test` on the 2-core
# machine, 2026-11-29, from --durations=0, both workers busy), as paths under tests/. `make test` gives whole
# files to two workers in collection order (see pytest_configure), so starting these first keeps one worker
# from running a long chain alone at the end. Refresh when a file's time changes much.
LONGEST_FIRST = (
    "compat/test_airflow_floor.py",  # ~545 s (compatibility lane: 3.1's unit run, oldest stack)
    "integration/test_switch_dags.py",  # ~520 s (jobs on Spark 4.2: drivers without a class-sharing archive)
    "integration/test_keeper.py",  # ~435 s
    "integration/test_fault_matrix.py",  # ~425 s
    "integration/test_state_on_s3.py",  # ~420 s
    "integration/test_three_brokers.py",  # ~345 s
    "integration/test_streaming_job.py",  # ~245 s
    "integration/test_getting_started_walk.py",  # ~205 s
    "integration/test_airflow_ui.py",  # ~205 s
    "integration/test_cluster_managers.py",  # ~200 s
    "integration/test_switch_reads_current_record.py",  # ~175 s
    "integration/test_health_watch.py",  # ~170 s
    "integration/test_translation_edges.py",  # ~145 s
    "integration/test_security.py",  # ~140 s
    "integration/test_translation.py",  # ~115 s
    "integration/test_delta_sink.py",  # ~90 s
)

AIRFLOW_SIDE = (
    "cluster_managers",
    "hooks",
    "io",
    "switching",
    "triggers",
    "operators",
    "sensors",
    "workflows",
)
"""The packages of the provider's Airflow side: their unit tests are marked ``airflow``."""


PARSING_CONTEXT_VARIABLES = ("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "_AIRFLOW_PARSING_CONTEXT_TASK_ID")
"""Where Airflow keeps its DAG parsing context (the DAG a task process parses the DAG file for)."""


@pytest.fixture(autouse=True)
def no_parsing_context() -> Any:
    """Each test starts and ends without a DAG parsing context in the environment. Airflow 3.1's context
    manager sets it and never removes a value that was not there before (``dag.test()`` uses it), so a test
    that ran a DAG would make every later DAG file parse of the same process build one pair's DAGs only."""
    for name in PARSING_CONTEXT_VARIABLES:
        os.environ.pop(name, None)
    yield
    for name in PARSING_CONTEXT_VARIABLES:
        os.environ.pop(name, None)


@pytest.fixture(scope="session", autouse=True)
def spark_local_dirs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Spark's scratch folders (``spark-*``, ``blockmgr-*``) of every driver and executor the tests start, in
    the session's temporary folder instead of /tmp: a driver killed by a test (as switches do) never removes
    its own, and pytest keeps only the last few sessions' folders."""
    os.environ.setdefault("SPARK_LOCAL_DIRS", str(tmp_path_factory.mktemp("spark-local")))


def pytest_configure(config: pytest.Config) -> None:
    """Keep the collection order of whole files under pytest-xdist's ``--dist loadfile``: since 3.7 it hands
    out the files with the most tests first (``--loadscope-reorder``, on by default), which sent the long
    chains of one or a few tests (the compatibility lane, the getting-started walk) to the end of the run and
    left :data:`LONGEST_FIRST` without effect."""
    if getattr(config.option, "loadscopereorder", False):
        config.option.loadscopereorder = False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """With ``AKF_TEST_TIMELINE=<file>``, append one JSON line per test (worker, test, start and end, wall
    clock) to the file: ``scripts/suite_timeline.py`` tells from it when each worker was busy, with what."""
    began = time.time()
    yield
    timeline = os.environ.get("AKF_TEST_TIMELINE")
    if timeline:
        line = {
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "test": item.nodeid,
            "began": round(began, 3),
            "ended": round(time.time(), 3),
        }
        with open(timeline, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark everything under tests/integration as needing the sandbox, so `-m "not sandbox"` skips it, and the
    unit tests of the Airflow side's packages ``airflow`` (``-m "not airflow"`` keeps the pure and driver-side
    ones); put the :data:`LONGEST_FIRST` files first (a file's tests keep their order)."""
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.sandbox)
        elif "unit" in item.path.parts and set(item.path.parts) & set(AIRFLOW_SIDE):
            item.add_marker(pytest.mark.airflow)

    def rank(item: pytest.Item) -> int:
        name = item.path.relative_to(REPO / "tests").as_posix()
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)

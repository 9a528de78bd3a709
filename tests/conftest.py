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

# The longest files, longest first, as paths under tests/ (seconds of test time in fresh-clone runs of
# `make test` on the quiet 2-core machine: `AKF_TEST_TIMELINE=... make test`, then scripts/suite_timeline.py;
# two on 2026-11-29, then one on 2026-12-04 with the stories on a 5 s trigger, whose workers ended 9 s apart
# in this order). `make test` gives whole files to two workers in collection order (see pytest_configure),
# so starting these first keeps one worker from running a long chain alone at the end.
# Refresh when a file's time changes much.
LONGEST_FIRST = (
    "integration/test_switch_dags.py",  # 505, 511; 377 (its jobs on Spark 4.2: no class-sharing archive)
    "compat/test_airflow_floor.py",  # 470, 489; 437 (compatibility lane: 3.1's unit run, the oldest stack)
    "integration/test_state_on_s3.py",  # 317, 527; 246
    "integration/test_fault_matrix.py",  # 440, 421; 410
    "integration/test_keeper.py",  # 388, 419; 369
    "integration/test_three_brokers.py",  # 309, 368; 287
    "integration/test_cluster_managers.py",  # 232, 249; 195
    "integration/test_streaming_job.py",  # 216, 213; 144
    "integration/test_switch_reads_current_record.py",  # 187, 155; 166
    "integration/test_getting_started_walk.py",  # 180, 159; 119
    "integration/test_translation_edges.py",  # 159, 151; 133
    "integration/test_health_watch.py",  # 153, 155; 153
    "integration/test_security.py",  # 138, 144; 139
    "integration/test_stateful_switch.py",  # 133, 143 alone on 2026-12-05, beside two helpers' work
    "integration/test_airflow_ui.py",  # 142, 99; 113
    "integration/test_translation.py",  # 87, 94; 73
    "integration/test_switch_wake_event.py",  # 92, 76; 83
    "integration/test_stateful_switch_on_hdfs.py",  # 80 alone on 2026-12-05
    "integration/test_stores.py",  # 76; 68
    "integration/test_delta_sink.py",  # 69
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """With ``AKF_TEST_TIMELINE=<file>``, append one JSON line per test (worker, test, start and end, wall
    clock) to the file: ``scripts/suite_timeline.py`` tells from it when each worker was busy, with what."""
    began = time.time()
    try:
        return (yield)
    finally:
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
        tests = REPO / "tests"
        name = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) else item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)

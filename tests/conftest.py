"""Test-wide settings: an isolated Airflow home, the property tests' profile, the job jars for the tests that
run Spark, and the sandbox marker for tests that need Kafka."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tests.property_examples  # noqa: F401 - the property tests' counts, loaded before any test module

REPO = Path(__file__).resolve().parents[1]

# Airflow reads these at import time, so they are set before any test module imports airflow.
os.environ.setdefault("AIRFLOW_HOME", str(REPO / ".airflow" / "test"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")


def _use_job_jars() -> None:
    """The jobs the tests submit get the default job jars (the provider's ``job_jars`` option), resolved
    with Maven first when ``make test``'s setup has not resolved them yet."""
    from akf_devtools.errors import SandboxError
    from akf_devtools.sandbox.jars import use_job_jars

    try:
        use_job_jars()
    except SandboxError as exc:  # the Spark tests then fail naming the jars
        print(f"conftest: no job jars: {exc}")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Fill the job jars only when a selected test runs Kafka or Spark: a run of the pure tests alone
    (``make test-fast``) resolves nothing with Maven."""
    if any(item.get_closest_marker("sandbox") or item.get_closest_marker("spark") for item in session.items):
        _use_job_jars()


# The longest files, longest first (seconds on the 2-core CI machine, from --durations). `make test` gives
# whole files to two workers in collection order, so starting these first keeps one worker from running a
# long chain alone at the end. Refresh when a file's time changes much.
LONGEST_FIRST = (
    "test_switch_dags.py",  # ~1000 s
    "test_fault_matrix.py",  # ~900 s
    "test_three_brokers.py",  # ~800 s
    "test_state_on_s3.py",  # ~700 s
    "test_keeper.py",  # ~420 s
    "test_streaming_job.py",  # ~260 s
    "test_security.py",  # ~210 s
    "test_airflow_ui.py",  # ~180 s
    "test_status_cli.py",  # ~180 s
    "test_stores.py",  # ~150 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark everything under tests/integration as needing the sandbox, so `-m "not sandbox"` skips it; put
    the :data:`LONGEST_FIRST` files first (a file's tests keep their order)."""
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.sandbox)

    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)

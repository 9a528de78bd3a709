"""Test-wide settings: an isolated Airflow home, and the sandbox marker for tests that need Kafka."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Airflow reads these at import time, so they are set before any test module imports airflow.
os.environ.setdefault("AIRFLOW_HOME", str(REPO / ".airflow" / "test"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")


def _use_job_jars() -> None:
    """The jobs the tests submit get the jars ``make setup`` resolved (the provider's ``job_jars`` option)."""
    from akf_devtools.errors import SandboxError
    from akf_devtools.sandbox.jars import use_job_jars

    try:
        use_job_jars()
    except SandboxError as exc:  # the pure tests do not need them; the Spark tests then fail naming the jars
        print(f"conftest: no job jars: {exc}")


_use_job_jars()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark everything under tests/integration as needing the sandbox, so `-m "not sandbox"` skips it."""
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.sandbox)

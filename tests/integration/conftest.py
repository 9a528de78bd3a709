"""Fixtures that run the real two-cluster sandbox (Kafka brokers in KRaft mode and MirrorMaker 2).

Every sandbox a test starts is stopped in the fixture's teardown, which pytest runs after failures and
on Ctrl-C; an atexit hook is a last resort for an interpreter that exits some other way.
"""

from __future__ import annotations

import atexit
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from akf_devtools.sandbox.airflow_env import prepare_airflow_home
from akf_devtools.sandbox.airflow_env import register_kafka_connections as register_connections
from akf_devtools.sandbox.mirrormaker import ReplicationSettings
from akf_devtools.sandbox.sandbox import Sandbox

__all__ = ["RUN_ROOT", "register_connections", "run_dag_test", "start_sandbox", "stop_sandbox"]

REPO = Path(__file__).resolve().parents[2]
RUN_ROOT = REPO / ".run" / f"pytest-{os.getpid()}"

_started: list[Sandbox] = []


def _stop_everything() -> None:
    while _started:
        _started.pop().down()


atexit.register(_stop_everything)


def start_sandbox(
    name: str,
    settings: ReplicationSettings | None = None,
    extra_listeners: dict[str, dict[str, int]] | None = None,
) -> Sandbox:
    """Start a sandbox in its own run directory and remember it for teardown."""
    sandbox = Sandbox(RUN_ROOT / name, settings=settings)
    _started.append(sandbox)
    sandbox.up(extra_listeners=extra_listeners)
    return sandbox


def stop_sandbox(sandbox: Sandbox) -> None:
    sandbox.down()
    if sandbox in _started:
        _started.remove(sandbox)
    shutil.rmtree(sandbox.run_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    """A shared sandbox (default policy, flows A->B and B->A). Tests must not fault it."""
    shared = start_sandbox("shared")
    yield shared
    stop_sandbox(shared)


@pytest.fixture(scope="module")
def own_sandbox() -> Iterator[Sandbox]:
    """A sandbox for one test module that injects faults into it."""
    own = start_sandbox(f"own-{uuid.uuid4().hex[:6]}")
    yield own
    stop_sandbox(own)


@pytest.fixture
def unique_topic() -> Callable[[str], str]:
    """Return a factory of topic names unique to this test run, e.g. ``orders-3f9a1c``."""

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    return make


@pytest.fixture(scope="session")
def airflow_home() -> Iterator[Path]:
    """An Airflow home with a migrated SQLite metadata DB and an empty dags folder, for dag.test() runs."""
    home = prepare_airflow_home(RUN_ROOT / "airflow")
    yield home


def run_dag_test(
    airflow_home: Path, dag_source: str, dag_id: str, timeout: float = 300, run_conf: dict | None = None
) -> tuple[str, str]:
    """Write a DAG file into the dags folder and run it with ``dag.test()`` in a fresh Python process.

    :param run_conf: the run's conf (the Params of a manual trigger).
    :return: the run's final state and the process output (logs of every task).
    """
    import subprocess
    import sys
    import textwrap

    dags = airflow_home / "dags"
    path = dags / f"{dag_id}.py"
    path.write_text(
        textwrap.dedent(dag_source)
        + f"\n\nif __name__ == '__main__':\n    run = dag.test(run_conf={run_conf!r})\n"
        + "    print('DAG_RUN_STATE', run.state)\n"
    )
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    try:
        result = subprocess.run(
            [sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    finally:
        path.unlink(missing_ok=True)
    output = result.stdout + result.stderr
    states = [line.split()[-1] for line in output.splitlines() if line.startswith("DAG_RUN_STATE")]
    return (states[-1] if states else f"no state (exit {result.returncode})"), output


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop anything still running; keep the run directory (logs) only when something failed."""
    _stop_everything()
    if exitstatus == 0:
        shutil.rmtree(RUN_ROOT, ignore_errors=True)

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
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.airflow_env import prepare_airflow_home
from akf_devtools.sandbox.airflow_env import register_kafka_connections as register_connections
from akf_devtools.sandbox.dag_test import main_block
from akf_devtools.sandbox.jars import use_job_jars
from akf_devtools.sandbox.mirrormaker import ReplicationSettings
from akf_devtools.sandbox.sandbox import Sandbox

__all__ = ["RUN_ROOT", "register_connections", "run_dag_test", "start_sandbox", "stop_sandbox"]


def pytest_collection_finish(session: pytest.Session) -> None:
    """The jobs the tests submit get the default job jars (the provider's ``job_jars`` option), resolved with
    Maven first when ``make test``'s setup has not resolved them yet; only when a selected test runs Kafka or
    Spark, so ``make test-fast`` (which collects this folder and deselects all of it) resolves nothing.

    It also notes which files come before the last one that uses the shared sandbox (:data:`_idle`)."""
    _note_pool_files(session.items)
    if not any(
        item.get_closest_marker("sandbox") or item.get_closest_marker("spark") for item in session.items
    ):
        return
    try:
        use_job_jars()
    except SandboxError as exc:  # the tests that need none still run; the Spark tests fail naming the jars
        print(f"conftest: no job jars: {exc}")


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
    brokers: int = 1,
) -> Sandbox:
    """Start a sandbox in its own run directory and remember it for teardown.

    :param brokers: brokers per cluster (3: three brokers and a quorum of three controllers each).
    """
    sandbox = Sandbox(RUN_ROOT / name, settings=settings, brokers=brokers)
    _started.append(sandbox)
    sandbox.up(timeout=150.0 if brokers == 1 else 240.0, extra_listeners=extra_listeners)
    return sandbox


def stop_sandbox(sandbox: Sandbox) -> None:
    sandbox.down()
    if sandbox in _started:
        _started.remove(sandbox)
    shutil.rmtree(sandbox.run_dir, ignore_errors=True)


_idle: list[Sandbox] = []
"""At most one sandbox that a module handed back whole, waiting for the next module of this process."""

_pool_needed_after: set[str] = set()
"""The test files after which a later file of the collection still uses the shared sandbox."""


def _note_pool_files(items: list[pytest.Item]) -> None:
    """Note the files after which a later file still checks out the shared sandbox.

    ``make test`` hands whole files to its workers in collection order (tests/conftest.py), so a worker that
    finished a file gets only files that come after it: once no later file uses the shared sandbox, the one it
    holds would idle to the end of the run (seven CPU seconds a minute) and is stopped instead.
    """
    files = list(dict.fromkeys(item.path for item in items))
    users = {item.path for item in items if "own_sandbox" in getattr(item, "fixturenames", ())}
    last = max((files.index(path) for path in users), default=-1)
    _pool_needed_after.clear()
    _pool_needed_after.update(str(path) for path in files[:last])


def _check_out() -> Sandbox:
    return _idle.pop() if _idle else start_sandbox(f"sandbox-{uuid.uuid4().hex[:6]}")


def _hand_back(sandbox: Sandbox, faults_before: int, spoiled: bool, module: Path) -> None:
    """Keep ``sandbox`` for the next module when it is whole again; stop it otherwise.

    A module's faults end with the clusters running again, but a flow whose target was down can stay
    stopped inside MirrorMaker 2, so after any fault MirrorMaker 2 is restarted and must replicate new
    heartbeats both ways. A wiped cluster lost MirrorMaker 2's internal topics, and a module marked
    ``spoils_sandbox`` wrote into them: such a sandbox is stopped.
    """
    faults = sandbox.faults_injected[faults_before:]
    try:
        if str(module) not in _pool_needed_after:
            print(f"conftest: no later test file uses the sandbox in {sandbox.run_dir}: stopping it")
        elif not spoiled and not any(kind == "wipe" for kind, _cluster in faults):
            if faults or not sandbox.mirrormaker.process.is_running():
                sandbox.stop_mirrormaker()
            sandbox.start_mirrormaker(timeout=60)
            if sandbox.is_up():
                _idle.append(sandbox)
                return
    except Exception as exc:  # a sandbox that cannot be made whole is replaced, not reused
        print(f"conftest: not reusing the sandbox in {sandbox.run_dir}: {exc}")
    stop_sandbox(sandbox)


@pytest.fixture(scope="module")
def own_sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """A sandbox the test module may inject faults into (crash, hang, wipe, MirrorMaker 2 stopped).

    Starting a sandbox costs three JVMs, so every module of a test process uses the same one, in turn,
    while modules leave it whole (clusters running, never wiped); each module uses topics, pairs and
    connections of its own. A sandbox left broken is stopped and the next module starts a new one.
    """
    own = _check_out()
    faults_before = len(own.faults_injected)
    yield own
    spoiled = request.node.get_closest_marker("spoils_sandbox") is not None
    _hand_back(own, faults_before, spoiled, request.node.path)


@pytest.fixture(scope="module")
def sandbox(own_sandbox: Sandbox) -> Sandbox:
    """The module's sandbox, for a module that injects no fault (the same one as ``own_sandbox``)."""
    return own_sandbox


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
    path.write_text(textwrap.dedent(dag_source) + "\n\n" + main_block(run_conf))
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
    from akf_devtools.sandbox.forked_runs import close_all

    close_all()
    _stop_everything()
    if exitstatus == 0:
        shutil.rmtree(RUN_ROOT, ignore_errors=True)

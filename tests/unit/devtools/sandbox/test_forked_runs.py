"""Runs forked from the warm process get their own environment, folder, log and exit status
(``akf_devtools.sandbox.forked_runs``)."""

from __future__ import annotations

import signal
import subprocess
import textwrap
from pathlib import Path

import pytest
from akf_devtools.sandbox import forked_runs
from akf_devtools.sandbox.forked_runs import forker_for

pytestmark = pytest.mark.slow  # the warm process imports Airflow once


SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    print("RUN", os.environ["AKF_TEST_VALUE"], os.getcwd(), __name__, sys.argv[0], flush=True)
    if os.environ.get("AKF_TEST_SLEEP"):
        time.sleep(60)
    sys.exit(int(os.environ["AKF_TEST_EXIT"]))
    """
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "airflow"
    home.mkdir()
    return {**__import__("os").environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}


def _run(forker, tmp_path: Path, name: str, env: dict[str, str], **values: str):
    script = tmp_path / f"{name}.py"
    script.write_text(SCRIPT)
    log = tmp_path / f"{name}.log"
    log.write_text("")
    return forker.fork(script, {**env, **values}, tmp_path, log), log, script


def test_a_forked_run_has_its_environment_folder_log_and_exit_status(tmp_path: Path, env):
    forker = forker_for(env)
    try:
        run, log, script = _run(forker, tmp_path, "first", env, AKF_TEST_VALUE="one", AKF_TEST_EXIT="3")
        assert run.wait(timeout=60) == 3 and run.poll() == 3
        assert log.read_text().split() == ["RUN", "one", str(tmp_path), "__main__", str(script)]
        again, log, _ = _run(forker, tmp_path, "second", env, AKF_TEST_VALUE="two", AKF_TEST_EXIT="0")
        assert again.wait(timeout=60) == 0 and "RUN two" in log.read_text()
        assert forker_for({**env, "AKF_TEST_VALUE": "other"}) is forker  # not an Airflow setting
    finally:
        forker.close()


def test_a_killed_run_ends_with_the_signal_and_a_wait_can_time_out(tmp_path: Path, env):
    forker = forker_for(env)
    try:
        run, _, _ = _run(
            forker, tmp_path, "sleeper", env, AKF_TEST_VALUE="x", AKF_TEST_EXIT="0", AKF_TEST_SLEEP="1"
        )
        with pytest.raises(subprocess.TimeoutExpired):
            run.wait(timeout=0.5)
        assert run.poll() is None
        run.kill()
        assert run.wait(timeout=30) == -signal.SIGKILL
    finally:
        forker.close()


def test_other_airflow_settings_get_a_warm_process_of_their_own(env):
    assert forked_runs._environment_key(env) != forked_runs._environment_key(
        {**env, "AIRFLOW__CORE__PARALLELISM": "3"}
    )
    assert forked_runs._environment_key(env) == forked_runs._environment_key({**env, "AIRFLOW_CONN_X": "y"})

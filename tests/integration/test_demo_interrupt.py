"""Ctrl-C in the middle of ``make demo`` stops every process it started: sandbox, job and DAG run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import RUN_ROOT

pytestmark = [pytest.mark.sandbox, pytest.mark.spark]


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention ``text`` (this test's own process excepted)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def test_ctrl_c_while_the_failover_dag_watches_stops_everything(tmp_path):
    run_dir = RUN_ROOT / "demo-interrupt"
    log = tmp_path / "demo.log"
    with open(log, "w") as out:
        demo = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "akf_devtools.demo",
                "--run-dir",
                str(run_dir),
                "--results",
                str(tmp_path / "results"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            # The demo as users run it: each DAG run a process of its own (whose command line names the
            # run folder, which the check below looks for), not forked from the tests' warm process.
            env={k: v for k, v in os.environ.items() if k != "AKF_FORK_DAG_RUNS"},
        )
        try:
            deadline = time.monotonic() + 300
            while "its down sensor is watching A" not in log.read_text():
                assert demo.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(1)
            assert processes_mentioning(str(run_dir)), "nothing of the demo was running before Ctrl-C"
            demo.send_signal(signal.SIGINT)
            assert demo.wait(timeout=120) == 130, log.read_text()[-3000:]
        finally:
            if demo.poll() is None:
                demo.kill()
    output = log.read_text()
    assert "interrupted; every process the demo started was stopped" in output
    time.sleep(1)
    assert processes_mentioning(str(run_dir)) == [], output[-3000:]

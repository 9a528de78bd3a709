"""`akf-dev sandbox` (a development tool) end to end through the real command, with the identity policy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from akf_devtools.sandbox.kafka_io import create_topic, end_offsets, produce

from tests.integration.conftest import RUN_ROOT
from tests.integration.waiting import wait_for

CLI = [sys.executable, "-m", "akf_devtools"]


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_up_status_fault_down_with_identity_policy(unique_topic):
    run_dir = str(RUN_ROOT / "cli")
    up = _cli("sandbox", "--run-dir", run_dir, "up", "--json", "--policy", "identity")
    try:
        assert up.returncode == 0, up.stderr
        info = json.loads(up.stdout)
        assert set(info["clusters"]) == {"A", "B"}
        assert info["run_dir"] == run_dir
        a, b = info["clusters"]["A"]["bootstrap"], info["clusters"]["B"]["bootstrap"]

        # Identity naming: the topic keeps its name on B.
        topic = unique_topic("same-name")
        create_topic(a, topic, 2)
        produce(a, topic, [(None, b"x", i % 2, None) for i in range(50)])
        wait_for(lambda: sum((end_offsets(b, topic) or {}).values()) >= 50, 60, f"{topic} replicated to B")

        status = _cli("sandbox", "--run-dir", run_dir, "status", "--json")
        assert status.returncode == 0, status.stderr
        processes = json.loads(status.stdout)["processes"]
        assert set(processes) == {"broker-A", "broker-B", "mirrormaker"}
        assert all(p["running"] for p in processes.values())
        assert processes["broker-A"]["answers"] and processes["broker-B"]["answers"]
        pids = [p["pid"] for p in processes.values()]

        bad = _cli("sandbox", "--run-dir", run_dir, "fault", "crash", "--cluster", "C")
        assert bad.returncode == 1
        assert "unknown cluster 'C'" in bad.stderr
        assert all(_alive(pid) for pid in pids)

        human = _cli("sandbox", "--run-dir", run_dir, "status")
        assert "broker-A" in human.stdout and "answers" in human.stdout
    finally:
        down = _cli("sandbox", "--run-dir", run_dir, "down")
    assert down.returncode == 0, down.stderr
    assert not any(_alive(pid) for pid in pids)
    stopped = json.loads(_cli("sandbox", "--run-dir", run_dir, "status", "--json").stdout)
    assert not any(p["running"] for p in stopped["processes"].values())


def test_bad_arguments_exit_2_with_usage():
    result = _cli("sandbox", "fault", "explode", "--cluster", "A")
    assert result.returncode == 2
    assert "invalid choice: 'explode'" in result.stderr
    result = _cli("sandbox", "up", "--timeout", "-3")
    assert result.returncode == 2
    assert "'-3' must be greater than 0" in result.stderr
    result = _cli("sandbox", "up", "--timeout", "soon")
    assert result.returncode == 2
    assert "argument --timeout: 'soon' is not a number" in result.stderr


def test_status_of_a_dir_without_sandbox_says_so(tmp_path):
    result = _cli("sandbox", "--run-dir", str(tmp_path), "status")
    assert result.returncode == 3
    assert "no sandbox has been started here" in result.stdout
    assert os.listdir(tmp_path) == []

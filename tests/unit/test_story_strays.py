"""The stories' last sweep: a process left running under a story's folder is found, killed and named."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.switch_story import kill_strays, stray_processes


def test_a_process_left_under_the_story_folder_is_killed_with_a_warning(tmp_path):
    root = tmp_path / "story"
    root.mkdir()
    left = subprocess.Popen(  # as a warm driver does: its own session, the story's folder on its command line
        [sys.executable, "-c", "import time; time.sleep(120)", str(root / "runs" / "standby")],
        start_new_session=True,
    )
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", str(tmp_path / "elsewhere")]
    )
    try:
        assert [pid for pid, _ in stray_processes(root)] == [left.pid]
        with pytest.warns(UserWarning, match=rf"left processes running, killed now: pid {left.pid}: "):
            assert [pid for pid, _ in kill_strays(root)] == [left.pid]
        assert left.wait(timeout=10) == -9
        assert other.poll() is None  # outside the folder: not touched
    finally:
        for process in (left, other):
            process.kill()
            process.wait()


def test_a_story_that_left_nothing_warns_nothing(tmp_path, recwarn):
    assert kill_strays(tmp_path) == []
    assert not recwarn.list

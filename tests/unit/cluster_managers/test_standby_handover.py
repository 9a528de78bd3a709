"""The launching side of a warm standby: which launch it may take, and how a run is handed to it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from airflow_kafka_failover.cluster_managers.standby_handover import (
    hand_over,
    launch_fingerprint,
    option_value,
    standby_process,
    waiting_standby,
)
from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.run_format.standby import StandbySlot

RUN = [
    "spark-submit",
    "--master",
    "local[2]",
    "--name",
    "akf-p-B-epoch-3",
    "job.py",
    "--settings",
    "/r/s.json",
]
WARM = [
    "spark-submit",
    "--master",
    "local[2]",
    "--name",
    "akf-p-B-standby",
    "job.py",
    "--standby",
    "/l/standby",
]


def test_a_warm_driver_and_a_run_of_the_same_launch_have_one_fingerprint(tmp_path):
    application = tmp_path / "job.py"
    application.write_text("print('v1')")
    same = launch_fingerprint(WARM, [str(application)])
    assert launch_fingerprint(RUN, [str(application)]) == same
    assert launch_fingerprint([*RUN[:2], "yarn", *RUN[3:]], [str(application)]) != same  # another master
    application.write_text("print('v2')")  # the job file changed since the warm driver started
    assert launch_fingerprint(RUN, [str(application)]) != same
    assert option_value(RUN, "--settings") == "/r/s.json" and option_value(RUN, "--jars") is None


@pytest.fixture
def warm(tmp_path):
    """A process that holds the slot and waits, as a warm driver does, started like one (pid record, log)."""
    slot = StandbySlot(tmp_path / "local" / "p" / "B" / "standby")
    process = start_holder(slot, ready_after=0.0)
    deadline = time.monotonic() + 30
    while not slot.waiting():
        assert time.monotonic() < deadline, process.log_tail()
        time.sleep(0.05)
    yield slot, process
    process.kill()


def test_a_waiting_driver_of_another_launch_is_asked_to_stop_and_not_used(warm):
    slot, _ = warm
    assert waiting_standby(slot, "f1")
    assert not waiting_standby(slot, "f2")
    assert slot.stop_file.exists()


def test_a_handed_run_takes_the_drivers_process_record_and_log(warm, tmp_path):
    slot, process = warm
    pid = process.pid()
    run_dir = tmp_path / "local" / "p" / "B" / "epoch-3"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "logs" / "job.log").write_text("an earlier run of epoch 3\n")
    assert hand_over(slot, str(run_dir), "/r/settings.json", 3) == pid
    run = ManagedProcess("job", run_dir)
    try:
        assert run.pid() == pid and "warm and waiting" in run.log_tail()
        assert [p.name for p in (run_dir / "logs").glob("job.log.*")]  # the earlier log is kept beside
        assert not standby_process(slot).pid_file.exists()
        assert json.loads(slot.handoff_file.read_text())["epoch"] == 3
    finally:
        run.kill()  # its pid record moved to the run: the fixture's kill no longer finds it


def test_nothing_is_handed_to_a_driver_that_ended(warm, tmp_path):
    slot, process = warm
    process.kill()
    assert not waiting_standby(slot, "f1")
    assert hand_over(slot, str(tmp_path / "run"), "/r/settings.json", 3) is None
    assert not slot.handoff_file.exists()


def test_the_second_start_of_a_held_slot_starts_nothing(warm):
    from airflow_kafka_failover.cluster_managers.standby_handover import start_standby

    slot, _ = warm
    assert start_standby(slot, ["false"], {}, "f1", rehearsal=None) is None  # type: ignore[arg-type]


def start_holder(slot: StandbySlot, ready_after: float | None) -> ManagedProcess:
    """A process that holds ``slot`` as ``starting`` and writes ``waiting`` after ``ready_after`` s (never
    when None)."""
    code = (
        "import sys, time\n"
        "from airflow_kafka_failover.run_format.standby import StandbySlot\n"
        "slot = StandbySlot(sys.argv[1]); slot.claim(); slot.write_state('starting')\n"
        f"ready_after = {ready_after!r}\n"
        "if ready_after is not None:\n"
        "    time.sleep(ready_after); slot.write_state('waiting'); print('warm and waiting', flush=True)\n"
        "time.sleep(60)\n"
    )
    process = standby_process(slot)
    process.start([sys.executable, "-c", code, str(slot.folder)])
    deadline = time.monotonic() + 30
    while not slot.held():
        assert time.monotonic() < deadline, process.log_tail()
        time.sleep(0.05)
    (slot.folder / "launch.json").write_text(json.dumps({"fingerprint": "f1"}))
    return process


def test_a_submission_waits_a_little_for_a_warm_driver_that_is_still_starting(tmp_path):
    slot = StandbySlot(tmp_path / "standby")
    process = start_holder(slot, ready_after=0.5)
    try:
        assert waiting_standby(slot, "f1", starting_wait=10)
    finally:
        process.kill()


def test_a_warm_driver_that_is_not_ready_in_time_is_asked_to_stop_and_not_used(tmp_path):
    slot = StandbySlot(tmp_path / "standby")
    process = start_holder(slot, ready_after=None)
    try:
        started = time.monotonic()
        assert not waiting_standby(slot, "f1", starting_wait=0.5)
        assert time.monotonic() - started < 5
        assert slot.stop_file.exists()
    finally:
        process.kill()


def test_a_driver_still_on_its_way_to_the_lock_is_not_replaced(tmp_path):
    """A warm driver whose process lives but has not claimed the slot yet (spark-submit still starting its
    JVM and Python driver) is not started again: a second start would take over its pid file and log, and
    the first would run on where no stop reaches it."""
    from airflow_kafka_failover.cluster_managers.standby_handover import start_standby

    slot = StandbySlot(tmp_path / "standby")
    first = standby_process(slot)
    first.start([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = first.pid_file.read_text()
        assert not slot.held()
        assert start_standby(slot, ["false"], {}, "f1", rehearsal=None) is None  # type: ignore[arg-type]
        assert first.pid_file.read_text() == record
        assert not list(first.log_file.parent.glob("standby.2*.log")), "the starting driver's log was moved"
    finally:
        first.kill()
    assert first.pid() is None


def test_a_driver_that_let_the_slot_go_and_is_still_exiting_is_stopped_and_replaced(tmp_path):
    """A warm driver that refused a handoff frees the lock as its Python driver exits, while its spark-submit
    JVM may still be shutting down: the next start stops that process and starts a new driver, rather than
    taking it for one on its way to the lock (seen in CI: a refused driver's spark-submit outlived its lock
    by a second, and no new warm driver was started)."""
    from airflow_kafka_failover.cluster_managers.standby_handover import start_standby

    class Rehearsal:  # stands in for the settings the driver rehearses on; only written
        def write(self, path: str) -> str:
            return path

    slot = StandbySlot(tmp_path / "standby")
    leaving = standby_process(slot)
    old = leaving.start([sys.executable, "-c", "import time; time.sleep(60)"])
    slot.write_state("refused", reason="the fence is at epoch 1")
    try:
        pid = start_standby(slot, [sys.executable, "-c", "pass"], {}, "f1", rehearsal=Rehearsal())  # type: ignore[arg-type]
        assert pid is not None
        assert pid != old
        assert not Path(f"/proc/{old}").exists() or "Z" in Path(f"/proc/{old}/stat").read_text().split()[2]
        assert not slot.state_file.exists(), "the refused driver's last state is still there"
        assert list(leaving.log_file.parent.glob("standby.2*.log")), "the refused driver's log was not kept"
    finally:
        leaving.kill()

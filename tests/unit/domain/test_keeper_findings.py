"""What the keeper makes of one look: pure decisions, every branch."""

from __future__ import annotations

import pytest

from airflow_kafka_failover.domain.keeper_findings import (
    MIN_STALL_SECONDS,
    Finding,
    JobLook,
    KeeperLimits,
    assess,
    describe,
)
from airflow_kafka_failover.domain.switch_lease import SwitchLease

NOW = 1_000_000.0
LIMITS = KeeperLimits(stall_seconds=90.0, max_lag_records=500)


def look(**changes) -> JobLook:
    base = {
        "at": NOW,
        "epoch": 3,
        "fence_epoch": 3,
        "alive": True,
        "state": "running",
        "started_at": NOW - 600,
        "committed_at": NOW - 5,
        "behind": {"orders-0": 10, "orders-1": 0},
    }
    return JobLook(**{**base, **changes})


def lease(epoch: int = 4, until: float = NOW + 30) -> SwitchLease:
    return SwitchLease("orders", epoch, "B", "failover", until, NOW - 10)


def test_a_running_job_that_keeps_up_has_no_finding():
    assert assess(look(), LIMITS) == []


def test_a_dead_job_is_restarted_unless_a_person_stopped_it():
    assert assess(look(alive=False, state="running"), LIMITS) == [Finding.DEAD]
    assert assess(look(alive=False, state="failed"), LIMITS) == [Finding.DEAD]
    assert assess(look(alive=False, state="stopped", stop_requested=True), LIMITS) == [Finding.HELD]
    assert assess(look(alive=False, state="killed", stop_requested=True), LIMITS) == [Finding.HELD]
    # A stop request left behind by a run that then failed on its own does not hold the job.
    assert assess(look(alive=False, state="failed", stop_requested=True), LIMITS) == [Finding.DEAD]


def test_a_job_whose_state_cannot_be_told_is_never_restarted():
    assert assess(look(alive=None), LIMITS) == [Finding.UNKNOWN]


def test_a_fence_ahead_waits_for_a_live_switch_and_acts_once_its_lease_expired():
    assert assess(look(fence_epoch=4, alive=False, lease=lease()), LIMITS) == [Finding.SWITCHING]
    assert assess(look(fence_epoch=4, lease=lease(until=NOW - 1)), LIMITS) == [Finding.FENCE_AHEAD]
    assert assess(look(fence_epoch=4, lease=None), LIMITS) == [Finding.FENCE_AHEAD]
    # A lease of another epoch (a switch before) protects nothing.
    assert assess(look(fence_epoch=4, lease=lease(epoch=3)), LIMITS) == [Finding.FENCE_AHEAD]


def test_a_dead_job_behind_a_fence_is_the_switchs_business_not_a_restart():
    assert Finding.DEAD not in assess(look(fence_epoch=4, alive=False), LIMITS)


def test_a_missing_warm_standby_is_started_only_beside_a_running_job():
    assert assess(look(standby_ready=False), LIMITS) == [Finding.NO_STANDBY]
    assert assess(look(standby_ready=True), LIMITS) == []
    assert assess(look(standby_ready=None), LIMITS) == []  # the pair wants none
    # A dead job, a job that cannot be told, a switch at work: those first, no warm driver meanwhile.
    assert assess(look(alive=False, standby_ready=False), LIMITS) == [Finding.DEAD]
    assert assess(look(alive=None, standby_ready=False), LIMITS) == [Finding.UNKNOWN]
    assert assess(look(fence_epoch=4, lease=lease(), standby_ready=False), LIMITS) == [Finding.SWITCHING]


def test_after_a_failed_start_of_a_warm_standby_the_trigger_waits_before_asking_again(monkeypatch):
    from airflow_kafka_failover.io import metrics
    from airflow_kafka_failover.triggers.job_keeper import JobKeeperTrigger

    class Looker:
        def log_change(self, *args) -> None:
            pass

    sent = []
    monkeypatch.setattr(metrics, "_send", lambda *args: sent.append(args))
    limits = {"stall_seconds": 90.0, "max_lag_records": None, "first_batch_seconds": 0.0}
    trigger = JobKeeperTrigger(
        "orders",
        {"cluster": "A"},
        "/nowhere",
        "unit_a",
        ["orders"],
        2.0,
        limits,
        NOW + 3600,
        state={},
        standby_slot="/slot",
        standby_not_before=NOW + 30,
    )
    assert trigger._event(look(standby_ready=False), Looker()) is None
    assert ("gauge", "standby_ready", 0, {"pair": "orders", "cluster": "A"}) in sent
    event = trigger._event(look(standby_ready=False, at=NOW + 31), Looker())
    assert event is not None and (event["status"], event["finding"]) == ("act", "no_standby")
    assert trigger.serialize()[1]["standby_slot"] == "/slot"


def test_stalled_needs_both_silence_and_records_waiting():
    quiet = NOW - LIMITS.stall_seconds - 1
    assert assess(look(committed_at=quiet), LIMITS) == [Finding.STALLED]
    assert assess(look(committed_at=quiet, behind={"orders-0": 0}), LIMITS) == []  # nothing to read
    assert assess(look(committed_at=quiet, behind=None), LIMITS) == []  # lag unknown (cluster down)
    assert assess(look(committed_at=NOW - LIMITS.stall_seconds + 1), LIMITS) == []


def test_a_job_without_a_batch_yet_is_measured_from_its_start():
    assert assess(look(committed_at=None, started_at=NOW - 30), LIMITS) == []
    assert assess(look(committed_at=None, started_at=NOW - 300), LIMITS) == [Finding.STALLED]
    assert look(committed_at=None, started_at=None).seconds_since_batch is None


def test_a_started_or_restarted_job_has_the_first_batch_time_for_its_first_batch():
    limits = KeeperLimits.of(30, 1.0, None, first_batch_seconds=300.0)
    assert (limits.stall_seconds, limits.first_batch_seconds) == (MIN_STALL_SECONDS, 300.0)
    # Started 200 s ago, no batch yet: past the stall time, within the first-batch time.
    assert assess(look(committed_at=None, started_at=NOW - 200), limits) == []
    # Restarted in place 200 s ago; its checkpoint's last batch is its previous process's.
    assert assess(look(committed_at=NOW - 400, started_at=NOW - 200), limits) == []
    assert assess(look(committed_at=NOW - 400, started_at=NOW - 301), limits) == [Finding.STALLED]
    text = describe(look(committed_at=None, started_at=NOW - 301), Finding.STALLED, limits)
    assert "no batch in the 301 s since its start (first-batch time 300 s)" in text, text
    # Once it committed a batch since its start, the stall time applies.
    assert assess(look(committed_at=NOW - 61, started_at=NOW - 200), limits) == [Finding.STALLED]
    assert "last batch 61 s ago (stall time 60 s)" in describe(
        look(committed_at=NOW - 61, started_at=NOW - 200), Finding.STALLED, limits
    )
    # The first-batch time never shortens the stall time.
    assert KeeperLimits.of(30, 5.0, None, first_batch_seconds=10.0).first_batch_seconds == 150.0


def test_a_job_restarted_in_place_is_timed_from_its_restart():
    """Its checkpoint's last batch is its previous process's: the stall clock starts at the restart."""
    restarted = look(committed_at=NOW - 300, started_at=NOW - 30)
    assert restarted.seconds_since_batch == 30
    assert assess(restarted, LIMITS) == []
    assert assess(look(committed_at=NOW - 600, started_at=NOW - 300), LIMITS) == [Finding.STALLED]


def test_lagging_above_the_limit_only_when_one_is_set():
    behind = {"orders-0": 400, "orders-1": 101}
    assert assess(look(behind=behind), LIMITS) == [Finding.LAGGING]
    assert assess(look(behind={"orders-0": 400, "orders-1": 100}), LIMITS) == []
    assert assess(look(behind=behind), KeeperLimits(90.0, None)) == []
    assert look(behind={"orders-0": -3, "orders-1": 2}).lag == 2  # a position past the end counts as 0


def test_the_stall_time_follows_the_trigger_interval_with_a_floor():
    assert KeeperLimits.of(30, 5.0, None).stall_seconds == 150.0
    assert KeeperLimits.of(30, 1.0, None).stall_seconds == MIN_STALL_SECONDS


@pytest.mark.parametrize("finding", list(Finding))
def test_every_finding_is_described_with_its_figures(finding):
    text = describe(
        look(fence_epoch=4, lease=lease(), behind={"orders-0": 900}, committed_at=NOW - 200), finding, LIMITS
    )
    assert "epoch" in text
    if finding is Finding.STALLED:
        assert "200 s ago" in text and "900 records" in text
    if finding is Finding.LAGGING:
        assert "900 records" in text and "max_lag_records 500" in text
    if finding is Finding.SWITCHING:
        assert "held by failover, valid for 30 s more" in text


def test_a_cluster_manager_that_does_not_answer_is_unknown_never_dead(tmp_path, monkeypatch):
    from airflow_kafka_failover.cluster_managers.yarn import Yarn
    from airflow_kafka_failover.triggers.job_keeper import JobLooker

    handle = {
        "pair": "orders",
        "cluster": "A",
        "epoch": 3,
        "deploy_mode": "cluster",
        "master": "yarn",
        "run_dir": str(tmp_path / "run"),
        "checkpoint": str(tmp_path / "ckpt"),
        "sink_root": str(tmp_path / "sink"),
        "application_id": "application_1_0001",
    }

    def unreachable(self, handle):
        raise ConnectionError("ResourceManager at rm:8088 refused the connection")

    monkeypatch.setattr(Yarn, "alive", unreachable)
    looker = JobLooker("orders", handle, str(tmp_path / "fence"), "unit_a", ["orders"])
    monkeypatch.setattr(looker, "_behind", lambda committed: None)
    seen = looker.look()
    assert seen.alive is None
    assert assess(seen, LIMITS) == [Finding.UNKNOWN]


@pytest.mark.slow
def test_between_looks_a_driver_that_dies_ends_the_wait_within_a_second():
    import asyncio
    import time as clock

    from airflow_kafka_failover.triggers.job_keeper import JobKeeperTrigger

    class Looker:
        def __init__(self, dies_after: float) -> None:
            self.dies_at = clock.monotonic() + dies_after

        def process_alive(self):
            return clock.monotonic() < self.dies_at

    trigger = JobKeeperTrigger("orders", {}, "/nowhere", "unit_a", ["orders"], 8.0, {}, NOW, state={})
    started = clock.monotonic()
    asyncio.run(trigger._until_next_look(Looker(dies_after=0.5), was_alive=True))
    assert clock.monotonic() - started < 2.5
    started = clock.monotonic()  # a job that was not running (or unknown) waits the whole interval
    trigger.interval = 1.5
    asyncio.run(trigger._until_next_look(Looker(dies_after=0.0), was_alive=False))
    assert clock.monotonic() - started >= 1.5


def test_the_keeper_logs_its_first_look_and_then_only_changes():
    from airflow_kafka_failover.triggers.job_keeper import JobLooker

    class Lines:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def info(self, text, *args) -> None:
            self.lines.append(text % args)

    looker = JobLooker.__new__(JobLooker)
    looker.pair, looker._last_logged = "orders", None
    out = Lines()
    for findings in ([], [], [Finding.STALLED], [Finding.STALLED], []):
        looker.log_change(out, findings, look(), LIMITS)
    assert (
        out.lines[0] == "keeper of pair orders: the job of epoch 3 runs (last batch 5 s ago, lag 10 records)"
    )
    assert len(out.lines) == 3 and "committed its last batch" in out.lines[1]


@pytest.fixture
def keeper_warnings():
    """The keeper's warnings, caught on its own logger (however the test run configured logging)."""
    import logging

    class Lines(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())

    handler = Lines()
    logger = logging.getLogger("airflow_kafka_failover.triggers.job_keeper")
    logger.addHandler(handler)
    yield handler.lines
    logger.removeHandler(handler)


def test_each_kind_of_trouble_is_warned_on_its_own_timer(tmp_path, monkeypatch, keeper_warnings):
    """A checkpoint that cannot be read, warned about at every look, must not hide that the job's state or
    its lag cannot be told either: each kind is warned once per ``WARN_EVERY_S``, on its own."""
    from airflow_kafka_failover.cluster_managers.yarn import Yarn
    from airflow_kafka_failover.core.exceptions import CheckpointError
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
    from airflow_kafka_failover.triggers import job_keeper
    from airflow_kafka_failover.triggers.job_keeper import JobLooker

    handle = {
        "pair": "orders",
        "cluster": "A",
        "epoch": 3,
        "deploy_mode": "cluster",
        "master": "yarn",
        "run_dir": str(tmp_path / "run"),
        "checkpoint": str(tmp_path / "ckpt"),
        "sink_root": str(tmp_path / "sink"),
        "application_id": "application_1_0001",
    }
    failing: set[str] = {"checkpoint"}

    def last_commit(checkpoint):
        raise CheckpointError(f"{checkpoint}/offsets/7: not UTF-8")

    def alive(self, handle):
        if "state" in failing:
            raise ConnectionError("ResourceManager at rm:8088 refused the connection")
        return True

    def end_offsets(self, partitions, latest, timeout_seconds, admin):
        if "lag" in failing:
            raise ConnectionError("the active cluster does not answer")
        return dict.fromkeys(partitions, 5)

    monkeypatch.setattr(job_keeper, "read_last_commit", last_commit)
    monkeypatch.setattr(Yarn, "alive", alive)
    monkeypatch.setattr(KafkaClusterHook, "admin", lambda self, timeout_seconds=None, **extra: object())
    monkeypatch.setattr(KafkaClusterHook, "partition_counts", lambda self, topics: {"orders": 1})
    monkeypatch.setattr(KafkaClusterHook, "offsets_at", end_offsets)
    looker = JobLooker("orders", handle, str(tmp_path / "fence"), "unit_a", ["orders"])

    def warned_at_one_look() -> list[str]:
        keeper_warnings.clear()
        looker.look()
        return list(keeper_warnings)

    [checkpoint] = warned_at_one_look()
    assert "cannot read the job's checkpoint" in checkpoint
    failing.update({"state", "lag"})  # the checkpoint still fails: it was warned about moments ago
    state, lag = warned_at_one_look()
    assert "cannot tell whether" in state and "refused the connection" in state
    assert "cannot measure the job's lag on unit_a" in lag and "does not answer" in lag
    assert warned_at_one_look() == []  # each kind again only after WARN_EVERY_S

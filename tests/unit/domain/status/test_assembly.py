"""The status view: how readings become a pair's status, its verdict, exit code, text and JSON."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.active_record import ActiveRecord, SwitchEntry
from airflow_kafka_failover.domain.status.assembly import EXIT_ACT, EXIT_UNREAD, assemble, exit_code
from airflow_kafka_failover.domain.status.model import (
    FenceAgreement,
    JobState,
    PairHistory,
    PairReadings,
    ReplicationReading,
    SwitchRow,
)
from airflow_kafka_failover.domain.status.text import history_to_text, statuses_to_json, to_text
from airflow_kafka_failover.run_format.fencing import FenceState
from airflow_kafka_failover.run_format.progress import JobProgress

NOW = 1_800_000_000.0
JOB = {
    "pair": "orders",
    "cluster": "B",
    "epoch": 2,
    "deploy_mode": "local",
    "master": "local[2]",
    "run_dir": "/runs/orders/B/epoch-2",
    "checkpoint": "/ckpt/orders/B/epoch-2",
    "sink_root": "/sink/orders",
}


def entry(epoch: int, kind: str = "failover", **extra) -> SwitchEntry:
    source, target = ("A", "B") if kind == "failover" else ("B", "A")
    return SwitchEntry.model_validate(
        {
            "at": f"2026-11-2{epoch}T10:00:00+00:00",
            "kind": kind,
            "from": source,
            "to": target,
            "epoch": epoch,
            "reason": f"automatic {kind}",
            "triggered_by": f"scheduled__{epoch}",
            "plan": {"max_duplicates": 10 * epoch},
            **extra,
        }
    )


def record(epoch: int = 2, active: str = "B", job: dict | None = JOB, history=None) -> ActiveRecord:
    if history is None:
        history = (entry(1), entry(2, "failback") if active == "A" else entry(2))
    return ActiveRecord(
        pair="orders",
        active=active,
        epoch=epoch,
        job=job,
        checkpoint=(job or {}).get("checkpoint"),
        history=tuple(history),
        updated_at="2026-11-22T10:00:01+00:00",
    )


def healthy(**changes) -> PairReadings:
    """A settled pair: B active at epoch 2, its job running and 5 records behind, B -> A replicating."""
    readings = PairReadings(
        pair="orders",
        primary="A",
        now=NOW,
        record=record(),
        fence_path="/fence/orders.json",
        fence=FenceState("orders", 2, "B", "2026-11-22T10:00:00+00:00"),
        job_status={"state": "running", "updated_at": "2026-11-22T10:00:05+00:00"},
        job_alive=True,
        job_where="pid 4242",
        progress=JobProgress(
            7, {TopicPartition("orders", 0): 100, TopicPartition("A.orders", 0): 40}, 140, NOW - 2.5
        ),
        active_ends={"orders-0": 103, "A.orders-0": 42},
        replication=ReplicationReading(
            source="B",
            target="A",
            lags={"orders-0": 0},
            heartbeats_topic="B.heartbeats",
            heartbeat_newest_ms=int((NOW - 1.5) * 1000),
            heartbeat_stale_seconds=30.0,
        ),
    )
    return replace(readings, **changes)


def test_a_settled_pair_needs_nobody_and_exits_0():
    status = assemble(healthy())
    assert (status.active, status.epoch, status.fence_agreement) == ("B", 2, FenceAgreement.SETTLED)
    assert status.job.state is JobState.RUNNING
    assert (status.job.last_batch_id, status.job.records, status.job.last_batch_age_seconds) == (7, 140, 2.5)
    assert [(row.partition, row.end_offset, row.committed, row.lag) for row in status.active_lag] == [
        ("A.orders-0", 42, 40, 2),
        ("orders-0", 103, 100, 3),
    ]
    assert status.total_lag == 5
    assert status.replication is not None
    assert status.replication.heartbeat_age_seconds == 1.5
    assert (status.problems, status.unread, status.warnings) == ([], [], [])
    assert exit_code([status]) == 0


def test_text_names_every_part():
    text = to_text(assemble(healthy()))
    assert text.startswith("pair orders: active B at epoch 2, record updated 2026-11-22T10:00:01+00:00")
    for part in (
        "fence:    epoch 2, cluster B, written 2026-11-22T10:00:00+00:00: settled",
        "job:      running on B at epoch 2 (local, pid 4242)",
        "last committed batch: 7 at 2027-01-15T07:59:57+00:00 (2.5 s ago), 140 records in all",
        "lag on B: 5 records behind the end in all",
        "replication B -> A (MirrorMaker 2): lag orders-0 0",
        "heartbeats B.heartbeats on A: newest 1.5 s old",
        "last switches (2 of 2):",
        "A -> B",
    ):
        assert part in text, f"{part!r} not in:\n{text}"
    assert "ACTION" not in text and "could not read" not in text


def test_fence_ahead_of_record_is_an_interrupted_switch_shown_loudly():
    status = assemble(healthy(fence=FenceState("orders", 3, "A", "")))
    assert status.fence_agreement is FenceAgreement.AHEAD
    assert len(status.problems) == 1
    assert status.problems[0].what.startswith(
        "INTERRUPTED SWITCH: the fence is at epoch 3 (cluster A) but the record at epoch 2 (active B)"
    )
    assert "force the switch to A" in status.problems[0].action
    assert exit_code([status]) == EXIT_ACT
    text = to_text(status)
    assert text.splitlines()[1] == (
        "  !! INTERRUPTED SWITCH: the fence (epoch 3, A) is ahead of the record (epoch 2, B); "
        "see ACTION NEEDED below"
    )
    assert "ACTION NEEDED: INTERRUPTED SWITCH" in text


def test_fence_ahead_of_a_missing_record_says_no_record_is_stored():
    initial = ActiveRecord.initial("orders", "A")
    status = assemble(
        healthy(record=initial, record_stored=False, fence=FenceState("orders", 1, "B", ""), job_status={})
    )
    assert status.fence_agreement is FenceAgreement.AHEAD
    assert "(no record is stored: the initial one stands in)" in status.problems[0].what
    assert status.record_updated_at is None
    assert any(w.startswith("no active record is stored") for w in status.warnings)


@pytest.mark.parametrize(
    ("fence", "agreement", "words"),
    [
        (
            FenceState("orders", 1, "B", ""),
            FenceAgreement.BEHIND,
            "the fence is at epoch 1 but the record at epoch 2",
        ),
        (FenceState("orders", 2, "A", ""), FenceAgreement.OTHER_CLUSTER, "the fence names cluster A"),
        (None, FenceAgreement.MISSING, "the fencing marker /fence/orders.json is missing"),
    ],
)
def test_a_fence_that_disagrees_needs_a_person(fence, agreement, words):
    status = assemble(healthy(fence=fence))
    assert status.fence_agreement is agreement
    assert [words in problem.what for problem in status.problems] == [True]
    assert exit_code([status]) == EXIT_ACT


def test_no_fence_at_epoch_0_is_normal():
    first = record(epoch=0, active="A", job={**JOB, "cluster": "A", "epoch": 0}, history=())
    status = assemble(healthy(record=first, fence=None))
    assert status.fence_agreement is FenceAgreement.NOT_FENCED_YET
    assert status.problems == []
    assert "no marker at /fence/orders.json (not fenced yet)" in to_text(status)


def test_an_unreadable_fence_is_unread_not_a_problem():
    status = assemble(healthy(fence=None, fence_error="ConfigError: not valid JSON"))
    assert status.fence_agreement is FenceAgreement.UNKNOWN
    assert status.problems == []
    assert status.unread == ["fencing marker /fence/orders.json: ConfigError: not valid JSON"]
    assert exit_code([status]) == EXIT_UNREAD


@pytest.mark.parametrize(
    ("status_json", "alive", "state", "needs_a_person"),
    [
        ({"state": "running"}, False, JobState.FAILED, True),  # killed: status.json still says running
        ({}, False, JobState.FAILED, True),
        ({}, True, JobState.STARTING, False),
        ({"state": "running"}, None, JobState.RUNNING, False),  # cluster mode: status.json only
        ({"state": "stopped", "reason": "a stop was requested"}, False, JobState.STOPPED, True),
        ({"state": "fenced", "reason": "epoch 3"}, False, JobState.FENCED, True),
        ({"state": "failed", "reason": "boom"}, False, JobState.FAILED, True),
        ({"state": "refused", "reason": "bad"}, False, JobState.REFUSED, True),
        ({"state": "killed", "reason": "forced stop"}, False, JobState.KILLED, True),
        ({"state": "dancing"}, True, JobState.UNKNOWN, False),
        ({}, None, JobState.UNKNOWN, False),
    ],
)
def test_job_state_from_status_and_liveness(status_json, alive, state, needs_a_person):
    status = assemble(healthy(job_status=status_json, job_alive=alive))
    assert status.job.state is state
    assert bool(status.problems) is needs_a_person
    if needs_a_person:
        assert status.problems[0].what.startswith("the job of epoch 2 on B is not running")
        assert "kafka_failover_orders_start" in status.problems[0].action
        assert exit_code([status]) == EXIT_ACT


def test_a_killed_job_says_why():
    status = assemble(healthy(job_status={"state": "running"}, job_alive=False))
    assert status.job.detail == "its process is gone while status.json says 'running' (killed, or it crashed)"


def test_no_job_recorded_needs_the_start_dag():
    status = assemble(healthy(record=record(job=None)))
    assert status.job.state is JobState.NONE
    assert status.problems[0].action == "trigger the start DAG kafka_failover_orders_start"
    assert "job:      none (the record names no job at epoch 2)" in to_text(status)


def test_a_cluster_that_does_not_answer_is_unread_and_the_rest_still_shows():
    reading = ReplicationReading(
        source="B", target="A", heartbeats_topic="B.heartbeats", standby_error="does not answer: refused"
    )
    status = assemble(
        healthy(active_ends=None, active_error="does not answer: timed out", replication=reading)
    )
    assert status.unread == [
        "active cluster B: does not answer: timed out",
        "standby cluster A: does not answer: refused",
    ]
    assert [row.lag for row in status.active_lag] == [None, None]
    assert [row.committed for row in status.active_lag] == [40, 100]
    assert status.total_lag is None
    assert status.job.state is JobState.RUNNING
    assert exit_code([status]) == EXIT_UNREAD
    text = to_text(status)
    assert "lag on B: ? records behind the end in all" in text
    assert "could not read: active cluster B: does not answer: timed out" in text


def test_an_unreadable_record_still_shows_the_fence():
    status = assemble(healthy(record=None, record_error="OperationalError: no such table: variable"))
    assert (status.active, status.epoch, status.job.state) == (None, None, JobState.UNKNOWN)
    assert status.fence is not None and status.fence_agreement is FenceAgreement.UNKNOWN
    assert status.unread == ["active record: OperationalError: no such table: variable"]
    text = to_text(status)
    assert text.startswith("pair orders: active record unreadable")
    assert "lag on" not in text


def test_problems_win_over_unread_in_the_exit_code():
    act = assemble(healthy(fence=FenceState("orders", 3, "A", "")))
    unread = assemble(healthy(active_error="x", active_ends=None))
    assert exit_code([unread, act]) == EXIT_ACT
    assert exit_code([unread, assemble(healthy())]) == EXIT_UNREAD
    assert exit_code([]) == 0


def test_stale_heartbeats_warn_without_changing_the_exit_code():
    reading = replace(healthy().replication, heartbeat_newest_ms=int((NOW - 95) * 1000))
    status = assemble(healthy(replication=reading))
    assert status.replication.heartbeat_age_seconds == 95.0
    assert status.warnings == [
        "the newest MirrorMaker 2 heartbeat B.heartbeats on A is 95 s old (stale after 30 s): replication "
        "B -> A looks stopped; restart MirrorMaker 2 (runbook: 'After an outage')"
    ]
    assert exit_code([status]) == 0


def test_unknown_replication_lag_and_no_batch_yet_warn():
    reading = replace(healthy().replication, lags={"orders-0": None, "orders-1": 3})
    status = assemble(healthy(replication=reading, progress=JobProgress(None, {}, 0)))
    assert "replication lag unknown for orders-0 (no offset sync to measure with)" in status.warnings
    assert "the job has committed no batch yet: its lag is unknown" in status.warnings
    assert status.job.last_batch_at is None
    assert "last committed batch: none yet" in to_text(status)


def test_replication_note_when_there_is_no_flow():
    status = assemble(healthy(replication=None, replication_note="no replication flow B->A is configured"))
    assert status.replication is None
    assert status.warnings == ["no replication flow B->A is configured"]
    assert "replication" not in to_text(status).split("last switches")[0].split("lag on")[1]


def test_recent_switches_are_the_last_ones_oldest_first():
    history = [entry(1), entry(2, "failback"), entry(3), entry(4, "failback")]
    status = assemble(
        healthy(
            record=record(epoch=4, active="A", job={**JOB, "cluster": "A", "epoch": 4}, history=history),
            fence=FenceState("orders", 4, "A", ""),
        )
    )
    assert [row.epoch for row in status.recent_switches] == [2, 3, 4]
    assert status.switches_total == 4
    assert assemble(healthy(), recent=0).recent_switches == []


def test_empty_history_says_so():
    status = assemble(healthy(record=record(history=())))
    assert (status.recent_switches, status.switches_total) == ([], 0)
    assert "last switches: none yet" in to_text(status)


def test_json_is_parseable_and_uses_the_record_words():
    document = json.loads(statuses_to_json([assemble(healthy(fence=FenceState("orders", 3, "A", "")))]))
    assert document["exit_code"] == EXIT_ACT
    (pair,) = document["pairs"]
    assert (pair["pair"], pair["active"], pair["epoch"], pair["fence"]["epoch"]) == ("orders", "B", 2, 3)
    assert pair["fence_agreement"] == "fence ahead of record"
    assert pair["job"]["state"] == "running"
    assert pair["active_lag"][1] == {"partition": "orders-0", "end_offset": 103, "committed": 100, "lag": 3}
    assert pair["replication"]["lags"] == {"orders-0": 0}
    assert pair["recent_switches"][0]["from"] == "A"
    assert pair["problems"][0]["what"].startswith("INTERRUPTED SWITCH")


def test_switch_row_of_an_entry():
    row = SwitchRow.of(entry(1, forced=True, gap_records=7, plan={"max_duplicates": None}))
    assert (row.from_cluster, row.to, row.forced, row.gap_records, row.max_duplicates) == (
        "A",
        "B",
        True,
        7,
        None,
    )
    assert row.model_dump(mode="json")["from"] == "A"


@pytest.mark.parametrize(
    ("state", "words"),
    [
        (None, None),
        (
            {"policy": "carry", "operators": ["0", "1"], "batch_id": 41, "files": 20},
            "carried 2 operators from batch 41",
        ),
        (
            {
                "policy": "fresh",
                "dropped_operators": ["0"],
                "warning": "state of 1 operator dropped at epoch 3",
            },
            "state of 1 operator dropped at epoch 3",
        ),
        ("not a dict", None),
    ],
)
def test_switch_row_says_what_became_of_the_state(state, words):
    extra = {} if state is None else {"state": state}
    assert SwitchRow.of(entry(1, **extra)).state == words


def test_history_view_limits_and_formats():
    rec = record(history=[entry(1), entry(2)])
    history = PairHistory.of(rec, stored=True, limit=1)
    assert [row.epoch for row in history.switches] == [2]
    lines = history_to_text(history).splitlines()
    assert lines[0] == "pair orders: active B at epoch 2; the last 1 of 2 switch(es):"
    assert lines[1].split() == [
        "at",
        "kind",
        "from",
        "->",
        "to",
        "epoch",
        "forced",
        "gap_records",
        "max_duplicates",
        "state",
        "by",
        "reason",
    ]
    assert lines[2].split()[:8] == ["2026-11-22T10:00:00+00:00", "failover", "A", "->", "B", "2", "no", "0"]
    assert lines[2].split()[8:11] == ["20", "-", "scheduled__2"]
    assert PairHistory.of(rec, stored=True).switches_total == 2
    assert len(PairHistory.of(rec, stored=True).switches) == 2


def test_history_view_of_no_switches():
    history = PairHistory.of(ActiveRecord.initial("orders", "A"), stored=False)
    assert (
        history_to_text(history) == "pair orders: active A at epoch 0; no switches yet (no record stored yet)"
    )
    assert history.model_dump(mode="json")["switches"] == []


def test_unbounded_duplicates_are_named():
    rec = record(history=[entry(1, plan={})])
    assert "unbounded" in history_to_text(PairHistory.of(rec, stored=True))


def test_a_job_stopped_by_an_interrupted_switch_is_not_sent_to_the_start_dag_first():
    status = assemble(
        healthy(fence=FenceState("orders", 3, "A", ""), job_status={"state": "fenced"}, job_alive=False)
    )
    assert [problem.what.split(":")[0] for problem in status.problems] == [
        "INTERRUPTED SWITCH",
        "the job of epoch 2 on B is not running (fenced)",
    ]
    assert status.problems[1].action.endswith(
        "settle the fence first (above): the start DAG refuses a fence at another epoch or cluster; then "
        "trigger the start DAG kafka_failover_orders_start (it resumes the epoch's checkpoint)"
    )


def test_ages_are_never_negative():
    progress = JobProgress(7, {}, 1, NOW + 3)  # committed after the reading's clock (or on a host ahead)
    reading = replace(healthy().replication, heartbeat_newest_ms=int((NOW + 2) * 1000))
    status = assemble(healthy(progress=progress, replication=reading))
    assert (status.job.last_batch_age_seconds, status.replication.heartbeat_age_seconds) == (0.0, 0.0)


def test_a_fence_ahead_while_a_switch_holds_its_lease_is_a_switch_at_work_not_a_problem():
    from airflow_kafka_failover.domain.switch_lease import SwitchLease

    readings = healthy(fence=FenceState("orders", 3, "A", ""))
    lease = SwitchLease("orders", 3, "A", "failback", readings.now + 40, readings.now - 5)
    status = assemble(replace(readings, lease=lease))
    assert status.fence_agreement is FenceAgreement.SWITCHING and status.problems == []
    assert exit_code([status]) != EXIT_ACT
    assert any(
        "a switch to A is at work: switch lease of epoch 3 (A) held by failback" in w for w in status.warnings
    )


def test_a_fence_ahead_whose_lease_expired_is_interrupted_and_the_keeper_finishes_it():
    from airflow_kafka_failover.domain.switch_lease import SwitchLease

    readings = healthy(fence=FenceState("orders", 3, "A", ""))
    lease = SwitchLease("orders", 3, "A", "failback", readings.now - 30, readings.now - 90)
    status = assemble(replace(readings, lease=lease))
    assert status.fence_agreement is FenceAgreement.AHEAD and exit_code([status]) == EXIT_ACT
    action = status.problems[0].action
    assert "the keeper (DAG kafka_failover_orders_keeper) finishes it" in action
    assert "held by failback, expired 30 s ago" in action and "force the switch to A" in action


def test_a_warm_standby_is_shown_and_a_missing_one_warns_without_changing_the_exit_code():
    from airflow_kafka_failover.domain.status.model import StandbyView

    waiting = StandbyView(cluster="A", slot="/runs/orders/A/standby", ready=True, state="waiting", pid=4242)
    status = assemble(healthy(standby=waiting))
    assert status.warnings == []
    assert "warm standby for A: waiting (pid 4242), slot /runs/orders/A/standby" in to_text(status)
    assert json.loads(statuses_to_json([status]))["pairs"][0]["standby"]["pid"] == 4242
    gone = StandbyView(cluster="A", slot="/runs/orders/A/standby", ready=False, state="taken", pid=4242)
    status = assemble(healthy(standby=gone))
    assert "warm standby for A: none waiting" in to_text(status)
    assert status.warnings == [
        "no warm standby driver waits for A (switch.standby: warm; last state taken): a switch to A now "
        "starts a new driver; the keeper starts one while A answers"
    ]
    assert exit_code([status]) == 0
    assert assemble(healthy()).standby is None  # a pair that wants none shows nothing


def test_a_stateful_job_shows_its_state_and_a_stateless_one_none():
    progress = JobProgress(
        7, {TopicPartition("orders", 0): 100}, 140, NOW - 2.5, True, {"operators": 2, "rows": 1234}
    )
    status = assemble(healthy(progress=progress))
    assert (status.job.state_operators, status.job.state_rows) == (2, 1234)
    assert "state: 2 stateful operators, 1234 rows (a switch carries it: job.state)" in to_text(status)
    stateless = assemble(healthy())
    assert stateless.job.state_operators is None and "state:" not in to_text(stateless)

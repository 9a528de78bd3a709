"""How a pair's readings become its status, and the verdict of ``kafka-failover status`` over every pair.

Pure. The verdict (:func:`exit_code`): :data:`EXIT_ACT` when some pair has ``problems`` (it needs a
person), else :data:`EXIT_UNREAD` when something could not be read, else 0. Warnings never change it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_failover.domain.status.model import (
    NOT_RUNNING,
    FenceAgreement,
    FenceView,
    JobState,
    JobView,
    PairReadings,
    PairStatus,
    PartitionLag,
    Problem,
    ReplicationReading,
    ReplicationView,
    SwitchRow,
)
from airflow_kafka_failover.domain.switch_lease import SwitchLease

EXIT_ACT = 4
"""``status``: some pair needs a person (see a pair's ``problems``)."""
EXIT_UNREAD = 5
"""``status``: every pair looks healthy as far as it could be read, but something could not be read."""
RECENT_SWITCHES = 3
"""How many of the last switches ``status`` shows."""


def _age(now: float, at: float | None) -> float | None:
    """Seconds from ``at`` to ``now``, never below 0 (the job's host clock may run a little ahead)."""
    return None if at is None else round(max(now - at, 0.0), 1)


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).isoformat(timespec="seconds")


def _lease_text(lease: SwitchLease | None, now: float) -> str:
    return f" ({lease.describe(now)})" if lease is not None else " (no switch lease is held)"


def _fence_agreement(readings: PairReadings) -> tuple[FenceAgreement, Problem | None]:
    record, fence, path = readings.record, readings.fence, readings.fence_path
    if record is None or readings.fence_error is not None:
        return FenceAgreement.UNKNOWN, None
    if fence is None:
        if record.epoch == 0:
            return FenceAgreement.NOT_FENCED_YET, None
        return FenceAgreement.MISSING, Problem(
            what=f"the fencing marker {path} is missing while the record is at epoch {record.epoch}: the "
            "next switch is refused ('another switch moved it') and no old job can be fenced",
            action=f"restore the marker with epoch {record.epoch} and cluster {record.active} (see the "
            "runbook's 'Undo and repair')",
        )
    lease = readings.lease
    if fence.epoch > record.epoch and lease and lease.epoch == fence.epoch and lease.valid_at(readings.now):
        return FenceAgreement.SWITCHING, None
    if fence.epoch > record.epoch:
        stored = "" if readings.record_stored else " (no record is stored: the initial one stands in)"
        return FenceAgreement.AHEAD, Problem(
            what=f"INTERRUPTED SWITCH: the fence is at epoch {fence.epoch} (cluster {fence.cluster}) but the "
            f"record at epoch {record.epoch} (active {record.active}){stored}: a switch advanced the fence "
            f"and never committed, so the job of epoch {record.epoch} stops at its next fence check and "
            "the pair may have no consumer",
            action=f"the keeper (DAG kafka_failover_{readings.pair}_keeper) finishes it once the switch's "
            f"lease expired{_lease_text(lease, readings.now)}; if the keeper is paused or its attempts fail, "
            f"fix the cause from its log, or force the switch to {fence.cluster}; see the runbook's 'Undo "
            "and repair'",
        )
    if fence.epoch < record.epoch:
        return FenceAgreement.BEHIND, Problem(
            what=f"the fence is at epoch {fence.epoch} but the record at epoch {record.epoch}: the record's "
            "job sees another epoch in the marker and stops as fenced",
            action=f"restore the marker {path} to epoch {record.epoch} and cluster {record.active}",
        )
    if fence.cluster != record.active:
        return FenceAgreement.OTHER_CLUSTER, Problem(
            what=f"the fence and the record are both at epoch {record.epoch} but the fence names cluster "
            f"{fence.cluster} and the record {record.active}",
            action=f"check which cluster the job of epoch {record.epoch} reads and repair the wrong one "
            "of the two (runbook: 'Undo and repair')",
        )
    return FenceAgreement.SETTLED, None


def _job_state(status: Mapping[str, Any], alive: bool | None) -> tuple[JobState, str]:
    written = status.get("state")
    reason = str(status.get("reason") or "")
    known = {state.value for state in JobState}
    if alive is False and written in (None, JobState.STARTING, JobState.RUNNING):
        said = f"status.json says {written!r}" if written else "it wrote no status"
        return JobState.FAILED, f"its process is gone while {said} (killed, or it crashed)"
    if written is None:
        if alive:
            return JobState.STARTING, "its process runs but has not reported its state yet"
        return JobState.UNKNOWN, "it wrote no status.json and its process cannot be checked from here"
    if written not in known:
        return JobState.UNKNOWN, f"status.json holds an unknown state {written!r}"
    state = JobState(written)
    if alive is None and state in (JobState.RUNNING, JobState.STARTING):
        reason = reason or "from status.json only: the driver runs on the cluster"
    return state, reason


def _restart_action(readings: PairReadings, agreement: FenceAgreement) -> str:
    start = f"trigger the start DAG kafka_failover_{readings.pair}_start"
    if agreement in (FenceAgreement.SETTLED, FenceAgreement.NOT_FENCED_YET, FenceAgreement.UNKNOWN):
        return start
    return (
        "settle the fence first (above): the start DAG refuses a fence at another epoch or cluster; "
        f"then {start}"
    )


def _job_view(readings: PairReadings, agreement: FenceAgreement) -> tuple[JobView, Problem | None]:
    record = readings.record
    if record is None:
        return JobView(state=JobState.UNKNOWN, detail="the active record could not be read"), None
    if record.job is None:
        return JobView(
            state=JobState.NONE, detail=f"the record names no job at epoch {record.epoch}"
        ), Problem(
            what=f"no job is recorded for epoch {record.epoch}: the pair has no consumer",
            action=_restart_action(readings, agreement),
        )
    job = record.job
    if readings.job_error is not None:
        return JobView(state=JobState.UNKNOWN, detail=readings.job_error, cluster=job.get("cluster")), None
    state, detail = _job_state(readings.job_status, readings.job_alive)
    progress = readings.progress
    committed_at = progress.committed_at if progress else None
    view = JobView(
        state=state,
        detail=detail,
        cluster=job.get("cluster"),
        epoch=job.get("epoch"),
        deploy_mode=job.get("deploy_mode"),
        where=readings.job_where,
        alive=readings.job_alive,
        status_updated_at=readings.job_status.get("updated_at"),
        last_batch_id=progress.batch_id if progress else None,
        last_batch_at=_iso(committed_at) if committed_at is not None else None,
        last_batch_age_seconds=_age(readings.now, committed_at),
        records=progress.records if progress else None,
        state_operators=progress.state.get("operators") if progress and progress.state else None,
        state_rows=progress.state.get("rows") if progress and progress.state else None,
    )
    if state not in NOT_RUNNING:
        return view, None
    return view, Problem(
        what=f"the job of epoch {job.get('epoch')} on {job.get('cluster')} is not running ({state}"
        + (f": {detail}" if detail else "")
        + ")",
        action=f"read its run folder {job.get('run_dir')} (status.json, logs/job.log) and fix the cause; "
        f"{_restart_action(readings, agreement)} (it resumes the epoch's checkpoint)",
    )


def _active_lag(readings: PairReadings) -> list[PartitionLag]:
    ends = dict(readings.active_ends or {})
    committed = {
        str(tp): offset for tp, offset in (readings.progress.offsets if readings.progress else {}).items()
    }
    rows = []
    for key in sorted(set(ends) | set(committed), key=_partition_order):
        end, position = ends.get(key), committed.get(key)
        lag = end - position if end is not None and position is not None else None
        rows.append(PartitionLag(partition=key, end_offset=end, committed=position, lag=lag))
    return rows


def _partition_order(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition("-")
    return (topic, int(partition)) if partition.isdigit() else (key, -1)


def _replication_view(reading: ReplicationReading, now: float) -> ReplicationView:
    newest = reading.heartbeat_newest_ms
    age = _age(now, newest / 1000 if newest is not None else None)
    return ReplicationView(
        source=reading.source,
        target=reading.target,
        lags=dict(sorted(reading.lags.items(), key=lambda item: _partition_order(item[0]))),
        heartbeats_topic=reading.heartbeats_topic,
        heartbeat_age_seconds=age,
    )


def _unread(readings: PairReadings) -> list[str]:
    found = [
        ("active record", readings.record_error),
        (f"fencing marker {readings.fence_path}", readings.fence_error),
        ("job handle", readings.job_error),
        ("job checkpoint", readings.progress_error),
    ]
    if readings.record is not None:
        found.append((f"active cluster {readings.record.active}", readings.active_error))
    reading = readings.replication
    if reading is not None:
        found += [
            (f"standby cluster {reading.target}", reading.standby_error),
            (f"replication lag {reading.source} -> {reading.target}", reading.lag_error),
            (f"heartbeats {reading.heartbeats_topic} on {reading.target}", reading.heartbeat_error),
        ]
    return [f"{what}: {error}" for what, error in found if error]


def _warnings(readings: PairReadings, view: PairStatus) -> list[str]:
    found = []
    if readings.active_missing_topics and readings.record is not None:
        found.append(
            f"topics {list(readings.active_missing_topics)} do not exist on the active cluster "
            f"{readings.record.active}: the job reads nothing from them"
        )
    if readings.replication_note:
        found.append(readings.replication_note)
    if not readings.record_stored and readings.record is not None:
        found.append(
            f"no active record is stored (Variable kafka_failover.{readings.pair}.active_record): shown "
            f"is the initial state, {readings.record.active} at epoch 0"
        )
    if view.fence_agreement is FenceAgreement.SWITCHING and readings.lease is not None:
        found.append(
            f"a switch to {readings.lease.cluster} is at work: {readings.lease.describe(readings.now)}; the "
            "job moves when it commits"
        )
    job = view.job
    if job.state in (JobState.RUNNING, JobState.STARTING) and job.last_batch_id is None:
        found.append("the job has committed no batch yet: its lag is unknown")
    unknown = [key for key, lag in (view.replication.lags if view.replication else {}).items() if lag is None]
    if unknown and readings.replication and not readings.replication.lag_error:
        found.append(f"replication lag unknown for {', '.join(unknown)} (no offset sync to measure with)")
    standby = readings.standby
    if standby is not None and not standby.ready:
        found.append(
            f"no warm standby driver waits for {standby.cluster} (switch.standby: warm; last state "
            f"{standby.state or 'none'}): a switch to {standby.cluster} now starts a new driver; the keeper "
            f"starts one while {standby.cluster} answers"
        )
    reading, replication = readings.replication, view.replication
    if reading and replication and replication.heartbeat_age_seconds is not None:
        if replication.heartbeat_age_seconds > reading.heartbeat_stale_seconds:
            age, stale = replication.heartbeat_age_seconds, reading.heartbeat_stale_seconds
            found.append(
                f"the newest MirrorMaker 2 heartbeat {replication.heartbeats_topic} on "
                f"{replication.target} is {age:g} s old (stale after {stale:g} s): replication "
                f"{replication.source} -> {replication.target} looks stopped; restart MirrorMaker 2 "
                "(runbook: 'After an outage')"
            )
    return found


def assemble(readings: PairReadings, recent: int = RECENT_SWITCHES) -> PairStatus:
    """Build the status of one pair from its readings.

    :param readings: what the readers gathered.
    :param recent: how many of the last switches to show.
    """
    record = readings.record
    agreement, fence_problem = _fence_agreement(readings)
    job, job_problem = _job_view(readings, agreement)
    fence = readings.fence
    history = record.history if record is not None else ()
    view = PairStatus(
        pair=readings.pair,
        active=record.active if record else None,
        epoch=record.epoch if record else None,
        record_stored=readings.record_stored,
        record_updated_at=(record.updated_at or None) if record and readings.record_stored else None,
        fence_path=readings.fence_path,
        fence=FenceView(epoch=fence.epoch, cluster=fence.cluster, written_at=fence.written_at)
        if fence
        else None,
        fence_agreement=agreement,
        job=job,
        active_lag=_active_lag(readings),
        replication=_replication_view(readings.replication, readings.now) if readings.replication else None,
        standby=readings.standby,
        recent_switches=[SwitchRow.of(entry) for entry in history[-recent:]] if recent > 0 else [],
        switches_total=len(history),
        problems=[problem for problem in (fence_problem, job_problem) if problem is not None],
        unread=_unread(readings),
    )
    return view.model_copy(update={"warnings": _warnings(readings, view)})


def exit_code(statuses: Iterable[PairStatus]) -> int:
    """The ``status`` command's exit code: 0, :data:`EXIT_ACT` or :data:`EXIT_UNREAD` (see the module).

    :param statuses: the status of every pair shown.
    """
    statuses = list(statuses)
    if any(status.problems for status in statuses):
        return EXIT_ACT
    if any(status.unread for status in statuses):
        return EXIT_UNREAD
    return 0

"""The steps of a switch (failover A->B or failback B->A), as plain functions the DAG tasks call.

Every step reads the active record when it acts, never a view handed on from an earlier task: a switch run
may watch for minutes between its gate and its verdict, and anything can commit meanwhile (the start DAG,
a keeper's restart, a manual switch). ``fence_and_stop`` re-decides on the record as it is (and ends the
run when the switch no longer applies); once the fence moved, the record of the old epoch can no longer
change (every commit at that epoch checks the fence first), and the later steps check that it is still the
record the fence was moved from.

Every step is safe to run again: the fence advance is idempotent for the same (epoch, cluster), stopping a
stopped job succeeds, a plan is recomputed from the stopped job's checkpoint, submitting a run that is
already running adopts it, and the record commit recognises a switch it already stored. A run interrupted
at any step therefore converges when it is run again.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from typing import Any

from airflow_kafka_failover.core.exceptions import CheckpointError, FailoverError, TranslationError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import PairConfig
from airflow_kafka_failover.domain.switch_gate import (
    FAILOVER,
    NotApplicable,
    SwitchParams,
    describe_changes,
    direction,
    gate,
)
from airflow_kafka_failover.domain.translation.plan import PlanPayload
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.io import metrics
from airflow_kafka_failover.io.lease_file import holding_lease, release_lease, write_lease
from airflow_kafka_failover.io.planner import build_plan, load_position
from airflow_kafka_failover.io.record_store import commit_record, fencing_marker, load_record, same_run
from airflow_kafka_failover.jobs.sink import uncommitted_output_records
from airflow_kafka_failover.run_format.fencing import FencedError
from airflow_kafka_failover.run_format.settings import SwitchPlan
from airflow_kafka_failover.run_format.spark_checkpoint import in_flight_offsets
from airflow_kafka_failover.switching.job_request import JobRequest, started_plan
from airflow_kafka_failover.switching.old_run import OldRun, old_run
from airflow_kafka_failover.switching.state import carry_state, check_state_policy, state_entry

log = logging.getLogger(__name__)

FORCED_STOP_TIMEOUT_S = 5.0
"""How long a forced failover waits for the old job's graceful stop: its cluster may still answer, and the
fence already keeps it from committing another batch."""


def current_record(pair: PairConfig, kind: str, seen: ActiveRecord | None = None) -> ActiveRecord:
    """The pair's record as it is now, checked to still call for this switch.

    :param pair: the pair.
    :param kind: ``failover`` or ``failback``.
    :param seen: the record the run's gate passed on, to say what changed since (None: nothing to compare).
    :raises NotApplicable: the record no longer calls for this switch (another switch moved the pair).
    """
    record = load_record(pair)
    changes = describe_changes(seen, record) if seen is not None else []
    if changes:
        log.warning(
            "the record of pair %s changed since the gate read it (%s): this step acts on the record as "
            "it is now",
            pair.name,
            "; ".join(changes),
        )
    try:
        gate(pair, kind, record)
    except NotApplicable as exc:
        raise NotApplicable(
            f"{exc} (the record changed since the gate read it: {'; '.join(changes) or 'see its history'}); "
            "this run ends here and touches nothing"
        ) from None
    return record


def fenced_record(
    pair: PairConfig, kind: str, fence_epoch: int, submitted: dict[str, Any] | None = None
) -> ActiveRecord:
    """The record a switch that fenced ``fence_epoch`` acts on, read now: one epoch behind the fence.

    :param pair: the pair.
    :param kind: ``failover`` or ``failback``.
    :param fence_epoch: the epoch this switch's ``fence_and_stop`` created.
    :param submitted: the handle this switch submitted; a record already at ``fence_epoch`` naming it is this
        switch's own commit (a retried task) and is returned as it is.
    :raises FencedError: another switch committed since the fence moved; this run must not act.
    """
    record = load_record(pair)
    source, target = direction(pair, kind)
    if submitted is not None and (record.epoch, record.active) == (fence_epoch, target):
        if same_run(record.job, submitted):
            return record
    if (record.epoch, record.active) != (fence_epoch - 1, source):
        raise FencedError(
            f"the record of pair {pair.name!r} is at epoch {record.epoch} with {record.active} active, but "
            f"this {kind} moved the fence to epoch {fence_epoch} from {source} at epoch {fence_epoch - 1}: "
            "another switch committed since; this run does nothing more (kafka-failover status shows the "
            "pair)"
        )
    return record


def fence_and_stop(
    pair: PairConfig, kind: str, seen: ActiveRecord | None = None, forced: bool = False
) -> dict[str, Any]:
    """Re-read the record, advance the fence to ``epoch + 1`` for the target, take the switch lease, then stop
    the old job (bounded, best effort).

    :param seen: the record the run's gate passed on (only to log what changed since).
    :param forced: the run was forced (no verdict). A failover that is not forced follows the down verdict:
        its source did not answer moments ago, so the old job is killed at once (it cannot finish a batch
        that needs its source) and the plan does not probe the source again (``source_judged_down`` in the
        result).
    :raises NotApplicable: the record, read now, no longer calls for this switch.
    :raises FencedError: the marker moved under us (another switch is in progress or won).
    """
    record = current_record(pair, kind, seen)
    _source, target = direction(pair, kind)
    check_state_policy(pair, kind, old_run(pair, record))
    new_epoch = record.epoch + 1
    marker = fencing_marker(pair)
    current = marker.read()
    expected = None if current is None and record.epoch == 0 else record.epoch
    fence = marker.advance(expected, new_epoch, target)
    fenced_at = time.time()
    write_lease(marker.path, pair.name, new_epoch, target, kind, pair.keeper.switch_lease_seconds)
    log.info(
        "fence of pair %s at epoch %s for %s: a job of an older epoch stops at its next check",
        pair.name,
        fence.epoch,
        fence.cluster,
    )
    # A commit at the old epoch that raced the fence's creation (the start DAG's) is in the record now; no
    # later one can land, since every commit checks the fence first.
    old = old_run(pair, fenced_record(pair, kind, new_epoch))
    judged_down = kind == FAILOVER and not forced
    return {
        "epoch": new_epoch,
        "stop": stop_old_job(pair, kind, old, new_epoch, source_judged_down=judged_down),
        "fenced_at": fenced_at,
        "old_run": old.identity,
        "source_judged_down": judged_down,
    }


def stop_old_job(
    pair: PairConfig, kind: str, old: OldRun, fence_epoch: int, source_judged_down: bool = False
) -> str:
    """Stop the old run once the fence moved past it (bounded, best effort); return the outcome.

    A failback gives it ``job.stop_timeout_seconds`` to finish its batch, then kills it (a local driver gets
    SIGTERM and time for its shutdown hooks). A failover gives it at most 5 s, none when the down verdict
    judged its source down, and then kills it at once (SIGKILL for a local driver): a driver whose brokers are
    gone hangs in its batch and in its shutdown hooks, and the fence already keeps it from committing a batch
    that matters. A batch it wrote but never committed is read again, and counted in the plan's bound.

    :param old: the run of the record's epoch (:func:`~airflow_kafka_failover.switching.old_run.old_run`).
    :param fence_epoch: the epoch of the fence this switch moved (named in the log).
    :param source_judged_down: the down verdict of this failover said the source does not answer.
    """
    if old.handle is None:
        log.info("the record's epoch has no job, in the record or in its run folder: there is none to stop")
        return "not-running"
    if kind != FAILOVER:
        timeout = pair.job.stop_timeout_seconds
    elif source_judged_down:
        timeout = 0.0
    else:
        timeout = min(pair.job.stop_timeout_seconds, FORCED_STOP_TIMEOUT_S)
    log.info(
        "stopping %s (%s)",
        old.describe(),
        "its source was judged down: killing it at once, after the stop request"
        if timeout == 0
        else f"a stop request, then a kill after {timeout:.0f} s",
    )
    try:
        return StreamingJobHook.for_options(pair.job).stop(old.handle, timeout, at_once=kind == FAILOVER)
    except Exception as exc:  # best effort: the fence stops it when it can read the marker
        log.warning(
            "could not stop the old job (%s); the fence at epoch %s stops it at its next check",
            exc,
            fence_epoch,
        )
        return f"unreachable: {exc}"


def stop_if_changed(
    pair: PairConfig, kind: str, old: OldRun, stopped: dict[str, Any] | None, epoch: int
) -> None:
    """Stop ``old`` when it is not the run ``fence_and_stop`` stopped (a start committed its job in between).

    :param stopped: the identity of the run ``fence_and_stop`` stopped (its XCom's ``old_run``).
    :param epoch: the fence's epoch.
    """
    if old.handle is not None and not old.is_run(stopped):
        log.warning("%s is not the run the fence step stopped (%s): stopping it now", old.describe(), stopped)
        stop_old_job(pair, kind, old, epoch)


def switch_lease(pair: PairConfig, kind: str, epoch: int, held: bool = True):
    """Hold the switch lease of ``epoch`` while a step of the switch runs (see ``switch_lease``).

    :param held: False holds nothing (a dry run moved no fence).
    """
    if not held:
        return nullcontext()
    _source, target = direction(pair, kind)
    return holding_lease(
        pair.job.fencing_marker, pair.name, epoch, target, kind, pair.keeper.switch_lease_seconds
    )


def _hook_if_reachable(pair: PairConfig, cluster: str, timeout: float = 3.0):
    """A hook on ``cluster`` when it answers within ``timeout`` s, else None.

    Only the check is short: the hook keeps its default timeout for the reads that follow (MirrorMaker 2's
    topics, watermarks), so a cluster that answers slowly still gives the plan its evidence.
    """

    hook = KafkaClusterHook(pair.cluster(cluster).connection)
    try:
        hook.describe_cluster(timeout_seconds=timeout)
    except Exception as exc:  # a dead cluster is expected during a failover
        log.info("cluster %s does not answer (%s); planning without it", cluster, exc)
        return None
    return hook


def check_target(pair: PairConfig, kind: str) -> None:
    """Fail when the target cannot be reached; say so when both clusters are down."""
    source, target = direction(pair, kind)
    if _hook_if_reachable(pair, target, timeout=5.0) is not None:
        return
    source_up = _hook_if_reachable(pair, source, timeout=5.0) is not None
    if not source_up:
        raise FailoverError(
            f"both clusters of pair {pair.name!r} are down ({source} and {target} do not answer); "
            "no switch is possible: bring one of them back"
        )
    raise FailoverError(
        f"the {kind} target {target} of pair {pair.name!r} does not answer while {source} does; "
        "not switching to a dead cluster"
    )


def make_plan(
    pair: PairConfig,
    kind: str,
    record: ActiveRecord,
    dry_run: bool,
    old: OldRun | None = None,
    probe_source: bool = True,
) -> dict[str, Any]:
    """Translate the old run's position on the source to start offsets on the target, handling gaps per
    on_gap.

    :param record: the active record, read when this step acts.
    :param old: the run the plan starts from (default: the record's, :func:`old_run`).
    :param probe_source: ask whether the source answers (1.5 s at most) and read it when it does; False when
        the down verdict has just judged it down: the plan reads the target only.
    :raises CheckpointError: the record names a job whose checkpoint holds no committed batch: its position
        is unknown, and no start can be proven safe.
    """

    source, target = direction(pair, kind)
    old = old or old_run(pair, record)
    position = old_position(pair, record, old)
    if not probe_source:
        log.info("not asking %s again: the down verdict of this failover judged it down", source)
    hooks = {
        source: _hook_if_reachable(pair, source, timeout=1.5) if probe_source else None,
        target: KafkaClusterHook(pair.cluster(target).connection),
    }
    started = time.monotonic()
    plan = build_plan(pair, source, target, position, hooks)
    while plan.blocking_gaps and pair.switch.on_gap == "wait" and not dry_run:
        waited = time.monotonic() - started
        blocking = sum(t.gap_records for t in plan.blocking_gaps)
        if waited >= pair.switch.gap_wait_seconds:
            raise TranslationError(
                f"{target} still lacks {blocking} records of {len(plan.blocking_gaps)} partitions after "
                f"waiting {waited:.0f} s for replication (on_gap: wait): {plan.summary()}. Restore "
                "replication, "
                "raise switch.gap_wait_seconds, or set on_gap: proceed to start without them (records only "
                "the source holds are read once it returns)"
            )
        log.info(
            "gap: %s records of %s partitions not on %s yet; re-planning in 5 s",
            blocking,
            len(plan.blocking_gaps),
            target,
        )
        time.sleep(5)
        plan = build_plan(pair, source, target, position, hooks)
    _log_upper_bounds(plan, pair.switch.on_gap)
    gap = plan.total_gap_records
    if gap:
        log.warning(
            "proceeding with a gap (on_gap: %s): %s offsets of %s partitions are missing on %s (see the "
            "plan's gap column); records the source held beyond them are only on %s until it returns",
            pair.switch.on_gap,
            gap,
            len(plan.gaps),
            target,
            source,
        )
    log.info("plan %s -> %s:\n%s", source, target, plan.to_table())
    watermarks = _known_watermarks(pair, source, position, hooks[source])
    summary = plan.summary()
    old_job = old.handle or {}
    uncommitted = (
        uncommitted_output_records(old.checkpoint, old_job["sink_root"], old_job["epoch"])
        if old.checkpoint and old_job.get("sink_root")
        else 0
    )
    in_flight = _in_flight(old.checkpoint, getattr(position, "batch_id", None))
    summary["uncommitted_output_records"] = uncommitted
    summary["position_batch"] = getattr(position, "batch_id", None)
    summary["in_flight_offsets"] = in_flight
    # The batch in flight holds the uncommitted output; whichever is larger bounds what it adds.
    extra = max(uncommitted, in_flight)
    summary["max_duplicates"] = None if plan.max_redelivery is None else plan.max_redelivery + extra
    if uncommitted:
        log.info(
            "the old job wrote %s records in batches it never committed; they are read again", uncommitted
        )
    if in_flight:
        log.info(
            "the old job had a batch of %s offsets in flight when the fence moved; if it still commits, "
            "the new job reads those records again (counted in max_duplicates)",
            in_flight,
        )
    return PlanPayload(
        plan=plan.to_json(),
        summary=summary,
        starting_offsets=plan.to_spark_starting_offsets(),
        gap_records=gap,
        source_watermarks=watermarks,
        dry_run=dry_run,
        old_run=old.identity,
    ).model_dump(mode="json")


def _in_flight(checkpoint: str | None, after_batch: int | None) -> int:
    """Offsets of the old job's batches planned after the committed batch the position came from (or after
    its last commit), 0 without a checkpoint or one. Read after the position: a batch that committed in
    between still counts, since the new job starts before its records."""
    if not checkpoint:
        return 0
    try:
        return in_flight_offsets(checkpoint, after_batch)
    except (CheckpointError, OSError) as exc:  # the position itself was read; this only widens the bound
        log.warning(
            "could not read the old job's batch in flight from %s (%s); counting none", checkpoint, exc
        )
        return 0


def _log_upper_bounds(plan: Any, on_gap: str) -> None:
    """Name the gaps a switch does not wait for: upper bounds where replication was shown complete."""
    passed = [t for t in plan.gaps if t.gap_upper_bound and t.replication_complete]
    if passed and on_gap == "wait":
        log.warning(
            "not waiting for %s: their gaps lie before MirrorMaker 2's oldest offset sync and are only upper "
            "bounds in offsets (transaction markers and aborted records may make up all of them), and the "
            "replicated heartbeats show replication past the replicas' ends",
            ", ".join(f"{t.target} (up to {t.gap_records})" for t in passed),
        )


def old_position(pair: PairConfig, record: ActiveRecord, old: OldRun) -> Any:
    """The old run's committed position; None when it committed nothing (every partition then starts at
    ``translation.initial_position``, and the plan says what that may re-read).

    :raises CheckpointError: the record names the run but its checkpoint holds no committed batch.
    """

    position = load_position(checkpoint=old.checkpoint) if old.checkpoint else None
    if position is not None:
        log.info("planning from the committed position of %s (checkpoint %s)", old.describe(), old.checkpoint)
        return position
    if old.named_by_record:
        raise CheckpointError(
            f"the record of pair {pair.name!r} names the job of epoch {record.epoch} on {record.active}, but "
            f"its checkpoint {old.checkpoint} holds no committed batch: where that job stopped is unknown, "
            "and no start on the other cluster can be proven safe. Restore the checkpoint from a backup; or, "
            f"to start from translation.initial_position ({pair.translation.initial_position}) and re-read "
            "or skip records knowingly, set the record's job and checkpoint to null (docs/runbook.md, Undo "
            "and repair)"
        )
    log.info(
        "%s committed no batch; every partition starts at %s",
        "the run of the record's epoch" if old.handle is not None else "no run of the record's epoch",
        pair.translation.initial_position,
    )
    return None


def _known_watermarks(pair: PairConfig, source: str, position: Any, hook: Any) -> dict[str, int]:
    """What the source is known to hold: the job's position, raised to its high watermarks when reachable."""
    marks = {
        f"{tp.topic}-{tp.partition}": offset for tp, offset in (position.offsets.items() if position else [])
    }
    if hook is None:
        return marks
    try:
        counts = hook.partition_counts(pair.topics_on(source))

        partitions = [TopicPartition(t, p) for t, n in counts.items() for p in range(n)]
        for tp, wm in hook.watermarks(partitions).items():
            key = f"{tp.topic}-{tp.partition}"
            marks[key] = max(wm.high, marks.get(key, 0))
    except Exception as exc:  # the position alone is still a valid lower bound
        log.info("could not read the watermarks of %s (%s); recording the job's position only", source, exc)
    return marks


def dry_run_plan(pair: PairConfig, kind: str, seen: ActiveRecord | None) -> dict[str, Any]:
    """The plan step of a dry run: the plan from the record as it is now; nothing is moved.

    :raises NotApplicable: the record, read now, does not call for this switch.
    :raises StateRefused: the job holds state and ``job.state`` is ``refuse`` (the switch would stop there).
    """
    record = current_record(pair, kind, seen)
    check_state_policy(pair, kind, old_run(pair, record))
    return make_plan(pair, kind, record, dry_run=True)


def plan_after_fence(pair: PairConfig, kind: str, fenced: dict[str, Any]) -> dict[str, Any]:
    """The plan step of a switch that moved the fence: read the record now, stop a run of the old epoch
    that the fence step did not (one the start DAG committed in between), plan from it.

    :param fenced: ``fence_and_stop``'s result (``epoch``, ``old_run``).
    :raises FencedError: another switch committed since the fence moved.
    """
    with switch_lease(pair, kind, fenced["epoch"]):
        record = fenced_record(pair, kind, fenced["epoch"])
        old = old_run(pair, record)
        stop_if_changed(pair, kind, old, fenced.get("old_run"), fenced["epoch"])
        return make_plan(
            pair, kind, record, False, old, probe_source=not fenced.get("source_judged_down", False)
        )


def commit_after_first_batch(
    pair: PairConfig,
    kind: str,
    fenced: dict[str, Any],
    handle: dict[str, Any],
    plan: dict[str, Any],
    params: SwitchParams,
    triggered_by: str,
) -> ActiveRecord:
    """The commit step: read the record now and commit the switch on it (see :func:`commit`); a record that
    already holds this switch's run (a retried task) is returned as it is.

    :param fenced: ``fence_and_stop``'s result.
    :param handle: the submit step's handle.
    :param plan: the plan step's payload.
    """
    with switch_lease(pair, kind, fenced["epoch"]):
        before = fenced_record(pair, kind, fenced["epoch"], submitted=handle)
        if before.epoch == fenced["epoch"]:
            log.info("the record already holds this switch's run at epoch %s: nothing to write", before.epoch)
            return before
        return commit(
            pair, kind, before, handle, plan, params, triggered_by, fenced_at=fenced.get("fenced_at")
        )


def submit(
    pair: PairConfig, cluster: str, epoch: int, starting_offsets: Any, plan: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Submit the job on ``cluster`` at ``epoch``; return its handle.

    :param starting_offsets: where a new checkpoint starts.
    :param plan: the switch's plan payload, kept in the run's settings so that the commit of whichever
        switch run adopts the run records it (None: not a switch).
    """
    switch_plan = (
        None if plan is None else SwitchPlan(summary=plan["summary"], gap_records=plan["gap_records"])
    )
    if plan is not None:
        carry_state(pair, cluster, epoch, plan)
    request = JobRequest.for_pair(pair, cluster, epoch, starting_offsets, switch_plan)
    return request.submit(StreamingJobHook.for_options(pair.job)).to_dict()


def plan_of_started_run(handle: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    """The plan to record for the run of ``handle``: the one it was started with (its settings'
    ``switch_plan``), not ``plan``, when another switch run started it from its own plan (two runs racing to
    the same epoch: the second adopts the first's job) or an earlier try of this one did. The run re-reads
    what its start offsets say, so only that plan's duplicate bound and gap describe it."""
    started = started_plan(handle["run_dir"])
    if started is None or started.summary == plan["summary"]:
        return plan
    log.warning(
        "the job of epoch %s was started from another plan (made at %s: duplicates <= %s, gap %s) than this "
        "run's (made at %s: duplicates <= %s, gap %s), by a switch run racing this one or an earlier try; "
        "recording the plan it started from",
        handle.get("epoch"),
        started.summary.get("created_at"),
        started.summary.get("max_duplicates"),
        started.gap_records,
        plan["summary"].get("created_at"),
        plan["summary"].get("max_duplicates"),
        plan["gap_records"],
    )
    return {**plan, "summary": started.summary, "gap_records": started.gap_records}


def _default_reason(kind: str, forced: bool, triggered_by: str) -> str:
    """The history entry's reason when the run gave none: ``forced``, ``manual <kind>`` for a run triggered
    by hand (``triggered_by`` is Airflow's run type, ``manual`` here), else ``automatic <kind>``."""
    if forced:
        return "forced"
    return f"{'manual' if triggered_by.startswith('manual') else 'automatic'} {kind}"


def commit(
    pair: PairConfig,
    kind: str,
    record: ActiveRecord,
    handle: dict[str, Any],
    plan: dict[str, Any],
    params: SwitchParams,
    triggered_by: str,
    fenced_at: float | None = None,
) -> ActiveRecord:
    """Write the switched record, then send the switch's metrics.

    The compare-and-set covers what the switch relied on: the record must still be at the epoch the switch
    started from, and name the run the plan started from (or none, when the plan found that run in its folder
    before the start DAG committed it).

    :param record: the record the switch moves the pair from, read when this step acts.
    :param plan: the plan step's payload (its ``old_run`` names the run it planned from).
    :param fenced_at: unix seconds when ``fence_and_stop`` wrote the fence (the switch's duration starts).
    """

    source, target = direction(pair, kind)
    plan = plan_of_started_run(handle, plan)
    entry = {
        "kind": kind,
        "reason": params.reason or _default_reason(kind, params.force, triggered_by),
        "triggered_by": triggered_by,
        "forced": params.force,
        "plan": plan["summary"],
        "gap_records": plan["gap_records"],
    }
    state = state_entry(pair, plan, handle["checkpoint"], record.epoch + 1)
    if state is not None:
        entry["state"] = state
        if "warning" in state:
            log.warning("pair %s: %s (job.state: %s)", pair.name, state["warning"], state["policy"])
    new = record.switched(
        to=target,
        job=handle,
        checkpoint=handle["checkpoint"],
        entry=entry,
        watermarks={source: plan["source_watermarks"]},
    )
    planned_from = plan.get("old_run")

    def planned_run_still_recorded(current: ActiveRecord) -> None:
        if current.job is not None and not same_run(current.job, planned_from):
            raise FencedError(
                f"the record of pair {pair.name!r} at epoch {current.epoch} names the run "
                f"{(current.job or {}).get('run_dir')}, not the one this {kind} stopped and planned from "
                f"({(planned_from or {}).get('run_dir', 'none')}); nothing was committed: the keeper "
                "finishes the switch with a plan from the recorded run"
            )

    committed = commit_record(pair, record.epoch, new, check=planned_run_still_recorded)
    release_lease(pair.job.fencing_marker, pair.name, committed.epoch)
    if committed is not new:  # a retry found its switch already committed: it was counted then
        return committed
    metrics.switch_committed(
        pair.name,
        kind,
        params.force,
        fenced_at,
        plan["gap_records"],
        plan["summary"].get("max_duplicates"),
    )
    return committed

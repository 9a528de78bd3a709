"""The steps of a switch (failover A->B or failback B->A), as plain functions the DAG tasks call.

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

from airflow_kafka_failover.config import PairConfig
from airflow_kafka_failover.exceptions import FailoverError, TranslationError
from airflow_kafka_failover.record import ActiveRecord
from airflow_kafka_failover.record_store import fencing_marker
from airflow_kafka_failover.switch_gate import FAILOVER, SwitchParams, direction
from airflow_kafka_failover.switch_lease import holding_lease, release_lease, write_lease

log = logging.getLogger(__name__)

FORCED_STOP_TIMEOUT_S = 5.0
"""How long a failover waits for the old job's graceful stop: its cluster is usually gone, and the fence
already keeps it from committing another batch."""


def fence_and_stop(pair: PairConfig, kind: str, record: ActiveRecord) -> dict[str, Any]:
    """Advance the fence to ``epoch + 1`` for the target, take the switch lease, then stop the old job
    (bounded, best effort).

    :raises FencedError: the marker moved under us (another switch is in progress or won).
    """
    _source, target = direction(pair, kind)
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
    return {"epoch": new_epoch, "stop": stop_old_job(pair, kind, record), "fenced_at": fenced_at}


def stop_old_job(pair: PairConfig, kind: str, record: ActiveRecord) -> str:
    """Stop the record's job once the fence moved past it (bounded, best effort); return the outcome."""
    from airflow_kafka_failover.operators.streaming_job import streaming_job_hook

    timeout = (
        min(pair.job.stop_timeout_seconds, FORCED_STOP_TIMEOUT_S)
        if kind == FAILOVER
        else pair.job.stop_timeout_seconds
    )
    try:
        return streaming_job_hook(pair.job).stop(record.job, timeout)
    except Exception as exc:  # best effort: the fence stops it when it can read the marker
        log.warning(
            "could not stop the old job (%s); the fence at epoch %s stops it at its next check",
            exc,
            record.epoch + 1,
        )
        return f"unreachable: {exc}"


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
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook

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


def make_plan(pair: PairConfig, kind: str, record: ActiveRecord, dry_run: bool) -> dict[str, Any]:
    """Translate the job's position on the source to start offsets on the target, handling gaps per on_gap."""
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
    from airflow_kafka_failover.jobs.progress import uncommitted_output_records
    from airflow_kafka_failover.translation.plan import PlanPayload
    from airflow_kafka_failover.translation.planner import build_plan, load_position

    source, target = direction(pair, kind)
    position = load_position(checkpoint=record.checkpoint) if record.checkpoint else None
    if position is None:
        log.info(
            "no committed position of the old job; every partition starts at %s",
            pair.translation.initial_position,
        )
    hooks = {
        source: _hook_if_reachable(pair, source, timeout=1.5),
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
    old_job = record.job or {}
    uncommitted = (
        uncommitted_output_records(record.checkpoint, old_job["sink_root"], old_job["epoch"])
        if record.checkpoint and old_job.get("sink_root")
        else 0
    )
    summary["uncommitted_output_records"] = uncommitted
    summary["max_duplicates"] = None if plan.max_redelivery is None else plan.max_redelivery + uncommitted
    if uncommitted:
        log.info(
            "the old job wrote %s records in batches it never committed; they are read again", uncommitted
        )
    return PlanPayload(
        plan=plan.to_json(),
        summary=summary,
        starting_offsets=plan.to_spark_starting_offsets(),
        gap_records=gap,
        source_watermarks=watermarks,
        dry_run=dry_run,
    ).model_dump(mode="json")


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


def _known_watermarks(pair: PairConfig, source: str, position: Any, hook: Any) -> dict[str, int]:
    """What the source is known to hold: the job's position, raised to its high watermarks when reachable."""
    marks = {
        f"{tp.topic}-{tp.partition}": offset for tp, offset in (position.offsets.items() if position else [])
    }
    if hook is None:
        return marks
    try:
        counts = hook.partition_counts(pair.topics_on(source))
        from airflow_kafka_failover.types import TopicPartition

        partitions = [TopicPartition(t, p) for t, n in counts.items() for p in range(n)]
        for tp, wm in hook.watermarks(partitions).items():
            key = f"{tp.topic}-{tp.partition}"
            marks[key] = max(wm.high, marks.get(key, 0))
    except Exception as exc:  # the position alone is still a valid lower bound
        log.info("could not read the watermarks of %s (%s); recording the job's position only", source, exc)
    return marks


def job_request(pair: PairConfig, cluster: str, epoch: int, starting_offsets: Any):
    from airflow_kafka_failover.operators.job_request import JobRequest

    return JobRequest(
        pair=pair.name,
        cluster=cluster,
        epoch=epoch,
        kafka_conn_id=pair.cluster(cluster).connection,
        options=pair.job,
        topics=tuple(pair.topics_on(cluster)),
        starting_offsets=starting_offsets,
        bookkeeping_group=pair.bookkeeping_group or "",
    )


def job_hook(pair: PairConfig):
    from airflow_kafka_failover.operators.streaming_job import streaming_job_hook

    return streaming_job_hook(pair.job)


def submit(pair: PairConfig, cluster: str, epoch: int, starting_offsets: Any) -> dict[str, Any]:
    """Submit the job on ``cluster`` at ``epoch``; return its handle."""
    return job_request(pair, cluster, epoch, starting_offsets).submit(job_hook(pair)).to_dict()


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
    """Write the switched record (compare-and-set on the epoch the switch started from), then send the
    switch's metrics.

    :param fenced_at: unix seconds when ``fence_and_stop`` wrote the fence (the switch's duration starts).
    """
    from airflow_kafka_failover import metrics
    from airflow_kafka_failover.record_store import commit_record

    source, target = direction(pair, kind)
    entry = {
        "kind": kind,
        "reason": params.reason or ("forced" if params.force else f"automatic {kind}"),
        "triggered_by": triggered_by,
        "forced": params.force,
        "plan": plan["summary"],
        "gap_records": plan["gap_records"],
    }
    new = record.switched(
        to=target,
        job=handle,
        checkpoint=handle["checkpoint"],
        entry=entry,
        watermarks={source: plan["source_watermarks"]},
    )
    committed = commit_record(pair, record.epoch, new)
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

"""Finishing a switch that moved the fence and then stopped (its worker died, a step failed for good).

The fence is the decision: once epoch N+1 is written for cluster T, every job of epoch N stops at its next
check and the record's compare-and-set refuses anything of epoch N that is not already there. Going back is
therefore not an option; the only way to one running job is forward, through the switch's own steps:
stop the old job (best effort), plan from its checkpoint, submit at N+1 on T (adopting a run a submit already
started), wait for the first batch, commit. Each step is the switch DAG's, so a switch that comes back to
life half-way converges with the keeper's work instead of fighting it (its submit adopts the running job,
its commit finds the same run already committed).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import ClusterManagers
from airflow_kafka_failover.core.exceptions import FailoverError
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import PairConfig
from airflow_kafka_failover.domain.switch_gate import FAILOVER, SwitchParams, direction
from airflow_kafka_failover.run_format.fencing import FenceState
from airflow_kafka_failover.run_format.progress import read_progress
from airflow_kafka_failover.switching import steps
from airflow_kafka_failover.switching.old_run import old_run

log = logging.getLogger(__name__)

KEEPER = "keeper (finished an interrupted switch)"


def switch_kind(pair: PairConfig, record: ActiveRecord, fence: FenceState) -> str:
    """The kind of the switch the fence decided: it moves the job from the record's cluster to the fence's.

    :raises FailoverError: the fence and the record do not describe one switch (a person must look).
    """
    if fence.epoch != record.epoch + 1:
        raise FailoverError(
            f"the fence of pair {pair.name!r} is at epoch {fence.epoch} but the record at {record.epoch}: "
            "more than one switch apart, which no single interrupted switch explains; compare the fencing "
            "marker with the record's history and fix whichever is wrong (kafka-failover status shows both)"
        )
    if fence.cluster == record.active or fence.cluster not in pair.clusters:
        raise FailoverError(
            f"the fence of pair {pair.name!r} names cluster {fence.cluster!r} at epoch {fence.epoch}, and "
            f"the record has {record.active} active: that is not a switch between the pair's clusters "
            f"{sorted(pair.clusters)}; fix the fencing marker"
        )
    kind = FAILOVER if direction(pair, FAILOVER) == (record.active, fence.cluster) else "failback"
    if direction(pair, kind) != (record.active, fence.cluster):
        raise FailoverError(
            f"no switch of pair {pair.name!r} moves the job from {record.active} to {fence.cluster}"
        )
    return kind


def _unix(iso: str) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def wait_first_batch(pair: PairConfig, handle: dict[str, Any], on_wait: Any = None) -> None:
    """Wait until the new job commits its first batch; raise with its log tail if it dies or times out."""

    job, tracker = JobHandle.from_dict(handle), ClusterManagers()
    deadline = time.monotonic() + pair.job.first_batch_timeout_seconds
    while read_progress(job.checkpoint).batch_id is None:
        if tracker.alive_or_unknown(job) is False:
            raise FailoverError(
                f"{job.describe()} died before its first batch (state {job.status().get('state')!r})\n"
                f"--- log tail ---\n{tracker.log_tail(job)}"
            )
        if time.monotonic() > deadline:
            raise FailoverError(
                f"{job.describe()} committed no batch within {pair.job.first_batch_timeout_seconds:.0f} s "
                f"(job.first_batch_timeout_seconds)\n--- log tail ---\n{tracker.log_tail(job)}"
            )
        if on_wait is not None:
            on_wait()
        time.sleep(2)


def finish_interrupted_switch(pair: PairConfig, record: ActiveRecord, fence: FenceState) -> ActiveRecord:
    """Finish the switch that fenced ``fence.epoch``: stop, plan, submit, first batch, commit.

    :param pair: the pair.
    :param record: the active record (one epoch behind the fence).
    :param fence: the fence.
    :return: the committed record.
    """

    kind = switch_kind(pair, record, fence)
    fenced_at = _unix(fence.written_at)
    log.warning(
        "pair %s: the %s to %s that fenced epoch %s (at %s) stopped before its commit; the keeper "
        "finishes it",
        pair.name,
        kind,
        fence.cluster,
        fence.epoch,
        fence.written_at or "an unknown time",
    )
    with steps.switch_lease(pair, kind, fence.epoch):
        old = old_run(pair, record)
        stopped = steps.stop_old_job(pair, kind, old, fence.epoch)
        log.info("the old job: %s", stopped)
        plan = steps.make_plan(pair, kind, record, False, old)
        handle = steps.submit(pair, fence.cluster, fence.epoch, plan["starting_offsets"], plan)
        wait_first_batch(pair, handle)
        reason = (
            f"finished by the keeper: the {kind} that fenced epoch {fence.epoch} at {fence.written_at} was "
            "interrupted before its commit"
        )
        committed = steps.commit(
            pair, kind, record, handle, plan, SwitchParams(reason=reason), KEEPER, fenced_at=fenced_at
        )
    log.info(
        "pair %s: %s active at epoch %s; the interrupted %s is finished",
        pair.name,
        committed.active,
        committed.epoch,
        kind,
    )
    return committed

"""A stateful job's state across a switch: the pair's ``job.state`` policy, applied at two steps.

- Before the fence moves (``fence_and_stop``), :func:`check_state_policy` looks for state in the old run's
  checkpoint (its ``state/`` folder: one listing, nothing else for a stateless query). ``refuse`` stops the
  switch there; ``carry`` checks that the last committed batch's state is whole, so that a missing or
  damaged state file stops the switch while the fence, the record and the running job are untouched.
- In the submit step, :func:`carry_state` writes the new run's checkpoint as a copy of the batch the plan
  started from, its positions rewritten to the plan's start offsets
  (:mod:`~airflow_kafka_failover.run_format.state_carry`). It runs after the fence moved and the old job
  stopped, so what it reads is the last batch that job committed.
- The commit step records what happened in the switch's history entry (:func:`state_entry`): what was
  carried, or, under ``fresh``, the warning that state was dropped.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from airflow_kafka_failover.core.exceptions import CheckpointError, FailoverError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import open_store
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.config import PairConfig
from airflow_kafka_failover.domain.translation.plan import TranslationPlan
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.run_format.layout import OWNER_FILE, claim_checkpoint
from airflow_kafka_failover.run_format.options import StatePolicy
from airflow_kafka_failover.run_format.spark_checkpoint import last_committed_offsets
from airflow_kafka_failover.run_format.state_carry import (
    CarriedCheckpoint,
    carried_from,
    carry_checkpoint,
    inspect_state,
    state_operators,
)
from airflow_kafka_failover.switching.job_request import JobRequest
from airflow_kafka_failover.switching.old_run import OldRun

log = logging.getLogger(__name__)


class StateRefused(FailoverError):
    """The old run holds state and ``job.state`` is ``refuse``: the switch stops before the fence moves."""


def check_state_policy(pair: PairConfig, kind: str, old: OldRun) -> None:
    """Apply ``job.state`` to the old run's state before the fence moves (see the module's docstring).

    :raises StateRefused: the run holds state and the policy is ``refuse``.
    :raises CheckpointError: the policy is ``carry`` and the state of the last committed batch is not whole.
    """
    if not old.checkpoint:
        return
    operators = state_operators(old.checkpoint)
    if not operators:
        return
    policy = pair.job.state
    described = f"{len(operators)} stateful operator{'s' if len(operators) != 1 else ''}"
    if policy is StatePolicy.REFUSE:
        raise StateRefused(
            f"the job of pair {pair.name!r} holds the state of {described} in {old.checkpoint}, and "
            f"job.state is 'refuse': the {kind} stops before the fence moves (nothing was changed). Set "
            "job.state: carry to take the state along, or fresh to start the new run without it"
        )
    if policy is StatePolicy.FRESH:
        log.warning(
            "the job holds the state of %s in %s; job.state is 'fresh': the new run starts without it "
            "(recorded in the switch's history)",
            described,
            old.checkpoint,
        )
        return
    try:
        state = inspect_state(old.checkpoint)
    except CheckpointError as exc:
        epoch = (old.identity or {}).get("epoch")
        run = f"epoch {epoch}" if epoch is not None else f"the checkpoint {old.checkpoint}"
        raise CheckpointError(
            f"pair {pair.name!r}, {kind} from {run}: {exc} (checked before the fence moved: nothing was "
            "changed)"
        ) from None
    if state is not None:
        log.info("%s is whole; the %s carries it to the new run", state.describe(), kind)


def carry_state(pair: PairConfig, cluster: str, epoch: int, plan: dict[str, Any]) -> CarriedCheckpoint | None:
    """Write the new run's checkpoint as a carried copy of the old run's state, under ``job.state: carry``.

    :param plan: the switch's plan payload (its ``old_run`` names the checkpoint, its summary the batch).
    :return: what was carried; None for a stateless query, another policy, or a run that already committed
        batches of its own (Spark resumes it).
    :raises CheckpointError: the state cannot be carried (named, with what to do).
    """
    old_checkpoint = (plan.get("old_run") or {}).get("checkpoint")
    if pair.job.state is not StatePolicy.CARRY or not old_checkpoint or not state_operators(old_checkpoint):
        return None
    request = JobRequest.for_pair(pair, cluster, epoch, plan["starting_offsets"])
    layout = request.layout
    target = KafkaClusterHook(
        pair.cluster(cluster).connection, timeout_seconds=pair.job.check_timeout_seconds
    )
    owner = {
        "pair": pair.name,
        "cluster": cluster,
        "epoch": epoch,
        "bootstrap_servers": target.bootstrap_servers,
    }
    if carried_from(layout.checkpoint) is None and _resumes_own_batches(layout.checkpoint, owner):
        log.info("the run of epoch %s already committed batches of its own: Spark resumes it", epoch)
        return None
    batch = plan["summary"].get("position_batch")
    state = inspect_state(old_checkpoint, batch if isinstance(batch, int) else None)
    if state is None:
        return None
    translation = TranslationPlan.from_json(plan["plan"])
    targets = {t.source: t.target for t in translation.translations}
    starts = resolved_starts(target, json.loads(plan["starting_offsets"]))
    log.info("carrying %s to %s", state.describe(), layout.checkpoint)
    carried = carry_checkpoint(state, layout.checkpoint, owner, targets, starts)
    log.info(
        "carried the state of %s operators from batch %s: %s files, %.1f MB in %.2f s; the new run's first "
        "batch is %s",
        len(carried.operators),
        carried.batch_id,
        carried.files,
        carried.bytes / 1e6,
        carried.seconds,
        carried.batch_id + 1,
    )
    return carried


def _resumes_own_batches(checkpoint: str, owner: dict[str, Any]) -> bool:
    """Whether the run's checkpoint holds batches of a run that started without a carry (Spark resumes it)."""
    where = locations.join(checkpoint, OWNER_FILE)
    if not open_store(where).exists(where):
        return False
    return claim_checkpoint(
        checkpoint, owner["pair"], owner["cluster"], owner["epoch"], owner["bootstrap_servers"]
    )


def resolved_starts(hook: Any, starting: dict[str, dict[str, int]]) -> dict[TopicPartition, int]:
    """The start map with Spark's -2 (earliest) and -1 (latest) replaced by the target's watermarks: a carried
    offsets log holds positions, which Spark does not resolve."""
    starts = {
        TopicPartition(topic, int(p)): int(o) for topic, parts in starting.items() for p, o in parts.items()
    }
    symbolic = [tp for tp, offset in starts.items() if offset < 0]
    if symbolic:
        marks = hook.watermarks(symbolic)
        for tp in symbolic:
            starts[tp] = marks[tp].low if starts[tp] == -2 else marks[tp].high
    return starts


def state_entry(pair: PairConfig, plan: dict[str, Any], checkpoint: str, epoch: int) -> dict[str, Any] | None:
    """What the switch's history entry says of the state: carried, dropped (``fresh``), or None (stateless).

    :param plan: the plan payload (its ``old_run`` names the old checkpoint).
    :param checkpoint: the new run's checkpoint.
    :param epoch: the epoch the switch reaches.
    """
    carried = carried_from(checkpoint)
    if carried is not None:
        return {"policy": str(StatePolicy.CARRY), **carried.to_dict()}
    old_checkpoint = (plan.get("old_run") or {}).get("checkpoint")
    operators = state_operators(old_checkpoint) if old_checkpoint else []
    if not operators or last_committed_offsets(str(old_checkpoint)) is None:
        return None  # stateless, or a first batch that never committed: no state was dropped
    warning = (
        f"state of {len(operators)} operator{'s' if len(operators) != 1 else ''} dropped at epoch {epoch}"
    )
    if pair.job.state is StatePolicy.CARRY:
        warning += " (the new run had committed batches of its own before the state could be carried)"
    return {"policy": str(pair.job.state), "dropped_operators": operators, "warning": warning}

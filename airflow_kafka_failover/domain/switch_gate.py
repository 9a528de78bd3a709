"""Whether a switch applies to a pair's active record, and the manual trigger's parameters.

Pure (no Airflow, no I/O): the record gate sensor and the switch steps both decide with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import PairConfig

__all__ = ["FAILOVER", "NotApplicable", "SwitchParams", "describe_changes", "direction", "gate"]

FAILOVER = "failover"


class NotApplicable(Exception):
    """The DAG has nothing to do for the pair's current record (e.g. failover with the standby active)."""


@dataclass(frozen=True)
class SwitchParams:
    """The manual-trigger parameters, validated.

    :param force: switch without waiting for the down/recovered verdict.
    :param dry_run: compute and show the plan; change nothing.
    :param reason: free text stored in the history.
    """

    force: bool = False
    dry_run: bool = False
    reason: str = ""

    @classmethod
    def from_params(cls, params: Any) -> SwitchParams:
        params = dict(params or {})
        for name in ("force", "dry_run"):
            if not isinstance(params.get(name, False), bool):
                raise ConfigError(f"param {name!r} must be true or false, got {params.get(name)!r}")
        reason = params.get("reason") or ""
        if not isinstance(reason, str):
            raise ConfigError(f"param 'reason' must be text, got {reason!r}")
        return cls(params.get("force", False), params.get("dry_run", False), reason.strip())


def direction(pair: PairConfig, kind: str) -> tuple[str, str]:
    """(source, target) of a switch kind."""
    return (pair.primary, pair.standby) if kind == FAILOVER else (pair.standby, pair.primary)


def gate(pair: PairConfig, kind: str, record: ActiveRecord) -> None:
    """Raise NotApplicable unless the record says this switch is the one to make."""
    source, target = direction(pair, kind)
    if record.active != source:
        raise NotApplicable(
            f"pair {pair.name!r}: {record.active} is already active at epoch {record.epoch}; a {kind} "
            "moves the "
            f"job from {source} to {target}, so there is nothing to do"
        )


def _job_words(job: dict[str, Any] | None) -> str:
    if job is None:
        return "none"
    return f"epoch {job.get('epoch')} on {job.get('cluster')} ({job.get('run_dir')})"


def describe_changes(before: ActiveRecord, after: ActiveRecord) -> list[str]:
    """What differs between two reads of a pair's record that a switch relies on, in words for the log.

    :param before: the record as an earlier task read it (the gate).
    :param after: the record as it is now.
    :return: one phrase per change (active cluster, epoch, job, checkpoint); empty when none.
    """
    changes = []
    if before.active != after.active:
        changes.append(f"active {before.active} -> {after.active}")
    if before.epoch != after.epoch:
        changes.append(f"epoch {before.epoch} -> {after.epoch}")
    if before.job != after.job:
        changes.append(f"job {_job_words(before.job)} -> {_job_words(after.job)}")
    if before.checkpoint != after.checkpoint:
        changes.append(f"checkpoint {before.checkpoint} -> {after.checkpoint}")
    return changes

"""The active record in an Airflow Variable (through the Task SDK), with a compare-and-set commit.

Variables have no compare-and-set of their own, so the commit builds one: it holds the fencing marker's
lock (the file lock :meth:`FencingMarker.advance` takes) while it re-reads the record, checks that it is
still at the epoch the switch started from and that the marker has not moved past the new record's epoch,
and writes. Two commits of one pair therefore never interleave their read and write: of two switches that
reached the same epoch together, the second finds the first's record (a no-op when it holds the same job,
"another switch won" when not). The lock is as shared as the marker itself: every Airflow worker that can
switch a pair must see the marker's folder (the jobs read it too).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from airflow_kafka_failover.config import PairConfig
from airflow_kafka_failover.jobs.fencing import FencedError, FencingMarker
from airflow_kafka_failover.record import ActiveRecord

log = logging.getLogger(__name__)


def variable_key(pair: str) -> str:
    """The Variable that holds a pair's active record."""
    return f"kafka_failover.{pair}.active_record"


def fencing_marker(pair: PairConfig) -> FencingMarker:
    """The pair's fencing marker (its path comes from the pair's job settings)."""
    return FencingMarker(Path(pair.job.fencing_marker), pair.name)


def load_record(pair: PairConfig) -> ActiveRecord:
    """The pair's record; the initial one (primary active, epoch 0) when none was stored yet."""
    from airflow.sdk import Variable

    raw = Variable.get(variable_key(pair.name), default=None)
    if raw is None:
        return ActiveRecord.initial(pair.name, pair.primary)
    return _parse_record(pair, raw)


def read_stored_record(pair: PairConfig) -> ActiveRecord | None:
    """The pair's stored record, read outside a task (the command line); None when none is stored.

    Outside a task the Task SDK's ``Variable`` has no metadata database to ask (it reads environment
    variables and external secrets backends only), so this reads through Airflow's own ``Variable`` model,
    as ``airflow variables get`` does: secrets backends, environment variables, then the metadata database
    of the ``AIRFLOW_HOME`` configuration. Read-only.

    :param pair: the pair.
    :raises ConfigError: the stored value is not a valid record.
    :raises Exception: the metadata database's own error when it cannot be read.
    """
    from airflow.models import Variable

    key = variable_key(pair.name)
    raw = Variable.get(key, default_var=None)
    if raw is None:
        # Variable.get logs and skips a backend that fails: asking the metadata database itself makes an
        # unreachable or unmigrated database an error here instead of "no record stored".
        from airflow.secrets.metastore import MetastoreBackend

        raw = MetastoreBackend().get_variable(key)
    return None if raw is None else _parse_record(pair, raw)


def _parse_record(pair: PairConfig, raw: Any) -> ActiveRecord:
    key = variable_key(pair.name)
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        from airflow_kafka_failover.exceptions import ConfigError

        raise ConfigError(
            f"Variable {key} is not valid JSON ({exc}): restore it from a backup, or rewrite it "
            "with the active cluster and the epoch the pair's fencing marker holds (deleting it "
            "restarts at epoch 0, which the fencing marker refuses once a switch happened)"
        ) from None
    return ActiveRecord.from_dict(data, tuple(pair.clusters), f"Variable {key}")


def commit_record(pair: PairConfig, expected_epoch: int, record: ActiveRecord) -> ActiveRecord:
    """Store ``record`` if the stored record is still at ``expected_epoch``; idempotent for a retry.

    Holds the fencing marker's lock from the read to the write (see the module's docstring).

    :raises FencedError: another switch committed first, or the marker has moved past ``record``'s epoch.
    """
    marker = fencing_marker(pair)
    with marker.locked():
        current = load_record(pair)
        if (
            current.epoch == record.epoch
            and current.active == record.active
            and same_run(current.job, record.job)
        ):
            log.info(
                "the record of pair %s already holds this switch's run of the job (epoch %s); nothing to "
                "write",
                pair.name,
                record.epoch,
            )
            return current
        if current.epoch != expected_epoch:
            raise FencedError(
                f"another switch won: the record of pair {pair.name!r} is at epoch {current.epoch} (active "
                f"{current.active}), not at {expected_epoch} as when this switch began; nothing was committed"
            )
        fence = marker.read()
        if fence is not None and fence.epoch > record.epoch:
            raise FencedError(
                f"the fencing marker {marker.path} of pair {pair.name!r} is at epoch {fence.epoch} (cluster "
                f"{fence.cluster}), past this record's epoch {record.epoch}: a newer switch fenced this one; "
                "nothing was committed"
            )
        _store(pair, record)
    log.info("committed the record of pair %s: %s active at epoch %s", pair.name, record.active, record.epoch)
    return record


RUN_IDENTITY = ("cluster", "epoch", "run_dir", "checkpoint")
"""What makes two job handles the same run: a handle adopted by a retried submit differs only in its
submission time."""


def same_run(first: dict[str, Any] | None, second: dict[str, Any] | None) -> bool:
    """Whether two job handles (the record's ``job``) name the same run of the job.

    :param first: a handle's JSON form, or None.
    :param second: another one, or None.
    """
    if first is None or second is None:
        return first is second
    return all(first.get(key) == second.get(key) for key in RUN_IDENTITY)


def _store(pair: PairConfig, record: ActiveRecord) -> None:
    from airflow.sdk import Variable

    Variable.set(variable_key(pair.name), json.dumps(record.to_dict()))


def describe(record: ActiveRecord) -> dict[str, Any]:
    """A short view of a record for logs and XCom."""
    return {
        "active": record.active,
        "epoch": record.epoch,
        "job_running_on": (record.job or {}).get("cluster"),
        "checkpoint": record.checkpoint,
        "switches": len(record.history),
    }

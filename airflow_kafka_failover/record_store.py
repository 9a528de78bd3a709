"""The active record in an Airflow Variable (through the Task SDK), with a compare-and-set commit.

Variables have no compare-and-set of their own. The commit re-reads the record and writes only if the
epoch is still the one the switch started from; the fencing marker's advance (a locked compare-and-set
on the marker file) before it makes sure that only one switch per epoch gets that far.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from airflow_kafka_failover.config import PairConfig
from airflow_kafka_failover.jobs.fencing import FencedError
from airflow_kafka_failover.record import ActiveRecord

log = logging.getLogger(__name__)


def variable_key(pair: str) -> str:
    """The Variable that holds a pair's active record."""
    return f"kafka_failover.{pair}.active_record"


def load_record(pair: PairConfig) -> ActiveRecord:
    """The pair's record; the initial one (primary active, epoch 0) when none was stored yet."""
    from airflow.sdk import Variable

    key = variable_key(pair.name)
    raw = Variable.get(key, default=None)
    if raw is None:
        return ActiveRecord.initial(pair.name, pair.primary)
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        from airflow_kafka_failover.exceptions import ConfigError

        raise ConfigError(f"Variable {key} is not valid JSON ({exc}): restore it from a backup, or rewrite it "
                          "with the active cluster and the epoch the pair's fencing marker holds (deleting it "
                          "restarts at epoch 0, which the fencing marker refuses once a switch happened)") from None
    return ActiveRecord.from_dict(data, tuple(pair.clusters), f"Variable {key}")


def commit_record(pair: PairConfig, expected_epoch: int, record: ActiveRecord) -> ActiveRecord:
    """Store ``record`` if the stored record is still at ``expected_epoch``; idempotent for a retry.

    :raises FencedError: another switch committed first.
    """
    from airflow.sdk import Variable

    current = load_record(pair)
    if current.epoch == record.epoch and current.active == record.active and current.job == record.job:
        log.info("the record of pair %s already holds this switch (epoch %s); nothing to write", pair.name,
                 record.epoch)
        return current
    if current.epoch != expected_epoch:
        raise FencedError(
            f"another switch won: the record of pair {pair.name!r} is at epoch {current.epoch} (active "
            f"{current.active}), not at {expected_epoch} as when this switch began; nothing was committed"
        )
    Variable.set(variable_key(pair.name), json.dumps(record.to_dict()))
    log.info("committed the record of pair %s: %s active at epoch %s", pair.name, record.active, record.epoch)
    return record


def describe(record: ActiveRecord) -> dict[str, Any]:
    """A short view of a record for logs and XCom."""
    return {"active": record.active, "epoch": record.epoch, "job_running_on": (record.job or {}).get("cluster"),
            "checkpoint": record.checkpoint, "switches": len(record.history)}

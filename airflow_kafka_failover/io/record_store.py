"""The active record: committed create-only in the pair's fencing folder, published in an Airflow Variable.

Variables have no compare-and-set, and no lock is shared by every host that may switch a pair. So a commit is
the creation of ``<fencing folder>/epoch-<n>.record.json``, create-only like the fence's own markers
(:mod:`airflow_kafka_failover.run_format.fencing`): of two switches that reach epoch ``n`` together, exactly
one creates it; the other finds it and is a no-op when it names the same run of the job, "another switch won"
when not. Only then is the record written to the Variable, which the UI, the CLI and every task read.

The Variable may lag the store (a worker that died between the two writes) or even go back (a worker that
stalled before its Variable write while another switch committed the next epoch): every read therefore looks
in the store for a record committed above the Variable's epoch and takes the newest, so what a task acts on
never goes back. A Variable ahead of the store (written by hand) is taken as it is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from airflow_kafka_failover import version_compat
from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import create_json, read_json
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import PairConfig
from airflow_kafka_failover.run_format.fencing import FencedError, FencingMarker

log = logging.getLogger(__name__)

RECORD_MARKER = "epoch-{epoch:010d}.record.json"
"""In the fencing folder: the record committed at an epoch (create-only)."""


def variable_key(pair: str) -> str:
    """The Variable that holds a pair's active record."""
    return f"kafka_failover.{pair}.active_record"


def fencing_marker(pair: PairConfig) -> FencingMarker:
    """The pair's fencing folder (its path comes from the pair's job settings)."""
    return FencingMarker(pair.job.fencing_marker, pair.name)


def record_marker(pair: PairConfig, epoch: int) -> str:
    """The location of the record committed at ``epoch``."""
    return locations.join(pair.job.fencing_marker, RECORD_MARKER.format(epoch=epoch))


def committed_record(pair: PairConfig, epoch: int) -> ActiveRecord | None:
    """The record committed at ``epoch`` in the store; None when none was.

    :raises ConfigError: the file is not a valid record (damaged by hand).
    """
    where = record_marker(pair, epoch)
    try:
        data = read_json(where)
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"committed record {where} is not valid JSON ({exc}); restore it") from None
    record = ActiveRecord.from_dict(data, tuple(pair.clusters), where)
    if record.epoch != epoch:
        raise ConfigError(f"committed record {where} holds epoch {record.epoch}, not {epoch}; restore it")
    return record


def newest_committed(pair: PairConfig, above: int) -> ActiveRecord | None:
    """The newest record committed above epoch ``above`` (reads upwards until an epoch has none)."""
    found = None
    epoch = above + 1
    while (record := committed_record(pair, epoch)) is not None:
        found = record
        epoch += 1
    return found


def load_record(pair: PairConfig) -> ActiveRecord:
    """The pair's record: the Variable's, or a newer one committed in the store; the initial one (primary
    active, epoch 0) when none was stored yet."""
    raw = version_compat.Variable.get(variable_key(pair.name), default=None)
    published = ActiveRecord.initial(pair.name, pair.primary) if raw is None else _parse_record(pair, raw)
    return _newest(pair, published)


def _newest(pair: PairConfig, published: ActiveRecord) -> ActiveRecord:
    newer = newest_committed(pair, published.epoch)
    if newer is None and published.job is None and published.epoch == 0:
        newer = committed_record(pair, 0)  # a start committed at epoch 0 whose Variable write was lost
    if newer is None:
        return published
    log.warning(
        "the Variable %s holds epoch %s (job %s) but the store has the record committed at epoch %s: using "
        "the store's (a commit's Variable write was lost or overtaken)",
        variable_key(pair.name),
        published.epoch,
        "none" if published.job is None else "set",
        newer.epoch,
    )
    return newer


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
    key = variable_key(pair.name)
    raw = version_compat.metastore_variable().get(key, default_var=None)
    if raw is None:
        # Variable.get logs and skips a backend that fails: asking the metadata database itself makes an
        # unreachable or unmigrated database an error here instead of "no record stored".
        from airflow.secrets.metastore import MetastoreBackend

        raw = MetastoreBackend().get_variable(key)
    if raw is None:
        initial = ActiveRecord.initial(pair.name, pair.primary)
        newest = _newest(pair, initial)
        return None if newest is initial else newest
    return _newest(pair, _parse_record(pair, raw))


def _parse_record(pair: PairConfig, raw: Any) -> ActiveRecord:
    key = variable_key(pair.name)
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"Variable {key} is not valid JSON ({exc}): restore it from a backup, or rewrite it "
            "with the active cluster and the epoch the pair's fencing marker holds (deleting it "
            "restarts at epoch 0, which the fencing marker refuses once a switch happened)"
        ) from None
    return ActiveRecord.from_dict(data, tuple(pair.clusters), f"Variable {key}")


def commit_record(
    pair: PairConfig,
    expected_epoch: int,
    record: ActiveRecord,
    check: Callable[[ActiveRecord], None] | None = None,
) -> ActiveRecord:
    """Commit ``record`` if the pair is still at ``expected_epoch``; idempotent for a retry.

    The commit is the creation of the record's file in the fencing folder (see the module's docstring); the
    Variable is written after it.

    :param check: called with the current record once its epoch matched, before anything is written; it
        raises :class:`FencedError` when the record no longer is the one the caller decided on.
    :raises FencedError: another switch committed first, the fence has moved past ``record``'s epoch, or
        ``check`` refused.
    """
    current = load_record(pair)
    if (
        current.epoch == record.epoch
        and current.active == record.active
        and same_run(current.job, record.job)
    ):
        log.info(
            "the record of pair %s already holds this switch's run of the job (epoch %s); nothing to write",
            pair.name,
            record.epoch,
        )
        _publish_if_behind(pair, current)
        return current
    if current.epoch != expected_epoch:
        raise FencedError(
            f"another switch won: the record of pair {pair.name!r} is at epoch {current.epoch} (active "
            f"{current.active}), not at {expected_epoch} as when this switch began; nothing was committed"
        )
    if check is not None:
        check(current)
    marker = fencing_marker(pair)
    fence = marker.newer_than(record.epoch)
    if fence is not None:
        raise FencedError(
            f"the fencing folder {marker.path} of pair {pair.name!r} is at epoch {fence.epoch} (cluster "
            f"{fence.cluster}), past this record's epoch {record.epoch}: a newer switch fenced this one; "
            "nothing was committed"
        )
    where = record_marker(pair, record.epoch)
    if not create_json(where, record.to_dict()):
        winner = committed_record(pair, record.epoch)
        if winner is None or winner.active != record.active or not same_run(winner.job, record.job):
            raise FencedError(
                f"another switch won: {where} already holds the record of epoch {record.epoch} with another "
                f"run of the job ({(winner.job or {}).get('run_dir') if winner else 'unreadable'}); nothing "
                "was committed"
            )
        log.info(
            "the record of epoch %s was committed by a retry of this switch; publishing it", record.epoch
        )
        record = winner
    _store(pair, record)
    log.info("committed the record of pair %s: %s active at epoch %s", pair.name, record.active, record.epoch)
    return record


def _publish_if_behind(pair: PairConfig, record: ActiveRecord) -> None:
    """Write ``record`` to the Variable when the Variable lags it (it came from the store)."""
    raw = version_compat.Variable.get(variable_key(pair.name), default=None)
    published = None if raw is None else _parse_record(pair, raw)
    if published is None or published.epoch < record.epoch or published.job != record.job:
        _store(pair, record)


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
    version_compat.Variable.set(variable_key(pair.name), json.dumps(record.to_dict()))


def describe(record: ActiveRecord) -> dict[str, Any]:
    """A short view of a record for logs and XCom."""
    return {
        "active": record.active,
        "epoch": record.epoch,
        "job_running_on": (record.job or {}).get("cluster"),
        "checkpoint": record.checkpoint,
        "switches": len(record.history),
    }

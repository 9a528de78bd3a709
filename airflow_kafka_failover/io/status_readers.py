"""Reading a pair for ``kafka-failover status``: the active record, the fence, the job, both clusters.

Read-only, and never raises for what it cannot read: every part that fails is kept with its error in the
``PairReadings`` (``domain/status/model.py``), so the command still shows everything else. The health
checks are the sensors' own: a probe per cluster (a refused connection is known at once), the recovered
watch's replication lag from MirrorMaker 2's offset syncs, and the replicated heartbeats.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.types import TopicPartition, partition_key
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import PairConfig
from airflow_kafka_failover.domain.health.evidence import describe_exception
from airflow_kafka_failover.domain.status.model import PairReadings, ReplicationReading, StandbyView
from airflow_kafka_failover.domain.translation.replication_policy import (
    for_name,
    offset_syncs_cluster,
    offset_syncs_topic,
)
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.io.health_watch import RecoveryWatch
from airflow_kafka_failover.io.lease_file import read_lease
from airflow_kafka_failover.io.probe import probe_cluster
from airflow_kafka_failover.io.record_store import fencing_marker, read_stored_record
from airflow_kafka_failover.run_format.options import DeployMode
from airflow_kafka_failover.run_format.progress import read_progress

log = logging.getLogger(__name__)

_ERROR_CHARS = 300
DATABASE_HINT = (
    "run the command where Airflow's metadata database is configured as for the scheduler (AIRFLOW_HOME, or "
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN)"
)

READ_TIMEOUT_SECONDS = 10.0
"""The least time each read may take once the cluster answered its probe (which has the pair's own, short,
``probe_timeout_seconds``): reading offset syncs and the newest heartbeat takes several round trips."""

RecordReader = Callable[[PairConfig], ActiveRecord | None]
"""Reads a pair's stored record (None: none stored); :func:`read_stored_record` unless a test gives one."""


def read_pair(pair: PairConfig, read_record: RecordReader | None = None) -> PairReadings:
    """Read everything ``status`` shows of one pair.

    :param pair: the pair.
    :param read_record: how to read the stored record (default :func:`read_stored_record`).
    """
    readings = PairReadings(pair=pair.name, primary=pair.primary, now=time.time())
    readings = _with_record(readings, pair, read_record or read_stored_record)
    readings = _with_fence(readings, pair)
    record = readings.record
    if record is not None:
        readings = _with_job(readings, record)
        readings = _with_active_cluster(readings, pair, record.active)
        readings = _with_replication(readings, pair, record.active)
        readings = _with_standby(readings, pair, record.active)
    # Ages (last batch, heartbeat) are taken at the end: the job commits batches while the clusters are read.
    return replace(readings, now=time.time())


def read_history_record(
    pair: PairConfig, read_record: RecordReader | None = None
) -> tuple[ActiveRecord, bool]:
    """The pair's record for ``history`` and whether it was stored (the initial one when not).

    :param pair: the pair.
    :param read_record: how to read the stored record (default :func:`read_stored_record`).
    :raises ConfigError: the stored record is not valid.
    """
    try:
        record = (read_record or read_stored_record)(pair)
    except ConfigError:
        raise
    except Exception as exc:  # the metadata database's own error, without its traceback
        raise ConfigError(
            f"cannot read the active record of pair {pair.name!r}: {_short(exc)}; {DATABASE_HINT}"
        ) from None
    if record is None:
        return ActiveRecord.initial(pair.name, pair.primary), False
    return record, True


def _short(exc: BaseException) -> str:
    """The exception's type and first line (a database error carries its SQL on the next lines)."""
    text = describe_exception(exc).splitlines()[0]
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 3] + "..."


def _with_record(readings: PairReadings, pair: PairConfig, read_record: RecordReader) -> PairReadings:
    try:
        record = read_record(pair)
    except ConfigError as exc:  # a stored record that is not valid: its message says what to do
        return replace(readings, record_error=str(exc))
    except Exception as exc:  # an unreadable record is shown as such; the fence can still be read
        return replace(readings, record_error=f"{_short(exc)}; {DATABASE_HINT}")
    if record is None:
        return replace(readings, record=ActiveRecord.initial(pair.name, pair.primary), record_stored=False)
    return replace(readings, record=record)


def _with_fence(readings: PairReadings, pair: PairConfig) -> PairReadings:
    marker = fencing_marker(pair)
    try:
        fence = marker.read()
    except Exception as exc:  # a corrupt marker is shown with its error
        return replace(readings, fence_path=str(marker.path), fence_error=_short(exc))
    try:
        lease = read_lease(marker.path, pair.name)
    except Exception as exc:  # a lease of another pair: the fence is shown, the lease's problem with it
        return replace(readings, fence_path=str(marker.path), fence=fence, fence_error=_short(exc))
    return replace(readings, fence_path=str(marker.path), fence=fence, lease=lease)


def _job_where(handle: JobHandle) -> str | None:
    if handle.deploy_mode == DeployMode.CLUSTER:
        return handle.driver_id or handle.application_id
    pid = handle.process.pid()
    return f"pid {pid}" if pid is not None else None


def _with_job(readings: PairReadings, record: ActiveRecord) -> PairReadings:
    if record.job is None:
        return readings
    try:
        handle = JobHandle.from_dict(record.job)
        status, where = handle.status(), _job_where(handle)
    except Exception as exc:  # a malformed handle is shown with its error
        return replace(readings, job_error=_short(exc))
    try:
        alive = job_alive(handle)
    except Exception as exc:  # the cluster manager did not answer: alive is unknown, the status.json stays
        log.warning("cannot tell whether %s runs: %s", handle.describe(), exc)
        alive = None
    readings = replace(readings, job_status=status, job_alive=alive, job_where=where)
    try:
        progress = read_progress(record.checkpoint or handle.checkpoint)
    except Exception as exc:  # a damaged checkpoint: the job's position is unknown
        return replace(readings, progress_error=_short(exc))
    return replace(readings, progress=progress)


def _with_standby(readings: PairReadings, pair: PairConfig, active: str) -> PairReadings:
    """The warm standby driver's slot for the cluster the job does not read (pairs that want one)."""
    from airflow_kafka_failover.io.standby_slot import standby_slot, wants_standby

    if not wants_standby(pair):
        return readings
    other = pair.other(active)
    try:
        slot = standby_slot(pair, other)
    except Exception as exc:  # a remote run_root without local_root: shown as unread, never raised
        return replace(readings, job_error=readings.job_error or f"warm standby slot: {_short(exc)}")
    state = slot.state()
    pid = state.get("pid")
    view = StandbyView(
        cluster=other,
        slot=str(slot.folder),
        ready=slot.held(),
        state=state.get("state"),
        pid=pid if isinstance(pid, int) else None,
    )
    return replace(readings, standby=view)


def _read_timeout(pair: PairConfig) -> float:
    return max(pair.health.probe_timeout_seconds, READ_TIMEOUT_SECONDS)


def _hook(pair: PairConfig, cluster: str) -> KafkaClusterHook:
    return KafkaClusterHook(pair.cluster(cluster).connection, timeout_seconds=_read_timeout(pair))


def _with_active_cluster(readings: PairReadings, pair: PairConfig, active: str) -> PairReadings:
    timeout = pair.health.probe_timeout_seconds
    topics = pair.topics_on(active)
    try:
        hook = _hook(pair, active)
        probe = probe_cluster(hook, active, topics, timeout)
        if probe.failed:
            return replace(readings, active_error=f"does not answer: {probe.error}")
        metadata = hook.describe_cluster(topics)
        partitions = [TopicPartition(p.topic, p.partition) for p in metadata.partitions]
        marks = hook.watermarks(partitions)
    except Exception as exc:  # reported, never raised: the rest of the status still shows
        return replace(readings, active_error=_short(exc))
    ends = {partition_key(tp): mark.high for tp, mark in marks.items()}
    return replace(readings, active_ends=ends, active_missing_topics=metadata.missing_topics)


def _watch_kwargs(pair: PairConfig, active: str, standby: str) -> dict[str, Any]:
    """The recovered watch of the standby against the active cluster, as the failback sensor builds it."""
    active_alias, standby_alias = pair.cluster(active).alias, pair.cluster(standby).alias
    policy = for_name(pair.replication.policy, pair.replication.separator)
    location = pair.replication.offset_syncs_location
    return {
        "cluster": standby,
        "kafka_config_id": pair.cluster(standby).connection,
        "topics": (),
        # The watch's reads take the longer read timeout; the standby's probe before it keeps the short one.
        "thresholds": pair.health.model_copy(update={"probe_timeout_seconds": _read_timeout(pair)}),
        "active_kafka_config_id": pair.cluster(active).connection,
        "replicated_topics": {topic: policy.remote_topic(active_alias, topic) for topic in pair.topics},
        "offset_syncs_topic": offset_syncs_topic(
            active_alias, standby_alias, location, pair.replication.separator
        ),
        "offset_syncs_on_watched": offset_syncs_cluster(active_alias, standby_alias, location)
        == standby_alias,
    }


def _with_replication(readings: PairReadings, pair: PairConfig, active: str) -> PairReadings:
    standby = pair.other(active)
    if pair.replication.offset_preserving:
        note = "replication is offset-preserving (not MirrorMaker 2): its lag and heartbeats are not shown"
        return replace(readings, replication_note=note)
    if not pair.replication.has_flow(active, standby):
        note = f"no replication flow {active}->{standby} is configured: the standby receives no copy"
        return replace(readings, replication_note=note)
    policy = for_name(pair.replication.policy, pair.replication.separator)
    reading = ReplicationReading(
        source=active,
        target=standby,
        heartbeats_topic=policy.heartbeats_topic(pair.cluster(active).alias),
        heartbeat_stale_seconds=pair.health.heartbeat_stale_seconds,
    )
    return replace(readings, replication=_read_replication(pair, reading))


def _read_replication(pair: PairConfig, reading: ReplicationReading) -> ReplicationReading:
    try:
        probe = probe_cluster(
            _hook(pair, reading.target), reading.target, (), pair.health.probe_timeout_seconds
        )
        if probe.failed:
            return replace(reading, standby_error=f"does not answer: {probe.error}")
        watch = RecoveryWatch(**_watch_kwargs(pair, reading.source, reading.target))
        watch.observe()
    except Exception as exc:  # e.g. a connection that does not exist
        return replace(reading, standby_error=_short(exc))
    if watch.history[-1].failed:
        return replace(reading, standby_error=f"does not answer: {watch.history[-1].error}")
    reading = replace(reading, lags=dict(watch.lags), lag_error=watch.measure_problem)
    topic = reading.heartbeats_topic or ""
    try:
        newest = watch.hook.newest_record_timestamp(topic, 0, _read_timeout(pair))
    except Exception as exc:  # the heartbeats topic is missing or slow: reported
        return replace(reading, heartbeat_error=_short(exc))
    if newest is None:
        return replace(reading, heartbeat_error=f"{topic} is empty")
    return replace(reading, heartbeat_newest_ms=newest)

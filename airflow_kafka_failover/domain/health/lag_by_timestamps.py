"""Replication lag when MirrorMaker 2 left no offset sync: the record-timestamp rule of the recovered sensor.

The offset arithmetic shared with the planner is :func:`airflow_kafka_failover.domain.replication_lag.
replication_lag`, re-exported here for the health watch.
"""

from __future__ import annotations

from airflow_kafka_failover.domain.replication_lag import replication_lag

__all__ = ["lag_by_timestamps", "replication_lag"]


def lag_by_timestamps(source_newest_ms: int | None, replica_newest_ms: int | None) -> int | None:
    """Replication lag when MirrorMaker 2 left no offset sync to measure it with: 0 or unknown.

    MM2 copies record timestamps, so a replica whose newest record is at least as new as the source's
    newest record holds everything up to the source's end (0). Otherwise, or when either side has no
    record, the lag is unknown (None) and the sensor keeps waiting. MM2 can go without emitting syncs for
    minutes after its target came back (its outstanding syncs to the dead target must time out first).

    :param source_newest_ms: timestamp of the newest record of the source partition.
    :param replica_newest_ms: timestamp of the newest record of its replica.
    """
    if source_newest_ms is None or replica_newest_ms is None:
        return None
    return 0 if replica_newest_ms >= source_newest_ms else None

"""How far MirrorMaker 2's replication of a partition lags: pure arithmetic, in one module for both users.

From the newest offset sync (:func:`replication_lag`, :func:`records_not_replicated`): the planner (a
position beyond what replication delivered is a gap) and the recovered decision of the health watch (a
failback waits until the lag is small). From record timestamps when MirrorMaker 2 left no sync
(:func:`lag_by_timestamps`): the recovered decision.
"""

from __future__ import annotations


def replication_lag(
    source_high: int, source_low: int, sync: tuple[int, int] | None, target_high: int
) -> int | None:
    """Estimate how many source offsets the replicated partition still lacks, from the newest MM2 offset sync.

    ``replicated_upstream_end = sync_upstream + (target_high - sync_downstream)``: records after the
    sync are assumed copied one-for-one. Where the source has gaps after the sync (transaction
    markers, compaction), fewer records than offsets were copied, so the estimate of progress is low
    and the lag high: it errs toward waiting. The same holds for a transaction marker at the very end
    of the source log, which keeps the lag at 1 until the next record (raise ``max_replication_lag``
    for transactional topics). Caveat: if MM2 itself writes transactionally (``exactly.once.support``),
    its markers on the target inflate ``target_high`` and the estimate may be low by one per MM2
    transaction since the sync.

    :param source_high: high watermark of the source partition on the active cluster.
    :param source_low: its low watermark.
    :param sync: the newest offset sync of the flow toward the recovered cluster, as
        ``(upstream_offset, downstream_offset)``, or None when there is none.
    :param target_high: high watermark of the replicated partition on the recovered cluster.
    :returns: the lag in offsets (0 when caught up), or None when unknown: no sync while the source
        holds records, or a sync beyond the source's end (it describes another history of the topic).
    """
    values = {"source_high": source_high, "source_low": source_low, "target_high": target_high}
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{name} must be a non-negative offset, got {value}")
    if source_high < source_low:
        raise ValueError(
            f"source_high {source_high} is below source_low {source_low}; watermarks are swapped"
        )
    if sync is None:
        return 0 if source_high == source_low else None
    upstream, downstream = sync
    if upstream < 0 or downstream < 0:
        raise ValueError(f"offset sync offsets must be non-negative, got {sync}")
    if upstream >= source_high:
        return None
    replicated_upstream_end = upstream + (target_high - downstream)
    return max(0, source_high - replicated_upstream_end)


def records_not_replicated(records_after_sync: int, sync: tuple[int, int], target_high: int) -> int:
    """Count the records after the newest offset sync that the replica does not hold yet: exact, by records.

    The sync ``(u, d)`` says the record at ``u`` sits at ``d``; MM2 copies the records after it in order,
    so the replica's ``target_high - d - 1`` offsets after ``d`` hold the first of them. Counting records on
    the source (a read-committed consumer over ``[u + 1, position)``) instead of offsets makes transaction
    markers and aborted records, which MM2 never copies, count for nothing.

    :param records_after_sync: records the source holds in ``[u + 1, position)``.
    :param sync: the newest offset sync ``(upstream_offset, downstream_offset)``.
    :param target_high: high watermark of the replicated partition.
    """
    if records_after_sync < 0 or target_high < 0 or min(sync) < 0:
        raise ValueError(
            f"counts and offsets must be non-negative, got {records_after_sync}, {sync}, {target_high}"
        )
    copied_after_sync = max(0, target_high - sync[1] - 1)
    return max(0, records_after_sync - copied_after_sync)


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

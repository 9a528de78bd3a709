"""What the target lacks of a partition, counted in records where the source answers: the I/O edge of gaps.

The pure rules (``domain/translation/rules.py``) can only count offsets, and transaction
markers and aborted records take offsets that MirrorMaker 2 never copies. The planner hands its translations
here; where the source cluster answers, the committed records of the ranges in question are counted on it
(with a read-committed consumer, as the job reads) instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.replication_lag import records_not_replicated, replication_lag
from airflow_kafka_failover.domain.translation.choosing import PartitionRequest, translate_partition
from airflow_kafka_failover.domain.translation.plan import PartitionTranslation
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.run_format.spark_checkpoint import StreamPosition

log = logging.getLogger(__name__)


def mark_replication_gaps(
    translations: list[PartitionTranslation],
    requests: list[PartitionRequest],
    position: StreamPosition,
    source_hook: KafkaClusterHook | None,
) -> None:
    """Report records the job processed that replication has not delivered to the target, as gaps.

    The offset-sync rule gives a safe start inside the target's watermarks even when the job has read
    further on the source than MM2 has copied; the records between the copied end and the position are
    then not on the target. Measured after the newest offset sync ``(u, d)`` (MM2 syncs after every skipped
    upstream offset, so the records after ``u`` it copied are consecutive):

    - offsets first: ``position - (u + (high - d))``; where the job's progress names its newest record
      offset, the position is lowered to just after it, since the offsets beyond held no record the job
      read (the transaction markers MM2 never copies, which would otherwise look like a gap);
    - then, where that still shows a gap and the source answers, by records: the committed records in
      ``[u + 1, position)`` on the source against the ``high - d - 1`` copied after ``d``.
    """
    suspects = []
    for translation, request in zip(translations, requests, strict=True):
        history = request.offset_syncs
        if history is None or not len(history) or request.watermarks is None:
            continue
        sync = (history.upstream[-1], history.downstream[-1])
        end = request.position
        last_record = position.last_record_offsets.get(request.source)
        if last_record is not None:
            end = min(end, last_record + 1)
        lag = replication_lag(end, 0, sync, request.watermarks.high)
        if lag:
            suspects.append((translation, request, sync, end, lag))
    counted = _records_after_syncs(source_hook, [(r.source, sync, end) for _, r, sync, end, _ in suspects])
    for translation, request, sync, end, lag in suspects:
        assert request.watermarks is not None
        records = counted.get(request.source)
        if records is not None:
            gap = records_not_replicated(records, sync, request.watermarks.high)
            how = f"counted by records on the source: {records} after the newest offset sync {sync}"
        else:
            gap = lag
            how = (
                f"estimated from offsets after the newest offset sync {sync}; transaction markers in that "
                "range count too, so it may be high"
            )
        if gap > translation.gap_records:
            translation.warnings.append(
                f"replication is behind the job: {gap} record(s) before position {request.position} of "
                f"{request.source} are not on {request.target} yet ({how}; copied up to about offset "
                f"{end - gap})"
            )
            translation.gap_records = gap


def _records_after_syncs(
    hook: KafkaClusterHook | None, spans: list[tuple[TopicPartition, tuple[int, int], int]]
) -> dict[TopicPartition, int]:
    """Committed records in ``[u + 1, end)`` per partition on the source; empty when it cannot be read."""
    ranges = {tp: (sync[0] + 1, end) for tp, sync, end in spans}
    return _count_source_records(hook, ranges, "after the newest offset syncs")


def count_gaps_before_oldest_syncs(
    translations: list[PartitionTranslation],
    requests: list[PartitionRequest],
    method_order: Sequence[str],
    source_hook: KafkaClusterHook | None,
) -> None:
    """Measure in records, on the source, the gaps of ``earliest`` starts before MM2's oldest offset sync.

    The rule counts the offsets in ``[position, u0)`` against the ``d0`` records the target holds below the
    oldest sync ``(u0, d0)``: an upper bound, since transaction markers and aborted records take offsets (see
    ``gap_before_oldest_sync`` of ``domain/translation/rules.py``). Where the source answers and still
    holds that range, its committed records are counted and the partition is translated again with the
    count; elsewhere the upper bound stands, and says so.

    :param translations: the plan's translations, replaced in place where a count was made.
    :param requests: the requests they were made from, in the same order.
    :param method_order: the configured methods, most preferred first.
    :param source_hook: the source cluster's hook; None when it is down.
    """
    spans: dict[int, tuple[int, int]] = {}
    for index, (translation, request) in enumerate(zip(translations, requests, strict=True)):
        history = request.offset_syncs
        if translation.gap_upper_bound and history is not None and history.upstream and not request.reverse:
            spans[index] = (request.position, history.copies[0].upstream[0])
    by_partition = {requests[index].source: span for index, span in spans.items()}
    counted = _count_source_records(source_hook, by_partition, "before the oldest offset syncs")
    for index in spans:
        records = counted.get(requests[index].source)
        if records is not None:
            recount = replace(requests[index], records_before_oldest_sync=records)
            translations[index] = translate_partition(recount, method_order)


def show_replication_complete(
    translations: list[PartitionTranslation],
    requests: list[PartitionRequest],
    target_hook: KafkaClusterHook,
    heartbeats_topic: str,
) -> None:
    """Mark the gaps that are an upper bound where the heartbeats show replication past the replica's end.

    For each translation with a ``gap_upper_bound``, two timestamps are read on the target: the replica's end
    (its newest record, whose timestamp MirrorMaker 2 copied from the source) and the newest of the source's
    heartbeats replicated there (``heartbeats_topic``; MM2 writes one on the source every second and copies it
    like a record). A heartbeat no older than the replica's end shows that MM2 went on copying from the source
    after that record had been written there; this compares MM2's clock with the producers'.

    Such a translation is marked ``replication_complete``: a switch with ``on_gap: wait`` does not wait for
    its gap (``TranslationPlan.blocking_gaps``), which lies
    before MM2's oldest offset sync, where MM2 copies nothing more. Otherwise its warnings say why not.

    :param translations: the plan's translations, marked in place.
    :param requests: the requests they were made from, in the same order.
    :param target_hook: the target cluster's hook.
    :param heartbeats_topic: the source's replicated heartbeats topic on the target, e.g. ``A.heartbeats``.
    """
    bounded = [
        (translation, request)
        for translation, request in zip(translations, requests, strict=True)
        if translation.gap_upper_bound
    ]
    if not bounded:
        return
    heartbeats = TopicPartition(heartbeats_topic, 0)
    newest = _newest_timestamps(target_hook, [heartbeats, *(request.target for _, request in bounded)])
    heartbeat = newest.get(heartbeats)
    for translation, request in bounded:
        end = newest.get(request.target)
        if heartbeat is None or end is None:
            why = f"{heartbeats_topic} or {request.target} has no record the plan could read"
        elif heartbeat < end:
            why = (
                f"the newest heartbeat in {heartbeats_topic} ({heartbeat} ms) is older than the newest "
                f"record of {request.target} ({end} ms)"
            )
        else:
            translation.replication_complete = True
            translation.warnings.append(
                f"replication of {request.source} is complete: a heartbeat newer than the newest record of "
                f"{request.target} reached {heartbeats_topic}; no wait changes a gap before the oldest "
                "offset sync, so its upper bound does not hold a switch (on_gap: wait)"
            )
            continue
        translation.warnings.append(
            f"replication of {request.source} is not shown complete ({why}), so the gap's upper bound holds "
            "a switch with on_gap: wait"
        )


def _newest_timestamps(hook: KafkaClusterHook, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    """The timestamp (ms) of each partition's last record, in one read per topic; empty when unreadable."""
    try:
        found = hook.newest_record_timestamps(partitions, timeout_seconds=10.0)
    except Exception as exc:  # evidence that cannot be read proves nothing: the gaps keep holding the switch
        log.warning(
            "Cannot read the newest records of %s (%s)",
            ", ".join(map(str, partitions)),
            f"{type(exc).__name__}: {exc}",
        )
        return {}
    return {tp: timestamp for tp, timestamp in found.items() if timestamp is not None}


def _count_source_records(
    hook: KafkaClusterHook | None, ranges: dict[TopicPartition, tuple[int, int]], what: str
) -> dict[TopicPartition, int]:
    """Committed records in each ``[start, end)`` on the source, where it still holds the range.

    :param hook: the source cluster's hook; None when it is down.
    :param ranges: partition -> (start, end).
    :param what: which ranges, for the log.
    :return: counts of the partitions whose range could be read; empty when the source cannot be read.
    """
    if hook is None or not ranges:
        return {}
    try:
        lows = hook.watermarks(list(ranges), timeout_seconds=5.0)
        readable = {tp: span for tp, span in ranges.items() if lows[tp].low <= span[0]}
        return hook.count_records(readable, timeout_seconds=15.0)
    except Exception as exc:  # the source may be failing: the offset estimate stands, and says so
        log.warning(
            "Cannot count the records %s on the source (%s); gaps are estimated from offsets",
            what,
            f"{type(exc).__name__}: {exc}",
        )
        return {}

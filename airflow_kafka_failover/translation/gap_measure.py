"""What the target lacks of a partition, counted in records where the source answers: the I/O edge of gaps.

The pure rules (:mod:`airflow_kafka_failover.translation.rules`) can only count offsets, and transaction
markers and aborted records take offsets that MirrorMaker 2 never copies. The planner hands its translations
here; where the source cluster answers, the committed records of the ranges in question are counted on it
(with a read-committed consumer, as the job reads) instead.
"""

from __future__ import annotations

import logging

from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.translation.choosing import PartitionRequest
from airflow_kafka_failover.translation.plan import PartitionTranslation
from airflow_kafka_failover.translation.replication_lag import records_not_replicated, replication_lag
from airflow_kafka_failover.translation.spark_checkpoint import StreamPosition
from airflow_kafka_failover.types import TopicPartition

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
    if hook is None or not spans:
        return {}
    ranges = {tp: (sync[0] + 1, end) for tp, sync, end in spans}
    try:
        lows = hook.watermarks(list(ranges), timeout_seconds=5.0)
        readable = {tp: span for tp, span in ranges.items() if lows[tp].low <= span[0]}
        return hook.count_records(readable, timeout_seconds=15.0)
    except Exception as exc:  # the source may be failing: the offset estimate stands, and says so
        log.warning(
            "Cannot count the records after the newest offset syncs on the source (%s); gaps are estimated "
            "from offsets",
            f"{type(exc).__name__}: {exc}",
        )
        return {}

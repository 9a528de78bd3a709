"""The planner's gap measure: transaction markers never count as records missing on the target.

The real-sandbox reproduction is tests/integration/test_translation_edges.py; these cover each path of
``gap_measure.mark_replication_gaps`` with a stand-in for the source cluster's hook.
"""

from __future__ import annotations

from airflow_kafka_failover.translation.choosing import PartitionRequest, translate_partitions
from airflow_kafka_failover.translation.gap_measure import mark_replication_gaps
from airflow_kafka_failover.translation.spark_checkpoint import StreamPosition
from airflow_kafka_failover.translation.sync_history import OffsetSyncHistory
from airflow_kafka_failover.types import TopicPartition, Watermarks

SRC = TopicPartition("orders", 0)
DST = TopicPartition("A.orders", 0)
# Record 76 was copied to 70, the last offset of the replica; 77 is a commit marker; the position is 78.
HISTORY = OffsetSyncHistory.from_syncs([(10, 5), (76, 70)])
REQUEST = PartitionRequest(SRC, 78, DST, offset_syncs=HISTORY, watermarks=Watermarks(0, 71))


class SourceHook:
    """Answers like the source cluster: ``records`` committed records after the sync, or fails."""

    def __init__(self, records: int | None, low: int = 0) -> None:
        self.records, self.low = records, low
        self.asked: list[dict] = []

    def watermarks(self, partitions, timeout_seconds=None):
        return {tp: Watermarks(self.low, 78) for tp in partitions}

    def count_records(self, ranges, timeout_seconds=None):
        self.asked.append(dict(ranges))
        if self.records is None:
            raise TimeoutError("reading orders on A did not reach the end of partitions [0] within 15 s")
        return dict.fromkeys(ranges, self.records)


def plan_gap(position: StreamPosition, hook: SourceHook | None) -> tuple[int, list[str]]:
    translations = translate_partitions([REQUEST], ["offset_sync"])
    mark_replication_gaps(translations, [REQUEST], position, hook)
    return translations[0].gap_records, translations[0].warnings


def test_offsets_alone_count_the_trailing_marker_as_a_gap():
    gap, warnings = plan_gap(StreamPosition({SRC: 78}), None)
    assert gap == 1
    assert "replication is behind the job" in warnings[-1] and "may be high" in warnings[-1]


def test_the_newest_record_offset_removes_the_marker_without_the_source():
    assert plan_gap(StreamPosition({SRC: 78}, last_record_offsets={SRC: 76}), None) == (0, [])


def test_records_counted_on_the_source_remove_the_marker():
    hook = SourceHook(records=0)
    assert plan_gap(StreamPosition({SRC: 78}), hook) == (0, [])
    assert hook.asked == [{SRC: (77, 78)}]


def test_records_really_missing_are_counted_by_records():
    hook = SourceHook(records=1)  # one record at 77 that MM2 has not copied yet
    gap, warnings = plan_gap(StreamPosition({SRC: 78}), hook)
    assert gap == 1
    assert "counted by records on the source: 1 after the newest offset sync (76, 70)" in warnings[-1]


def test_a_source_that_fails_or_lost_the_range_leaves_the_estimate():
    failing = SourceHook(records=None)
    assert plan_gap(StreamPosition({SRC: 78}), failing)[0] == 1
    trimmed = SourceHook(records=0, low=78)  # retention removed 77: cannot count it
    assert plan_gap(StreamPosition({SRC: 78}), trimmed)[0] == 1
    assert trimmed.asked == [{}]

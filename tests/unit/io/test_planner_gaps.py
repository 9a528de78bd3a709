"""The planner's gap measure: transaction markers never count as records missing on the target.

The real-sandbox reproductions are in tests/integration/test_translation_edges.py; these cover each path of
``io/gap_measure.py`` (after the newest offset sync, issue 18; before the oldest, issue 32) with
stand-ins for the clusters' hooks.
"""

from __future__ import annotations

from dataclasses import replace

from airflow_kafka_failover.core.types import TopicPartition, Watermarks
from airflow_kafka_failover.domain.translation.choosing import PartitionRequest, translate_partitions
from airflow_kafka_failover.domain.translation.plan import PartitionTranslation, TranslationPlan
from airflow_kafka_failover.domain.translation.sync_history import OffsetSyncHistory
from airflow_kafka_failover.io.gap_measure import (
    count_gaps_before_oldest_syncs,
    mark_replication_gaps,
    show_replication_complete,
)
from airflow_kafka_failover.run_format.spark_checkpoint import StreamPosition

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


# ---- the gap before the oldest offset sync (issue 32) ----------------------------------------------------

EARLY = PartitionRequest(
    SRC,
    19,
    DST,
    offset_syncs=OffsetSyncHistory.from_syncs([(88, 53), (124, 80)]),
    watermarks=Watermarks(0, 81),
)
"""The issue's partition: position 19, oldest sync 88 -> 53; the source holds 41 records in [19, 88)."""


class TargetHook:
    """Answers like the target cluster: the newest record timestamp of each partition, or fails."""

    def __init__(self, newest: dict[tuple[str, int], int | None]) -> None:
        self.newest = newest
        self.asked: list[list[TopicPartition]] = []

    def newest_record_timestamps(self, partitions, timeout_seconds=None):
        self.asked.append(list(partitions))
        missing = [tp for tp in partitions if (tp.topic, tp.partition) not in self.newest]
        if missing:
            raise TimeoutError(f"reading the last records of {missing} took longer than 10 s")
        return {tp: self.newest[(tp.topic, tp.partition)] for tp in partitions}


def early_gap(hook: SourceHook | None) -> PartitionTranslation:
    translations = translate_partitions([EARLY], ["offset_sync"])
    count_gaps_before_oldest_syncs(translations, [EARLY], ["offset_sync"], hook)
    return translations[0]


def test_records_counted_on_the_source_remove_the_false_gap_before_the_oldest_sync():
    hook = SourceHook(records=41)
    translation = early_gap(hook)
    assert (translation.method, translation.gap_records, translation.gap_upper_bound) == (
        "earliest",
        0,
        False,
    )
    assert hook.asked == [{SRC: (19, 88)}]


def test_records_really_never_copied_before_the_oldest_sync_are_counted():
    translation = early_gap(SourceHook(records=60))  # more records than the 53 below the sync: 7 missing
    assert (translation.gap_records, translation.gap_upper_bound) == (7, False)
    assert "counted by records on the source: 60 committed record(s) there" in translation.warnings[1]


def test_without_the_source_the_gap_before_the_oldest_sync_is_an_upper_bound():
    for hook in (None, SourceHook(records=None), SourceHook(records=41, low=20)):
        translation = early_gap(hook)
        assert (translation.gap_records, translation.gap_upper_bound) == (16, True)
        assert "upper bound counted in offsets, not records" in translation.warnings[1]


def replication_shown(newest: dict[tuple[str, int], int | None]) -> PartitionTranslation:
    translations = translate_partitions([EARLY], ["offset_sync"])
    show_replication_complete(translations, [EARLY], TargetHook(newest), "A.heartbeats")
    return translations[0]


def test_heartbeats_past_the_replicas_end_show_replication_complete():
    hook = TargetHook({("A.heartbeats", 0): 2_000, ("A.orders", 0): 1_500})
    translations = translate_partitions([EARLY], ["offset_sync"])
    show_replication_complete(translations, [EARLY], hook, "A.heartbeats")
    assert hook.asked == [[TopicPartition("A.heartbeats", 0), DST]]  # one read for all of them
    translation = translations[0]
    assert translation.replication_complete
    assert "replication of orders-0 is complete" in translation.warnings[-1]
    plan = TranslationPlan.create("A", "B", [translation], {"A.orders": 1})
    assert plan.gaps == [translation] and plan.blocking_gaps == []


def test_heartbeats_older_than_the_replicas_end_or_unreadable_keep_the_upper_bound_blocking():
    for newest in (
        {("A.heartbeats", 0): 1_000, ("A.orders", 0): 1_500},
        {("A.heartbeats", 0): None, ("A.orders", 0): 1_500},
        {("A.orders", 0): 1_500},
    ):
        translation = replication_shown(newest)
        assert not translation.replication_complete
        assert "is not shown complete" in translation.warnings[-1]
        assert TranslationPlan.create("A", "B", [translation], {"A.orders": 1}).blocking_gaps == [translation]


def test_a_counted_gap_is_not_checked_for_complete_replication_and_blocks():
    translations = translate_partitions([replace(EARLY, records_before_oldest_sync=60)], ["offset_sync"])
    hook = TargetHook({})
    show_replication_complete(translations, [EARLY], hook, "A.heartbeats")
    assert hook.asked == []
    assert (translations[0].gap_records, translations[0].replication_complete) == (7, False)
    assert TranslationPlan.create("A", "B", translations, {"A.orders": 1}).blocking_gaps == translations

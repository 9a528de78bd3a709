"""The one reader of MirrorMaker 2's internal topics, over a stand-in hook (real topics: integration)."""

from __future__ import annotations

from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint, OffsetSync
from airflow_kafka_failover.hooks.kafka_cluster import CompactedRecord
from airflow_kafka_failover.io.mm2_topics import read_checkpoints, read_offset_syncs


class TopicHook:
    """Answers ``read_topic_to_end`` with fixed records, as the real hook does from a topic."""

    def __init__(self, records: list[tuple[bytes | None, bytes | None]]) -> None:
        self.records = [CompactedRecord(0, offset, k, v, 0) for offset, (k, v) in enumerate(records)]
        self.timeouts: list[float | None] = []

    def read_topic_to_end(self, topic: str, timeout_seconds: float | None = None):
        self.timeouts.append(timeout_seconds)
        return iter(self.records)


def test_offset_syncs_skip_tombstones_report_garbage_and_keep_wanted_topics():
    orders, other = OffsetSync("orders", 0, 10, 7), OffsetSync("payments", 1, 3, 3)
    hook = TopicHook([orders.encode(), (orders.encode()[0], None), (b"junk", b"\x01"), other.encode()])
    reading = read_offset_syncs(hook, "mm2-offset-syncs.B.internal", "A", topics={"orders"}, timeout=12.0)
    assert reading.decoded == [orders]
    assert reading.tombstones == 1
    assert len(reading.undecodable) == 1
    assert reading.undecodable[0].startswith(
        "record at offset 2 of mm2-offset-syncs.B.internal-0 on A does not decode: malformed OffsetSync key"
    )
    assert "Only MirrorMaker 2 should write to mm2-offset-syncs.B.internal" in reading.undecodable[0]
    assert hook.timeouts == [12.0]
    assert read_offset_syncs(hook, "t", "A").decoded == [orders, other]


def test_checkpoints_keep_one_group():
    mine, theirs = Checkpoint("job", "A.orders", 0, 5, 4), Checkpoint("other", "A.orders", 0, 9, 9)
    reading = read_checkpoints(
        TopicHook([mine.encode(), theirs.encode(), (None, None)]), "A.checkpoints.internal", "B", "job"
    )
    assert (reading.decoded, reading.undecodable, reading.tombstones) == ([mine], [], 1)

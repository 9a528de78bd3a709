"""MirrorMaker 2 in the module's sandbox replicates records and checkpoints consumer groups."""

from __future__ import annotations

import time
import uuid

from akf_devtools.sandbox.kafka_io import create_topic, end_offsets, produce, read_all
from confluent_kafka import Consumer, TopicPartition

from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint
from tests.integration.waiting import wait_for

BASE_TS = (int(time.time()) - 3600) * 1000
"""The records' timestamps: an hour ago, well within the brokers' retention (7 days). Records stamped in 2023
were deleted by the broker's retention check, due every 5 minutes, when it came between producing and
reading them (CI once read an empty partition 0)."""


def test_records_appear_on_b_with_same_partition_and_timestamp(sandbox, unique_topic):
    topic = unique_topic("orders")
    a, b = sandbox.bootstrap("A"), sandbox.bootstrap("B")
    create_topic(a, topic, 6)
    produce(a, topic, [(f"k{i}".encode(), f"v{i}".encode(), i % 6, BASE_TS + i * 1000) for i in range(1000)])

    remote = f"A.{topic}"
    wait_for(
        lambda: sum((end_offsets(b, remote) or {}).values()) >= 1000, 180, f"1000 records in {remote} on B"
    )

    source = {r.key: r for r in read_all(a, topic)}
    replicated = {r.key: r for r in read_all(b, remote)}
    assert len(source) == 1000
    assert replicated.keys() == source.keys()
    for key, record in source.items():
        copy = replicated[key]
        assert (copy.partition, copy.timestamp_ms, copy.value) == (
            record.partition,
            record.timestamp_ms,
            record.value,
        )
    assert len(end_offsets(b, remote)) == 6


def test_committed_group_gets_checkpoint_on_b_within_30s(sandbox, unique_topic):
    topic = unique_topic("payments")
    group = f"bookkeeping-{uuid.uuid4().hex[:8]}"
    a, b = sandbox.bootstrap("A"), sandbox.bootstrap("B")
    create_topic(a, topic, 2)
    produce(a, topic, [(None, f"v{i}".encode(), i % 2, None) for i in range(200)])
    wait_for(
        lambda: sum((end_offsets(b, f"A.{topic}") or {}).values()) >= 200, 60, "replication of the topic"
    )

    consumer = Consumer({"bootstrap.servers": a, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 60), TopicPartition(topic, 1, 100)], asynchronous=False
        )
    finally:
        consumer.close()

    def checkpoints() -> dict[int, Checkpoint]:
        found = {}
        for record in read_all(b, "A.checkpoints.internal"):
            checkpoint = Checkpoint.decode(record.key, record.value)
            if checkpoint.group == group:
                found[checkpoint.partition] = checkpoint
        return found if len(found) == 2 else {}

    found = wait_for(checkpoints, 30, f"MM2 checkpoints of group {group} on B")
    assert {p: c.upstream_offset for p, c in found.items()} == {0: 60, 1: 100}
    assert all(c.topic == f"A.{topic}" for c in found.values())
    # Offsets are identical on both sides here, so a safe (never later) checkpoint is at most the
    # committed offset; MM2 rounds down to its sparse offset syncs, so it may well be earlier.
    assert all(0 <= c.downstream_offset <= c.upstream_offset for c in found.values())

"""Reading offset ranges of a topic with a confluent-kafka consumer, to a known end.

A plain client helper without Airflow imports, shared by ``KafkaClusterHook`` and the sandbox's tools.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any


def consume_ranges(
    consumer: Any, topic: str, ranges: Mapping[int, tuple[int, int]], timeout: float, where: str
) -> Iterator[Any]:
    """Yield the messages of ``topic`` in ``[start, end)`` of each partition, then stop.

    Compaction, transaction markers and aborted records leave offsets without a delivered message, so a
    partition is done when the consumer's position reaches its end, not when a message at ``end - 1``
    arrives. Messages appended after ``end`` are not yielded.

    :param consumer: a consumer that is not assigned to anything yet; the caller closes it.
    :param topic: the topic.
    :param ranges: partition -> (start offset, end offset).
    :param timeout: seconds for the whole read.
    :param where: the cluster, for the timeout message.
    :raises TimeoutError: naming the partitions that did not reach their end.
    """
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    todo = {partition: end for partition, (start, end) in ranges.items() if end > start}
    if not todo:
        return
    consumer.assign([KafkaTopicPartition(topic, partition, ranges[partition][0]) for partition in todo])
    deadline = time.monotonic() + timeout
    while todo:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"reading {topic} on {where} did not reach the end of partitions {sorted(todo)} "
                f"within {timeout:.0f} s"
            )
        for msg in consumer.consume(num_messages=5000, timeout=0.2):
            end = todo.get(msg.partition())
            if msg.error() is not None or end is None or msg.offset() >= end:
                continue
            yield msg
            if msg.offset() + 1 >= end:
                del todo[msg.partition()]
        for position in consumer.position([KafkaTopicPartition(topic, p) for p in list(todo)]):
            if position.offset >= todo[position.partition]:
                del todo[position.partition]

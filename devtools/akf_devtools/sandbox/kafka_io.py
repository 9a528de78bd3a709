"""Plain Kafka client calls the sandbox and its tests need: topics, watermarks, producing, reading.

The provider's own Kafka access (with Airflow connections, timeouts and batching) is the hook in
``airflow_kafka_failover.hooks``; this module serves the sandbox's readiness checks and test data.

Every function takes the cluster as its bootstrap address, or as a confluent-kafka config dict with
``bootstrap.servers`` and security settings (``Sandbox.client_config(name)`` of a SCRAM sandbox). Messages
name the bootstrap address only, never the config, which may hold a password.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_kafka_failover.hooks.partition_reader import consume_ranges


@dataclass(frozen=True)
class Record:
    """A record as read back from a topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


Cluster = str | Mapping[str, Any]
"""A bootstrap address, or a confluent-kafka config with ``bootstrap.servers`` (and security settings)."""


def client_config(cluster: Cluster) -> dict[str, Any]:
    """The confluent-kafka config of ``cluster``."""
    if isinstance(cluster, str):
        return {"bootstrap.servers": cluster}
    return dict(cluster)


def address(cluster: Cluster) -> str:
    """The bootstrap address of ``cluster``, for messages (a config may hold a password)."""
    return cluster if isinstance(cluster, str) else str(cluster.get("bootstrap.servers"))


def _quiet_consumer(bootstrap: Cluster, **extra: object) -> Consumer:
    config = {
        **client_config(bootstrap),
        "group.id": "airflow-kafka-failover-sandbox-probe",
        "enable.auto.commit": False,
        "socket.connection.setup.timeout.ms": 2000,
        **extra,
    }
    return Consumer(config)


def high_watermark(bootstrap: Cluster, topic: str, partition: int, timeout: float = 2.0) -> int | None:
    """Return the high watermark of one partition, or None when the topic or cluster does not answer."""
    consumer = _quiet_consumer(bootstrap)
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        return high
    except KafkaException:
        return None
    finally:
        consumer.close()


def end_offsets(bootstrap: Cluster, topic: str, timeout: float = 5.0) -> dict[int, int] | None:
    """Return {partition: high watermark} of a topic, or None when the topic or cluster does not answer."""
    consumer = _quiet_consumer(bootstrap)
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
        if metadata.topics[topic].error is not None:
            return None
        return {
            partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)[1]
            for partition in metadata.topics[topic].partitions
        }
    except KafkaException:
        return None
    finally:
        consumer.close()


def create_topic(
    bootstrap: Cluster, topic: str, partitions: int, timeout: float = 15.0, **configs: str
) -> None:
    """Create a topic and wait until every partition has a leader.

    The topic gets the cluster's default replication factor (one replica on a single broker, three on a
    sandbox cluster of three brokers) and its default ``min.insync.replicas`` unless ``configs`` say.
    """
    admin = AdminClient(client_config(bootstrap))
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=-1, config=configs)],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    futures[topic].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if (
            described is not None
            and described.error is None
            and len(described.partitions) == partitions
            and all(part.leader >= 0 for part in described.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise TimeoutError(
        f"topic {topic} on {address(bootstrap)} has partitions without a leader after {timeout:.0f} s"
    )


def produce(
    bootstrap: Cluster,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None, int | None, int | None]],
    timeout: float = 30.0,
    **config: object,
) -> int:
    """Produce (key, value, partition, timestamp_ms) records synchronously; return how many were acked."""
    producer = Producer({**client_config(bootstrap), "linger.ms": 5, "enable.idempotence": True, **config})
    errors: list[str] = []
    acked = 0

    def on_delivery(err, _msg) -> None:
        nonlocal acked
        if err is not None:
            errors.append(str(err))
        else:
            acked += 1

    for key, value, partition, timestamp_ms in records:
        kwargs: dict = {"key": key, "value": value, "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(timeout)
    if errors or remaining:
        raise RuntimeError(
            f"producing to {topic} on {address(bootstrap)}: {remaining} unacked, errors {errors[:3]}"
        )
    return acked


def read_all(bootstrap: Cluster, topic: str, timeout: float = 30.0, **config: object) -> list[Record]:
    """Read every record currently in ``topic`` (all partitions, low to high watermark)."""
    consumer = _quiet_consumer(bootstrap, **config)
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
        if metadata.topics[topic].error is not None:
            raise RuntimeError(f"topic {topic} on {address(bootstrap)}: {metadata.topics[topic].error}")
        ranges = {
            partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
            for partition in metadata.topics[topic].partitions
        }
        return [
            Record(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1])
            for msg in consume_ranges(consumer, topic, ranges, timeout, address(bootstrap))
        ]
    finally:
        consumer.close()

"""KafkaClusterHook and the probe against a real cluster of the module's sandbox."""

from __future__ import annotations

import time

import pytest
from akf_devtools.sandbox.kafka_io import create_topic, produce
from confluent_kafka import Producer

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.io.probe import probe_cluster
from tests.integration.conftest import register_connections
from tests.integration.waiting import wait_for

BASE_TS = (int(time.time()) - 3600) * 1000
"""The records' timestamps: an hour ago, well within the brokers' retention (7 days). Records stamped in 2023
were deleted by the broker's retention check, due every 5 minutes, when it came between producing and
reading them (CI once read an empty partition 0)."""


@pytest.fixture(scope="module")
def hook_a(sandbox) -> KafkaClusterHook:
    return KafkaClusterHook(register_connections(sandbox, "hooktest")["A"], timeout_seconds=5.0)


def test_metadata_watermarks_and_times(sandbox, hook_a, unique_topic):
    topic = unique_topic("meta")
    create_topic(sandbox.bootstrap("A"), topic, 4)
    produce(sandbox.bootstrap("A"), topic, [(None, b"v", i % 4, BASE_TS + i * 1000) for i in range(40)])
    assert hook_a.partition_counts([topic]) == {topic: 4}
    metadata = hook_a.describe_cluster([topic, "no-such-topic"])
    assert metadata.broker_ids and metadata.missing_topics == ("no-such-topic",)
    assert all(p.leader >= 0 for p in metadata.partitions)
    partitions = [TopicPartition(topic, p) for p in range(4)]
    marks = hook_a.watermarks(partitions)
    assert {tp: (m.low, m.high) for tp, m in marks.items()} == {tp: (0, 10) for tp in partitions}
    # Partition 1 holds records i = 1, 5, 9, ...; the first at or after BASE_TS + 6 s is i = 9, offset 2.
    found = hook_a.offsets_for_times(
        {TopicPartition(topic, 1): BASE_TS + 6000, TopicPartition(topic, 2): BASE_TS * 2}
    )
    assert found == {TopicPartition(topic, 1): 2, TopicPartition(topic, 2): None}
    with pytest.raises(ConfigError, match=r"topics no-such-topic do not exist on the cluster of connection"):
        hook_a.partition_counts(["no-such-topic"])


def test_newest_record_timestamps_in_one_read(sandbox, hook_a, unique_topic):
    """Partition 0 ends with a record, 1 is empty, 2 ends with a transaction's commit marker (no record)."""
    topic = unique_topic("newest")
    create_topic(sandbox.bootstrap("A"), topic, 3)
    produce(sandbox.bootstrap("A"), topic, [(None, b"v", 0, BASE_TS + i * 1000) for i in range(5)])
    producer = Producer({"bootstrap.servers": sandbox.bootstrap("A"), "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"v", partition=2, timestamp=BASE_TS)
    producer.commit_transaction(30)
    partitions = [TopicPartition(topic, p) for p in range(3)]
    # The transaction coordinator writes the commit marker after the commit returns.
    wait_for(lambda: hook_a.watermarks([partitions[2]])[partitions[2]].high == 2, 30, "the commit marker")
    assert hook_a.newest_record_timestamps(partitions) == {
        partitions[0]: BASE_TS + 4000,
        partitions[1]: None,
        partitions[2]: None,
    }
    assert hook_a.newest_record_timestamp(topic, 0) == BASE_TS + 4000


def test_group_offsets_read_and_alter(sandbox, hook_a, unique_topic):
    topic = unique_topic("group")
    create_topic(sandbox.bootstrap("A"), topic, 2)
    produce(sandbox.bootstrap("A"), topic, [(None, b"v", i % 2, None) for i in range(20)])
    group = f"g-{topic}"
    assert hook_a.committed_offsets(group) == {}
    hook_a.alter_committed_offsets(group, {TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 3})
    assert hook_a.committed_offsets(group) == {TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 3}
    with pytest.raises(ConfigError, match=r"integers >= 0; got \{'.*-0': -1\}"):
        hook_a.alter_committed_offsets(group, {TopicPartition(topic, 0): -1})


def test_read_compacted_topic_to_end(sandbox, hook_a, unique_topic):
    topic = unique_topic("compacted")
    create_topic(sandbox.bootstrap("A"), topic, 1, **{"cleanup.policy": "compact"})
    produce(
        sandbox.bootstrap("A"), topic, [(f"k{i % 5}".encode(), f"v{i}".encode(), 0, None) for i in range(25)]
    )
    started = time.monotonic()
    records = list(hook_a.read_topic_to_end(topic))
    assert len(records) == 25 and records[-1].value == b"v24"
    assert time.monotonic() - started < 10


def test_probe_evidence_with_a_canary(sandbox, hook_a, unique_topic):
    canary = unique_topic("canary")
    create_topic(sandbox.bootstrap("A"), canary, 1)
    result = probe_cluster(hook_a, "A", [canary], timeout_seconds=5.0, canary_topic=canary)
    assert result.ok and result.reachable and result.broker_count == 1
    assert result.canary_ok is True and result.latency_s is not None
    missing = probe_cluster(hook_a, "A", ["no-such-topic"], timeout_seconds=5.0)
    assert missing.degraded and missing.leaderless_partitions == ("no-such-topic (topic missing)",)


def test_down_sensor_refuses_a_topic_missing_on_the_cluster_before_waiting(sandbox):
    from airflow_kafka_failover.sensors.cluster_health import KafkaClusterDownSensor

    conns = register_connections(sandbox, "hooksensor")
    sensor = KafkaClusterDownSensor(
        task_id="d",
        kafka_config_id=conns["A"],
        cluster_alias="A",
        topics=["orderz"],
        peer_kafka_config_id=conns["B"],
        deferrable=True,
    )
    started = time.monotonic()
    with pytest.raises(
        ConfigError, match=r"topics orderz do not exist on cluster A \(connection 'hooksensor_a'\)"
    ):
        sensor.execute(context={})
    assert time.monotonic() - started < 10

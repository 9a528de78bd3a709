"""Translation with IdentityReplicationPolicy: same topic names on both clusters, one A->B flow.

Failover maps ``orders`` on A forward to ``orders`` on B; failback maps B's replica back to A in reverse
through the same flow's offset syncs (stored on B).
"""

from __future__ import annotations

import uuid

import pytest
from akf_devtools.sandbox.kafka_io import create_topic
from akf_devtools.sandbox.mirrormaker import ReplicationSettings

from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.config import parse_pair
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.io.planner import build_plan
from airflow_kafka_failover.run_format.spark_checkpoint import StreamPosition
from tests.integration import translation_support as data
from tests.integration.conftest import register_connections, start_sandbox, stop_sandbox

TOPIC = "orders"
PARTITIONS = 3


@pytest.fixture(scope="module")
def identity_world():
    sandbox = start_sandbox(f"identity-{uuid.uuid4().hex[:6]}", ReplicationSettings(policy="identity"))
    try:
        conns = register_connections(sandbox, "identity")
        a, b = sandbox.bootstrap("A"), sandbox.bootstrap("B")
        create_topic(a, TOPIC, PARTITIONS)
        ids = [f"i-{n}" for n in range(600)]
        data.produce_with_aborts(a, TOPIC, ids, PARTITIONS)
        data.wait_replicated(b, TOPIC, set(ids))
        pair = parse_pair(
            "orders",
            {
                "clusters": {"A": {"connection": conns["A"]}, "B": {"connection": conns["B"]}},
                "primary": "A",
                "topics": [TOPIC],
                "replication": {"policy": "identity"},
            },
        )
        hooks = {name: KafkaClusterHook(conn) for name, conn in conns.items()}
        yield {"pair": pair, "hooks": hooks, "ids": ids, "a": a, "b": b}
    finally:
        stop_sandbox(sandbox)


def test_failover_identity_names_loses_nothing(identity_world):
    world = identity_world
    offsets, processed, newest = data.position_at(data.read_ids(world["a"], TOPIC), 0.6)
    position = StreamPosition(
        offsets={TopicPartition(TOPIC, p): o for p, o in offsets.items()},
        max_timestamps_ms={TopicPartition(TOPIC, p): ts for p, ts in newest.items()},
    )
    plan = build_plan(world["pair"], "A", "B", position, world["hooks"])
    assert {t.target.topic for t in plan.translations} == {TOPIC}
    assert all(t.target_offset is not None for t in plan.translations), plan.to_table()
    redelivered, bound = data.check_no_loss(plan, world["b"], set(world["ids"]) - processed, processed, TOPIC)
    print(f"identity forward: {redelivered} re-delivered, bound {bound}\n{plan.to_table()}")
    if bound is not None:
        assert redelivered <= bound


def test_failback_identity_names_reverse_loses_nothing(identity_world):
    world = identity_world
    offsets, processed, newest = data.position_at(data.read_ids(world["b"], TOPIC), 0.7)
    position = StreamPosition(
        offsets={TopicPartition(TOPIC, p): o for p, o in offsets.items()},
        max_timestamps_ms={TopicPartition(TOPIC, p): ts for p, ts in newest.items()},
    )
    plan = build_plan(world["pair"], "B", "A", position, world["hooks"])
    assert {t.method for t in plan.translations} <= {"offset_sync_reverse", "timestamp"}, plan.to_table()
    redelivered, bound = data.check_no_loss(plan, world["a"], set(world["ids"]) - processed, processed, TOPIC)
    print(f"identity reverse: {redelivered} re-delivered, bound {bound}\n{plan.to_table()}")
    if bound is not None:
        assert redelivered <= bound

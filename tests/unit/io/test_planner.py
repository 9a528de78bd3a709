"""A plan with no position at all states what its start may read again: never a bound of 0 at `earliest`."""

from __future__ import annotations

import pytest

from airflow_kafka_failover.core.types import TopicPartition, Watermarks
from airflow_kafka_failover.domain.config import parse_pair
from airflow_kafka_failover.hooks.kafka_cluster import ClusterMetadata, PartitionInfo
from airflow_kafka_failover.io.planner import build_plan

HELD = {TopicPartition("A.orders", 0): Watermarks(10, 70), TopicPartition("A.orders", 1): Watermarks(0, 25)}


class TargetHook:
    """B answering metadata for ``A.orders`` (two partitions) and its own ``orders`` (absent), and
    watermarks; ``watermarks_fail`` makes the watermark read fail."""

    bootstrap_servers, kafka_config_id, timeout_seconds = "b:9092", "kafka_b", 10.0

    def __init__(self, watermarks_fail: bool = False) -> None:
        self.watermarks_fail = watermarks_fail

    def describe_cluster(self, topics):
        parts = tuple(PartitionInfo("A.orders", p, 1, (1,), (1,)) for p in (0, 1))
        return ClusterMetadata("b", (1,), parts, tuple(t for t in topics if t != "A.orders"))

    def watermarks(self, partitions):
        if self.watermarks_fail:
            raise TimeoutError("no answer")
        return {tp: HELD[tp] for tp in partitions}


def pair(initial: str):
    return parse_pair(
        "orders",
        {
            "clusters": {"A": {"connection": "kafka_a"}, "B": {"connection": "kafka_b"}},
            "primary": "A",
            "topics": ["orders"],
            "translation": {"initial_position": initial},
        },
    )


@pytest.mark.parametrize(
    ("initial", "hook", "bound"),
    [
        ("earliest", TargetHook(), 85),  # every record B holds: 60 + 25
        ("latest", TargetHook(), 0),  # reads nothing again (and skips what is there, as configured)
        ("earliest", TargetHook(watermarks_fail=True), None),
    ],
)
def test_the_bound_of_a_start_without_position(initial, hook, bound):
    plan = build_plan(pair(initial), "A", "B", None, {"A": None, "B": hook})
    assert plan.translations == [] and plan.untracked_partitions == initial
    assert plan.max_redelivery == bound and plan.summary()["untracked_redelivery_bound"] == bound
    assert (
        "re-delivery " + ("bound unknown" if bound is None else f"at most {bound} records") in plan.to_table()
    )

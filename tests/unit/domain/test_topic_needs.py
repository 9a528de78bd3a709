"""What each cluster of a pair must hold: the topics of ``PairConfig.topics_on``, whence each comes, and the
sentences ``kafka-failover check`` prints for what a start or switch would refuse."""

from __future__ import annotations

import pytest

from airflow_kafka_failover.domain.config import parse_pair
from airflow_kafka_failover.domain.topic_needs import topic_needs, topic_problems


def pair(**replication):
    data = {
        "clusters": {"A": {"connection": "kafka_a"}, "B": {"connection": "kafka_b"}},
        "primary": "A",
        "topics": ["orders"],
    }
    if replication:
        data["replication"] = replication
    return parse_pair("orders", data)


@pytest.mark.parametrize(
    "replication",
    [
        {},
        {"flows": ["A->B"]},
        {"flows": ["B->A"]},
        {"policy": "identity"},
        {"policy": "identity", "flows": ["B->A"]},
    ],
)
def test_the_needs_are_the_topics_the_job_reads_on_each_cluster(replication):
    config = pair(**replication)
    for cluster in ("A", "B"):
        assert [n.topic for n in topic_needs(config) if n.cluster == cluster] == config.topics_on(cluster)


def test_the_default_flows_need_the_topic_on_both_clusters_and_both_copies():
    needs = {(n.cluster, n.topic): (n.origin, n.origin_topic, n.replicated) for n in topic_needs(pair())}
    assert needs == {
        ("A", "orders"): ("A", "orders", False),
        ("A", "B.orders"): ("B", "orders", True),
        ("B", "orders"): ("B", "orders", False),
        ("B", "A.orders"): ("A", "orders", True),
    }


def test_one_way_leaves_the_copy_on_the_primary_out():
    needs = {(n.cluster, n.topic) for n in topic_needs(pair(flows=["A->B"]))}
    assert needs == {("A", "orders"), ("B", "orders"), ("B", "A.orders")}


def test_under_identity_the_flows_target_holds_the_copy_under_the_same_name():
    needs = {(n.cluster, n.topic): n.made_by for n in topic_needs(pair(policy="identity"))}
    assert needs[("A", "orders")].startswith("you")
    assert needs[("B", "orders")] == "MirrorMaker 2, flow A->B (from orders on A)"


def test_what_the_page_left_out_is_named_with_what_to_do():
    """Only orders on A (the page's first reading): B's orders and both copies are missing."""
    (copy_on_a, own, copy_on_b) = topic_problems(pair(), {"A": {"orders": 3}, "B": {}})
    assert copy_on_a.startswith("topic B.orders does not exist on A (the job on A reads it, so a start")
    assert "MirrorMaker 2's copy of orders on B, made by the flow B->A" in copy_on_a
    assert "leave it out of the pair's replication.flows (now ['A->B', 'B->A'])" in copy_on_a
    assert own.startswith("topic orders does not exist on B") and "create it there" in own
    assert copy_on_b.startswith("topic A.orders does not exist on B")


def test_everything_held_is_no_problem_and_a_copy_with_other_partitions_is():
    held = {"A": {"orders": 3, "B.orders": 3}, "B": {"orders": 3, "A.orders": 3}}
    assert topic_problems(pair(), held) == []
    held["B"]["A.orders"] = 2
    (problem,) = topic_problems(pair(), held)
    assert problem.startswith("A.orders has 2 partitions on B but orders has 3 on A")

"""The probe's partition evidence and the watch's min.insync.replicas check, with a fake cluster hook.

The real brokers are in tests/integration/test_three_brokers.py; here every answer a cluster of three can
give is written down: leaders that answer, a dead leader the metadata still names, no leader, too few
in-sync replicas.
"""

from __future__ import annotations

import time

from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.health.down_decision import decide_down
from airflow_kafka_failover.domain.health.verdict import HealthThresholds
from airflow_kafka_failover.hooks.kafka_cluster import ClusterMetadata, PartitionInfo
from airflow_kafka_failover.io.health_watch import DownWatch
from airflow_kafka_failover.io.probe import judge_partitions, probe_cluster
from tests.unit.domain.health.probe_histories import BASE, DEFAULTS, advancing_heartbeats, every


def part(partition: int, leader: int, isrs: tuple[int, ...], topic: str = "orders") -> PartitionInfo:
    return PartitionInfo(topic, partition, leader, replicas=(1, 2, 3), isrs=isrs)


class FakeHook:
    """A cluster hook whose metadata and silent leaders are given; it records what it was asked."""

    bootstrap_servers = "127.0.0.1:1"

    def __init__(self, partitions, silent=None, missing=(), min_isr=None, fail_min_isr=0):
        self.metadata = ClusterMetadata("c", (1, 2, 3), tuple(partitions), tuple(missing))
        self.silent = silent or {}
        self.asked: list[list[TopicPartition]] = []
        self.clients: list[object] = []
        self.min_isr = min_isr or {}
        self.min_isr_calls = 0
        self.fail_min_isr = fail_min_isr

    def probe_client(self, timeout_seconds=None):
        return "client"

    def describe_cluster(self, topics, timeout_seconds=None, client=None):
        self.clients.append(client)
        return self.metadata

    def leaders_not_answering(self, partitions, timeout_seconds=None, client=None):
        self.clients.append(client)
        self.asked.append(sorted(partitions))
        return {tp: why for tp, why in self.silent.items() if tp in partitions}

    def min_insync_replicas(self, topics, timeout_seconds=None):
        self.min_isr_calls += 1
        if self.min_isr_calls <= self.fail_min_isr:
            raise TimeoutError("no answer")
        return self.min_isr


def test_a_healthy_cluster_of_three_gives_an_ok_probe_that_checked_every_partition(monkeypatch):
    monkeypatch.setattr("airflow_kafka_failover.io.probe.every_address_refuses", lambda *a: None)
    hook = FakeHook([part(0, 1, (1, 2, 3)), part(1, 2, (2, 3, 1))])
    probe = probe_cluster(hook, "A", ["orders"], 2.0)
    assert probe.ok and probe.partitions_checked == 2
    # One ListOffsets question for the led partitions (the client batches it per leader), on the client
    # that fetched the metadata.
    assert hook.asked == [[TopicPartition("orders", 0), TopicPartition("orders", 1)]]
    assert hook.clients == ["client", "client"]


def test_each_kind_of_partition_trouble_is_named():
    hook = FakeHook(
        [part(0, 1, (1, 2, 3)), part(1, 2, (2, 3, 1)), part(2, -1, ()), part(3, 3, (3,))],
        silent={TopicPartition("orders", 1): "no answer within 2 s"},
        missing=("refunds",),
    )
    found = judge_partitions(hook, hook.metadata, 2.0, {"orders": 2})
    assert found["leaderless_partitions"] == ("orders-2", "refunds (topic missing)")
    assert found["unreadable_partitions"] == ("orders-1 (leader 2: no answer within 2 s)",)
    assert found["under_min_isr_partitions"] == ("orders-2", "orders-3")
    assert found["under_replicated_partitions"] == ("orders-2", "orders-3")
    assert found["partitions_checked"] == 4
    # Only partitions with a leader are asked; without min ISR given, none is reported under it.
    assert hook.asked == [[TopicPartition("orders", p) for p in (0, 1, 3)]]
    assert judge_partitions(hook, hook.metadata, 2.0)["under_min_isr_partitions"] == ()


def test_a_single_lost_broker_is_under_replicated_not_down():
    # Broker 2 was fenced and its leaderships moved: ISR 2 of 3 >= min.insync.replicas 2.
    hook = FakeHook([part(0, 1, (1, 3)), part(1, 3, (3, 1))])
    found = judge_partitions(hook, hook.metadata, 2.0, {"orders": 2})
    assert found["under_replicated_partitions"] == ("orders-0", "orders-1")
    assert not found["under_min_isr_partitions"] and not found["leaderless_partitions"]


def test_a_read_check_that_fails_as_a_whole_marks_every_led_partition(monkeypatch):
    hook = FakeHook([part(0, 1, (1, 2, 3)), part(1, 2, (2, 3, 1))])

    def broken(partitions, timeout_seconds=None, client=None):
        raise RuntimeError("client gone")

    monkeypatch.setattr(hook, "leaders_not_answering", broken)
    found = judge_partitions(hook, hook.metadata, 2.0)
    assert found["unreadable_partitions"] == (
        "orders-0 (leader 1: RuntimeError: client gone)",
        "orders-1 (leader 2: RuntimeError: client gone)",
    )


def _watch(hook: FakeHook, count_under_min_isr: bool) -> DownWatch:
    watch = DownWatch(
        cluster="A",
        kafka_config_id="unit_a",
        topics=["orders"],
        thresholds=HealthThresholds(),
        count_under_min_isr=count_under_min_isr,
    )
    watch.hook = hook
    return watch


def test_the_watch_reads_min_insync_replicas_once_and_retries_until_it_could(monkeypatch):
    monkeypatch.setattr("airflow_kafka_failover.io.probe.every_address_refuses", lambda *a: None)
    hook = FakeHook([part(0, 1, (1,))], min_isr={"orders": 2}, fail_min_isr=1)
    watch = _watch(hook, count_under_min_isr=True)
    first = watch.probe(time.time())  # the config could not be read yet: no min-ISR evidence
    assert first.under_min_isr_partitions == () and first.under_replicated_partitions == ("orders-0",)
    second = watch.probe(time.time() + 2)
    third = watch.probe(time.time() + 4)
    assert second.under_min_isr_partitions == third.under_min_isr_partitions == ("orders-0",)
    assert second.partitions_down and hook.min_isr_calls == 2


def test_without_the_option_min_insync_replicas_is_never_asked(monkeypatch):
    monkeypatch.setattr("airflow_kafka_failover.io.probe.every_address_refuses", lambda *a: None)
    hook = FakeHook([part(0, 1, (1,))], min_isr={"orders": 2})
    probe = _watch(hook, count_under_min_isr=False).probe(time.time())
    assert probe.ok and hook.min_isr_calls == 0


def test_partition_trouble_while_heartbeats_advance_is_not_down_and_not_a_split():
    # The cluster answers, so Airflow reaches it: no split. MirrorMaker 2 still writes heartbeats to it.
    history = every(0, 10) + every(10, 40, "degraded")
    decision = decide_down(history, advancing_heartbeats(40), DEFAULTS, BASE + 39, False)
    assert not decision.is_down and not decision.split_suspected
    assert "not failed over on the trouble of some partitions" in decision.reason

"""A stray record on MirrorMaker 2's real offset-syncs topic must not stop the recovered decision.

Chained on a sandbox of its own (stray records on an internal topic are not something to share): a topic on
B is replicated to A, then a tombstone and a record that is not an offset sync are written into
``mm2-offset-syncs.B.internal`` on A next to MirrorMaker 2's own syncs. The one reader of that topic reports
both and keeps the real syncs, and the recovered decision (what ``KafkaClusterRecoveredSensor`` waits on)
still measures the replication lag and decides that A has recovered.
"""

from __future__ import annotations

import time

import pytest
from akf_devtools.sandbox.kafka_io import create_topic, end_offsets, produce

from airflow_kafka_failover.domain.health.verdict import HealthThresholds
from airflow_kafka_failover.domain.translation.mm2_records import OffsetSync
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.io.health_watch import RecoveryWatch, watch_until
from airflow_kafka_failover.io.mm2_topics import read_offset_syncs
from tests.integration.conftest import register_connections
from tests.integration.waiting import wait_for

# The garbage record stays in MirrorMaker 2's own offset-syncs topic, which MirrorMaker 2 then fails to read.
pytestmark = pytest.mark.spoils_sandbox

OFFSET_SYNCS = "mm2-offset-syncs.B.internal"  # the flow B->A, stored on its target A (the sandbox's setting)


def test_recovered_decision_survives_a_tombstone_and_a_garbage_offset_sync(own_sandbox):
    conns = register_connections(own_sandbox, "syncs")
    topic = "orders-stray-syncs"
    create_topic(own_sandbox.bootstrap("B"), topic, 2)
    produce(own_sandbox.bootstrap("B"), topic, [(None, b"x", i % 2, None) for i in range(200)])
    wait_for(
        lambda: sum((end_offsets(own_sandbox.bootstrap("A"), f"B.{topic}") or {}).values()) >= 200,
        90,
        f"B.{topic} replicated to A",
    )
    hook = KafkaClusterHook(conns["A"], timeout_seconds=10.0)
    wait_for(
        lambda: any(s.topic == topic for s in read_offset_syncs(hook, OFFSET_SYNCS, "A").decoded),
        90,
        f"MirrorMaker 2 wrote an offset sync of {topic}",
    )

    tombstone_key, _ = OffsetSync(topic, 0, 0, 0).encode()
    produce(
        own_sandbox.bootstrap("A"),
        OFFSET_SYNCS,
        [(tombstone_key, None, 0, None), (b"not an offset sync", b"\x00\x01garbage", 0, None)],
    )
    reading = read_offset_syncs(hook, OFFSET_SYNCS, "A", topics={topic})
    assert reading.tombstones >= 1
    assert len(reading.undecodable) == 1 and "does not decode" in reading.undecodable[0]
    assert reading.decoded and all(sync.topic == topic for sync in reading.decoded)

    watch = RecoveryWatch(
        cluster="A",
        kafka_config_id=conns["A"],
        topics=[],
        # Reading the offset-syncs topic of a sandbox other modules used before takes seconds on a loaded
        # machine; this test is about bad records in it, not about the default 2 s probe timeout.
        thresholds=HealthThresholds(
            probe_timeout_seconds=8.0, stability_window_seconds=15.0, heartbeat_stale_seconds=15.0
        ),
        active_kafka_config_id=conns["B"],
        replicated_topics={topic: f"B.{topic}"},
        offset_syncs_topic=OFFSET_SYNCS,
        offset_syncs_on_watched=True,
    )
    decision = watch_until(watch, time.time() + 120)
    assert watch.measure_problem is None, watch.measure_problem
    assert set(watch.lags) == {f"{topic}-0", f"{topic}-1"}, watch.lags
    assert all(lag is not None for lag in watch.lags.values()), watch.lags
    assert decision.is_recovered, decision.reason

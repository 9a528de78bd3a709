"""Down and recovered decisions against real faults of the sandbox (what both sensors and the trigger drive).

Runs in file order on a sandbox of its own: crash, hang, a 2 s blip, recovery after a crash, recovery
waiting for replication, and wipe (data loss) last.
"""

from __future__ import annotations

import time

import pytest
from akf_devtools.sandbox.kafka_io import create_topic, end_offsets, produce

from airflow_kafka_failover.domain.health.verdict import HealthThresholds
from airflow_kafka_failover.io.health_watch import DownWatch, RecoveryWatch, watch_until
from tests.integration.conftest import register_connections
from tests.integration.waiting import wait_for

DEFAULTS = HealthThresholds()
# A shorter stability window keeps the suite fast; the rule it tests is the same.
QUICK_RECOVERY = HealthThresholds(stability_window_seconds=10.0)


@pytest.fixture(scope="module")
def conns(own_sandbox):
    return register_connections(own_sandbox, "health")


@pytest.fixture(scope="module")
def topic(own_sandbox):
    name = "orders-health"
    create_topic(own_sandbox.bootstrap("A"), name, 3)
    produce(own_sandbox.bootstrap("A"), name, [(f"k{i}".encode(), b"v", None, None) for i in range(300)])
    return name


@pytest.fixture(scope="module")
def topic_on_b(own_sandbox):
    """A topic written on B (as while B is active), replicated to A as ``B.<name>``.

    First requested after the crash and hang of A: MirrorMaker 2 is restarted as after any outage of A, since
    its B->A flow (whose internal topics live on A) can stay stopped until then.
    """
    own_sandbox.restart_mirrormaker()
    name = "events-on-b"
    create_topic(own_sandbox.bootstrap("B"), name, 2)
    produce(own_sandbox.bootstrap("B"), name, [(None, b"e", i % 2, None) for i in range(50)])
    wait_for(
        lambda: sum((end_offsets(own_sandbox.bootstrap("A"), f"B.{name}") or {}).values()) >= 50,
        120,
        f"B.{name} replicated to A",
    )
    return name


def down_watch(conns, topic, thresholds=DEFAULTS) -> DownWatch:
    return DownWatch(
        cluster="A",
        kafka_config_id=conns["A"],
        topics=[topic],
        thresholds=thresholds,
        peer_kafka_config_id=conns["B"],
        heartbeats_topic="A.heartbeats",
    )


def _healthy_first(watch: DownWatch) -> None:
    decision = watch_until(watch, time.time() + 4)
    assert not decision.is_down, decision.reason


def test_crash_is_down(own_sandbox, conns, topic):
    watch = down_watch(conns, topic)
    _healthy_first(watch)
    fault_at = time.time()
    own_sandbox.fault("crash", "A")
    try:
        decision = watch_until(watch, fault_at + 45)
        assert decision.is_down, decision.reason
        assert not decision.split_suspected
        print(f"crash detected after {time.time() - fault_at:.1f} s: {decision.reason}")
    finally:
        own_sandbox.fault("restart", "A")


def test_hang_is_down(own_sandbox, conns, topic):
    watch = down_watch(conns, topic)
    _healthy_first(watch)
    fault_at = time.time()
    own_sandbox.fault("hang", "A")
    try:
        decision = watch_until(watch, fault_at + 45)
        assert decision.is_down, decision.reason
        print(f"hang detected after {time.time() - fault_at:.1f} s: {decision.reason}")
    finally:
        own_sandbox.fault("resume", "A")


def test_two_second_hang_is_not_down(own_sandbox, conns, topic):
    watch = down_watch(conns, topic)
    _healthy_first(watch)
    decisions = []
    own_sandbox.fault("hang", "A")
    time.sleep(2.0)
    own_sandbox.fault("resume", "A")
    last = watch_until(watch, time.time() + 15, on_probe=decisions.append)
    assert not any(d.is_down for d in [*decisions, last]), [d.reason for d in decisions if d.is_down]


def test_recovered_only_after_the_stability_window(own_sandbox, conns, topic, topic_on_b):
    recorded = {f"{topic}-{p}": high for p, high in end_offsets(own_sandbox.bootstrap("A"), topic).items()}
    own_sandbox.fault("crash", "A")
    time.sleep(2)
    own_sandbox.fault("restart", "A")
    restarted_at = time.time()
    watch = RecoveryWatch(
        cluster="A",
        kafka_config_id=conns["A"],
        topics=[topic],
        thresholds=QUICK_RECOVERY,
        active_kafka_config_id=conns["B"],
        replicated_topics={topic_on_b: f"B.{topic_on_b}"},
        offset_syncs_topic="mm2-offset-syncs.B.internal",
        offset_syncs_on_watched=True,
        recorded_high_watermarks=recorded,
    )
    decisions = []
    decision = watch_until(watch, restarted_at + 60, on_probe=decisions.append)
    assert decision.is_recovered, decision.reason
    assert time.time() - restarted_at >= QUICK_RECOVERY.stability_window_seconds
    assert not decisions[0].is_recovered and "stability" in decisions[0].reason


def test_recovered_waits_until_replication_toward_it_caught_up(own_sandbox, conns):
    own_sandbox.restart_mirrormaker()  # after the previous test's crash of A (see topic_on_b)
    local = "orders-on-b"
    create_topic(own_sandbox.bootstrap("B"), local, 2)
    produce(own_sandbox.bootstrap("B"), local, [(None, b"x", i % 2, None) for i in range(100)])
    wait_for(
        lambda: sum((end_offsets(own_sandbox.bootstrap("A"), f"B.{local}") or {}).values()) >= 100,
        120,
        "first records replicated B->A",
    )
    own_sandbox.stop_mirrormaker()
    produce(own_sandbox.bootstrap("B"), local, [(None, b"y", i % 2, None) for i in range(500)])
    watch = RecoveryWatch(
        cluster="A",
        kafka_config_id=conns["A"],
        topics=[],
        thresholds=QUICK_RECOVERY,
        active_kafka_config_id=conns["B"],
        replicated_topics={local: f"B.{local}"},
        offset_syncs_topic="mm2-offset-syncs.B.internal",
        offset_syncs_on_watched=True,
    )
    waiting = watch_until(watch, time.time() + QUICK_RECOVERY.stability_window_seconds + 6)
    assert not waiting.is_recovered
    assert any("lag" in item or "B.orders" in item or local in item for item in waiting.waiting_on), (
        waiting.waiting_on
    )
    own_sandbox.start_mirrormaker()
    decision = watch_until(watch, time.time() + 90)
    assert decision.is_recovered, decision.reason
    assert sum(end_offsets(own_sandbox.bootstrap("A"), f"B.{local}").values()) == 600


def test_wiped_cluster_is_refused_with_data_loss(own_sandbox, conns, topic):
    highs = end_offsets(own_sandbox.bootstrap("A"), topic)
    recorded = {f"{topic}-{p}": high for p, high in highs.items()}
    own_sandbox.fault("wipe", "A")
    watch = RecoveryWatch(
        cluster="A",
        kafka_config_id=conns["A"],
        topics=[],
        thresholds=QUICK_RECOVERY,
        active_kafka_config_id=conns["B"],
        replicated_topics={},
        offset_syncs_topic="mm2-offset-syncs.B.internal",
        offset_syncs_on_watched=True,
        recorded_high_watermarks=recorded,
    )
    decision = watch_until(watch, time.time() + 30)
    assert decision.data_loss == recorded
    message = str(decision.data_loss_error())
    assert "refused" in message and f"{topic}-0" in message


DOWN_DAG = """
import datetime
from airflow.sdk import DAG
from airflow_kafka_failover.sensors.cluster_health import KafkaClusterDownSensor

with DAG("{dag_id}", schedule=None, start_date=datetime.datetime(2026, 1, 1)) as dag:
    KafkaClusterDownSensor(
        task_id="a_down",
        kafka_config_id="{conn_a}",
        cluster_alias="A",
        peer_kafka_config_id="{conn_b}",
        deferrable={deferrable},
        mode="poke",
        timeout=120,
    )
"""


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "poke"])
def test_down_sensor_in_a_dag_run(own_sandbox, conns, airflow_home, deferrable):
    from tests.integration.conftest import run_dag_test

    if own_sandbox.status()["processes"]["broker-A"]["running"]:
        own_sandbox.fault("crash", "A")
    dag_id = f"down_{'deferrable' if deferrable else 'poke'}"
    source = DOWN_DAG.format(dag_id=dag_id, conn_a=conns["A"], conn_b=conns["B"], deferrable=deferrable)
    state, output = run_dag_test(airflow_home, source, dag_id)
    assert state == "success", output[-4000:]
    assert "is down by its probes" in output
    assert ("Deferring" in output) == deferrable

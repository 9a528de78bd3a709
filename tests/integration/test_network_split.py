"""A network split between Airflow and cluster A while MirrorMaker 2 still replicates: never a failover.

Cluster A gets a second listener whose advertised address is a TCP proxy; Airflow's connection goes
through the proxy, MirrorMaker 2 uses A's own listener. Cutting the proxy cuts only Airflow's path.
"""

from __future__ import annotations

import time
import uuid

import pytest
from akf_devtools.sandbox.loopback import TcpProxy, free_ports

from airflow_kafka_failover.domain.health.verdict import HealthThresholds
from airflow_kafka_failover.io.health_watch import DownWatch, watch_until
from tests.integration.conftest import register_connections, start_sandbox, stop_sandbox


@pytest.fixture(scope="module")
def split_sandbox():
    proxy_port = free_ports(1)[0]
    sandbox = start_sandbox(f"split-{uuid.uuid4().hex[:6]}", extra_listeners={"A": {"PROXIED": proxy_port}})
    proxy = TcpProxy(
        target_port=sandbox.broker("A").extra_listeners["PROXIED"][0], listen_port=proxy_port
    ).start()
    yield sandbox, proxy
    proxy.stop()
    stop_sandbox(sandbox)


def test_cut_path_with_live_heartbeats_is_a_split_not_down(split_sandbox):
    sandbox, proxy = split_sandbox
    conns = register_connections(sandbox, "split", overrides={"A": f"127.0.0.1:{proxy.listen_port}"})
    watch = DownWatch(
        cluster="A",
        kafka_config_id=conns["A"],
        topics=[],
        thresholds=HealthThresholds(),
        peer_kafka_config_id=conns["B"],
        heartbeats_topic="A.heartbeats",
    )
    assert not watch_until(watch, time.time() + 4).is_down
    proxy.cut()
    decisions = []
    last = watch_until(watch, time.time() + 25, on_probe=decisions.append)
    decisions.append(last)
    assert watch.history[-1].failed, "the probes must fail through the cut proxy"
    assert not any(d.is_down for d in decisions), [d.reason for d in decisions if d.is_down]
    assert last.split_suspected, last.reason
    assert "split" in last.reason.lower()
    # Through the proxy again, A is healthy: the split healed without a switch.
    proxy.restore()
    assert not watch_until(watch, time.time() + 4).is_down


def test_sensor_logs_a_split_warning(split_sandbox, capfd):
    from airflow_kafka_failover.sensors.cluster_health import KafkaClusterDownSensor

    sandbox, proxy = split_sandbox
    conns = register_connections(sandbox, "splitsensor", overrides={"A": f"127.0.0.1:{proxy.listen_port}"})
    sensor = KafkaClusterDownSensor(
        task_id="down",
        kafka_config_id=conns["A"],
        cluster_alias="A",
        peer_kafka_config_id=conns["B"],
        deferrable=False,
    )
    proxy.cut()
    try:
        assert sensor.poke(context={}) is False
    finally:
        proxy.restore()
    # Airflow 3 task loggers write through structlog to the console, not through stdlib logging.
    output = "".join(capfd.readouterr())
    warnings = [
        line for line in output.splitlines() if "warning" in line and "Network split suspected" in line
    ]
    assert warnings, output[-3000:]

"""ClusterHealthTrigger and the health sensors without a cluster: serialization, bad input, events."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest
from akf_devtools.sandbox.loopback import free_ports

from airflow_kafka_failover.core.exceptions import ConfigError, DataLossError
from airflow_kafka_failover.sensors.cluster_health import (
    KafkaClusterDownSensor,
    KafkaClusterRecoveredSensor,
)
from airflow_kafka_failover.triggers.cluster_health import ClusterHealthTrigger


@pytest.fixture
def dead_cluster_conn(monkeypatch) -> str:
    """A kafka connection to a loopback port where nothing listens."""
    port = free_ports(1)[0]
    monkeypatch.setenv(
        "AIRFLOW_CONN_DEAD_KAFKA",
        json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": f"127.0.0.1:{port}"}}),
    )
    return "dead_kafka"


def _trigger(**overrides) -> ClusterHealthTrigger:
    kwargs = {
        "kind": "down",
        "watch_kwargs": {
            "cluster": "A",
            "kafka_config_id": "dead_kafka",
            "topics": ["orders"],
            "canary_topic": None,
            "peer_kafka_config_id": None,
            "heartbeats_topic": None,
            "require_corroboration": False,
        },
        "thresholds": {
            "probe_interval_seconds": 0.5,
            "probe_timeout_seconds": 0.5,
            "min_down_seconds": 1.0,
            "heartbeat_stale_seconds": 2.0,
            "stability_window_seconds": 2.0,
        },
        "deadline": None,
        "state": {
            "history": [
                {
                    "cluster": "A",
                    "at": 1.0,
                    "reachable": True,
                    "latency_s": 0.01,
                    "broker_count": 1,
                    "leaderless_partitions": [],
                    "under_min_isr_partitions": [],
                    "canary_ok": None,
                    "error": None,
                }
            ]
        },
    }
    kwargs.update(overrides)
    return ClusterHealthTrigger(**kwargs)


def test_serialize_round_trips_init():
    trigger = _trigger(deadline=1234.5)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_kafka_failover.triggers.cluster_health.ClusterHealthTrigger"
    json.dumps(kwargs)  # only JSON types cross the triggerer boundary
    again = ClusterHealthTrigger(**kwargs)
    assert again.serialize() == (classpath, kwargs)


@pytest.mark.slow
def test_trigger_on_an_unreachable_cluster_yields_one_down_event(dead_cluster_conn):
    async def first_event():
        return await anext(_trigger().run())

    started = time.monotonic()
    event = asyncio.run(asyncio.wait_for(first_event(), timeout=30))
    assert event.payload["status"] == "success"
    assert event.payload["decision"]["is_down"] is True
    assert time.monotonic() - started < 15
    history = event.payload["state"]["history"]
    assert len(history) >= 3 and all(not probe["reachable"] for probe in history[1:])


@pytest.mark.slow
def test_a_down_decision_sends_its_detection_time(dead_cluster_conn, monkeypatch):
    from airflow_kafka_failover.io import metrics

    sent = []
    monkeypatch.setattr(metrics, "_send", lambda *metric: sent.append(metric))
    event = asyncio.run(asyncio.wait_for(anext(_trigger().run()), timeout=30))
    sensor = KafkaClusterDownSensor(
        task_id="d", kafka_config_id="kafka_a", cluster_alias="A", require_corroboration=False
    )

    class TaskInstance:
        def xcom_push(self, key, value):
            self.pushed = (key, value)

    sensor.execute_complete({"ti": TaskInstance()}, event.payload)
    [(kind, name, value, tags)] = sent
    assert (kind, name, tags) == ("timing", "down_detection", {"connection": "kafka_a", "cluster": "A"})
    failing_since = event.payload["decision"]["verdict"]["failing_since"]
    assert failing_since is not None and 0 < value.total_seconds() < 60


@pytest.mark.slow
def test_trigger_deadline_yields_timeout(dead_cluster_conn):
    trigger = _trigger(
        kind="recovered",
        deadline=time.time() + 2,
        watch_kwargs={
            "cluster": "A",
            "kafka_config_id": "dead_kafka",
            "topics": [],
            "canary_topic": None,
            "active_kafka_config_id": "dead_kafka",
            "replicated_topics": {},
            "offset_syncs_topic": "x",
            "offset_syncs_on_watched": True,
            "recorded_high_watermarks": {},
        },
    )
    event = asyncio.run(asyncio.wait_for(anext(trigger.run()), timeout=30))
    assert event.payload["status"] == "timeout"
    assert event.payload["message"].startswith("gave up waiting")


def test_an_exception_in_the_trigger_becomes_one_error_event_and_the_sensor_raises_its_message(
    dead_cluster_conn,
):
    # A history of another cluster makes the watch's first decision raise inside the trigger's loop.
    state = _trigger().state
    state["history"][0]["cluster"] = "B"
    event = asyncio.run(asyncio.wait_for(anext(_trigger(state=state).run()), timeout=30))
    assert event.payload == {
        "status": "error",
        "message": "ValueError: probe history mixes clusters ['A', 'B']; judge one cluster at a time",
    }
    sensor = KafkaClusterDownSensor(
        task_id="d", kafka_config_id="x", cluster_alias="A", require_corroboration=False
    )
    with pytest.raises(RuntimeError, match=r"down health watch failed: ValueError: probe history mixes"):
        sensor.execute_complete({}, event.payload)


def test_an_exception_without_text_is_named_by_its_type_in_the_error_event(monkeypatch):
    async def fails_silently(self):
        raise TimeoutError()

    monkeypatch.setattr(ClusterHealthTrigger, "_watch_until_decided", fails_silently)
    event = asyncio.run(asyncio.wait_for(anext(_trigger().run()), timeout=30))
    assert event.payload == {"status": "error", "message": "TimeoutError"}


def test_the_sensor_checks_once_then_defers_a_trigger_that_holds_only_json(dead_cluster_conn):
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
    from airflow_kafka_failover.version_compat import TaskDeferred

    sensor = KafkaClusterDownSensor(
        task_id="down",
        kafka_config_id=dead_cluster_conn,
        cluster_alias="A",
        require_corroboration=False,
        deferrable=True,
        timeout=60,
    )
    started = time.time()
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context={})
    trigger = deferred.value.trigger
    assert isinstance(trigger, ClusterHealthTrigger) and deferred.value.method_name == "execute_complete"
    _, kwargs = trigger.serialize()
    json.dumps(kwargs)
    assert kwargs["kind"] == "down" and started + 60 <= kwargs["deadline"] <= time.time() + 60
    # The one check before deferring: a single refused probe, carried to the trigger.
    [probe] = kwargs["state"]["history"]
    assert probe["reachable"] is False and "connection refused" in probe["error"]
    assert not any(isinstance(value, KafkaClusterHook) for value in vars(trigger).values())


def test_an_unknown_watch_kind_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown watch kind 'up': use one of 'down', 'recovered'"):
        _trigger(kind="up")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kafka_config_id": "no_such_conn"}, "Airflow connection 'no_such_conn' does not exist"),
        (
            {"thresholds": {"probe_interval_seconds": 0}},
            "probe_interval_seconds must be a positive number of seconds, got 0",
        ),
        ({"thresholds": {"failure_threshold": -1}}, "failure_threshold must be an integer >= 1, got -1"),
        (
            {"thresholds": {"min_down_seconds": -6}},
            "min_down_seconds must be a positive number of seconds, got -6",
        ),
        ({"thresholds": {"probe_intervall": 2}}, "unknown health threshold key(s) ['probe_intervall']"),
        (
            {"peer_kafka_config_id": None, "require_corroboration": True},
            "require_corroboration=True needs peer_kafka_config_id",
        ),
    ],
)
def test_down_sensor_bad_input_fails_before_waiting(dead_cluster_conn, kwargs, message):
    params = {
        "task_id": "down",
        "kafka_config_id": dead_cluster_conn,
        "cluster_alias": "A",
        "deferrable": True,
        **kwargs,
    }
    sensor = KafkaClusterDownSensor(**params)
    started = time.monotonic()
    with pytest.raises(ConfigError) as excinfo:
        sensor.execute(context={})
    assert message in str(excinfo.value)
    assert time.monotonic() - started < 5


def test_the_sensor_takes_every_threshold_name_its_model_takes(dead_cluster_conn, monkeypatch):
    """The sensors keep no list of threshold names of their own: a threshold the model gains is taken as
    the model takes it, and the model alone refuses a name it does not know."""
    from airflow_kafka_failover.domain.health.verdict import HealthThresholds
    from airflow_kafka_failover.triggers import cluster_health

    class WithOneMore(HealthThresholds):
        quorum_wait_seconds: float = 1.0

    monkeypatch.setattr(cluster_health, "HealthThresholds", WithOneMore)
    sensor = KafkaClusterDownSensor(
        task_id="down",
        kafka_config_id=dead_cluster_conn,
        cluster_alias="A",
        require_corroboration=False,
        thresholds={"quorum_wait_seconds": 4.0, "probe_interval_seconds": 1.0},
    )
    watch = sensor._build()
    assert (watch.thresholds.quorum_wait_seconds, watch.thresholds.probe_interval_seconds) == (4.0, 1.0)


def test_connection_without_bootstrap_servers_is_named(monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_NO_BOOTSTRAP", json.dumps({"conn_type": "kafka", "extra": {"group.id": "g"}})
    )
    sensor = KafkaClusterDownSensor(
        task_id="down",
        kafka_config_id="no_bootstrap",
        cluster_alias="A",
        require_corroboration=False,
        deferrable=True,
    )
    with pytest.raises(ConfigError, match="'no_bootstrap' has no 'bootstrap.servers' in its extra"):
        sensor.execute(context={})


def test_connection_of_the_wrong_type_is_named(monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_AN_HTTP_CONN", json.dumps({"conn_type": "http", "host": "example.invalid"})
    )
    sensor = KafkaClusterDownSensor(
        task_id="down",
        kafka_config_id="an_http_conn",
        cluster_alias="A",
        require_corroboration=False,
        deferrable=True,
    )
    with pytest.raises(ConfigError, match="'an_http_conn' is of type 'http', not 'kafka'"):
        sensor.execute(context={})


def test_recovered_sensor_rejects_bad_recorded_watermarks(dead_cluster_conn):
    sensor = KafkaClusterRecoveredSensor(
        task_id="rec",
        kafka_config_id=dead_cluster_conn,
        cluster_alias="A",
        active_kafka_config_id=dead_cluster_conn,
        active_alias="B",
        replicated_topics=["orders"],
        recorded_high_watermarks={"orders-0": -5},
        deferrable=True,
    )
    with pytest.raises(ConfigError, match=r"recorded_high_watermarks .* bad: \{'orders-0': -5\}"):
        sensor.execute(context={})


def test_recovered_sensor_rejects_unknown_policy(dead_cluster_conn):
    sensor = KafkaClusterRecoveredSensor(
        task_id="rec",
        kafka_config_id=dead_cluster_conn,
        cluster_alias="A",
        active_kafka_config_id=dead_cluster_conn,
        active_alias="B",
        replication_policy="mirror",
        deferrable=True,
    )
    with pytest.raises(ConfigError, match="mirror"):
        sensor.execute(context={})


def test_event_handling_timeout_soft_fail_and_data_loss():
    from airflow_kafka_failover.version_compat import AirflowSensorTimeout, AirflowSkipException

    sensor = KafkaClusterDownSensor(
        task_id="d", kafka_config_id="x", cluster_alias="A", require_corroboration=False
    )
    timeout_event = {"status": "timeout", "message": "gave up waiting: not down", "state": {"history": []}}
    with pytest.raises(AirflowSensorTimeout, match="gave up waiting"):
        sensor.execute_complete({}, timeout_event)
    sensor.soft_fail = True
    with pytest.raises(AirflowSkipException):
        sensor.execute_complete({}, timeout_event)
    loss = {
        "status": "error",
        "message": "DATA LOSS on cluster A, failback refused",
        "state": {"history": []},
        "decision": {},
    }
    with pytest.raises(DataLossError, match="failback refused"):
        sensor.execute_complete({}, loss)


@pytest.mark.slow
def test_importing_the_sensors_stays_light():
    """DAG files import these modules at parse time: confluent-kafka must not be imported by them."""
    import subprocess
    import sys

    code = (
        "import sys; import airflow_kafka_failover.sensors.cluster_health; "
        "print(sorted(m for m in sys.modules if m.startswith(('confluent_kafka', 'pyspark'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, check=True
    )
    assert result.stdout.strip().endswith("[]"), result.stdout

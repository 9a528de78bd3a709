"""How the switch DAGs are woken: the DAG shape under ``switch.wake`` continuous and event, and the sensor
of a run woken by the verdict event."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

try:
    from airflow.serialization.serialized_objects import DagSerialization
except ImportError:  # Airflow before 3.3 names it SerializedDAG
    from airflow.serialization.serialized_objects import SerializedDAG as DagSerialization
from airflow.triggers.base import BaseEventTrigger

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.sensors.switch_verdict import verdict_event
from airflow_kafka_failover.triggers.verdict_change import ClusterVerdictTrigger
from airflow_kafka_failover.workflows.factory import build_dags

SWITCH_TASKS = {
    "gate",
    "check_target",
    "fence_and_stop",
    "plan",
    "submit",
    "wait_first_batch",
    "commit",
}


def pair_config(tmp_path: Path, **switch: Any) -> Path:
    pair = {
        "clusters": {"A": {"connection": "unit_a"}, "B": {"connection": "unit_b"}},
        "primary": "A",
        "topics": ["orders"],
        "switch": switch,
    }
    path = tmp_path / "pairs.yaml"
    path.write_text(yaml.safe_dump({"pairs": {"orders": pair}}))
    return path


def _watched_assets(dag) -> list[Any]:
    return list(dag.timetable.asset_condition.objects)


@pytest.mark.parametrize(
    ("kind", "sensor_id", "watch"),
    [("failover", "wait_for_down", "down"), ("failback", "wait_for_recovery", "recovered")],
)
def test_event_mode_schedules_each_switch_dag_on_its_verdict_asset(tmp_path, kind, sensor_id, watch):
    dags = build_dags(pair_config(tmp_path, wake="event"))
    dag = dags[f"kafka_failover_orders_{kind}"]
    assert type(dag.timetable).__name__ == "AssetTriggeredTimetable"
    [asset] = _watched_assets(dag)
    assert asset.name.startswith(f"kafka_failover.cluster.unit_a.{watch}_verdict.")
    assert asset.uri.startswith(f"x-kafka-failover://cluster/unit_a/{watch}-verdict/")
    [watcher] = asset.watchers
    trigger = watcher.trigger
    assert isinstance(trigger, ClusterVerdictTrigger) and trigger.kind == watch
    sensor = dag.get_task(sensor_id)
    # The trigger watches exactly what the sensor watches: one watch, two places it runs.
    assert trigger.watch_kwargs == {
        **sensor.watch_kwargs(),
        "topics": sorted(sensor.watch_kwargs()["topics"]),
    }
    assert sensor.verdict_asset_name == asset.name
    assert {t.task_id for t in dag.tasks} == SWITCH_TASKS | {sensor_id}
    assert dag.get_task(sensor_id).upstream_task_ids == {"gate"}
    assert dag.get_task("check_target").upstream_task_ids == {sensor_id}
    DagSerialization.to_dict(dag)  # what the dag-processor stores must serialize


def test_the_verdict_trigger_is_the_same_for_every_parse(tmp_path):
    path = pair_config(tmp_path, wake="event")

    def trigger_hash() -> int:
        [asset] = _watched_assets(build_dags(path)["kafka_failover_orders_failover"])
        return BaseEventTrigger.hash(*asset.watchers[0].trigger.serialize())

    # A different hash per parse would make the triggerer start a new watcher on every parse.
    assert trigger_hash() == trigger_hash()


def test_continuous_mode_is_the_default_and_has_no_watcher(tmp_path):
    dags = build_dags(pair_config(tmp_path))
    for kind, sensor_id in (("failover", "wait_for_down"), ("failback", "wait_for_recovery")):
        dag = dags[f"kafka_failover_orders_{kind}"]
        assert type(dag.timetable).__name__ == "ContinuousTimetable"
        assert dag.get_task(sensor_id).verdict_asset_name is None
        assert {t.task_id for t in dag.tasks} == SWITCH_TASKS | {sensor_id}


def test_event_mode_when_not_automatic_is_manual_only(tmp_path):
    dag = build_dags(pair_config(tmp_path, wake="event", automatic=False))["kafka_failover_orders_failover"]
    assert type(dag.timetable).__name__ == "NullTimetable"
    assert dag.get_task("wait_for_down").verdict_asset_name is None


def test_an_unknown_wake_mode_names_the_choices(tmp_path):
    with pytest.raises(ConfigError, match=r"wake.*(continuous|event)"):
        build_dags(pair_config(tmp_path, wake="sometimes"))


# ---- the sensor of a run woken by the verdict event -------------------------------------------------


def _context(payloads: list[dict[str, Any]], asset_name: str, **params: Any) -> dict[str, Any]:
    """A task's context with the asset events that woke its run, in the Task SDK's own mapping."""
    from airflow.sdk.execution_time.context import TriggeringAssetEventsAccessor

    asset = SimpleNamespace(name=asset_name, uri="x-kafka-failover://cluster/unit_a/down-verdict/test")
    events = [
        SimpleNamespace(asset=asset, source_aliases=[], extra={"from_trigger": True, "payload": payload})
        for payload in payloads
    ]
    return {"params": params, "triggering_asset_events": TriggeringAssetEventsAccessor.build(events)}


def _down_payload(status: str = "success") -> dict[str, Any]:
    probe = {
        "cluster": "A",
        "at": 1.0,
        "reachable": False,
        "latency_s": None,
        "broker_count": 0,
        "leaderless_partitions": [],
        "under_min_isr_partitions": [],
        "canary_ok": None,
        "error": "KafkaException: timed out",
    }
    return {"status": status, "kind": "down", "message": "A is down", "state": {"history": [probe]}}


def _sensor(tmp_path: Path):
    dag = build_dags(pair_config(tmp_path, wake="event"))["kafka_failover_orders_failover"]
    return dag.get_task("wait_for_down")


def test_the_woken_sensor_reads_the_newest_verdict_event(tmp_path):
    sensor = _sensor(tmp_path)
    older, newest = _down_payload(), _down_payload()
    newest["state"]["history"][0]["at"] = 2.0
    context = _context([older, newest], sensor.verdict_asset_name)
    assert verdict_event(context, sensor.verdict_asset_name) == newest
    assert sensor.woken_verdict(context) == newest


def test_a_run_not_woken_by_the_event_watches_afresh(tmp_path):
    sensor = _sensor(tmp_path)
    assert sensor.woken_verdict({"params": {}, "triggering_asset_events": {}}) is None
    other = _context([_down_payload()], sensor.verdict_asset_name)
    assert verdict_event(other, sensor.verdict_asset_name.replace("down", "recovered")) is None
    assert verdict_event(other, None) is None
    assert sensor.woken_verdict(_context([_down_payload("error")], sensor.verdict_asset_name)) is None


@pytest.mark.parametrize(("reachable", "confirmed"), [(False, True), (True, False)])
def test_a_new_probe_confirms_the_woken_down_verdict_or_sends_the_sensor_back_to_watching(
    tmp_path, reachable, confirmed
):
    from airflow_kafka_failover.domain.health.evidence import ProbeResult

    sensor = _sensor(tmp_path)
    woken = _down_payload()
    probe = {
        **woken["state"]["history"][0],
        "at": 5.0,
        "reachable": reachable,
        "broker_count": int(reachable),
    }
    watch = SimpleNamespace(history=[ProbeResult.model_validate(probe)], state=lambda: {"history": [probe]})
    event = sensor._confirm(woken, watch)
    if confirmed:
        assert event["status"] == "success" and event["state"] == {"history": [probe]}
        assert event["message"] == "A is down (confirmed by a new probe)"
    else:
        assert event is None


def test_a_run_woken_by_a_failed_watch_fails_with_the_triggers_message(tmp_path):
    sensor = _sensor(tmp_path)
    payload = {
        "status": "error",
        "kind": "down",
        "message": "ConfigError: connection 'unit_a' is not defined",
    }
    with pytest.raises(
        RuntimeError, match=r"down watch in the triggerer failed: ConfigError: connection 'unit_a'"
    ):
        sensor.execute(_context([payload], sensor.verdict_asset_name))


def test_force_and_dry_run_still_skip_the_wait_in_event_mode(tmp_path):
    sensor = _sensor(tmp_path)
    error = {"status": "error", "kind": "down", "message": "not looked at"}
    assert sensor.execute(_context([error], sensor.verdict_asset_name, force=True)) is None
    assert sensor.execute(_context([], sensor.verdict_asset_name, dry_run=True)) is None


@pytest.mark.slow
def test_the_woken_sensor_confirms_the_verdict_with_one_probe_instead_of_waiting(tmp_path, monkeypatch):
    import json
    import time

    from akf_devtools.sandbox.loopback import free_ports

    for name, port in zip(("UNIT_A", "UNIT_B"), free_ports(2), strict=True):
        conn = {"conn_type": "kafka", "extra": {"bootstrap.servers": f"127.0.0.1:{port}"}}
        monkeypatch.setenv(f"AIRFLOW_CONN_{name}", json.dumps(conn))
    sensor = _sensor(tmp_path)
    payload = _down_payload()
    now = time.time()
    # The trigger's evidence: 3 failed probes over 8 s, which ended 12 s ago (the run took that long to
    # start). After that gap a fresh verdict would start counting again; the new probe confirms instead.
    first = payload["state"]["history"][0]
    payload["state"]["history"] = [{**first, "at": now - at} for at in (20, 16, 12)]
    payload["decision"] = {"kind": "down", "is_down": True, "verdict": {"failing_since": now - 20}}
    pushed = {}
    ti = SimpleNamespace(xcom_push=lambda key, value: pushed.update({key: value}))
    context = {**_context([payload], sensor.verdict_asset_name), "ti": ti}
    started = time.monotonic()
    decision = sensor.execute(context)  # no defer: it would raise TaskDeferred
    assert decision["is_down"] is True
    assert time.monotonic() - started < 20
    history = pushed["health_evidence"]["history"]
    assert history[-1]["at"] > now - 1 and not history[-1]["reachable"]


@pytest.mark.parametrize("wake", ["event", "continuous"])
def test_a_runs_later_steps_go_before_earlier_steps_of_other_runs(tmp_path, wake):
    """A mass failover finishes the pairs' runs one after another instead of moving all of them a step at a
    time: every task of the start and switch DAGs, the verdict sensor built apart included, is weighted by
    its upstream tasks (as the scheduler reads the serialized DAG)."""
    from airflow.task.priority_strategy import _UpstreamPriorityWeightStrategy

    dags = build_dags(pair_config(tmp_path, wake=wake))
    for kind in ("start", "failover", "failback"):
        dag = DagSerialization.from_dict(DagSerialization.to_dict(dags[f"kafka_failover_orders_{kind}"]))
        strategies = {task.task_id: type(task.weight_rule) for task in dag.tasks}
        assert set(strategies.values()) == {_UpstreamPriorityWeightStrategy}, (kind, strategies)
    assert SWITCH_TASKS | {"wait_for_down"} <= set(dags["kafka_failover_orders_failover"].task_ids)

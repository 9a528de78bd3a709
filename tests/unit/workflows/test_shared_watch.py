"""A fleet's switch DAGs share one verdict watch per cluster and threshold set (``switch.wake: event``)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from airflow.triggers.base import BaseEventTrigger

from airflow_kafka_failover.workflows.factory import DAG_KINDS, build_dags
from airflow_kafka_failover.workflows.shared_watch import share_watches

QUICK = {"probe_interval_seconds": 1, "failure_threshold": 3, "stability_window_seconds": 6}


def fleet_config(tmp_path: Path, pairs: dict[str, dict[str, Any]]) -> Path:
    """Pairs over the connections ``unit_a`` and ``unit_b`` unless a pair names its own."""
    body = {}
    for name, extra in pairs.items():
        body[name] = {
            "clusters": {"A": {"connection": "unit_a"}, "B": {"connection": "unit_b"}},
            "primary": "A",
            "topics": [f"orders-{name}"],
            "switch": {"wake": "event"},
            **extra,
        }
    path = tmp_path / "pairs.yaml"
    path.write_text(yaml.safe_dump({"pairs": body}))
    return path


def _asset(dag):
    [asset] = list(dag.timetable.asset_condition.objects)
    return asset


def _trigger_hash(asset) -> int:
    [watcher] = asset.watchers
    return BaseEventTrigger.hash(*watcher.trigger.serialize())


def test_pairs_on_the_same_cluster_share_one_asset_and_one_trigger(tmp_path):
    dags = build_dags(fleet_config(tmp_path, {f"p{i}": {} for i in range(5)}))
    for kind, sensor_id in (("failover", "wait_for_down"), ("failback", "wait_for_recovery")):
        assets = [_asset(dags[f"kafka_failover_p{i}_{kind}"]) for i in range(5)]
        assert len({(a.name, a.uri) for a in assets}) == 1
        # The triggerer knows a trigger by its hash: one hash, one watch for the five pairs.
        assert len({_trigger_hash(a) for a in assets}) == 1
        trigger = assets[0].watchers[0].trigger
        if kind == "failover":
            # The five pairs' topics on A (each pair also reads back the copy of its topic from B).
            assert trigger.watch_kwargs["topics"] == sorted(
                t for i in range(5) for t in (f"orders-p{i}", f"B.orders-p{i}")
            )
        else:
            assert sorted(trigger.watch_kwargs["replicated_topics"]) == [f"orders-p{i}" for i in range(5)]
        for i in range(5):
            sensor = dags[f"kafka_failover_p{i}_{kind}"].get_task(sensor_id)
            assert sensor.verdict_asset_name == assets[0].name
            # Each pair's own sensor still probes only its own topics when it confirms the verdict.
            assert sorted(sensor.watch_kwargs()["topics"]) == [f"B.orders-p{i}", f"orders-p{i}"]


def test_pairs_with_other_thresholds_or_another_primary_get_a_watch_of_their_own(tmp_path):
    dags = build_dags(
        fleet_config(
            tmp_path,
            {
                "quick1": {"health": QUICK},
                "quick2": {"health": QUICK},
                "default": {},
                "other_primary": {"clusters": {"A": {"connection": "unit_c"}, "B": {"connection": "unit_b"}}},
            },
        )
    )
    names = {
        pair: _asset(dags[f"kafka_failover_{pair}_failover"]).name
        for pair in ("quick1", "quick2", "default", "other_primary")
    }
    assert names["quick1"] == names["quick2"]
    assert len(set(names.values())) == 3
    assert names["other_primary"].startswith("kafka_failover.cluster.unit_c.down_verdict.")


def test_the_asset_stays_when_a_pair_joins_and_the_trigger_follows(tmp_path):
    one = build_dags(fleet_config(tmp_path, {"p0": {}}))
    two = build_dags(fleet_config(tmp_path, {"p0": {}, "p1": {}}))
    before, after = _asset(one["kafka_failover_p0_failover"]), _asset(two["kafka_failover_p0_failover"])
    assert (before.name, before.uri) == (after.name, after.uri)
    assert _trigger_hash(before) != _trigger_hash(after)
    assert _trigger_hash(after) == _trigger_hash(
        _asset(build_dags(fleet_config(tmp_path, {"p1": {}, "p0": {}}))["kafka_failover_p0_failover"])
    )


def test_a_topic_copied_under_another_name_is_not_merged():
    shared = {"cluster": "A", "kafka_config_id": "a", "topics": [], "replicated_topics": {}}
    watches = share_watches(
        [
            ("x", "failback", {**shared, "replicated_topics": {"orders": "B.orders"}}, {}),
            ("y", "failback", {**shared, "replicated_topics": {"orders": "orders"}}, {}),
            ("z", "failback", {**shared, "replicated_topics": {"payments": "B.payments"}}, {}),
        ]
    )
    assert watches[("x", "failback")] is watches[("z", "failback")]
    assert watches[("y", "failback")] is not watches[("x", "failback")]
    assert watches[("y", "failback")].asset_name != watches[("x", "failback")].asset_name
    assert watches[("x", "failback")].watch_kwargs()["replicated_topics"] == {
        "orders": "B.orders",
        "payments": "B.payments",
    }


def test_continuous_pairs_beside_event_pairs_keep_their_own_sensor_watch(tmp_path):
    dags = build_dags(fleet_config(tmp_path, {"ev": {}, "cont": {"switch": {"wake": "continuous"}}}))
    assert type(dags["kafka_failover_cont_failover"].timetable).__name__ == "ContinuousTimetable"
    assert dags["kafka_failover_cont_failover"].get_task("wait_for_down").verdict_asset_name is None
    assert _asset(dags["kafka_failover_ev_failover"]).watchers[0].trigger.watch_kwargs["topics"] == [
        "B.orders-ev",
        "orders-ev",
    ]


@pytest.mark.slow  # migrates a metadata DB and writes the fleet's DAGs to it with Airflow's CLI (about 40 s)
def test_airflow_stores_one_trigger_per_cluster_and_kind_for_a_fleet(tmp_path):
    """What the dag-processor writes for five event-mode pairs on A: two verdict assets, two trigger rows."""
    from akf_devtools.sandbox.airflow_env import _metadata_db, airflow_env, prepare_airflow_home

    home = prepare_airflow_home(tmp_path / "home")
    config = fleet_config(tmp_path, {f"p{i}": {} for i in range(5)})
    shutil.copy(Path(__file__).resolve().parents[3] / "dags" / "kafka_failover.py", home / "dags")
    env = airflow_env(home, AKF_PAIRS_CONFIG=str(config), AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False")
    airflow = Path(sys.executable).with_name("airflow")
    for _ in range(2):  # the second write finds the assets active (scheduled by unpaused DAGs)
        done = subprocess.run(
            [str(airflow), "dags", "reserialize"], env=env, capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    _config, database = _metadata_db(home)
    with sqlite3.connect(database) as db:
        triggers = db.execute("SELECT classpath FROM trigger").fetchall()
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        watchers = "asset_watcher" if "asset_watcher" in tables else "asset_trigger"  # Airflow 3.1's name
        watched = db.execute(
            "SELECT asset.name, COUNT(DISTINCT dag_schedule_asset_reference.dag_id) FROM asset "
            f"JOIN {watchers} ON {watchers}.asset_id = asset.id "
            "JOIN dag_schedule_asset_reference ON dag_schedule_asset_reference.asset_id = asset.id "
            "GROUP BY asset.name"
        ).fetchall()
    assert [classpath for (classpath,) in triggers] == [
        "airflow_kafka_failover.triggers.verdict_change.ClusterVerdictTrigger"
    ] * 2
    assert sorted(count for _name, count in watched) == [5, 5]
    assert all(name.startswith("kafka_failover.cluster.unit_a.") for name, _count in watched)


def test_a_task_process_builds_only_the_dags_of_its_pair_and_they_are_the_ones_the_processor_stores(tmp_path):
    """Airflow parses the DAG file for each task with its parsing context naming the task's DAG: the file
    then builds that pair's four DAGs alone, each serialized exactly as the full parse (the dag-processor's)
    serializes it, shared watch included. A DAG id of no pair gets every DAG."""
    from airflow.sdk.definitions._internal.dag_parsing_context import _airflow_parsing_context_manager

    try:
        from airflow.serialization.serialized_objects import DagSerialization
    except ImportError:  # Airflow before 3.3 names it SerializedDAG
        from airflow.serialization.serialized_objects import SerializedDAG as DagSerialization

    config = fleet_config(tmp_path, {f"p{i}": {} for i in range(3)})
    everything = build_dags(config)
    assert len(everything) == 12
    for dag_id in ("kafka_failover_p1_failover", "kafka_failover_p2_keeper"):
        with _airflow_parsing_context_manager(dag_id=dag_id):
            built = build_dags(config)
        pair = dag_id.split("_")[2]
        assert sorted(built) == sorted(f"kafka_failover_{pair}_{kind}" for kind in DAG_KINDS)
        for built_id, dag in built.items():
            assert DagSerialization.to_dict(dag) == DagSerialization.to_dict(everything[built_id]), built_id
    with _airflow_parsing_context_manager(dag_id="someone_elses_dag"):
        assert sorted(build_dags(config)) == sorted(everything)

"""The DAG factory, the gate and the switch Params, without Kafka or Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.switching.steps import SwitchParams
from airflow_kafka_failover.workflows.factory import build_dags

REPO = Path(__file__).resolve().parents[3]


def pair_config(tmp_path: Path, **changes) -> Path:
    pair = {
        "clusters": {"A": {"connection": "unit_a"}, "B": {"connection": "unit_b"}},
        "primary": "A",
        "topics": ["orders"],
    }
    pair.update(changes)
    path = tmp_path / "pairs.yaml"
    path.write_text(yaml.safe_dump({"pairs": {"orders": pair}}))
    return path


def test_four_dags_per_pair_with_the_documented_shape(tmp_path):
    dags = build_dags(pair_config(tmp_path))
    assert sorted(dags) == [
        "kafka_failover_orders_failback",
        "kafka_failover_orders_failover",
        "kafka_failover_orders_keeper",
        "kafka_failover_orders_start",
    ]
    keeper = dags["kafka_failover_orders_keeper"]
    assert keeper.task_ids == ["keep"] and keeper.max_active_runs == 1
    assert keeper.get_task("keep").start_from_trigger is False and set(keeper.params) == {"window_seconds"}
    failover = dags["kafka_failover_orders_failover"]
    assert [t.task_id for t in failover.topological_sort()] == [
        "gate",
        "wait_for_down",
        "check_target",
        "fence_and_stop",
        "plan",
        "submit",
        "wait_first_batch",
        "commit",
    ]
    assert failover.max_active_runs == 1 and set(failover.params) == {"force", "dry_run", "reason"}
    assert all(failover.params.get_param(name).description for name in failover.params)
    failback = dags["kafka_failover_orders_failback"]
    assert "wait_for_recovery" in failback.task_ids
    commit = failback.get_task("commit")
    assert [outlet.name for outlet in commit.outlets] == ["kafka_failover.orders"]
    # docs/reference.md: "All DAGs have ... catchup=False, max_active_runs=1, render_template_as_native_obj"
    for dag in dags.values():
        assert not dag.catchup and dag.max_active_runs == 1 and dag.render_template_as_native_obj, dag.dag_id


def test_the_down_sensor_checks_the_primarys_heartbeats_on_the_standby(tmp_path):
    sensor = build_dags(pair_config(tmp_path))["kafka_failover_orders_failover"].get_task("wait_for_down")
    kwargs = sensor.watch_kwargs()
    assert (kwargs["peer_kafka_config_id"], kwargs["heartbeats_topic"]) == ("unit_b", "A.heartbeats")
    assert kwargs["require_corroboration"] is False  # an unreachable standby leaves it to check_target


@pytest.mark.parametrize(
    "replication", [{"offset_preserving": True, "policy": "identity"}, {"flows": ["B->A"]}]
)
def test_no_heartbeat_check_without_mm2_from_the_primary(tmp_path, replication):
    sensor = build_dags(pair_config(tmp_path, replication=replication))[
        "kafka_failover_orders_failover"
    ].get_task("wait_for_down")
    assert sensor.watch_kwargs()["peer_kafka_config_id"] is None


def test_the_verdict_sensors_judge_the_pairs_own_partitions_by_default(tmp_path):
    dags = build_dags(pair_config(tmp_path))
    down = dags["kafka_failover_orders_failover"].get_task("wait_for_down")
    recovered = dags["kafka_failover_orders_failback"].get_task("wait_for_recovery")
    for sensor in (down, recovered):
        kwargs = sensor.watch_kwargs()
        # The job on A reads orders and, under the default policy, B's copy of it.
        assert kwargs["topics"] == ["orders", "B.orders"]
        assert (kwargs["count_under_min_isr"], kwargs["canary_topic"]) == (False, None)
        assert sensor.missing_topics_are_evidence is True
        assert "leader_failover_seconds" in sensor.thresholds
        assert "check_partitions" not in sensor.thresholds  # an evidence option, not a threshold


def test_the_probe_checks_follow_the_health_section(tmp_path):
    health = {"count_under_min_isr": True, "canary_topic": "canary", "leader_failover_seconds": 20}
    dags = build_dags(pair_config(tmp_path, health=health))
    kwargs = dags["kafka_failover_orders_failover"].get_task("wait_for_down").watch_kwargs()
    assert (kwargs["count_under_min_isr"], kwargs["canary_topic"]) == (True, "canary")
    trigger_less = build_dags(pair_config(tmp_path, health={"check_partitions": False}))
    sensor = trigger_less["kafka_failover_orders_failover"].get_task("wait_for_down")
    assert sensor.watch_kwargs()["topics"] == []  # a probe is a metadata request only
    identity = build_dags(pair_config(tmp_path, replication={"policy": "identity"}))
    sensor = identity["kafka_failover_orders_failover"].get_task("wait_for_down")
    assert sensor.watch_kwargs()["topics"] == ["orders"]


def test_switch_steps_share_one_pool(tmp_path):
    dags = build_dags(pair_config(tmp_path, switch={"pool": "kafka_failover_orders"}))
    for dag_id in ("kafka_failover_orders_failover", "kafka_failover_orders_failback"):
        dag = dags[dag_id]
        assert {dag.get_task(t).pool for t in ("fence_and_stop", "plan", "submit", "commit")} == {
            "kafka_failover_orders"
        }


def test_manual_only_when_not_automatic(tmp_path):
    automatic = build_dags(pair_config(tmp_path))["kafka_failover_orders_failover"]
    assert type(automatic.timetable).__name__ == "ContinuousTimetable"
    manual = build_dags(pair_config(tmp_path, switch={"automatic": False}))["kafka_failover_orders_failover"]
    assert type(manual.timetable).__name__ == "NullTimetable"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"primary": None}, "primary"),
        ({"clusters": {"A": {"connection": "same"}, "B": {"connection": "same"}}}, "the same cluster twice"),
        ({"replication": {"policy": "mirror-all"}}, "replication.policy: 'mirror-all' is not one of"),
        ({"switch": {"on_gap": "ignore"}}, "switch.on_gap"),
        ({"job": {"trigger_interval_seconds": 0}}, "job.trigger_interval_seconds"),
        ({"job": {"spark_conf": ["a"]}}, "job.spark_conf: must be a mapping"),
        ({"job": {"colour": "red"}}, "job: unknown key(s) ['colour']"),
    ],
)
def test_bad_config_fails_the_dag_file_naming_file_pair_and_field(tmp_path, change, message):
    data = {k: v for k, v in change.items() if v is not None}
    path = pair_config(tmp_path, **data)
    if change.get("primary", 1) is None:
        raw = yaml.safe_load(path.read_text())
        del raw["pairs"]["orders"]["primary"]
        path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as error:
        build_dags(path)
    assert str(path) in str(error.value) and "'orders'" in str(error.value) and message in str(error.value)


def test_job_paths_default_under_airflow_home_and_resolve_relative_to_the_file(tmp_path, monkeypatch):
    from airflow_kafka_failover.domain.config import load_pair

    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    job = load_pair(pair_config(tmp_path, job={"sink_root": "out/sink"}), "orders").job
    assert job.sink_root == str(tmp_path / "out" / "sink")
    assert job.checkpoint_root == str(tmp_path / "home" / "kafka-failover" / "checkpoints")
    assert job.fencing_marker == str(tmp_path / "home" / "kafka-failover" / "fencing" / "orders")
    assert job.local_root == str(tmp_path / "home" / "kafka-failover" / "runs")


@pytest.mark.parametrize("conf", [{"force": "yes"}, {"dry_run": 1}, {"reason": 5}])
def test_params_of_the_wrong_type_are_refused_before_the_run(tmp_path, conf):
    from airflow_kafka_failover.version_compat import ParamValidationError

    dag = build_dags(pair_config(tmp_path))["kafka_failover_orders_failover"]
    ((name, value),) = conf.items()
    with pytest.raises(ParamValidationError, match="Failed validating 'type'"):
        dag.params.get_param(name).resolve(value)
    with pytest.raises(ConfigError, match=next(iter(conf))):
        SwitchParams.from_params(conf)


def test_the_gate_fails_on_an_unknown_connection_before_touching_anything(tmp_path):
    from airflow_kafka_failover.sensors.record_gate import ActiveRecordGate
    from airflow_kafka_failover.version_compat import AirflowFailException

    path = pair_config(
        tmp_path, clusters={"A": {"connection": "nowhere_a"}, "B": {"connection": "nowhere_b"}}
    )
    gate = ActiveRecordGate(task_id="gate", config_path=str(path), pair_name="orders", kind="failover")
    with pytest.raises(AirflowFailException, match="connection 'nowhere_a' does not exist"):
        gate.poke({"params": {"force": False, "dry_run": False, "reason": ""}})


def test_the_gate_task_of_a_switch_dag_fails_on_bad_input_and_only_a_timeout_skips(tmp_path):
    """Through ``execute``, as the DAG runs it: a refusal fails the run (Airflow's ``soft_fail`` would have
    turned it into a skip), a scheduled run that waited out the watch is skipped."""
    from airflow_kafka_failover.version_compat import (
        AirflowFailException,
        AirflowSensorTimeout,
        AirflowSkipException,
    )

    path = pair_config(
        tmp_path, clusters={"A": {"connection": "nowhere_a"}, "B": {"connection": "nowhere_b"}}
    )
    gate = build_dags(path)["kafka_failover_orders_failover"].get_task("gate")
    assert not gate.soft_fail

    class FirstTry:
        def get_first_reschedule_date(self, _context):
            return None

    context = {"params": {"force": False, "dry_run": False, "reason": ""}, "ti": FirstTry()}
    with pytest.raises(AirflowFailException, match="connection 'nowhere_a' does not exist"):
        gate.execute(context)

    def waited_out(_context):
        raise AirflowSensorTimeout("Sensor has timed out")

    gate.poke = waited_out
    with pytest.raises(AirflowSkipException, match="did not apply within the watch"):
        gate.execute(context)


@pytest.mark.slow
def test_dag_file_parses_without_kafka_or_spark_clients():
    code = (
        "import sys, time, runpy; t = time.perf_counter(); g = runpy.run_path('dags/kafka_failover.py');"
        "print(json.dumps({'dags': sorted(k for k in g if k.startswith('kafka_failover_')), "
        "'heavy': [m for m in ('confluent_kafka', 'pyspark', 'pyarrow') if m in sys.modules]}))"
    )
    env = {**os.environ, "AKF_PAIRS_CONFIG": str(REPO / "examples" / "pairs.yaml")}
    result = subprocess.run(
        [sys.executable, "-c", "import json; " + code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["heavy"] == []
    assert "kafka_failover_orders_failover" in found["dags"]


@pytest.mark.slow
def test_dag_file_without_a_config_names_the_variable_to_set():
    env = {key: value for key, value in os.environ.items() if key != "AKF_PAIRS_CONFIG"}
    result = subprocess.run(
        [sys.executable, "-c", "import runpy; runpy.run_path('dags/kafka_failover.py')"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode != 0
    assert "AKF_PAIRS_CONFIG is not set" in result.stderr


def test_a_cluster_that_answers_the_short_check_keeps_the_hooks_default_timeout(tmp_path, monkeypatch):
    """The plan reads MM2's topics on the source through this hook: a 1.5 s check must not cap those reads."""
    from airflow_kafka_failover.domain.config import load_pair
    from airflow_kafka_failover.hooks import kafka_cluster
    from airflow_kafka_failover.switching import steps

    checks: list[float | None] = []
    monkeypatch.setattr(
        kafka_cluster.KafkaClusterHook,
        "describe_cluster",
        lambda self, timeout_seconds=None: checks.append(timeout_seconds),
    )
    hook = steps._hook_if_reachable(load_pair(pair_config(tmp_path), "orders"), "A", timeout=1.5)
    assert checks == [1.5]
    assert hook is not None and hook.timeout_seconds == kafka_cluster.DEFAULT_TIMEOUT_S


@pytest.mark.parametrize(
    "executor",
    [
        "CeleryExecutor",
        "LocalExecutor,KubernetesExecutor",
        "edge:airflow.providers.edge3.executors.EdgeExecutor",
    ],
)
def test_default_state_folders_are_refused_when_tasks_run_on_several_hosts(tmp_path, monkeypatch, executor):
    """Each host would keep its own fence under its own $AIRFLOW_HOME: the DAG file fails, naming them."""
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", executor)
    with pytest.raises(ConfigError) as refused:
        build_dags(pair_config(tmp_path))
    message = str(refused.value)
    for key in ("job.fencing_marker", "job.run_root", "job.checkpoint_root", "job.sink_root"):
        assert key in message, message
    assert "job.local_root" not in message and "runs tasks on several hosts" in message


@pytest.mark.parametrize("executor", ["LocalExecutor", "airflow.executors.local_executor.LocalExecutor"])
def test_default_state_folders_serve_a_single_host_executor(tmp_path, monkeypatch, executor):
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", executor)
    assert len(build_dags(pair_config(tmp_path))) == 4


def test_state_folders_named_in_the_config_are_taken_as_shared(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "CeleryExecutor")
    shared = tmp_path / "nfs"
    job = {key: str(shared / key) for key in ("fencing_marker", "run_root", "checkpoint_root", "sink_root")}
    assert len(build_dags(pair_config(tmp_path, job=job))) == 4

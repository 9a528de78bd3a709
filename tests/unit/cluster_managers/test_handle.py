from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_kafka_failover.cluster_managers.handle import DEPLOY_MODES, JobHandle
from airflow_kafka_failover.cluster_managers.registry import job_alive, job_log_tail
from airflow_kafka_failover.core.exceptions import ConfigError

REQUIRED = {
    "pair": "orders",
    "cluster": "A",
    "epoch": 2,
    "deploy_mode": "local",
    "master": "local[2]",
    "run_dir": "/runs/orders/A/epoch-2",
    "checkpoint": "/ckpt/orders/A/epoch-2",
    "sink_root": "/sink/orders",
}


def handle(run_dir: Path | None = None, **overrides) -> JobHandle:
    values = {**REQUIRED, **overrides}
    if run_dir is not None:
        values["run_dir"] = str(run_dir)
    return JobHandle.from_dict(values)


@pytest.mark.parametrize("data", [None, "orders", ["orders"], 3])
def test_from_dict_needs_a_mapping(data):
    with pytest.raises(ConfigError) as err:
        JobHandle.from_dict(data)
    assert str(err.value) == (f"a job handle must be a mapping (the submit operator's XCom), got {data!r}")


def test_from_dict_lists_missing_keys_sorted():
    data = {"pair": "orders", "cluster": "A", "master": "local"}
    with pytest.raises(ConfigError) as err:
        JobHandle.from_dict(data)
    assert str(err.value) == (
        f"job handle {data!r} lacks ['checkpoint', 'deploy_mode', 'epoch', 'run_dir', 'sink_root']; "
        "pass the submit operator's return value"
    )


@pytest.mark.parametrize("mode", ["yarn", "Local", "", None])
def test_from_dict_refuses_an_unknown_deploy_mode(mode):
    with pytest.raises(ConfigError) as err:
        handle(deploy_mode=mode)
    assert str(err.value) == f"job handle has deploy_mode {mode!r}; expected one of {DEPLOY_MODES}"


def test_round_trip_and_defaults():
    original = handle(
        deploy_mode="cluster",
        driver_id="driver-20240101-0001",
        application_id="app-1",
        spark_conn_id="spark_b",
        submitted_at="2024-01-01T00:00:00+00:00",
    )
    data = original.to_dict()
    assert data == {
        **REQUIRED,
        "local_dir": None,
        "deploy_mode": "cluster",
        "driver_id": "driver-20240101-0001",
        "application_id": "app-1",
        "spark_conn_id": "spark_b",
        "submitted_at": "2024-01-01T00:00:00+00:00",
        "resource_manager": None,
        "master_webui_port": None,
        "kubernetes_conn_id": None,
    }
    assert JobHandle.from_dict(json.loads(json.dumps(data))) == original
    minimal = handle()
    assert (minimal.spark_conn_id, minimal.submitted_at, minimal.driver_id, minimal.application_id) == (
        "spark_default",
        "",
        None,
        None,
    )


def test_from_dict_ignores_unknown_keys_and_passes_handles_through():
    assert handle(extra="ignored") == handle()
    original = handle()
    assert JobHandle.from_dict(original) is original


def test_is_alive_is_unknown_in_cluster_mode(tmp_path):
    assert job_alive(handle(tmp_path, deploy_mode="cluster", driver_id="d-1")) is None


@pytest.mark.parametrize("mode", ["local", "client"])
def test_is_alive_is_false_without_pid_file(tmp_path, mode):
    job = handle(tmp_path, deploy_mode=mode)
    assert not job.process.pid_file.exists()
    assert job_alive(job) is False


def test_is_alive_is_false_for_a_corrupt_pid_file(tmp_path):
    job = handle(tmp_path)
    job.process.pid_file.parent.mkdir(parents=True)
    job.process.pid_file.write_text("{half")
    assert job_alive(job) is False


def test_log_file_and_status(tmp_path):
    job = handle(tmp_path)
    assert job.log_file == tmp_path / "logs" / "job.log"
    assert job.status() == {}
    (tmp_path / "status.json").write_text('{"state": "running", "batch_id": 4}')
    assert job.status() == {"state": "running", "batch_id": 4}


def test_log_tail_in_cluster_mode_names_the_driver(tmp_path):
    job = handle(tmp_path, deploy_mode="cluster", driver_id="driver-20240101-0007", application_id="app-9")
    assert job_log_tail(job) == "(the driver runs on the cluster as driver-20240101-0007; see its logs there)"
    yarn = handle(tmp_path, deploy_mode="cluster", application_id="application_1_0002")
    assert job_log_tail(yarn) == "(the driver runs on the cluster as application_1_0002; see its logs there)"


def test_log_tail_in_local_mode_reads_the_log(tmp_path):
    job = handle(tmp_path)
    assert job_log_tail(job) == f"(no log at {tmp_path / 'logs' / 'job.log'})"
    job.log_file.parent.mkdir(parents=True)
    job.log_file.write_text("".join(f"line {n}\n" for n in range(10)))
    assert job_log_tail(job, 3) == "line 7\nline 8\nline 9"


def test_describe(tmp_path):
    assert handle(tmp_path, deploy_mode="cluster", driver_id="d-7").describe() == (
        "job of pair 'orders' on A at epoch 2 (cluster, d-7)"
    )


def test_from_dict_names_a_field_of_the_wrong_type():
    with pytest.raises(ConfigError) as err:
        handle(epoch="two")
    assert "is malformed: epoch: Input should be a valid integer (got 'two')" in str(err.value)
    assert "pass the submit operator's return value" in str(err.value)

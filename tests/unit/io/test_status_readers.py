"""The status readers on real files and real sockets: nothing they cannot read makes them raise.

Clusters are Airflow ``kafka`` connections to loopback ports where nothing listens (a cluster that does
not answer); the job is a real detached process with its pid file; the checkpoint is laid out as Spark
writes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from akf_devtools.demo.story import QUICK_HEALTH

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import parse_pair
from airflow_kafka_failover.domain.status.assembly import EXIT_ACT, EXIT_UNREAD, assemble, exit_code
from airflow_kafka_failover.domain.status.model import FenceAgreement, JobState
from airflow_kafka_failover.io.status_readers import read_history_record, read_pair
from airflow_kafka_failover.run_format.fencing import FencingMarker
from airflow_kafka_failover.run_format.layout import status_file
from tests.builders import closed_port

WRITTEN_AT = 1_790_000_000.5


def pair_config(tmp_path: Path, **overrides):
    data = {
        "clusters": {"A": {"connection": "status_a"}, "B": {"connection": "status_b"}},
        "primary": "A",
        "topics": ["orders"],
        "health": QUICK_HEALTH,
        "job": {
            "sink_root": str(tmp_path / "sink"),
            "checkpoint_root": str(tmp_path / "checkpoints"),
            "run_root": str(tmp_path / "runs"),
            "fencing_marker": str(tmp_path / "fence"),
        },
        **overrides,
    }
    return parse_pair("orders", data)


@pytest.fixture
def dead_clusters(monkeypatch):
    for name in ("A", "B"):
        conn = {"conn_type": "kafka", "extra": {"bootstrap.servers": f"127.0.0.1:{closed_port()}"}}
        monkeypatch.setenv(f"AIRFLOW_CONN_STATUS_{name}", json.dumps(conn))


def write_checkpoint(root: Path, offsets: dict, written_at: float = WRITTEN_AT) -> None:
    """A checkpoint with batch 0 committed at ``offsets`` and its progress entry."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "offsets" / "0").write_text(
        "\n".join(["v1", '{"batchWatermarkMs":0,"conf":{}}', json.dumps(offsets)])
    )
    (root / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    line = {"epoch": 1, "batch_id": 0, "end_offsets": offsets, "records": 12, "written_at": written_at}
    (root / "progress").mkdir()
    (root / "progress" / "0").write_text(json.dumps(line))


def job_handle(tmp_path: Path, epoch: int = 1) -> dict:
    return {
        "pair": "orders",
        "cluster": "A",
        "epoch": epoch,
        "deploy_mode": "local",
        "master": "local[2]",
        "run_dir": str(tmp_path / "runs" / "orders" / "A" / f"epoch-{epoch}"),
        "checkpoint": str(tmp_path / "checkpoints" / "orders" / "A" / f"epoch-{epoch}"),
        "sink_root": str(tmp_path / "sink"),
    }


@pytest.fixture
def running_job(tmp_path):
    """The record's job at epoch 1 on A: a live detached process that reported running, batch 0 committed."""
    handle = job_handle(tmp_path)
    run_dir = Path(handle["run_dir"])
    run_dir.mkdir(parents=True)
    Path(status_file(run_dir)).write_text(
        json.dumps({"state": "running", "updated_at": "2026-11-23T10:00:00+00:00"})
    )
    write_checkpoint(Path(handle["checkpoint"]), {"orders": {"0": 7, "1": 5}})
    process = ManagedProcess("job", run_dir)
    process.start(["sleep", "120"])
    yield handle, process
    process.stop(timeout=5)


def stored(record: ActiveRecord | None):
    return lambda pair: record


def record_with(handle: dict, epoch: int = 1) -> ActiveRecord:
    return ActiveRecord(pair="orders", active="A", epoch=epoch, job=handle, checkpoint=handle["checkpoint"])


def write_fence(tmp_path: Path, epoch: int, cluster: str = "A") -> None:
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, epoch, cluster)


def test_clusters_that_do_not_answer_are_reported_and_the_rest_is_read(tmp_path, dead_clusters, running_job):
    handle, process = running_job
    write_fence(tmp_path, 1)
    readings = read_pair(pair_config(tmp_path), stored(record_with(handle)))
    assert readings.job_alive is True and readings.job_where == f"pid {process.pid()}"
    assert readings.progress is not None
    assert readings.progress.offsets == {TopicPartition("orders", 0): 7, TopicPartition("orders", 1): 5}
    assert readings.progress.committed_at == WRITTEN_AT
    assert readings.active_ends is None
    assert readings.active_error.startswith("does not answer: connection refused by every bootstrap address")
    assert readings.replication is not None
    assert readings.replication.heartbeats_topic == "A.heartbeats"
    assert readings.replication.standby_error.startswith("does not answer: connection refused")
    status = assemble(readings)
    assert status.job.state is JobState.RUNNING
    assert status.fence_agreement is FenceAgreement.SETTLED
    assert [row.committed for row in status.active_lag] == [7, 5]
    assert [item.split(":")[0] for item in status.unread] == ["active cluster A", "standby cluster B"]
    assert exit_code([status]) == EXIT_UNREAD


def test_a_killed_job_whose_status_says_running_is_failed(tmp_path, dead_clusters, running_job):
    handle, process = running_job
    process.stop(timeout=5)
    write_fence(tmp_path, 1)
    status = assemble(read_pair(pair_config(tmp_path), stored(record_with(handle))))
    assert status.job.state is JobState.FAILED
    assert status.job.where is None
    assert exit_code([status]) == EXIT_ACT


def test_fence_ahead_of_record_is_read_as_an_interrupted_switch(tmp_path, dead_clusters, running_job):
    handle, _process = running_job
    write_fence(tmp_path, 2, "B")
    status = assemble(read_pair(pair_config(tmp_path), stored(record_with(handle))))
    assert status.fence_agreement is FenceAgreement.AHEAD
    assert status.problems[0].what.startswith("INTERRUPTED SWITCH")


def test_no_stored_record_reads_as_the_initial_one(tmp_path, dead_clusters):
    readings = read_pair(pair_config(tmp_path), stored(None))
    assert (readings.record.active, readings.record.epoch, readings.record_stored) == ("A", 0, False)
    assert readings.fence is None and readings.fence_error is None
    status = assemble(readings)
    assert status.job.state is JobState.NONE


def test_an_unreadable_record_keeps_the_first_line_of_the_error_and_says_where_to_run(
    tmp_path, dead_clusters
):
    def broken(pair):
        raise RuntimeError(
            "(sqlite3.OperationalError) no such table: variable\n[SQL: SELECT variable.id ...]"
        )

    write_fence(tmp_path, 3, "B")
    readings = read_pair(pair_config(tmp_path), broken)
    assert readings.record is None
    assert readings.record_error.startswith(
        "RuntimeError: (sqlite3.OperationalError) no such table: variable; run "
    )
    assert "SELECT" not in readings.record_error
    assert "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in readings.record_error
    assert readings.fence.epoch == 3
    assert readings.active_error is None and readings.replication is None  # the active cluster is unknown


def test_a_record_that_is_not_valid_keeps_its_message(tmp_path, dead_clusters):
    def invalid(pair):
        raise ConfigError("Variable kafka_failover.orders.active_record: epoch -1 is not an integer >= 0")

    readings = read_pair(pair_config(tmp_path), invalid)
    assert (
        readings.record_error
        == "Variable kafka_failover.orders.active_record: epoch -1 is not an integer >= 0"
    )


def test_a_corrupt_fence_is_reported(tmp_path, dead_clusters):
    (tmp_path / "fence").mkdir()
    (tmp_path / "fence" / "epoch-0000000001.json").write_text("{not json")
    readings = read_pair(pair_config(tmp_path), stored(None))
    assert readings.fence is None
    assert readings.fence_error.startswith("ConfigError: fencing marker")
    assert readings.fence_path == str(tmp_path / "fence")


def test_a_malformed_job_handle_is_reported(tmp_path, dead_clusters):
    bad = ActiveRecord(pair="orders", active="A", epoch=0, job={"pair": "orders"})
    readings = read_pair(pair_config(tmp_path), stored(bad))
    assert readings.job_error.startswith("ConfigError: job handle")
    assert assemble(readings).job.state is JobState.UNKNOWN


def test_a_damaged_checkpoint_is_reported(tmp_path, dead_clusters):
    handle = job_handle(tmp_path)
    offsets = Path(handle["checkpoint"]) / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text("v9\n{}\n{}")
    (Path(handle["checkpoint"]) / "commits").mkdir()
    (Path(handle["checkpoint"]) / "commits" / "0").write_text("v1\n{}")
    readings = read_pair(pair_config(tmp_path), stored(record_with(handle)))
    assert readings.progress is None
    assert readings.progress_error.startswith("CheckpointError")


def test_a_connection_that_does_not_exist_is_reported(tmp_path, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_STATUS_A", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_STATUS_B", raising=False)
    readings = read_pair(pair_config(tmp_path), stored(None))
    assert "Airflow connection 'status_a' does not exist" in readings.active_error
    assert "Airflow connection 'status_b' does not exist" in readings.replication.standby_error


@pytest.mark.parametrize(
    ("replication", "note"),
    [
        ({"offset_preserving": True}, "replication is offset-preserving (not MirrorMaker 2)"),
        ({"flows": ["B->A"]}, "no replication flow A->B is configured"),
    ],
)
def test_no_mirrormaker_flow_toward_the_standby_is_a_note(tmp_path, dead_clusters, replication, note):
    readings = read_pair(pair_config(tmp_path, replication=replication), stored(None))
    assert readings.replication is None
    assert readings.replication_note.startswith(note)


def test_history_record_reads_the_initial_one_when_none_is_stored(tmp_path):
    record, was_stored = read_history_record(pair_config(tmp_path), stored(None))
    assert (record.active, record.epoch, record.history, was_stored) == ("A", 0, (), False)


def test_history_record_names_a_database_that_cannot_be_read(tmp_path):
    def broken(pair):
        raise RuntimeError("could not connect to server\ndetails")

    with pytest.raises(ConfigError) as err:
        read_history_record(pair_config(tmp_path), broken)
    assert str(err.value).startswith(
        "cannot read the active record of pair 'orders': RuntimeError: could not connect to server; run "
        "the command where Airflow's metadata database is configured"
    )


@pytest.mark.parametrize(("master_says", "alive"), [("RUNNING", True), ("KILLED", False)])
def test_a_standalone_driver_is_shown_as_the_master_lists_it(
    tmp_path, dead_clusters, running_job, master_says, alive
):
    """A live pid does not make a job alive that the standalone master lists as ended."""
    from tests.unit.fake_standalone_master import FakeStandaloneMaster, serving

    handle, process = running_job
    app = "app-20261123100000-0004"
    write_fence(tmp_path, 1)
    with serving(FakeStandaloneMaster(apps={app: master_says})) as master:
        standalone = {
            **handle,
            "deploy_mode": "client",
            "master": "spark://127.0.0.1:7077",
            "application_id": app,
            "master_webui_port": master.port,
        }
        readings = read_pair(pair_config(tmp_path), stored(record_with(standalone)))
    assert process.is_running()
    assert readings.job_alive is alive and readings.job_where == f"pid {process.pid()}"


def test_a_standalone_master_that_does_not_answer_shows_the_job_as_unknown(tmp_path, dead_clusters):
    handle = {
        **job_handle(tmp_path),
        "deploy_mode": "client",
        "master": "spark://127.0.0.1:7077",
        "application_id": "app-20261123100000-0004",
        "master_webui_port": closed_port(),
    }
    write_fence(tmp_path, 1)
    readings = read_pair(pair_config(tmp_path), stored(record_with(handle)))
    assert readings.job_alive is None


@pytest.mark.parametrize(("phase", "alive"), [("Running", True), ("Failed", False), (None, None)])
def test_a_kubernetes_driver_is_shown_as_the_api_server_reports_its_pod(
    tmp_path, dead_clusters, monkeypatch, phase, alive
):
    """Through the kubernetes connection's API server (a fake one over HTTP): Running, Failed, or a pod it
    does not have (unknown, never dead)."""
    from tests.unit.cluster_managers.test_kubernetes import kubernetes_connection
    from tests.unit.fake_kubernetes_api import FakeKubernetesApi, kubeconfig, running

    pod = "akf-orders-a-e1-0a1b2c3d-driver"
    handle = {
        **job_handle(tmp_path),
        "deploy_mode": "cluster",
        "master": "k8s://https://api.example.com:6443",
        "driver_id": f"spark-jobs:{pod}",
        "kubernetes_conn_id": "kube_status",
    }
    write_fence(tmp_path, 1)
    with running(FakeKubernetesApi()) as api:
        kubernetes_connection(monkeypatch, tmp_path, "kube_status", kubeconfig(api))
        if phase:
            api.add_pod("spark-jobs", pod, phase)
        readings = read_pair(pair_config(tmp_path), stored(record_with(handle)))
    assert readings.job_alive is alive and readings.job_where == f"spark-jobs:{pod}"

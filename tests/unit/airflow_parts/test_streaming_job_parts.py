"""The job's Airflow parts without Spark: provider registration, cluster deploy mode through a fake
spark-submit (YARN output), and the stop operator's idempotence."""

from __future__ import annotations

import importlib
import json
import os
import stat

import pytest

from airflow_kafka_failover.get_provider_info import get_provider_info
from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.jobs.handle import JobHandle
from airflow_kafka_failover.jobs.layout import RunLayout
from airflow_kafka_failover.jobs.settings import JobSettings
from airflow_kafka_failover.operators.streaming_job import StopStreamingJobOperator


def test_every_registered_module_imports():
    info = get_provider_info()
    modules = [
        m
        for kind in ("hooks", "sensors", "operators", "triggers")
        for e in info[kind]
        for m in e["python-modules"]
    ]
    assert "airflow_kafka_failover.operators.streaming_job" in modules
    assert "airflow_kafka_failover.sensors.job_progress" in modules
    for module in modules:
        importlib.import_module(module)


def _script(path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_yarn(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    _script(
        bin_dir / "spark-submit",
        f'echo "spark-submit $*" >> {calls}\n'
        'echo "INFO Client: Submitting application application_1700000000000_0042 to ResourceManager"\n',
    )
    _script(bin_dir / "yarn", f'echo "yarn $*" >> {calls}\n')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_YARN",
        json.dumps({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}),
    )
    return bin_dir, calls


def _settings(tmp_path) -> tuple[JobSettings, RunLayout]:
    layout = RunLayout("orders", "B", 1, str(tmp_path / "ckpt"), str(tmp_path / "runs"))
    settings = JobSettings(
        pair="orders",
        cluster="B",
        epoch=1,
        bootstrap_servers="b:9092",
        checkpoint=str(layout.checkpoint),
        sink_root=str(tmp_path / "sink"),
        bookkeeping_group="g",
        fencing_marker=str(tmp_path / "fence"),
        run_dir=str(layout.run_dir),
        topics=("orders",),
    )
    return settings, layout


def test_cluster_mode_submits_without_waiting_and_kills_through_yarn(tmp_path, fake_yarn):
    bin_dir, calls = fake_yarn
    hook = StreamingJobHook("spark_yarn", jars="/jars/kafka.jar", py_files="/dist/provider.zip")
    settings, layout = _settings(tmp_path)
    handle = hook.submit(settings, layout, env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert (handle.deploy_mode, handle.master, handle.application_id) == (
        "cluster",
        "yarn",
        "application_1700000000000_0042",
    )
    submitted = calls.read_text()
    assert "--deploy-mode cluster" in submitted
    assert "spark.yarn.submit.waitAppCompletion=false" in submitted
    assert f"--settings {layout.settings_file}" in submitted
    assert stat.S_IMODE(layout.settings_file.stat().st_mode) == 0o600
    assert hook.stop(handle.to_dict(), timeout=0.1) == "forced"
    assert "yarn application -kill application_1700000000000_0042" in calls.read_text()


def test_standalone_cluster_mode_is_refused_with_the_way_out(tmp_path, monkeypatch):
    from airflow_kafka_failover.exceptions import ConfigError

    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_STANDALONE_CLUSTER",
        json.dumps(
            {
                "conn_type": "spark",
                "host": "spark://127.0.0.1",
                "port": 7077,
                "extra": {"deploy-mode": "cluster"},
            }
        ),
    )
    settings, layout = _settings(tmp_path)
    with pytest.raises(ConfigError, match="use deploy-mode client"):
        StreamingJobHook("spark_standalone_cluster", jars="/x.jar").submit(settings, layout)


@pytest.mark.parametrize("handle", [None, {}, ""])
def test_stopping_nothing_succeeds(handle):
    assert StopStreamingJobOperator(task_id="stop", handle=handle).execute({}) == "not-running"


def test_stopping_a_job_that_is_gone_succeeds(tmp_path):
    handle = JobHandle(
        pair="p",
        cluster="A",
        epoch=0,
        deploy_mode="local",
        master="local[2]",
        run_dir=str(tmp_path / "run"),
        checkpoint=str(tmp_path / "ckpt"),
        sink_root=str(tmp_path),
    )
    assert (
        StopStreamingJobOperator(task_id="stop", handle=json.dumps(handle.to_dict())).execute({})
        == "not-running"
    )


def test_a_bad_handle_fails_the_stop_task_naming_it():
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException, match="lacks"):
        StopStreamingJobOperator(task_id="stop", handle={"pair": "p"}).execute({})

"""The job's Airflow parts without Spark: provider registration, cluster deploy mode through a fake
spark-submit (YARN output) and a fake ResourceManager, and the stop operator's idempotence."""

from __future__ import annotations

import importlib
import json
import os
import stat
from pathlib import Path

import pytest

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.core.atomic_file import write_json_atomically
from airflow_kafka_failover.get_provider_info import get_provider_info
from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.operators.streaming_job import StopStreamingJobOperator
from airflow_kafka_failover.run_format.layout import RunLayout, read_status, status_file, stop_requested
from airflow_kafka_failover.run_format.settings import JobSettings
from tests.builders import run_of
from tests.unit.fake_resource_manager import FakeResourceManager, running


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
    """A fake spark-submit printing YARN's submission line, and a fake ResourceManager for the kill."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    _script(
        bin_dir / "spark-submit",
        f'echo "spark-submit $*" >> {calls}\n'
        'echo "INFO Client: Submitting application application_1700000000000_0042 to ResourceManager"\n',
    )
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with running(FakeResourceManager(apps={"application_1700000000000_0042": "RUNNING"})) as rm:
        extra = {"deploy-mode": "cluster", "yarn_resourcemanager_webapp_address": rm.url}
        monkeypatch.setenv(
            "AIRFLOW_CONN_SPARK_YARN", json.dumps({"conn_type": "spark", "host": "yarn", "extra": extra})
        )
        yield bin_dir, calls, rm


def _settings(tmp_path) -> tuple[JobSettings, RunLayout]:
    return run_of(tmp_path)


@pytest.mark.slow
def test_cluster_mode_submits_without_waiting_and_kills_through_the_resource_manager(tmp_path, fake_yarn):
    bin_dir, calls, rm = fake_yarn
    hook = StreamingJobHook("spark_yarn", jars="/jars/kafka.jar", py_files="/dist/provider.zip")
    settings, layout = _settings(tmp_path)
    handle = hook.submit(settings, layout, env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert (handle.deploy_mode, handle.master, handle.application_id, handle.resource_manager) == (
        "cluster",
        "yarn",
        "application_1700000000000_0042",
        rm.url,
    )
    submitted = calls.read_text()
    assert "--deploy-mode cluster" in submitted
    assert "spark.yarn.submit.waitAppCompletion=false" in submitted
    assert f"--settings {layout.settings_file}" in submitted
    assert stat.S_IMODE(Path(layout.settings_file).stat().st_mode) == 0o600
    assert job_alive(handle) is True
    assert hook.stop(handle.to_dict(), timeout=0.1) == "forced"
    assert ("PUT", "/ws/v1/cluster/apps/application_1700000000000_0042/state") in rm.requests
    assert rm.apps["application_1700000000000_0042"] == "KILLED" and job_alive(handle) is False
    status = read_status(layout.run_dir)
    assert status["state"] == "killed"
    assert status["reason"] == (
        "killed through the cluster manager: YARN application application_1700000000000_0042 is KILLED "
        f"(ResourceManager {rm.url})"
    )


def _running_local_job(tmp_path, command: list[str]) -> tuple[JobHandle, RunLayout]:
    """A local run of epoch 1 on B whose ``status.json`` says running and whose driver is ``command``."""
    settings, layout = _settings(tmp_path)
    handle = JobHandle(
        pair="orders",
        cluster="B",
        epoch=1,
        deploy_mode="local",
        master="local[2]",
        run_dir=str(layout.run_dir),
        checkpoint=str(layout.checkpoint),
        sink_root=settings.sink_root,
    )
    Path(layout.run_dir).mkdir(parents=True)
    write_json_atomically(status_file(layout.run_dir), {"state": "running", "epoch": 1})
    handle.process.start(command)
    return handle, layout


def test_a_local_job_ignoring_the_stop_request_is_killed_and_its_status_says_so(tmp_path):
    handle, layout = _running_local_job(tmp_path, ["sleep", "60"])  # never reads the stop request
    try:
        assert StreamingJobHook("spark_default").stop(handle.to_dict(), timeout=0.5) == "forced"
    finally:
        handle.process.stop(timeout=5)
    assert not handle.process.is_running()
    status = read_status(layout.run_dir)
    assert (status["state"], status["state_before"], status["epoch"]) == ("killed", "running", 1)
    assert "did not stop within 0 s of the stop request" in status["reason"]


def test_a_local_job_stopped_at_once_is_killed_even_when_it_ignores_sigterm(tmp_path):
    """A failover's stop: a driver hanging in its shutdown hooks (here: one that ignores SIGTERM) gets
    SIGKILL, not SIGTERM and a 10 s wait."""
    handle, layout = _running_local_job(
        tmp_path, ["bash", "-c", "trap '' TERM; while true; do sleep 0.1; done"]
    )
    try:
        assert StreamingJobHook("spark_default").stop(handle.to_dict(), timeout=0, at_once=True) == "forced"
        assert not handle.process.is_running()
    finally:
        handle.process.kill()
    assert stop_requested(layout.run_dir)  # a driver out of reach of the kill still stops on it
    status = read_status(layout.run_dir)
    assert status["state"] == "killed"
    assert status["reason"].endswith("its process group was killed"), status["reason"]


def test_standalone_cluster_mode_is_refused_with_the_way_out(tmp_path, monkeypatch):
    from airflow_kafka_failover.core.exceptions import ConfigError

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
    from airflow_kafka_failover.version_compat import AirflowFailException

    with pytest.raises(AirflowFailException, match="lacks"):
        StopStreamingJobOperator(task_id="stop", handle={"pair": "p"}).execute({})


# ---------------------------------------------------------------- the submit operator's options and on_kill


def _submit_operator(tmp_path, **overrides):
    from airflow_kafka_failover.operators.streaming_job import SubmitStreamingJobOperator

    arguments = dict(
        task_id="submit",
        pair="orders",
        cluster="B",
        epoch=1,
        kafka_conn_id="kafka_b",
        topics=["orders"],
        sink_root=str(tmp_path / "sink"),
        checkpoint_root=str(tmp_path / "ckpt"),
        run_root=str(tmp_path / "runs"),
        fencing_marker=str(tmp_path / "fence"),
    )
    arguments.update(overrides)
    return SubmitStreamingJobOperator(**arguments)


def test_the_operator_takes_the_job_options_by_their_names(tmp_path):
    operator = _submit_operator(
        tmp_path,
        trigger_interval_seconds=1.5,
        record_id_field="key",
        kafka_options={"acks": "all"},
        conf={"a": 1},
    )
    options = operator.options()
    assert (options.trigger_interval_seconds, options.record_id_field) == (1.5, "key")
    assert options.kafka_options == {"acks": "all"} and options.spark_conf == {"a": "1"}
    assert options.sink_root == str(tmp_path / "sink")
    request = operator.request()
    assert (
        request.options == options and Path(request.layout.run_dir).parent.parent.parent == tmp_path / "runs"
    )


def test_the_operator_takes_spark_conf_and_spark_connection_by_their_option_names(tmp_path):
    operator = _submit_operator(tmp_path, spark_conf={"spark.x": 1}, spark_connection="spark_yarn")
    options = operator.options()
    assert options.spark_conf == {"spark.x": "1"} and options.spark_connection == "spark_yarn"
    assert operator.spark_conn_id == "spark_yarn"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"spark_conf": {"a": 1}, "conf": {"b": 2}}, "spark_conf and conf are the same Spark settings"),
        (
            {"spark_connection": "spark_yarn", "spark_conn_id": "spark_k8s"},
            "spark_connection='spark_yarn' and spark_conn_id='spark_k8s' name two connections",
        ),
    ],
)
def test_one_setting_given_under_both_names_is_refused(tmp_path, given, message):
    from airflow_kafka_failover.core.exceptions import ConfigError

    with pytest.raises(ConfigError, match=message):
        _submit_operator(tmp_path, **given)


def test_a_keyword_the_operator_does_not_use_is_refused_by_name(tmp_path):
    """A misspelt option (``spark_confs``) is not silently dropped: the DAG file fails naming it."""
    with pytest.raises(
        TypeError, match=r"(?s)Invalid arguments were passed to SubmitStreamingJobOperator.*spark_confs"
    ):
        _submit_operator(tmp_path, spark_confs={"spark.x": 1})


def test_a_bad_job_option_fails_the_task_naming_it(tmp_path):
    from airflow_kafka_failover.version_compat import AirflowFailException

    operator = _submit_operator(tmp_path, sink_root="s3://bucket/sink", kafka_conn_id="kafka_nowhere")
    with pytest.raises(
        AirflowFailException,
        match=r"task submit: sink_root: 's3://bucket/sink' uses the unsupported scheme s3://",
    ):
        operator.execute({})


class FakeJobHook:
    """Stands in for StreamingJobHook: records stops; ``during_submit`` runs while the job is starting."""

    def __init__(self, during_submit=None) -> None:
        self.during_submit = during_submit
        self.stops: list[tuple[JobHandle, float]] = []
        self.submitted: list[JobSettings] = []

    def submit(self, settings, layout, application, startup_timeout):
        self.submitted.append(settings)
        if self.during_submit:
            self.during_submit()
        return JobHandle(
            pair=settings.pair,
            cluster=settings.cluster,
            epoch=settings.epoch,
            deploy_mode="client",
            master="local[1]",
            run_dir=str(layout.run_dir),
            checkpoint=settings.checkpoint,
            sink_root=settings.sink_root,
        )

    def stop(self, handle, timeout, at_once=False):
        self.stops.append((JobHandle.from_dict(handle), timeout))
        return "stopped"


@pytest.fixture
def checked_without_kafka(monkeypatch, tmp_path):
    """The request's Kafka checks replaced by settings built here (the fake hook needs no cluster)."""
    from airflow_kafka_failover.switching.job_request import JobRequest

    def settings(request):
        layout = request.layout
        return JobSettings(
            pair=request.pair,
            cluster=request.cluster,
            epoch=request.epoch,
            bootstrap_servers="b:9092",
            checkpoint=str(layout.checkpoint),
            sink_root=request.sink_root,
            bookkeeping_group="g",
            fencing_marker=request.fencing_marker,
            run_dir=str(layout.run_dir),
            topics=request.topics,
            switch_plan=request.switch_plan,
        )

    monkeypatch.setattr(JobRequest, "settings", settings)


def test_on_kill_stops_a_job_that_is_still_starting(tmp_path, checked_without_kafka):
    operator = _submit_operator(tmp_path, stop_timeout_seconds=7.0)

    class Killed(Exception):
        pass

    def killed_while_starting():
        operator.on_kill()
        raise Killed

    operator.hook = FakeJobHook(during_submit=killed_while_starting)
    with pytest.raises(Killed):
        operator.execute({})
    [(handle, timeout)] = operator.hook.stops
    run_dir = RunLayout("orders", "B", 1, str(tmp_path / "ckpt"), str(tmp_path / "runs")).run_dir
    assert (handle.pair, handle.cluster, handle.epoch, handle.run_dir) == ("orders", "B", 1, str(run_dir))
    assert timeout == 7.0


def test_on_kill_leaves_a_started_job_alone(tmp_path, checked_without_kafka):
    operator = _submit_operator(tmp_path)
    operator.hook = FakeJobHook()
    handle = operator.execute({})
    assert handle["run_dir"].endswith("epoch-1") and operator.hook.submitted
    operator.on_kill()
    assert operator.hook.stops == []


def test_on_kill_before_execute_does_nothing(tmp_path):
    operator = _submit_operator(tmp_path)
    operator.hook = FakeJobHook()
    operator.on_kill()
    assert operator.hook.stops == []


YARN_APP = "application_1700000000000_0042"


def _submit(hook: StreamingJobHook, tmp_path, bin_dir, startup_timeout: float = 30.0) -> JobHandle:
    settings, layout = _settings(tmp_path)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return hook.submit(settings, layout, env=env, startup_timeout=startup_timeout)


def _submissions(calls) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


@pytest.mark.slow
def test_a_yarn_submit_waits_until_the_application_runs(tmp_path, fake_yarn):
    import threading

    bin_dir, calls, rm = fake_yarn
    rm.apps[YARN_APP] = "ACCEPTED"
    timer = threading.Timer(1.5, lambda: rm.apps.__setitem__(YARN_APP, "RUNNING"))
    timer.start()
    try:
        handle = _submit(StreamingJobHook("spark_yarn", jars=""), tmp_path, bin_dir)
    finally:
        timer.cancel()
    assert rm.apps[YARN_APP] == "RUNNING" and handle.application_id == YARN_APP
    asks = [r for r in rm.requests if r == ("GET", f"/ws/v1/cluster/apps/{YARN_APP}")]
    assert len(asks) >= 2  # ACCEPTED was seen and waited on


def test_a_yarn_application_that_fails_at_start_up_names_its_diagnostics(tmp_path, fake_yarn):
    from airflow_kafka_failover.hooks.streaming_job import JobStartError

    bin_dir, _calls, rm = fake_yarn
    rm.apps[YARN_APP] = "FAILED"
    rm.diagnostics[YARN_APP] = "Application application_1700000000000_0042 failed 2 times: exit code 13"
    with pytest.raises(JobStartError) as err:
        _submit(StreamingJobHook("spark_yarn", jars=""), tmp_path, bin_dir)
    assert f"YARN application {YARN_APP} (job of pair 'orders' on B at epoch 1" in str(err.value)
    assert (
        "ended FAILED (FAILED) during start-up: Application application_1700000000000_0042 failed 2 "
        in str(err.value)
    )


@pytest.mark.slow
def test_a_yarn_application_still_accepted_at_the_deadline_is_killed(tmp_path, fake_yarn):
    from airflow_kafka_failover.hooks.streaming_job import JobStartError

    bin_dir, _calls, rm = fake_yarn
    rm.apps[YARN_APP] = "ACCEPTED"
    with pytest.raises(JobStartError) as err:
        _submit(StreamingJobHook("spark_yarn", jars=""), tmp_path, bin_dir, startup_timeout=1.0)
    assert f"YARN application {YARN_APP}" in str(err.value)
    assert (
        "was not RUNNING within 1 s (state ACCEPTED); it was killed through the ResourceManager (KILLED)"
        in (str(err.value))
    )
    assert rm.apps[YARN_APP] == "KILLED"


def test_a_retried_yarn_submit_adopts_the_live_application(tmp_path, fake_yarn):
    bin_dir, calls, rm = fake_yarn
    hook = StreamingJobHook("spark_yarn", jars="")
    first = _submit(hook, tmp_path, bin_dir)
    again = _submit(hook, tmp_path, bin_dir)
    assert _submissions(calls) == 1
    assert again == first and again.application_id == YARN_APP
    # Once the application ended, a retry submits a new one.
    rm.apps[YARN_APP] = "KILLED"
    rm.apps["application_1700000000000_0043"] = "RUNNING"
    (bin_dir / "spark-submit").write_text((bin_dir / "spark-submit").read_text().replace("_0042", "_0043"))
    third = _submit(hook, tmp_path, bin_dir)
    assert _submissions(calls) == 2 and third.application_id == "application_1700000000000_0043"


def test_a_retried_yarn_submit_never_submits_while_the_resource_manager_is_silent(tmp_path, fake_yarn):
    from airflow_kafka_failover.hooks.streaming_job import JobStartError

    bin_dir, calls, rm = fake_yarn
    hook = StreamingJobHook("spark_yarn", jars="")
    _submit(hook, tmp_path, bin_dir)
    rm.status_override, rm.body_override = 503, b"standby"
    with pytest.raises(JobStartError) as err:
        _submit(hook, tmp_path, bin_dir)
    assert f"answered HTTP 503 to GET {rm.url}/ws/v1/cluster/apps/{YARN_APP}" in str(err.value)
    assert "Nothing was submitted, so that two drivers of epoch 1 never run" in str(err.value)
    assert _submissions(calls) == 1


def test_a_retried_yarn_submit_whose_application_yarn_forgot_is_a_clear_error(tmp_path, fake_yarn):
    from airflow_kafka_failover.hooks.streaming_job import CLUSTER_HANDLE_FILE, JobStartError

    bin_dir, calls, rm = fake_yarn
    hook = StreamingJobHook("spark_yarn", jars="")
    _submit(hook, tmp_path, bin_dir)
    del rm.apps[YARN_APP]
    with pytest.raises(JobStartError) as err:
        _submit(hook, tmp_path, bin_dir)
    _settings_, layout = _settings(tmp_path)
    assert f"does not know application {YARN_APP}" in str(err.value)
    assert f"The run's last submission ({layout.run_dir}/{CLUSTER_HANDLE_FILE}) names it" in str(err.value)
    assert _submissions(calls) == 1


def test_stopping_an_ended_yarn_application_does_nothing(tmp_path, fake_yarn):
    bin_dir, _calls, rm = fake_yarn
    hook = StreamingJobHook("spark_yarn", jars="")
    handle = _submit(hook, tmp_path, bin_dir)
    rm.apps[YARN_APP] = "FINISHED"
    assert hook.stop(handle.to_dict(), timeout=5) == "not-running"
    assert not any(method == "PUT" for method, _ in rm.requests)


@pytest.mark.slow
def test_a_yarn_application_that_ends_on_the_stop_request_is_stopped_not_killed(tmp_path, fake_yarn):
    import threading

    bin_dir, _calls, rm = fake_yarn
    hook = StreamingJobHook("spark_yarn", jars="")
    handle = _submit(hook, tmp_path, bin_dir)
    # The driver does not share the run folder's status.json: only YARN's state tells that it ended.
    timer = threading.Timer(1.0, lambda: rm.apps.__setitem__(YARN_APP, "FINISHED"))
    timer.start()
    try:
        assert hook.stop(handle.to_dict(), timeout=20) == "stopped"
    finally:
        timer.cancel()
    assert not any(method == "PUT" for method, _ in rm.requests)


def test_stopping_a_handle_with_a_pod_on_yarn_changes_nothing(tmp_path, fake_yarn):
    from airflow_kafka_failover.core.exceptions import ConfigError
    from airflow_kafka_failover.run_format.layout import stop_request_file

    _bin_dir, _calls, rm = fake_yarn
    settings, layout = _settings(tmp_path)
    handle = {
        "pair": "orders",
        "cluster": "B",
        "epoch": 1,
        "deploy_mode": "cluster",
        "master": "yarn",
        "run_dir": str(layout.run_dir),
        "checkpoint": str(layout.checkpoint),
        "sink_root": settings.sink_root,
        "driver_id": "spark-jobs:akf-orders-driver",
    }
    with pytest.raises(ConfigError, match="names driver 'spark-jobs:akf-orders-driver'"):
        StreamingJobHook("spark_yarn").stop(handle, timeout=1)
    assert not Path(stop_request_file(layout.run_dir)).exists() and rm.requests == []


def test_the_standalone_web_ui_port_comes_from_the_connection_extra(monkeypatch):
    from airflow_kafka_failover.core.exceptions import ConfigError

    def connection(extra: dict) -> str:
        return json.dumps({"conn_type": "spark", "host": "spark://m:7077", "extra": extra})

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_SA", connection({"standalone_master_webui_port": "18080"}))
    assert StreamingJobHook("spark_sa").standalone_master_webui_port() == 18080
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_SA", connection({}))
    assert StreamingJobHook("spark_sa").standalone_master_webui_port() is None
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_SA", connection({"standalone_master_webui_port": "ui"}))
    with pytest.raises(ConfigError, match="'standalone_master_webui_port' is 'ui'"):
        StreamingJobHook("spark_sa").standalone_master_webui_port()


@pytest.mark.slow
def test_on_kill_while_waiting_for_yarn_kills_the_submitted_application(
    tmp_path, fake_yarn, checked_without_kafka
):
    import threading

    from airflow_kafka_failover.hooks.streaming_job import JobStartError

    bin_dir, calls, rm = fake_yarn
    rm.apps[YARN_APP] = "ACCEPTED"  # never RUNNING: the submit waits until the task is killed
    operator = _submit_operator(tmp_path, spark_conn_id="spark_yarn", stop_timeout_seconds=0.5)

    def kill_the_task_once_submitted() -> None:
        while _submissions(calls) == 0:
            threading.Event().wait(0.1)
        operator._starting = operator.request()  # what execute() holds while the hook submits
        operator.on_kill()

    killer = threading.Thread(target=kill_the_task_once_submitted)
    killer.start()
    with pytest.raises(JobStartError, match=f"YARN application {YARN_APP} .* ended KILLED"):
        _submit(StreamingJobHook("spark_yarn", jars=""), tmp_path, bin_dir, startup_timeout=60)
    killer.join(timeout=30)
    assert rm.apps[YARN_APP] == "KILLED" and ("PUT", f"/ws/v1/cluster/apps/{YARN_APP}/state") in rm.requests


def test_a_launch_without_spark_submit_on_its_path_is_refused_before_writing_anything(tmp_path, fake_yarn):
    """An Airflow host without the provider's ``spark`` extra and without a Spark distribution on PATH."""
    from airflow_kafka_failover.hooks.streaming_job import JobStartError

    _bin_dir, calls, _rm = fake_yarn
    settings, layout = _settings(tmp_path)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    with pytest.raises(JobStartError) as refused:
        StreamingJobHook("spark_yarn", jars="").submit(settings, layout, env={"PATH": str(empty)})
    message = str(refused.value)
    assert "spark-submit 'spark-submit'" in message and "'spark_yarn'" in message and str(empty) in message
    assert "airflow-kafka-failover[spark]" in message and "set SPARK_HOME" in message
    assert not Path(layout.settings_file).exists() and _submissions(calls) == 0

"""The cluster managers' conformance suite (issue 28): the same cases against each of them, then the cases
only one of them has.

One bench per manager (``cluster_benches.py``): a local-mode driver on this host, a client-mode driver on a
real Spark standalone master and worker, a PySpark driver in YARN cluster mode on a Hadoop minicluster, and
the real spark-submit in Kubernetes cluster mode against the fake API server (a thread of the bench plays
the driver pod). Each starts its cluster once; pytest runs one bench's cases together and stops its cluster
before the next bench starts. Every run is the contract job (``contract_job.py``) started the product's way,
through ``StreamingJobHook.submit()``, and stopped through ``StreamingJobHook.stop()``.

The cases that only look at a live run share one per bench (started on first use): the first two, and the
unknown-is-never-dead case, which freezes the manager under it and checks that it runs on; the run that
obeys the stop request is then stopped, and the one that ignores it is a run of its own. The local driver
has no manager apart from itself to make unreachable: its own case shows that its process file cannot
lie instead. The cases only one manager has run on the same clusters.
"""

from __future__ import annotations

import json
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.kubernetes_pods import run_label
from airflow_kafka_failover.cluster_managers.registry import ClusterManagers
from airflow_kafka_failover.cluster_managers.yarn import (
    ResourceManagerClient,
    UnknownYarnApplication,
    YarnApplicationState,
)
from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.hooks.streaming_job import JobStartError
from airflow_kafka_failover.run_format.layout import stop_requested
from tests.integration.cluster_benches import (
    CLUSTER,
    PAIR,
    Bench,
    bench_of,
    master_state,
    yarn_applications,
)
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.spark

EVERY_MANAGER = ["local", "standalone", "yarn", "kubernetes"]
APART_FROM_THE_DRIVER = ["standalone", "yarn", "kubernetes"]
"""The managers that are not the driver itself: they can be unreachable while it runs."""
STOP_TIMEOUT = 60.0
"""An obedient job stops within a second or two of its stop request; this is the bound."""
IGNORED_STOP_TIMEOUT = 3.0
"""What a job that ignores its stop request is given before the kill."""


@pytest.fixture(scope="module", params=EVERY_MANAGER)
def bench(request: pytest.FixtureRequest) -> Iterator[Bench]:
    with bench_of(request.param) as opened:
        yield opened


# ---- the same cases against each manager ---------------------------------------------------------------


def test_a_run_waited_for_is_alive_and_a_second_submit_adopts_its_driver(bench):
    run = bench.shared_run()
    handle = run.handle
    assert handle.manager == bench.name
    assert ClusterManagers().alive(handle) is True
    driver = bench.driver(handle)
    assert bench.drivers(run) == [driver]

    # A retried task, or the keeper, submits the same (pair, cluster, epoch): the live driver is adopted.
    again = run.submit(startup_timeout=60)
    assert bench.driver(again) == driver
    assert bench.drivers(run) == [driver]


def test_the_log_tail_and_the_description_name_the_driver(bench):
    handle = bench.shared_run().handle
    assert bench.in_log(handle) in ClusterManagers().log_tail(handle, 40)
    assert bench.driver(handle) in handle.describe()


@pytest.mark.parametrize("bench", APART_FROM_THE_DRIVER, indirect=True)
def test_an_unreachable_manager_is_unknown_never_dead(bench):
    """Seen from another Airflow worker (no process of the run there): while the manager does not answer,
    whether the driver runs is unknown, and a retried submit starts nothing; the driver ran on."""
    run = bench.shared_run()
    driver = bench.driver(run.handle)
    elsewhere = run.from_another_host()
    handle = elsewhere.handle
    managers = ClusterManagers()
    with bench.unreachable():
        with pytest.raises(bench.unknown, match="may still run"):
            managers.alive(handle)
        assert managers.alive_or_unknown(handle) is None
        assert isinstance(managers.log_tail(handle), str)
        with pytest.raises(JobStartError, match="(?i)nothing was submitted"):
            elsewhere.submit(startup_timeout=30)
    assert managers.alive(handle) is True
    assert bench.drivers(run) == [driver]


def test_a_run_that_obeys_the_stop_request_stops(bench):
    run = bench.shared_run()
    handle = run.handle
    assert run.stop(timeout=STOP_TIMEOUT) == "stopped"
    assert ClusterManagers().alive(handle) is False
    assert handle.status()["state"] == "stopped"
    assert bench.drivers(run) == []
    # Stopping again finds nothing to stop.
    assert run.hook.stop(handle.to_dict(), timeout=5) == "not-running"


def test_a_run_that_ignores_the_stop_request_is_killed(bench):
    run = bench.start(obeys=False)
    handle = run.handle
    started = time.monotonic()
    assert run.stop(timeout=IGNORED_STOP_TIMEOUT) == "forced"
    took = time.monotonic() - started
    print(f"{bench.name}: forced in {took:.1f} s")
    assert took < IGNORED_STOP_TIMEOUT + bench.kill_takes
    assert stop_requested(handle.run_dir)  # asked first
    assert ClusterManagers().alive(handle) is False
    status = handle.status()
    assert status["state"] == "killed", status
    assert bench.kill_said(handle) in status["reason"]
    assert bench.drivers(run) == []
    wait_for(lambda: not bench.left_behind(handle), 60, f"nothing of {bench.driver(handle)} left running")
    assert isinstance(ClusterManagers().log_tail(handle), str)
    assert run.hook.stop(handle.to_dict(), timeout=5) == "not-running"


# ---- what only one manager has ---------------------------------------------------------------------------


@pytest.mark.parametrize("bench", ["local"], indirect=True)
def test_local_a_pid_file_naming_a_recycled_pid_is_not_the_job(bench):
    """The local driver has no manager apart from itself to lose; its process file is what could lie. Once
    the job ended, its pid may be given to another process: that process is not the job."""
    run = bench.ended_run()
    handle = run.handle
    record = json.loads(handle.process.pid_file.read_text())
    stranger = ManagedProcess("stranger", bench.root)
    stranger.start(["sleep", "300"])
    try:
        # The job's pid file, its pid now another process's (started at another time).
        handle.process.pid_file.write_text(json.dumps({**record, "pid": stranger.pid()}))
        managers = ClusterManagers()
        assert managers.alive(handle) is False
        assert "not running" in handle.describe()
        assert managers.of(handle).live_run(handle, run.layout) is None  # a submit starts its own
        assert run.hook.stop(handle.to_dict(), timeout=5) == "not-running"
        assert stranger.is_running()  # never signalled
    finally:
        stranger.stop(timeout=5)


@pytest.mark.parametrize("bench", ["standalone"], indirect=True)
def test_standalone_an_application_the_master_ended_is_dead_whatever_pid_lives(bench):
    """A live process in the run's pid file (the driver's pid reused, or a pid file of another host) does not
    make the application the master ended alive."""
    run = bench.ended_run()
    handle = run.handle
    ended = wait_for(
        lambda: [a for a in master_state(bench.cluster)["completedapps"] if a["id"] == handle.application_id],
        60,
        "the master to list the application as completed",
    )
    assert ended[0]["state"] == "FINISHED"
    handle.process.start(["sleep", "60"])
    try:
        assert handle.process.is_running()
        assert ClusterManagers().alive(handle) is False
    finally:
        handle.process.stop(timeout=5)


def yarn_handle(run_dir: Path, application_id: str, resource_manager: str | None) -> JobHandle:
    """The handle of a YARN application of the tests' own (not submitted through the hook)."""
    return JobHandle(
        pair=PAIR,
        cluster=CLUSTER,
        epoch=0,
        deploy_mode="cluster",
        master="yarn",
        run_dir=str(run_dir),
        checkpoint=str(run_dir / "ckpt"),
        sink_root=str(run_dir / "sink"),
        application_id=application_id,
        resource_manager=resource_manager,
    )


@pytest.mark.parametrize("bench", ["yarn"], indirect=True)
def test_yarn_a_handle_without_an_address_finds_the_resource_manager_in_hadoop_conf_dir(
    bench, tmp_path, monkeypatch
):
    hadoop = bench.cluster
    client = ResourceManagerClient(hadoop.resource_manager_url)
    app = hadoop.submit_sleeping_application("akf-sleep-conf", seconds=600)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hadoop.conf_dir))
    job = yarn_handle(tmp_path, app, resource_manager=None)
    # Queued (ACCEPTED) counts as alive: a second submit then would start a second driver.
    assert ClusterManagers().alive(job) is True
    wait_for(lambda: client.application(app).state == YarnApplicationState.RUNNING, 90, f"{app} RUNNING")
    assert client.kill(app, wait_seconds=30).state == YarnApplicationState.KILLED
    assert ClusterManagers().alive(job) is False
    # Killing again is a no-op on an application in a final state.
    assert client.kill(app).state == YarnApplicationState.KILLED


@pytest.mark.parametrize("bench", ["yarn"], indirect=True)
def test_yarn_an_application_id_the_resource_manager_does_not_know_is_a_clear_error(bench, tmp_path):
    hadoop = bench.cluster
    cluster_timestamp = json.load(
        urllib.request.urlopen(f"{hadoop.resource_manager_url}/ws/v1/cluster/info")
    )["clusterInfo"]["id"]
    missing = f"application_{cluster_timestamp}_9999"
    job = yarn_handle(tmp_path, missing, hadoop.resource_manager_url)
    with pytest.raises(UnknownYarnApplication) as err:
        ClusterManagers().alive(job)
    assert f"does not know application {missing}" in str(err.value)
    assert "not found" in str(err.value)
    with pytest.raises(ConfigError, match="'app-20240101000000-0001' is not a YARN application id"):
        ResourceManagerClient(hadoop.resource_manager_url).is_alive("app-20240101000000-0001")


FAILING_JOB = """
    import sys

    sys.exit("the job's settings are unusable (a start-up failure before the SparkSession)")
"""


@pytest.mark.parametrize("bench", ["yarn"], indirect=True)
def test_yarn_a_driver_that_fails_at_start_up_is_a_clear_error(bench, tmp_path):
    """The application never reaches RUNNING (its driver exits before the SparkSession): the submit names
    the application and YARN's diagnostics."""
    application = tmp_path / "failing_job.py"
    application.write_text(textwrap.dedent(FAILING_JOB))
    run = bench.new_run()
    started = time.monotonic()
    with pytest.raises(JobStartError) as err:
        run.submit(startup_timeout=180, application=application)
    print(f"the failing driver was reported {time.monotonic() - started:.0f} s after submission")
    (app,) = [app for app in yarn_applications(bench.cluster) if app["name"] == run.app_name]
    assert app["finalStatus"] == "FAILED"
    message = str(err.value)
    assert f"YARN application {app['id']} (job of pair '{PAIR}' on {CLUSTER} at epoch" in message
    assert f"ended {app['state']} (FAILED) during start-up: " in message
    assert app["diagnostics"] and app["diagnostics"][:200] in message


@pytest.mark.parametrize("bench", ["kubernetes"], indirect=True)
def test_kubernetes_the_real_spark_submit_creates_the_pod_the_provider_named_and_labelled(bench):
    """What spark-submit (pyspark 4.0's, which carries Spark's Kubernetes client) did for the bench's runs:
    the pod has the name and labels the provider set, and Spark printed it only as the submission id,
    which the Spark provider (6.3) does not parse in a namespace other than "spark" (why the provider names
    the pod itself)."""

    def pod_of(handle: JobHandle | None) -> dict | None:
        return None if handle is None else bench.api.pod(*str(handle.driver_id).split(":"))

    # A run of the cases whose pod is still there (stopped on request, it is Succeeded), else a new one.
    run = next((run for run in bench.runs if pod_of(run.handle)), None) or bench.shared_run()
    ref = run.handle.driver_pod()
    pod = pod_of(run.handle)
    assert ref.namespace == bench.namespace and ref.name.startswith(f"akf-{PAIR}-{CLUSTER.lower()}-e")
    assert pod["metadata"]["labels"]["akf-run"] == run_label(PAIR, CLUSTER, run.settings.epoch)
    assert pod["metadata"]["labels"]["spark-role"] == "driver"
    created = {
        (method, path.split("/")[5]) for method, path in bench.api.requests if method in ("POST", "PATCH")
    }
    assert created == {("POST", "pods"), ("PATCH", "services"), ("PATCH", "configmaps")}
    [spark_submit] = [hook for hook in run.hook.built if hook._name != "probe"]  # the adoption built none
    said = "\n".join(spark_submit._last_submit_log_lines)
    assert f"submission ID {ref} into Kubernetes" in said
    assert spark_submit._kubernetes_driver_pod is None

"""YARN applications tracked and killed through a real ResourceManager's REST API.

The module starts one Hadoop minicluster (ResourceManager, NodeManager, NameNode, DataNode in one JVM from
the Maven Central jars) and submits real YARN applications to it: a JVM application master that registers
and sleeps, and PySpark applications in ``yarn`` cluster deploy mode submitted through StreamingJobHook (one
that fails before its driver starts, one that runs: the submit waits for RUNNING, a retried submit adopts it).
The last test stops the cluster and checks that a silent ResourceManager is "cannot reach", never "dead", and
that the keeper's look says "unknown" and waits.
"""

from __future__ import annotations

import json
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from akf_devtools.sandbox.hadoop import HadoopMiniCluster

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.cluster_managers.yarn import (
    ResourceManagerClient,
    ResourceManagerUnreachable,
    UnknownYarnApplication,
    YarnApplicationState,
)
from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.domain.keeper_findings import Finding, KeeperLimits, assess
from airflow_kafka_failover.hooks.streaming_job import JobStartError, StreamingJobHook
from airflow_kafka_failover.jobs.layout import RunLayout, read_status
from airflow_kafka_failover.jobs.settings import JobSettings
from airflow_kafka_failover.triggers.job_keeper import JobLooker
from tests.builders import run_of
from tests.integration.conftest import RUN_ROOT
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def hadoop():
    cluster = HadoopMiniCluster(RUN_ROOT / "hadoop-yarn")
    try:
        took = cluster.up()
        print(f"Hadoop minicluster up in {took:.1f} s at {cluster.resource_manager_url}")
        yield cluster
    finally:
        cluster.down()
    # The NodeManager stops its containers; nothing of the cluster may outlive the module.
    assert not cluster.process.is_running()
    assert cluster.container_pids() == []


def yarn_handle(run_dir: Path, application_id: str, resource_manager: str | None) -> JobHandle:
    return JobHandle(
        pair="orders",
        cluster="B",
        epoch=4,
        deploy_mode="cluster",
        master="yarn",
        run_dir=str(run_dir),
        checkpoint=str(run_dir / "ckpt"),
        sink_root=str(run_dir / "sink"),
        spark_conn_id="spark_yarn_it",
        application_id=application_id,
        resource_manager=resource_manager,
    )


def state(client: ResourceManagerClient, application_id: str) -> YarnApplicationState:
    return client.application(application_id).state


def test_a_running_application_is_alive_and_the_hook_kills_it(hadoop, tmp_path, monkeypatch):
    client = ResourceManagerClient(hadoop.resource_manager_url)
    app = hadoop.submit_sleeping_application("akf-sleep-kill", seconds=600)
    wait_for(lambda: state(client, app) == YarnApplicationState.RUNNING, 90, f"{app} RUNNING")
    handle = yarn_handle(tmp_path, app, hadoop.resource_manager_url)
    assert job_alive(handle) is True
    # The master's container is a real JVM working inside the cluster's folder.
    assert hadoop.container_pids(app)

    extra = {"deploy-mode": "cluster", "yarn_resourcemanager_webapp_address": hadoop.resource_manager_url}
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_YARN_IT", json.dumps({"conn_type": "spark", "host": "yarn", "extra": extra})
    )
    # The application never reads the stop request: the hook kills it through the ResourceManager.
    assert StreamingJobHook("spark_yarn_it").stop(handle.to_dict(), timeout=1) == "forced"
    report = client.application(app)
    assert (report.state, report.final_status) == (YarnApplicationState.KILLED, "KILLED")
    assert job_alive(handle) is False
    status = read_status(tmp_path)
    assert status["state"] == "killed" and f"YARN application {app} is KILLED" in status["reason"]
    wait_for(lambda: not hadoop.container_pids(app), 60, "the killed master's container to be gone")
    # Killing again is a no-op on an application in a final state.
    assert client.kill(app).state == YarnApplicationState.KILLED


def test_a_handle_without_an_address_finds_the_resource_manager_in_hadoop_conf_dir(
    hadoop, tmp_path, monkeypatch
):
    client = ResourceManagerClient(hadoop.resource_manager_url)
    app = hadoop.submit_sleeping_application("akf-sleep-conf", seconds=600)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hadoop.conf_dir))
    handle = yarn_handle(tmp_path, app, None)
    # Queued (ACCEPTED) counts as alive: a second submit then would start a second driver.
    assert job_alive(handle) is True
    wait_for(lambda: state(client, app) == YarnApplicationState.RUNNING, 90, f"{app} RUNNING")
    assert client.kill(app, wait_seconds=30).state == YarnApplicationState.KILLED
    assert job_alive(handle) is False


def test_an_application_id_the_resource_manager_does_not_know_is_a_clear_error(hadoop, tmp_path):
    cluster_timestamp = json.load(
        urllib.request.urlopen(f"{hadoop.resource_manager_url}/ws/v1/cluster/info")
    )["clusterInfo"]["id"]
    missing = f"application_{cluster_timestamp}_9999"
    with pytest.raises(UnknownYarnApplication) as err:
        job_alive(yarn_handle(tmp_path, missing, hadoop.resource_manager_url))
    assert f"does not know application {missing}" in str(err.value)
    assert "not found" in str(err.value)
    with pytest.raises(ConfigError, match="'app-20240101000000-0001' is not a YARN application id"):
        ResourceManagerClient(hadoop.resource_manager_url).is_alive("app-20240101000000-0001")


TINY_JOB = """
    import json
    import sys
    import time

    from pyspark.sql import SparkSession

    # Keeps the job's contract only as far as the test needs: read --settings, report running in status.json.
    settings = json.load(open(sys.argv[sys.argv.index("--settings") + 1]))
    spark = SparkSession.builder.getOrCreate()
    count = spark.range(1000).count()
    status = {"state": "running", "rows": count, "application_id": spark.sparkContext.applicationId}
    with open(settings["run_dir"] + "/status.json", "w") as out:
        json.dump(status, out)
    time.sleep(600)
"""


FAILING_JOB = """
    import sys

    sys.exit("the job's settings are unusable (a start-up failure before the SparkSession)")
"""


def yarn_hook(hadoop, monkeypatch) -> StreamingJobHook:
    for name, value in hadoop.env.items():
        monkeypatch.setenv(name, value)
    extra = {"deploy-mode": "cluster", "yarn_resourcemanager_webapp_address": hadoop.resource_manager_url}
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_YARN_IT", json.dumps({"conn_type": "spark", "host": "yarn", "extra": extra})
    )
    python = sys.executable
    jvm = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    return StreamingJobHook(
        "spark_yarn_it",
        conf={
            "spark.yarn.appMasterEnv.PYSPARK_PYTHON": python,
            "spark.executorEnv.PYSPARK_PYTHON": python,
            "spark.executor.instances": "1",
            "spark.driver.extraJavaOptions": jvm,
            "spark.executor.extraJavaOptions": jvm,
            "spark.yarn.maxAppAttempts": "1",
        },
        jars="",
        packages=None,
        driver_memory="512m",
        executor_memory="512m",
    )


def yarn_run(tmp_path: Path, epoch: int) -> tuple[JobSettings, RunLayout]:
    return run_of(tmp_path, epoch, bootstrap="127.0.0.1:9")


def applications_named(hadoop, name: str) -> list[dict]:
    with urllib.request.urlopen(f"{hadoop.resource_manager_url}/ws/v1/cluster/apps", timeout=10) as answer:
        apps = (json.load(answer).get("apps") or {}).get("app") or []
    return [app for app in apps if app["name"] == name]


@pytest.mark.spark
def test_a_pyspark_driver_that_fails_at_start_up_is_a_clear_error(hadoop, tmp_path, monkeypatch):
    """The application never reaches RUNNING (its driver exits before the SparkSession): the submit names
    the application and YARN's diagnostics."""
    application = tmp_path / "failing_job.py"
    application.write_text(textwrap.dedent(FAILING_JOB))
    settings, layout = yarn_run(tmp_path, 6)
    started = time.monotonic()
    with pytest.raises(JobStartError) as err:
        yarn_hook(hadoop, monkeypatch).submit(settings, layout, application=application, startup_timeout=180)
    print(f"the failing driver was reported {time.monotonic() - started:.0f} s after submission")
    (app,) = applications_named(hadoop, "akf-orders-B-epoch-6")
    assert app["finalStatus"] == "FAILED"
    message = str(err.value)
    assert f"YARN application {app['id']} (job of pair 'orders' on B at epoch 6" in message
    assert f"ended {app['state']} (FAILED) during start-up: " in message
    assert app["diagnostics"] and app["diagnostics"][:200] in message


@pytest.mark.spark
def test_pyspark_in_yarn_cluster_mode_through_the_hook(hadoop, tmp_path, monkeypatch):
    """spark-submit --master yarn --deploy-mode cluster through the hook; it waits until the application
    runs, a retried submit adopts it, and it is tracked and killed through REST."""
    application = tmp_path / "tiny_job.py"
    application.write_text(textwrap.dedent(TINY_JOB))
    hook = yarn_hook(hadoop, monkeypatch)
    settings, layout = yarn_run(tmp_path, 5)
    client = ResourceManagerClient(hadoop.resource_manager_url)
    submitted = time.monotonic()
    handle = hook.submit(settings, layout, application=application)
    print(f"YARN application RUNNING {time.monotonic() - submitted:.0f} s after submission")
    assert (handle.deploy_mode, handle.master) == ("cluster", "yarn")
    assert handle.application_id is not None and handle.application_id.startswith("application_")
    assert handle.resource_manager == hadoop.resource_manager_url
    # The submit returned once YARN said RUNNING (ACCEPTED is not running).
    assert client.application(handle.application_id).state == YarnApplicationState.RUNNING

    # A retried submit of the same run (a task retry, the keeper) adopts the application.
    again = hook.submit(settings, layout, application=application)
    assert again.application_id == handle.application_id
    assert [app["id"] for app in applications_named(hadoop, "akf-orders-B-epoch-5")] == [
        handle.application_id
    ]

    def driver_reported_running() -> bool:
        report = client.application(handle.application_id)
        assert report.alive, f"{report.application_id} ended {report.state}: {report.diagnostics[-3000:]}"
        return read_status(layout.run_dir).get("state") == "running"

    wait_for(driver_reported_running, 240, "the PySpark driver on YARN to report running", interval=2.0)
    print(f"PySpark driver on YARN reported running {time.monotonic() - submitted:.0f} s after submission")
    status = read_status(layout.run_dir)
    assert (status["rows"], status["application_id"]) == (1000, handle.application_id)
    assert job_alive(handle) is True
    # The tiny job ignores the stop request: the hook kills it through the ResourceManager.
    assert hook.stop(handle.to_dict(), timeout=3) == "forced"
    assert client.application(handle.application_id).state == YarnApplicationState.KILLED
    assert job_alive(handle) is False
    assert read_status(layout.run_dir)["state"] == "killed"
    # Stopping again finds nothing to stop and kills nothing.
    assert hook.stop(handle.to_dict(), timeout=3) == "not-running"


def test_a_stopped_resource_manager_is_unreachable_not_dead(hadoop, tmp_path):
    app = hadoop.submit_sleeping_application("akf-sleep-orphan", seconds=600)
    handle = yarn_handle(tmp_path, app, hadoop.resource_manager_url)
    assert job_alive(handle) is True
    hadoop.down()
    with pytest.raises(ResourceManagerUnreachable) as err:
        job_alive(handle)
    assert str(err.value).startswith(
        f"cannot reach the YARN ResourceManager at {hadoop.resource_manager_url}"
    )
    assert "it may still run" in str(err.value)
    # The keeper's look: whether the job runs cannot be told, so it waits (never a restart, never "dead").
    looker = JobLooker("orders", handle.to_dict(), str(tmp_path / "fence"), "no_such_kafka", ["orders"])
    look = looker.look()
    assert look.alive is None
    assert assess(look, KeeperLimits(stall_seconds=60.0, max_lag_records=None)) == [Finding.UNKNOWN]

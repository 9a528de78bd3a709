"""The job on a real Spark standalone cluster (master + worker from pyspark's spark-class, on loopback).

Standalone clusters do not run Python drivers in cluster deploy mode, so the driver runs in client mode as
a detached process next to Airflow, and stopping it ends the application on the cluster. The driver is also
tracked through the master's ``/json/``: the handle records Spark's application id, a retried submit adopts
the application the master runs, an application the master ended is dead whatever pid lives, and a master
that does not answer is "unknown" (the keeper waits).
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from akf_devtools.sandbox.kafka_io import create_topic
from akf_devtools.sandbox.spark_standalone import SparkStandalone

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.cluster_managers.standalone import StandaloneMasterUnreachable
from airflow_kafka_failover.domain.keeper_findings import Finding, KeeperLimits, assess
from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.jobs.sink import read_sink
from airflow_kafka_failover.sensors.job_progress import StreamingJobProgressSensor
from airflow_kafka_failover.triggers.job_keeper import JobLooker
from tests.integration import translation_support as data
from tests.integration.conftest import RUN_ROOT, register_connections
from tests.integration.job_support import JobWorld, register_spark_connection
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.spark


@pytest.fixture
def standalone():
    cluster = SparkStandalone(RUN_ROOT / "spark-standalone", worker_cores=1, worker_memory="1g")
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()


def master_state(cluster: SparkStandalone) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.master_ui_port}/json/", timeout=5) as response:
        return json.load(response)


def test_job_runs_on_a_standalone_cluster_in_client_mode(sandbox, standalone, tmp_path, unique_topic):
    conns = register_connections(sandbox, "standalone")
    spark = register_spark_connection(
        "spark_standalone",
        standalone.master_url,
        deploy_mode="client",
        extra={"standalone_master_webui_port": standalone.master_ui_port},
    )
    world = JobWorld(tmp_path, "standalone", conns, spark)
    topic = unique_topic("standalone")
    create_topic(sandbox.bootstrap("A"), topic, 2)
    ids = [f"s-{n}" for n in range(200)]
    data.produce_ids(sandbox.bootstrap("A"), topic, ids, 2)
    options = {"total_executor_cores": 1, "executor_memory": "512m"}
    try:
        handle = world.submit("A", 0, [topic], "earliest", **options)
        assert handle["deploy_mode"] == "client" and handle["master"] == standalone.master_url
        apps = wait_for(lambda: master_state(standalone)["activeapps"], 60, "the application on the master")
        assert apps[0]["name"] == "akf-standalone-A-epoch-0"
        # The handle names the application as the master knows it, and the master's word is asked.
        assert (handle["application_id"], handle["master_webui_port"]) == (
            apps[0]["id"],
            standalone.master_ui_port,
        )
        job = JobHandle.from_dict(handle)
        assert job_alive(job) is True
        running = job.standalone_application()
        assert running is not None and running.state == "RUNNING"
        assert f"Spark application {apps[0]['id']}" in job.describe()
        # A retried submit of the same run adopts the application the master runs: no second one.
        again = world.submit("A", 0, [topic], "earliest", **options)
        assert again["application_id"] == handle["application_id"]
        assert [app["id"] for app in master_state(standalone)["activeapps"]] == [apps[0]["id"]]
        sensor = StreamingJobProgressSensor(task_id="progress", handle=handle, min_records=200)
        wait_for(lambda: sensor.poke({}), 180, "200 records through the standalone cluster", interval=2.0)
        assert read_sink(world.sink).record_ids == set(ids)
    finally:
        world.stop_all()
    assert StreamingJobHook(spark).stop(handle) == "not-running"
    wait_for(lambda: not master_state(standalone)["activeapps"], 60, "the application to end on the master")
    (ended,) = [
        app for app in master_state(standalone)["completedapps"] if app["id"] == handle["application_id"]
    ]
    assert ended["state"] == "FINISHED"

    # A live process in the pid file (the driver's pid reused, or a pid file of another host) does not
    # make the application the master ended alive.
    job.process.start(["sleep", "60"])
    try:
        assert job.process.is_running()
        assert job_alive(job) is False
    finally:
        job.process.stop(timeout=5)

    # A master that does not answer: whether the job runs is unknown, never "dead"; the keeper waits.
    standalone.master.stop(timeout=10)
    with pytest.raises(StandaloneMasterUnreachable) as err:
        job_alive(job)
    assert f"the state of {handle['application_id']} is unknown and it may still run" in str(err.value)
    look = JobLooker("standalone", handle, str(tmp_path / "fence"), conns["A"], [topic]).look()
    assert look.alive is None
    assert assess(look, KeeperLimits(stall_seconds=60.0)) == [Finding.UNKNOWN]

"""The job on a real Spark standalone cluster (master + worker from pyspark's spark-class, on loopback).

Standalone clusters do not run Python drivers in cluster deploy mode, so the driver runs in client mode as
a detached process next to Airflow, and stopping it ends the application on the cluster.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from akf_devtools.sandbox.kafka_io import create_topic
from akf_devtools.sandbox.spark_standalone import SparkStandalone

from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.jobs.sink import read_sink
from airflow_kafka_failover.sensors.job_progress import StreamingJobProgressSensor
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
    spark = register_spark_connection("spark_standalone", standalone.master_url, deploy_mode="client")
    world = JobWorld(tmp_path, "standalone", conns, spark)
    topic = unique_topic("standalone")
    create_topic(sandbox.bootstrap("A"), topic, 2)
    ids = [f"s-{n}" for n in range(200)]
    data.produce_ids(sandbox.bootstrap("A"), topic, ids, 2)
    try:
        handle = world.submit("A", 0, [topic], "earliest", total_executor_cores=1, executor_memory="512m")
        assert handle["deploy_mode"] == "client" and handle["master"] == standalone.master_url
        apps = wait_for(lambda: master_state(standalone)["activeapps"], 60, "the application on the master")
        assert apps[0]["name"] == "akf-standalone-A-epoch-0"
        sensor = StreamingJobProgressSensor(task_id="progress", handle=handle, min_records=200)
        wait_for(lambda: sensor.poke({}), 180, "200 records through the standalone cluster", interval=2.0)
        assert read_sink(world.sink).record_ids == set(ids)
    finally:
        world.stop_all()
    assert StreamingJobHook(spark).stop(handle) == "not-running"
    wait_for(lambda: not master_state(standalone)["activeapps"], 60, "the application to end on the master")

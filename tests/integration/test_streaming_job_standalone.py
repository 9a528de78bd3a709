"""The packaged job on a real Spark standalone cluster (master + worker from pyspark's spark-class, on
loopback), reading the sandbox's Kafka.

Standalone clusters do not run Python drivers in cluster deploy mode, so the driver runs in client mode as
a detached process next to Airflow, and stopping it ends the application on the cluster. How the standalone
manager tracks, adopts and stops a driver (the master's word, a silent master, a reused pid) is the
conformance suite's (test_cluster_managers.py); this module runs the real job through the cluster.
"""

from __future__ import annotations

import pytest
from akf_devtools.sandbox.kafka_io import create_topic

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.jobs.sink import read_sink
from airflow_kafka_failover.sensors.job_progress import StreamingJobProgressSensor
from tests.integration import translation_support as data
from tests.integration.cluster_benches import master_state, standalone_cluster
from tests.integration.conftest import RUN_ROOT, register_connections
from tests.integration.job_support import JobWorld, register_spark_connection
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.spark


@pytest.fixture
def standalone():
    with standalone_cluster(RUN_ROOT / "spark-standalone") as cluster:
        yield cluster


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
        # The handle names the application as the master knows it.
        assert (handle["application_id"], handle["master_webui_port"]) == (
            apps[0]["id"],
            standalone.master_ui_port,
        )
        assert job_alive(JobHandle.from_dict(handle)) is True
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

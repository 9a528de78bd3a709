"""The health sensors inside real DAG runs (``dag.test()``), the deferrable path through the trigger too."""

from __future__ import annotations

from akf_devtools.sandbox.kafka_io import create_topic, end_offsets, produce

from tests.integration.conftest import register_connections, run_dag_test
from tests.integration.waiting import wait_for

RECOVERED_DAG = """
import datetime
from airflow.sdk import DAG
from airflow_kafka_failover.sensors.cluster_health import KafkaClusterRecoveredSensor

with DAG("{dag_id}", schedule=None, start_date=datetime.datetime(2026, 1, 1)) as dag:
    KafkaClusterRecoveredSensor(
        task_id="a_recovered",
        kafka_config_id="{conn_a}",
        cluster_alias="A",
        active_kafka_config_id="{conn_b}",
        active_alias="B",
        replicated_topics=["{topic}"],
        thresholds={{"stability_window_seconds": 6.0}},
        deferrable={deferrable},
        timeout=120,
    )
"""


def test_recovered_sensor_deferrable_through_dag_test(sandbox, airflow_home, unique_topic):
    conns = register_connections(sandbox, "dagrec")
    topic = unique_topic("on-b")
    create_topic(sandbox.bootstrap("B"), topic, 2)
    produce(sandbox.bootstrap("B"), topic, [(None, b"x", i % 2, None) for i in range(40)])
    wait_for(
        lambda: sum((end_offsets(sandbox.bootstrap("A"), f"B.{topic}") or {}).values()) >= 40,
        60,
        "replication to A",
    )
    source = RECOVERED_DAG.format(
        dag_id="recovered_deferrable", conn_a=conns["A"], conn_b=conns["B"], topic=topic, deferrable=True
    )
    state, output = run_dag_test(airflow_home, source, "recovered_deferrable")
    assert state == "success", output[-4000:]
    assert "Deferring" in output, "the sensor must hand its wait to the trigger"
    assert "caught up" in output or "recovered" in output
    assert "Probes of cluster A" in output

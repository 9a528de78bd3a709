"""A driver without Spark's Kafka source or the Kafka client is refused, naming the jars that fix it."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.jobs.classpath import check_kafka_classpath, kafka_source_coordinates
from airflow_kafka_failover.run_format.fencing import FencingMarker
from tests.unit.jobs.test_api import settings_file


def fake_spark(loadable: set[str]) -> SimpleNamespace:
    utils = SimpleNamespace(classIsLoadable=lambda name: name in loadable)
    jvm = SimpleNamespace(
        org=SimpleNamespace(apache=SimpleNamespace(spark=SimpleNamespace(util=SimpleNamespace(Utils=utils)))),
        scala=SimpleNamespace(
            util=SimpleNamespace(Properties=SimpleNamespace(versionNumberString=lambda: "2.13.16"))
        ),
    )
    return SimpleNamespace(sparkContext=SimpleNamespace(_jvm=jvm), version="3.5.6")


def test_the_coordinates_follow_the_drivers_spark_and_scala():
    assert kafka_source_coordinates("4.0.0", "2.13.16") == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"
    assert kafka_source_coordinates("3.5.6", "2.12.18") == "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.6"


def test_a_classpath_with_both_passes():
    check_kafka_classpath(
        fake_spark(
            {"org.apache.spark.sql.kafka010.KafkaSourceProvider", "org.apache.kafka.clients.admin.Admin"}
        )
    )


def test_a_missing_kafka_client_alone_is_named():
    with pytest.raises(
        ConfigError,
        match=r"lacks the Kafka client \(kafka-clients: org.apache.kafka.clients.admin.Admin\): give",
    ):
        check_kafka_classpath(fake_spark({"org.apache.spark.sql.kafka010.KafkaSourceProvider"}))


# The driver runs in a process of its own: a SparkSession started in the test worker would stay in its JVM,
# without the jars that later tests in the same worker (the record-id reader's) put on the classpath.
DRIVER = """
import sys
from airflow_kafka_failover.jobs.api import FailoverStream
FailoverStream.from_args(
    ["--settings", sys.argv[1]], spark_config={"spark.master": "local[1]", "spark.ui.enabled": "false"}
)
"""


@pytest.mark.slow
def test_a_real_driver_without_the_jars_is_refused_before_its_query(tmp_path):
    """A real local SparkSession without --jars: the run writes ``refused`` naming the coordinates, exits 2,
    and claims nothing (the checkpoint folder is not created)."""
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, 2, "A")
    path = settings_file(tmp_path)
    driver = subprocess.run(
        [sys.executable, "-c", DRIVER, str(path)], capture_output=True, text=True, timeout=300, check=False
    )
    assert driver.returncode == 2, driver.stderr[-3000:]
    status = json.loads((path.parent / "status.json").read_text())
    assert status["state"] == "refused"
    assert (
        "lacks Spark's Kafka source (spark-sql-kafka-0-10: org.apache.spark.sql.kafka010.KafkaSourceProvider)"
        in status["reason"]
    )
    assert (
        "org.apache.spark:spark-sql-kafka-0-10_2.13:" in status["reason"]
        and "job.packages" in status["reason"]
    )

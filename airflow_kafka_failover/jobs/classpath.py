"""The driver's classpath holds what the job calls: Spark's Kafka source and the Kafka client.

Without them the job used to fail in its first call into the JVM with ``TypeError: 'JavaPackage' object is not
callable`` (Py4J's answer for a class it cannot find), which names neither the jar nor the fix. The run checks
first and refuses with the jars' Maven coordinates for the Spark and Scala versions the driver runs.
"""

from __future__ import annotations

from typing import Any

from airflow_kafka_failover.core.exceptions import ConfigError

REQUIRED_CLASSES = {
    "org.apache.spark.sql.kafka010.KafkaSourceProvider": ("Spark's Kafka source", "spark-sql-kafka-0-10"),
    "org.apache.kafka.clients.admin.Admin": ("the Kafka client", "kafka-clients"),
}
"""A class the job needs: what it is, and the jar that holds it."""


def kafka_source_coordinates(spark_version: str, scala_version: str) -> str:
    """The Maven coordinates of Spark's Kafka source for this Spark and Scala (``2.13.16`` -> ``2.13``)."""
    scala_binary = ".".join(scala_version.split(".")[:2])
    return f"org.apache.spark:spark-sql-kafka-0-10_{scala_binary}:{spark_version}"


def check_kafka_classpath(spark: Any) -> None:
    """Refuse a driver whose classpath lacks Spark's Kafka source or the Kafka client.

    :param spark: the run's SparkSession.
    :raises ConfigError: naming the missing classes and the coordinates or jars that bring them.
    """
    jvm = spark.sparkContext._jvm
    missing = [
        f"{what} ({jar}: {name})"
        for name, (what, jar) in REQUIRED_CLASSES.items()
        if not jvm.org.apache.spark.util.Utils.classIsLoadable(name)
    ]
    if not missing:
        return
    coordinates = kafka_source_coordinates(spark.version, jvm.scala.util.Properties.versionNumberString())
    raise ConfigError(
        f"the driver's classpath lacks {' and '.join(missing)}: give the job {coordinates} in job.packages "
        "(it brings kafka-clients), or its jars (spark-sql-kafka-0-10, spark-token-provider-kafka-0-10, "
        "kafka-clients, commons-pool2) in job.jars or the Airflow option [kafka_failover] job_jars"
    )

"""Provider metadata read by Airflow's ProvidersManager through the ``apache_airflow_provider`` entry point.

It lists every module of ``hooks/``, ``operators/``, ``sensors/`` and ``triggers/`` that defines a hook, an
operator, a sensor or a trigger (``tests/unit/test_get_provider_info.py`` derives the lists from the package,
so they cannot drift). It defines no connection type: the pairs use the official Kafka provider's ``kafka``
type, the Spark provider's ``spark`` type, and for state on a store the Amazon provider's ``aws`` and the HDFS
provider's ``webhdfs`` types (``cncf-kubernetes``'s ``kubernetes`` for driver pods).
"""

from __future__ import annotations

from airflow_kafka_failover import __version__


def get_provider_info() -> dict:
    """Return the provider's metadata in the shape Airflow's provider schema expects."""
    return {
        "package-name": "airflow-kafka-failover",
        "name": "Kafka Failover",
        "description": (
            "Moves a Spark Structured Streaming consumer between two Kafka clusters when one fails, "
            "starting at translated offsets so that no record is lost."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Kafka Failover",
                "external-doc-url": "https://kafka.apache.org/documentation/#georeplication",
                "tags": ["apache"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Kafka Failover",
                "python-modules": [
                    "airflow_kafka_failover.hooks.kafka_cluster",
                    "airflow_kafka_failover.hooks.streaming_job",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "Kafka Failover",
                "python-modules": [
                    "airflow_kafka_failover.sensors.cluster_health",
                    "airflow_kafka_failover.sensors.job_progress",
                    "airflow_kafka_failover.sensors.record_gate",
                    "airflow_kafka_failover.sensors.switch_verdict",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "Kafka Failover",
                "python-modules": [
                    "airflow_kafka_failover.operators.keeper",
                    "airflow_kafka_failover.operators.streaming_job",
                ],
            }
        ],
        "config": {
            "kafka_failover": {
                "description": "Defaults of the streaming jobs the failover DAGs run.",
                "options": {
                    "job_jars": {
                        "description": (
                            "Comma-separated jars passed to spark-submit as --jars when a pair's job config "
                            "names neither jars nor packages: Spark's Kafka source (spark-sql-kafka-0-10 and "
                            "its dependencies), Delta's jars (delta-spark and delta-storage) for a job that "
                            "writes Delta, and optionally the record-id jar."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "/opt/jars/spark-kafka/*.jar,/opt/jars/akf-record-id.jar",
                        "default": "",
                    }
                },
            }
        },
        "triggers": [
            {
                "integration-name": "Kafka Failover",
                "python-modules": [
                    "airflow_kafka_failover.triggers.cluster_health",
                    "airflow_kafka_failover.triggers.job_keeper",
                    "airflow_kafka_failover.triggers.verdict_change",
                ],
            }
        ],
    }

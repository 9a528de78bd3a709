"""The driver's Spark is one the job side supports.

The job side is tested on the Spark lines of :data:`SUPPORTED_SPARK_LINES` (docs/limits.md, "Versions":
Spark 4.0 in most of the suite, Spark 4.2 with Delta 4.4 in its end-to-end switch story, Spark 3.5 with
Delta 3.3 in the compatibility lane; Spark 4.1 with Delta 4.1 was run through the same story by hand). A
driver on another line would otherwise start and fail later in a way that names neither version (a Spark
API that moved, a Delta or Kafka-source jar built for another Scala). The run checks first, before Spark
starts, and refuses naming the driver's pyspark and the lines it may use.
"""

from __future__ import annotations

from airflow_kafka_failover.core.exceptions import ConfigError

SUPPORTED_SPARK_LINES = ("3.5", "4.0", "4.1", "4.2")
"""The Spark lines (major.minor) the job side runs on: the oldest (3.5), the suite's (4.0) and the newest
(4.2) are run end to end by ``make test``; 4.1, between them, by hand (docs/limits.md)."""


def spark_line(version: str) -> str:
    """``3.5.7`` -> ``3.5``; ``4.0.0.dev1`` -> ``4.0``."""
    return ".".join(version.split(".")[:2])


def check_driver_spark(version: str | None = None) -> None:
    """Refuse a driver whose pyspark is outside :data:`SUPPORTED_SPARK_LINES`.

    :param version: the driver's pyspark version (the installed ``pyspark.__version__`` by default).
    :raises ConfigError: naming the driver's version and the supported lines.
    """
    if version is None:
        import pyspark  # deferred: the Airflow side imports the job side's modules without pyspark

        version = pyspark.__version__
    if spark_line(version) in SUPPORTED_SPARK_LINES:
        return
    lines = " or ".join(f"{line}.x" for line in SUPPORTED_SPARK_LINES)
    raise ConfigError(
        f"the driver runs pyspark {version}, and the job side of airflow-kafka-failover supports Spark "
        f"{lines} (docs/limits.md, 'Versions'): run the job on a driver with one of them and its Delta line "
        "(pip install airflow-kafka-failover-job[spark,delta] picks both, as docs/jobs.md says); on an "
        "Airflow worker, SPARK_HOME and PYSPARK_PYTHON choose the Spark and the Python"
    )

"""The newest Spark line the job side supports is the one its jobs are tested on.

``tests/integration/test_switch_dags.py`` runs its whole story (start, failovers after a crash and a hang,
failbacks, a dry run, a forced failover, the user's Delta MERGE job read back exactly once) with the jobs
on ``.venv-newest-driver`` (made by ``scripts/setup.sh --compat`` from
``tests/compat/requirements-newest-driver.in`` and ``constraints-newest-driver.txt``, no Airflow), chosen
with ``SPARK_HOME`` and ``PYSPARK_PYTHON`` as a deployment would, with Spark's Kafka source and Delta for
that Spark from ``jvm/newest-spark/`` (resolved into ``.jars-newest-spark``), and checks that the drivers'
logs name that Spark and Delta. Until 2026-11-29 a lane of its own ran the story's first three steps a
second time for that (about 300 s of the suite).
"""

from __future__ import annotations

from airflow_kafka_failover.jobs.driver_spark import SUPPORTED_SPARK_LINES, spark_line
from tests.packaging import NEWEST_DRIVER_CONSTRAINTS, pinned


def test_the_newest_driver_runs_the_newest_spark_line_the_job_side_accepts():
    assert spark_line(pinned(NEWEST_DRIVER_CONSTRAINTS, "pyspark")) == SUPPORTED_SPARK_LINES[-1]

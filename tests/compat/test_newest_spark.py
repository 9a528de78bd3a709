"""The newest-Spark lane: the job side on the newest Spark and Delta it supports.

The suite runs its jobs on the Spark of ``.venv`` (the pyspark the provider's ``spark`` extra pins) and the
compatibility lane on the oldest; this lane runs the end-to-end story of
``tests/integration/test_switch_dags.py`` (the start DAG, a crash of A and the failover DAG, A's restart and
the failback DAG, the user's Delta MERGE job, each acknowledged id read back once) with the job on the
newest: ``.venv-newest-driver`` (made by ``scripts/setup.sh --compat`` from
``tests/compat/requirements-newest-driver.in`` and ``constraints-newest-driver.txt``, no Airflow), chosen
with ``SPARK_HOME`` and ``PYSPARK_PYTHON``, with Spark's Kafka source and Delta for that Spark from
``jvm/newest-spark/`` (resolved into ``.jars-newest-spark``). The DAGs run on this run's Airflow and the
brokers are the suite's (``jvm/newest-spark/kafka`` is a link to ``jvm/kafka``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from airflow_kafka_failover.jobs.driver_spark import SUPPORTED_SPARK_LINES, spark_line
from tests.compat.lanes import run_switch_story
from tests.packaging import NEWEST_DRIVER, pinned

REPO = Path(__file__).resolve().parents[2]
NEWEST_DRIVER_CONSTRAINTS = REPO / "constraints-newest-driver.txt"

pytestmark = [pytest.mark.slow, pytest.mark.compat, pytest.mark.sandbox, pytest.mark.spark]


def test_the_lane_runs_the_newest_spark_line_the_job_side_accepts():
    assert spark_line(pinned(NEWEST_DRIVER_CONSTRAINTS, "pyspark")) == SUPPORTED_SPARK_LINES[-1]


def test_the_switch_story_runs_on_the_newest_spark(tmp_path):
    jvm, jars = REPO / "jvm" / "newest-spark", REPO / ".jars-newest-spark"
    story = run_switch_story(Path(sys.executable), NEWEST_DRIVER, jvm, jars, tmp_path)
    assert story.passed(), story.failure()
    print("figures:", (story.results / "e2e_switch_figures.json").read_text())
    # The job really ran on the newest Spark and Delta: the drivers' own words.
    spark, delta = (pinned(NEWEST_DRIVER_CONSTRAINTS, name) for name in ("pyspark", "delta-spark"))
    assert story.spark_versions() == {spark}
    assert f"delta-spark_2.13-{delta}.jar" in story.job_logs()

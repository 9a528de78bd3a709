"""A driver whose pyspark is not a Spark line the job side supports is refused before Spark starts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.jobs.driver_spark import SUPPORTED_SPARK_LINES, check_driver_spark, spark_line
from airflow_kafka_failover.run_format.fencing import FencingMarker
from tests.unit.jobs.test_api import refusal, settings_file


@pytest.mark.parametrize("version", ["3.5.0", "3.5.7", "4.0.0", "4.0.1", "4.0.0.dev2", "4.1.1", "4.2.0"])
def test_the_tested_lines_pass(version):
    check_driver_spark(version)


@pytest.mark.parametrize("version", ["3.4.4", "4.3.0", "5.0.0"])
def test_another_line_is_refused_naming_both(version):
    with pytest.raises(ConfigError) as refused:
        check_driver_spark(version)
    message = str(refused.value)
    assert (
        f"pyspark {version}" in message
        and "3.5.x or 4.0.x or 4.1.x or 4.2.x" in message
        and "PYSPARK_PYTHON" in message
    )


def test_the_line_is_major_and_minor():
    assert spark_line("3.5.7") == "3.5" and spark_line("4.0.0.dev1") == "4.0"
    assert all(spark_line(f"{line}.9") == line for line in SUPPORTED_SPARK_LINES)


def test_the_installed_pyspark_is_a_supported_line():
    pyspark = pytest.importorskip("pyspark")
    assert spark_line(pyspark.__version__) in SUPPORTED_SPARK_LINES


def test_a_run_on_another_spark_writes_refused_and_claims_nothing(tmp_path, monkeypatch):
    pyspark = pytest.importorskip("pyspark")
    monkeypatch.setattr(pyspark, "__version__", "4.3.0")
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, 2, "A")
    reason = refusal(settings_file(tmp_path))
    assert "pyspark 4.3.0" in reason and "4.2.x" in reason
    assert not (tmp_path / "ckpt").exists(), "the refused run claimed the checkpoint"


def test_the_job_distributions_extras_span_exactly_the_supported_lines():
    """``pip install airflow-kafka-failover-job[spark]`` picks a pyspark the job accepts, and no line it
    accepts is left out of the range (job-distribution/pyproject.toml)."""
    metadata = (Path(__file__).resolve().parents[3] / "job-distribution" / "pyproject.toml").read_text()
    (low, high) = re.findall(r'spark = \["pyspark>=([0-9.]+),<([0-9.]+)"\]', metadata)[0]
    major, minor = SUPPORTED_SPARK_LINES[-1].split(".")
    assert (low, high) == (SUPPORTED_SPARK_LINES[0], f"{major}.{int(minor) + 1}")

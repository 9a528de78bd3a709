"""The job's processes never inherit Airflow's connections, variables or configuration (they hold secrets)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from airflow_kafka_failover.cluster_managers.local import job_environment
from airflow_kafka_failover.core.process_group import ManagedProcess


def test_the_job_environment_has_no_airflow_secrets(monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_SECURE",
        json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": "h:1", "sasl.password": "pw-s3cr3t"}}
        ),
    )
    monkeypatch.setenv("AIRFLOW_VAR_TOKEN", "tok-s3cr3t")
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", "fernet-s3cr3t")
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "kafka_failover_orders_start")
    monkeypatch.setenv("JAVA_HOME", "/opt/java")
    env = job_environment({"AKF_SPARK_LOG_LEVEL": "INFO"})
    assert not [name for name in env if name.startswith(("AIRFLOW_CONN_", "AIRFLOW_VAR_", "AIRFLOW__"))]
    # A marker no other variable holds ("123" was also in pytest's 123rd temporary folder, in TMPDIR).
    assert not any("s3cr3t" in value for value in env.values())
    assert env["AIRFLOW_CTX_DAG_ID"] == "kafka_failover_orders_start" and env["JAVA_HOME"] == "/opt/java"
    assert env["AKF_SPARK_LOG_LEVEL"] == "INFO" and env["PATH"] and env["PYSPARK_PYTHON"]


def test_a_process_started_without_inheriting_gets_only_the_given_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SECURE", "secret-123")
    out = tmp_path / "env.txt"
    process = ManagedProcess("envdump", tmp_path)
    process.start(
        ["/bin/sh", "-c", f"env > {out}"], env={"ONLY": "this", "PATH": "/usr/bin:/bin"}, inherit_env=False
    )
    deadline = time.monotonic() + 10
    while process.is_running() and time.monotonic() < deadline:
        time.sleep(0.05)
    names = {line.split("=", 1)[0] for line in out.read_text().splitlines()}
    assert "ONLY" in names and "AIRFLOW_CONN_KAFKA_SECURE" not in names


def test_spark_home_chooses_the_spark_submit_and_pyspark_python_the_drivers_python(monkeypatch, tmp_path):
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark-3.5"))
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/driver/bin/python")
    env = job_environment()
    assert env["PATH"].split(os.pathsep)[0] == str(tmp_path / "spark-3.5" / "bin")
    assert env["PYSPARK_PYTHON"] == "/opt/driver/bin/python"


def test_without_spark_home_the_interpreters_own_spark_submit_comes_first(monkeypatch):
    monkeypatch.delenv("SPARK_HOME", raising=False)
    assert job_environment()["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)

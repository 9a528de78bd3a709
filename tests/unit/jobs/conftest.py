from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession, with the record-id jar, for the job-side tests marked ``spark``."""
    pyspark_sql = pytest.importorskip("pyspark.sql")
    from akf_devtools.sandbox.jars import record_id_jar

    session = (
        pyspark_sql.SparkSession.builder.master("local[1]")
        .appName("akf-job-side-test")
        .config("spark.ui.enabled", "false")
        .config("spark.jars", str(record_id_jar()))
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    yield session
    session.stop()

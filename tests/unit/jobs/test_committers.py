"""Choosing the S3A committer for the sink's writes: what is set, and what is left alone."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

from airflow_kafka_failover.jobs.committers import (
    COMMIT_PROTOCOL,
    MAGIC,
    PARQUET_COMMITTER,
    S3A_COMMITTER_FACTORY,
    use_s3a_committer,
)


class Conf(dict):
    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key, default)

    def set(self, key: str, value: str) -> None:
        self[key] = value


def session(loadable: bool = True, sql: dict | None = None, hadoop: dict | None = None) -> Any:
    utils = SimpleNamespace(classIsLoadable=lambda name: loadable and name == COMMIT_PROTOCOL)
    jvm = SimpleNamespace(
        org=SimpleNamespace(apache=SimpleNamespace(spark=SimpleNamespace(util=SimpleNamespace(Utils=utils))))
    )
    hadoop_conf = Conf(hadoop or {})
    context = SimpleNamespace(_jvm=jvm, _jsc=SimpleNamespace(hadoopConfiguration=lambda: hadoop_conf))
    return SimpleNamespace(conf=Conf(sql or {}), sparkContext=context, hadoop=hadoop_conf)


def test_the_magic_committer_is_chosen_when_spark_hadoop_cloud_is_there():
    spark = session()
    assert use_s3a_committer(spark)
    assert spark.conf["spark.sql.sources.commitProtocolClass"] == COMMIT_PROTOCOL
    assert spark.conf["spark.sql.parquet.output.committer.class"] == PARQUET_COMMITTER
    assert spark.hadoop["fs.s3a.committer.name"] == MAGIC
    assert spark.hadoop["mapreduce.outputcommitter.factory.scheme.s3a"] == S3A_COMMITTER_FACTORY


def test_without_the_jar_the_sink_commits_by_copying_and_says_what_to_add(caplog):
    spark = session(loadable=False)
    with caplog.at_level(logging.WARNING, logger="airflow_kafka_failover.job"):
        assert not use_s3a_committer(spark)
    assert "spark-hadoop-cloud_2.13" in caplog.text
    assert spark.conf == {} and spark.hadoop == {}


def test_a_job_with_its_own_commit_protocol_keeps_it():
    sql = {"spark.sql.sources.commitProtocolClass": "com.example.MyProtocol"}
    spark = session(sql=sql)
    assert not use_s3a_committer(spark)
    assert spark.conf == sql and spark.hadoop == {}


def test_a_job_with_its_own_s3a_committer_keeps_it():
    spark = session(hadoop={"fs.s3a.committer.name": "directory"})
    assert use_s3a_committer(spark)
    assert spark.hadoop["fs.s3a.committer.name"] == "directory"
    assert spark.conf["spark.sql.sources.commitProtocolClass"] == COMMIT_PROTOCOL

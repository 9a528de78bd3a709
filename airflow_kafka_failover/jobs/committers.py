"""Writing a batch's files to S3 without copying them: Hadoop's S3A "magic" committer.

Spark's default way to commit a file write (Hadoop's ``FileOutputCommitter``) writes every file under
``_temporary/`` and renames it into place at commit. On S3 a rename is a copy and a delete per object, so a
batch's files are uploaded, then copied (on the store here, the job's batches took twice as long as a plain
query's file sink, which needs no rename). Hadoop's S3A committers upload the files straight to their place
as multipart uploads that only become visible when the write commits; ``_SUCCESS`` is still written last.

Spark reaches them through ``spark-hadoop-cloud`` (``PathOutputCommitProtocol`` and
``BindingParquetOutputCommitter``), a jar of its own that a Spark installation may not have: when it is
missing the job logs that the sink commits by copying and goes on (correct, slower). Settings a job already
has (its own ``spark.sql.sources.commitProtocolClass`` or ``fs.s3a.committer.name``) are left alone.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("airflow_kafka_failover.job")

COMMIT_PROTOCOL = "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol"
PARQUET_COMMITTER = "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter"
MAGIC = "magic"
S3A_COMMITTER_FACTORY = "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory"
_FACTORY_KEY = "mapreduce.outputcommitter.factory.scheme.s3a"
_SPARK_DEFAULT_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"


def use_s3a_committer(spark: Any) -> bool:
    """Make the session's file writes to ``s3a://`` go through the S3A magic committer, where it can.

    :param spark: the job's SparkSession.
    :return: whether writes to ``s3a://`` now commit without copying.
    """
    protocol = spark.conf.get("spark.sql.sources.commitProtocolClass", _SPARK_DEFAULT_PROTOCOL)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    if protocol not in (_SPARK_DEFAULT_PROTOCOL, COMMIT_PROTOCOL):
        log.info("the job sets its own file commit protocol %s; the sink uses it on s3a://", protocol)
        return False
    if not spark.sparkContext._jvm.org.apache.spark.util.Utils.classIsLoadable(COMMIT_PROTOCOL):
        log.warning(
            "spark-hadoop-cloud is not on the driver's classpath (%s not found): the sink's batches on "
            "s3a:// are committed by copying every file; add org.apache.spark:spark-hadoop-cloud_2.13 (the "
            "version of your Spark) to the job's jars to write them in place",
            COMMIT_PROTOCOL,
        )
        return False
    committer = hadoop.get("fs.s3a.committer.name")
    if committer not in (None, "file", MAGIC):
        log.info("the job sets the S3A committer %r; the sink uses it", committer)
    else:
        hadoop.set("fs.s3a.committer.name", MAGIC)
        hadoop.set("fs.s3a.committer.magic.enabled", "true")
        if not hadoop.get(_FACTORY_KEY):
            hadoop.set(_FACTORY_KEY, S3A_COMMITTER_FACTORY)
    spark.conf.set("spark.sql.sources.commitProtocolClass", COMMIT_PROTOCOL)
    spark.conf.set("spark.sql.parquet.output.committer.class", PARQUET_COMMITTER)
    return True

"""The packaged streaming job: Kafka -> idempotent Parquet sink, written on the job-side API.

Run by spark-submit with one argument, the settings file the operator wrote::

    spark-submit --jars <spark-sql-kafka jars> stream_job.py --settings <run_dir>/settings.json

It reads the pair's topics with :class:`~airflow_kafka_failover.jobs.api.FailoverStream`, adds the record
id, and writes each micro-batch with :class:`~airflow_kafka_failover.jobs.sink.ParquetBatchSink` (one
directory per epoch and batch, complete once its ``_SUCCESS`` is written; a replayed batch writes nothing;
the epoch's source cluster in the epoch's folder).
The batch's statistics for its progress entry (records, the newest offset and timestamp per partition,
records without an id) come from the footers of the Parquet files the sink wrote, so the source is read
without the per-record observation a job of a user's has.
Status, stop requests, the fence, progress entries and bookkeeping-group commits are the API's (see
:mod:`airflow_kafka_failover.jobs.job_run`), as for any job of a user's.

Exit codes: 0 stopped on request or fenced, 2 bad settings or checkpoint, 1 anything else.
"""

from __future__ import annotations

from typing import Any

from airflow_kafka_failover.jobs.api import FailoverStream
from airflow_kafka_failover.jobs.sink import ParquetBatchSink


def sink_columns(kafka: Any, record_id: Any) -> Any:
    """The columns of the sink's files (``sink.FILE_COLUMNS``) of the Kafka source ``kafka``: the epoch, the
    batch and the source cluster are the sink's folders, not columns of every row."""
    from pyspark.sql import functions as F

    return kafka.select(
        record_id.alias("record_id"),
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        F.expr("unix_millis(timestamp)").alias("timestamp_ms"),
    )


def main(argv: list[str] | None = None) -> None:
    """Run the packaged job; ends the process with its exit code."""
    with FailoverStream.from_args(argv) as stream:
        # The sink returns each batch's statistics from its files' footers: no observation of the source.
        kafka = stream.read_kafka(observe=False)
        records = sink_columns(kafka, stream.record_id())
        sink = ParquetBatchSink(stream.settings.sink_root, stream.epoch, stream.cluster)
        # One write per batch: the batch is read once without a cache.
        stream.foreach_batch(records, sink.write_batch, cache_batch=False)


if __name__ == "__main__":
    main()

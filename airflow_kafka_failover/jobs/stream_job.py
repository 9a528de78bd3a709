"""The PySpark streaming job: Kafka -> idempotent Parquet sink, with bookkeeping commits and fencing.

Run by spark-submit with one argument, the settings file the operator wrote::

    spark-submit --jars <spark-sql-kafka jars> stream_job.py --settings <run_dir>/settings.json

Per micro-batch (``foreachBatch``, on the driver), in this order:

1. Check the stop request and the fencing marker; a fenced or stopping run raises before writing, so the
   batch is not committed in the checkpoint and the next run reads it again.
2. Write the batch to ``_staging`` and rename it to ``epoch=<e>/batch=<b>``; a directory that is already
   there is a replayed batch and is not written again.
3. Append a progress record (epoch, batch id, end offsets from the checkpoint's ``offsets/<b>``, newest
   record timestamp per partition, record count) to ``<checkpoint>/progress.jsonl``.
4. Commit the batch's end offsets to the bookkeeping group on the cluster the job reads, so MirrorMaker 2
   checkpoints the job's position to the other cluster.

Spark then marks the batch committed. Between batches the driver polls the stop request and the fencing
marker every ``poll_interval_seconds``: a stop request or a newer epoch ends the query after the batch in
flight.

Exit codes: 0 stopped on request or fenced, 2 bad settings or checkpoint, 1 anything else.
Setting ``AKF_JOB_FAULT=exit-after-sink:<batch>`` makes the run die right after writing that batch's output
(before its commit), the crash the sink's idempotence is there for; tests use it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_kafka_failover.atomic_file import write_json_atomically
from airflow_kafka_failover.exceptions import CheckpointError, ConfigError
from airflow_kafka_failover.jobs.fencing import FencingMarker
from airflow_kafka_failover.jobs.layout import (
    claim_checkpoint,
    status_file,
    stop_request_file,
)
from airflow_kafka_failover.jobs.record_id import record_id_column, register_reader
from airflow_kafka_failover.jobs.settings import JobSettings
from airflow_kafka_failover.jobs.sink import batch_dir, staging_dir
from airflow_kafka_failover.translation.spark_checkpoint import PROGRESS_FILE, parse_offsets_file

log = logging.getLogger("airflow_kafka_failover.job")

EXIT_STOPPED = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


class RunStopping(Exception):
    """Raised inside a batch when the run must not process it (fenced or asked to stop)."""


class StreamRun:
    """One run of the job: the query, its batch function, and the stop/fence checks around it."""

    def __init__(self, settings: JobSettings, spark: Any) -> None:
        self.settings = settings
        self.spark = spark
        self.fence = FencingMarker(Path(settings.fencing_marker), settings.pair)
        self.batch_lock = threading.Lock()
        self.stop_reason: str | None = None
        self.stop_state = "stopped"
        self.admin: Any = None
        self.last_batch: int | None = None
        self.fault_batch = _fault_batch()
        self.record_id_reader = False

    # ---- status ---------------------------------------------------------------------------------------

    def write_status(self, state: str, **extra: Any) -> None:
        data = {
            "state": state,
            "pid": os.getpid(),
            "epoch": self.settings.epoch,
            "cluster": self.settings.cluster,
            "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            **extra,
        }
        write_json_atomically(status_file(self.settings.run_dir), data)

    # ---- stop and fence checks ------------------------------------------------------------------------

    def why_stop(self) -> tuple[str, str] | None:
        """Return (state, reason) when the run must stop now, else None."""
        if stop_request_file(self.settings.run_dir).exists():
            return "stopped", "a stop was requested"
        try:
            fence = self.fence.read()
        except ConfigError as exc:
            log.warning(
                "cannot read the fencing marker (%s); going on with epoch %s", exc, self.settings.epoch
            )
            return None
        if fence is not None and fence.epoch != self.settings.epoch:
            return "fenced", (
                f"the pair's epoch is now {fence.epoch} (cluster {fence.cluster}), this run "
                f"belongs to epoch {self.settings.epoch}"
            )
        return None

    # ---- the batch ------------------------------------------------------------------------------------

    def process_batch(self, batch_df: Any, batch_id: int) -> None:
        with self.batch_lock:
            if self.stop_reason is None:
                verdict = self.why_stop()
                if verdict is not None:
                    self.stop_state, self.stop_reason = verdict
            if self.stop_reason is not None:
                raise RunStopping(f"batch {batch_id} not processed: {self.stop_reason}")
            steps = StepTimes()
            final = batch_dir(self.settings.sink_root, self.settings.epoch, batch_id)
            if final.is_dir():
                log.info(
                    "batch %s: output %s already exists (replayed batch); nothing written", batch_id, final
                )
            else:
                self._write(batch_df, batch_id, final)
            steps.lap("write")
            if self.fault_batch == batch_id:
                log.error("fault injection: exiting after writing batch %s, before its commit", batch_id)
                os._exit(EXIT_FAILED)
            end_offsets = self._end_offsets(batch_id)
            stats = self._batch_stats(final)
            steps.lap("stats")
            self._append_progress(batch_id, end_offsets, stats)
            steps.lap("progress")
            self._commit_group(end_offsets)
            steps.lap("group commit")
            self.last_batch = batch_id
            log.info(
                "batch %s: %s records in %.2f s (%s), end offsets %s",
                batch_id,
                stats["records"],
                steps.total(),
                steps,
                _short(end_offsets),
            )

    def _write(self, batch_df: Any, batch_id: int, final: Path) -> None:
        from pyspark.sql import functions as F

        settings = self.settings
        record_id = record_id_column(settings.record_id_field, self.record_id_reader)
        staging = staging_dir(settings.sink_root, settings.epoch, batch_id, uuid.uuid4().hex[:8])
        batch_df.select(
            record_id.alias("record_id"),
            "key",
            "value",
            F.lit(settings.cluster).alias("source_cluster"),
            "topic",
            "partition",
            "offset",
            F.expr("unix_millis(timestamp)").alias("timestamp_ms"),
            F.lit(settings.epoch).alias("epoch"),
            F.lit(batch_id).cast("long").alias("batch_id"),
        ).write.mode("errorifexists").parquet(str(staging))
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(staging, final)
        except OSError:
            if not final.is_dir():
                raise
            log.info("batch %s: another attempt placed %s first; keeping it", batch_id, final)

    def _end_offsets(self, batch_id: int) -> dict[Any, int]:
        path = Path(self.settings.checkpoint) / "offsets" / str(batch_id)
        return parse_offsets_file(path, path.read_text())

    def _batch_stats(self, final: Path) -> dict[str, Any]:
        """Records, records without id, and the newest timestamp and record offset per partition of a batch.

        Read from the Parquet footers when every file holds one Kafka partition (Spark writes one file per
        Kafka partition: the query has no shuffle), which costs no Spark job; else by reading the batch back.
        """
        stats = _footer_stats(final)
        if stats is None:
            stats = self._batch_stats_by_spark(final)
        if stats["without_id"]:
            log.warning(
                "%s records of this batch have no record id (field %r); they cannot be deduplicated",
                stats["without_id"],
                self.settings.record_id_field,
            )
        return stats

    def _batch_stats_by_spark(self, final: Path) -> dict[str, Any]:
        from pyspark.sql import functions as F

        rows = (
            self.spark.read.parquet(str(final))
            .groupBy("topic", "partition")
            .agg(
                F.max("timestamp_ms").alias("newest"),
                F.max("offset").alias("last"),
                F.count(F.lit(1)).alias("records"),
                F.count("record_id").alias("with_id"),
            )
            .collect()
        )
        newest: dict[str, dict[str, int]] = {}
        last: dict[str, dict[str, int]] = {}
        for row in rows:
            if row["newest"] is not None:
                newest.setdefault(row["topic"], {})[str(row["partition"])] = int(row["newest"])
            if row["last"] is not None:
                last.setdefault(row["topic"], {})[str(row["partition"])] = int(row["last"])
        records = sum(int(row["records"]) for row in rows)
        without_id = records - sum(int(row["with_id"]) for row in rows)
        return {"records": records, "without_id": without_id, "max_timestamp_ms": newest, "max_offset": last}

    def _open_admin(self) -> Any:
        """The Kafka Admin client (Java, through Py4J) the bookkeeping-group commits go through."""
        jvm = self.spark.sparkContext._jvm
        props = jvm.java.util.Properties()
        props.put("bootstrap.servers", self.settings.bootstrap_servers)
        for key, value in self.settings.kafka_options.items():
            props.put(key, value)
        return jvm.org.apache.kafka.clients.admin.Admin.create(props)

    def _commit_group(self, end_offsets: dict[Any, int]) -> None:
        jvm = self.spark.sparkContext._jvm
        if self.admin is None:
            self.admin = self._open_admin()
        offsets = jvm.java.util.HashMap()
        for tp, offset in end_offsets.items():
            offsets.put(
                jvm.org.apache.kafka.common.TopicPartition(tp.topic, tp.partition),
                jvm.org.apache.kafka.clients.consumer.OffsetAndMetadata(offset),
            )
        unit = jvm.java.util.concurrent.TimeUnit.SECONDS
        self.admin.alterConsumerGroupOffsets(self.settings.bookkeeping_group, offsets).all().get(30, unit)

    def _append_progress(self, batch_id: int, end_offsets: dict[Any, int], stats: dict[str, Any]) -> None:
        nested: dict[str, dict[str, int]] = {}
        for tp in sorted(end_offsets):
            nested.setdefault(tp.topic, {})[str(tp.partition)] = end_offsets[tp]
        record = {
            "epoch": self.settings.epoch,
            "batch_id": batch_id,
            "end_offsets": nested,
            "max_timestamp_ms": stats["max_timestamp_ms"],
            "max_offset": stats["max_offset"],
            "records": stats["records"],
            "without_id": stats["without_id"],
            "written_at": time.time(),
        }
        path = Path(self.settings.checkpoint) / PROGRESS_FILE
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        with os.fdopen(descriptor, "a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    # ---- the query ------------------------------------------------------------------------------------

    def reader(self) -> Any:
        settings = self.settings
        reader = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", settings.bootstrap_servers)
            .option("startingOffsets", settings.starting_offsets_option)
            .option("failOnDataLoss", "true")
            .option("kafka.isolation.level", "read_committed")
        )
        if settings.topics:
            reader = reader.option("subscribe", ",".join(settings.topics))
        else:
            reader = reader.option("subscribePattern", settings.topic_pattern)
        if settings.max_offsets_per_trigger is not None:
            reader = reader.option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
        for key, value in settings.kafka_options.items():
            reader = reader.option(f"kafka.{key}", value)
        return reader.load()

    def run(self) -> int:
        settings = self.settings
        # Opened before the query starts, so that the first batch does not pay for it (the client connects
        # lazily; an unusable Kafka option still fails here, before anything is read).
        self.admin = self._open_admin()
        self.record_id_reader = register_reader(self.spark, settings.record_id_field)
        try:
            query = (
                self.reader()
                .writeStream.foreachBatch(self.process_batch)
                .option("checkpointLocation", settings.checkpoint)
                .trigger(processingTime=f"{settings.trigger_interval_seconds} seconds")
                .queryName(f"akf-{settings.pair}-{settings.cluster}-epoch-{settings.epoch}")
                .start()
            )
            self.write_status(
                "running",
                query_id=str(query.id),
                run_id=str(query.runId),
                application_id=self.spark.sparkContext.applicationId,
            )
            log.info("query %s running on cluster %s, epoch %s", query.id, settings.cluster, settings.epoch)
            return self._supervise(query)
        finally:
            self.admin.close()

    def _wait_committed(self, timeout: float = 30.0) -> None:
        """Wait until Spark marked the last processed batch committed, so stopping does not undo it.

        Spark writes ``commits/<b>`` after the batch function returns; a stop in between would leave a batch
        whose output and group commit exist but which the checkpoint does not count, and the next run would
        read it again.
        """
        if self.last_batch is None:
            return
        marker = Path(self.settings.checkpoint) / "commits" / str(self.last_batch)
        deadline = time.monotonic() + timeout
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not marker.exists():
            log.warning(
                "batch %s is still not committed after %.0f s; stopping anyway (it will be read again)",
                self.last_batch,
                timeout,
            )

    def _supervise(self, query: Any) -> int:
        from pyspark.errors import StreamingQueryException

        while True:
            try:
                if query.awaitTermination(self.settings.poll_interval_seconds):
                    break
            except StreamingQueryException as exc:
                if self.stop_reason is not None:
                    break
                self.write_status("failed", reason=_first_line(str(exc)))
                log.error("the query failed: %s", exc)
                return EXIT_FAILED
            verdict = self.why_stop()
            if verdict is not None:
                with self.batch_lock:  # lets the batch in flight finish
                    if self.stop_reason is None:
                        self.stop_state, self.stop_reason = verdict
                log.info("stopping: %s", self.stop_reason)
                self._wait_committed()
                query.stop()
                break
        if self.stop_reason is None:
            self.stop_reason = "the query ended"
        self.write_status(self.stop_state, reason=self.stop_reason)
        log.info("%s: %s", self.stop_state, self.stop_reason)
        return EXIT_STOPPED


def _footer_stats(batch: Path) -> dict[str, Any] | None:
    """Batch statistics from Parquet footers, or None when they cannot give them (no pyarrow, mixed files)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None
    records = without_id = 0
    newest: dict[str, dict[str, int]] = {}
    last: dict[str, dict[str, int]] = {}
    for file in sorted(batch.glob("*.parquet")):
        metadata = pq.ParquetFile(file).metadata
        schema = metadata.schema.to_arrow_schema()
        columns = {
            name: schema.get_field_index(name)
            for name in ("record_id", "topic", "partition", "offset", "timestamp_ms")
        }
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            if row_group.num_rows == 0:
                continue
            found = {name: row_group.column(index).statistics for name, index in columns.items()}
            if any(
                stat is None or not stat.has_min_max for name, stat in found.items() if name != "record_id"
            ):
                return None
            topic = found["topic"].min
            if (
                not isinstance(topic, str)
                or topic != found["topic"].max
                or found["partition"].min != found["partition"].max
            ):
                return None
            records += row_group.num_rows
            id_stats = found["record_id"]
            if id_stats is None or id_stats.null_count is None:
                return None
            without_id += id_stats.null_count
            key = str(found["partition"].min)
            for into, column in ((newest, "timestamp_ms"), (last, "offset")):
                value = int(found[column].max)
                partitions = into.setdefault(topic, {})
                partitions[key] = max(value, partitions.get(key, value))
    return {"records": records, "without_id": without_id, "max_timestamp_ms": newest, "max_offset": last}


class StepTimes:
    """Wall time of the steps of one batch, for its log line: ``write 1.20 s, stats 0.01 s, ...``."""

    def __init__(self) -> None:
        self.started = self.mark = time.monotonic()
        self.steps: list[tuple[str, float]] = []

    def lap(self, step: str) -> None:
        """Record the time since the previous lap (or the start) as ``step``."""
        now = time.monotonic()
        self.steps.append((step, now - self.mark))
        self.mark = now

    def total(self) -> float:
        return time.monotonic() - self.started

    def __str__(self) -> str:
        return ", ".join(f"{step} {seconds:.2f} s" for step, seconds in self.steps)


def _fault_batch() -> int | None:
    fault = os.environ.get("AKF_JOB_FAULT", "")
    if fault.startswith("exit-after-sink:"):
        return int(fault.split(":", 1)[1])
    return None


def _short(offsets: dict[Any, int], limit: int = 6) -> str:
    items = [f"{tp.topic}-{tp.partition}:{offset}" for tp, offset in sorted(offsets.items())]
    return ", ".join(items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:500] if text.strip() else ""


def prepare(settings: JobSettings) -> None:
    """Check the checkpoint and the fence before Spark starts; raise with the reason to refuse."""
    claim_checkpoint(
        settings.checkpoint, settings.pair, settings.cluster, settings.epoch, settings.bootstrap_servers
    )
    fence = FencingMarker(Path(settings.fencing_marker), settings.pair).read()
    if fence is None:
        raise ConfigError(
            f"fencing marker {settings.fencing_marker} does not exist; the operator writes it "
            "before it submits the job"
        )
    if fence.epoch != settings.epoch:
        raise ConfigError(
            f"fencing marker {settings.fencing_marker} holds epoch {fence.epoch}; this run is for "
            f"epoch {settings.epoch} and must not start"
        )
    stop_request_file(settings.run_dir).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--settings", required=True, help="the settings file written by the operator")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s [akf-job] %(message)s"
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        settings = JobSettings.load(args.settings)
        prepare(settings)
    except (ConfigError, CheckpointError) as exc:
        log.error("refusing to start: %s", exc)
        run_dir = _run_dir_of(args.settings)
        write_json_atomically(
            status_file(run_dir), {"state": "refused", "reason": str(exc), "pid": os.getpid()}
        )
        return EXIT_BAD_INPUT

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(
        f"akf-{settings.pair}-{settings.cluster}-epoch-{settings.epoch}"
    ).getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("AKF_SPARK_LOG_LEVEL", "WARN"))
    run = StreamRun(settings, spark)
    run.write_status("starting")
    try:
        return run.run()
    except Exception as exc:  # the status file tells the operator and the sensor why
        run.write_status("failed", reason=_first_line(str(exc)))
        log.exception("the job failed")
        return EXIT_FAILED
    finally:
        spark.stop()


def _run_dir_of(settings_path: str) -> Path:
    return Path(settings_path).resolve().parent


if __name__ == "__main__":
    sys.exit(main())

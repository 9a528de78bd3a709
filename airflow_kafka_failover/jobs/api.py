"""Run your own PySpark streaming job under the failover DAGs.

The DAGs submit your application with ``--settings <file>``; :class:`FailoverStream` reads that file and
does the rest of the contract (status, stop requests, the fence, progress entries, bookkeeping-group commits)
around every micro-batch, so that your code is only your transformation and your sink::

    from airflow_kafka_failover.jobs.api import FailoverStream

    with FailoverStream.from_args(delta=True) as stream:
        orders = stream.read_kafka()                      # the active cluster, at the planned offsets
        parsed = orders.select(...)                       # your transformation
        stream.write_delta(parsed, "/lake/orders", mode="merge", merge_on="order_id")

Three ways to write, each of which blocks until the run is stopped or fenced:

- :meth:`FailoverStream.foreach_batch` with a function ``(batch DataFrame, batch id)`` of yours; the fence and
  the stop request are checked before each call;
- :meth:`FailoverStream.write_delta`, the Delta Lake sink: ``append`` with Delta's idempotent transaction ids
  (a replayed batch writes nothing), or ``merge`` on a key (a record re-delivered after a switch is not
  inserted twice: exactly once across switches);
- :meth:`FailoverStream.write_stream` with a ``DataStreamWriter`` of yours (format and options) whose sink is
  idempotent per batch in Spark itself; the fence is checked between batches there.

Leaving the ``with`` block ends the process with the exit code the operators read (0 stopped or fenced, 1
failed, 2 refused). Needs pyspark only (no Airflow) on the driver; ``write_delta`` needs ``delta-spark``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from airflow_kafka_failover.core.exceptions import CheckpointError, ConfigError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import StoreUnavailable
from airflow_kafka_failover.jobs.classpath import check_kafka_classpath
from airflow_kafka_failover.jobs.driver_spark import check_driver_spark
from airflow_kafka_failover.jobs.hadoop_store import use_hadoop_stores
from airflow_kafka_failover.jobs.job_run import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    JobRun,
    first_line,
    prepare,
    record_id_counts,
    write_refusal,
)
from airflow_kafka_failover.jobs.record_id import record_id_column, register_reader
from airflow_kafka_failover.run_format.settings import JobSettings
from airflow_kafka_failover.run_format.standby import Handoff, SlotBusy, StandbySlot, StandbyStopped

__all__ = ["DELTA_SESSION_CONFIG", "FailoverStream"]

log = logging.getLogger("airflow_kafka_failover.job")

DELTA_SESSION_CONFIG = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
"""What a SparkSession needs for Delta's MERGE; ``from_args(delta=True)`` sets it."""


class FailoverStream:
    """One run of your streaming job under the failover DAGs.

    Build it with :meth:`from_args`; use it as a context manager.

    :param settings: the run's settings.
    :param spark: the SparkSession.
    """

    def __init__(self, settings: JobSettings, spark: Any) -> None:
        self.settings = settings
        self.spark = spark
        self._run = JobRun(settings, spark)
        self._record_id_reader: bool | None = None
        self._source: Any = None
        self.exit_code: int | None = None

    # ---- building one -------------------------------------------------------------------------------

    @classmethod
    def from_args(
        cls,
        argv: list[str] | None = None,
        *,
        app_name: str | None = None,
        delta: bool = False,
        spark_config: dict[str, str] | None = None,
    ) -> FailoverStream:
        """Read ``--settings`` from the command line, check the run may start, and build the SparkSession.

        A run that must not start (a driver whose pyspark is not a Spark line the job side supports, bad
        settings, a checkpoint of another run, a fence at another epoch) writes ``refused`` with the reason to
        its status file and exits with code 2 before Spark starts; so does a
        driver whose classpath lacks Spark's Kafka source or the Kafka client (checked once the session is
        up, naming the jars' Maven coordinates).

        With ``--standby <slot>`` instead of ``--settings``, the driver is a warm standby
        (:mod:`~airflow_kafka_failover.run_format.standby`): it holds the slot (a second warm driver of the
        slot exits with code 2), starts Spark and loads the Kafka source, and waits without reading anything
        until a switch hands it a run's settings file; from there on the checks above apply to that run as to
        a submitted one (a handoff of an epoch the fence has left behind is refused). A stop request in the
        slot before any handoff ends it with code 0.

        :param argv: the arguments (``sys.argv[1:]`` by default); other arguments than ``--settings`` or
            ``--standby`` are left to your job (see :attr:`extra_args`).
        :param app_name: the Spark application name (default ``akf-<pair>-<cluster>-epoch-<n>``; a warm
            standby keeps spark-submit's ``--name``).
        :param delta: configure the session for Delta Lake (:data:`DELTA_SESSION_CONFIG`).
        :param spark_config: more session settings.
        """
        _configure_logging()
        parser = argparse.ArgumentParser(description="a streaming job run by the Kafka failover DAGs")
        given = parser.add_mutually_exclusive_group(required=True)
        given.add_argument("--settings", help="the settings file written by the operator")
        given.add_argument(
            "--standby",
            help="a warm standby's slot folder: start Spark now, wait there for the run a switch hands over",
        )
        args, extra = parser.parse_known_args(argv)
        session_config = {**(DELTA_SESSION_CONFIG if delta else {}), **(spark_config or {})}
        spark = None
        settings_location = args.settings
        slot: StandbySlot | None = None
        if args.standby:
            spark, slot, handoff = _warm_standby(args.standby, app_name, session_config)
            settings_location = handoff.settings
        if locations.is_remote(settings_location):
            # A settings file on a store is read through Spark's Hadoop FileSystem: the session comes first.
            spark = spark or _session(app_name, session_config)
            use_hadoop_stores(spark)
        try:
            check_driver_spark()
            settings = JobSettings.load(settings_location)
            if slot is not None and settings.epoch != handoff.epoch:
                raise ConfigError(
                    f"the handoff names epoch {handoff.epoch} but its settings file {settings_location} is "
                    f"for epoch {settings.epoch}; the warm driver does not start either run"
                )
            prepare(settings)
        except (ConfigError, CheckpointError, StoreUnavailable) as exc:
            log.error("refusing to start: %s", exc)
            _refuse(settings_location, str(exc))
            if slot is not None:
                slot.write_state("refused", reason=first_line(str(exc)))
            if spark is not None:
                spark.stop()
            raise SystemExit(EXIT_BAD_INPUT) from None
        if slot is not None:  # this driver is the run now: the slot is free for the next warm driver
            slot.write_state("taken", epoch=settings.epoch, settings=settings_location)
            slot.release()
        if spark is None:
            spark = _session(
                app_name or f"akf-{settings.pair}-{settings.cluster}-epoch-{settings.epoch}", session_config
            )
        try:
            check_kafka_classpath(spark)
        except ConfigError as exc:
            log.error("refusing to start: %s", exc)
            _refuse(settings_location, str(exc))
            spark.stop()
            raise SystemExit(EXIT_BAD_INPUT) from None
        stream = cls(settings, spark)
        stream.extra_args = extra
        stream._run.write_status("starting")
        return stream

    extra_args: list[str] = []
    """Command-line arguments after ``--settings`` that are your job's own."""

    # ---- what the run reads -------------------------------------------------------------------------

    @property
    def cluster(self) -> str:
        """The name of the cluster this run reads (``A``, ``B``)."""
        return self.settings.cluster

    @property
    def epoch(self) -> int:
        """This run's epoch; it grows by one at every switch."""
        return self.settings.epoch

    @property
    def sink_root(self) -> str:
        """The pair config's ``job.sink_root``: where your job writes (a Delta table, a folder, ...)."""
        return self.settings.sink_root

    @property
    def application_id(self) -> str:
        """A name for this run that no other run of the pair shares: ``akf-<pair>-<cluster>-epoch-<n>``."""
        return f"akf-{self.settings.pair}-{self.settings.cluster}-epoch-{self.settings.epoch}"

    def read_kafka(self, *, observe: bool = True) -> Any:
        """The Kafka source of the active cluster as a streaming DataFrame.

        Its columns are Spark's Kafka source columns (``key``, ``value``, ``topic``, ``partition``,
        ``offset``, ``timestamp``, ...); it reads the pair's topics on this cluster from the planned start
        offsets (or from the checkpoint), with the connection's security options and
        ``maxOffsetsPerTrigger``. Build your query on it; call it once.

        :param observe: observe the source for the progress entries (default): every record is counted and
            each partition's newest offset and timestamp kept, which failover and the loss checks read.
            ``False`` only for a :meth:`foreach_batch` function that returns those statistics for every
            batch itself (a dict with ``records``, ``max_offset`` and ``max_timestamp_ms`` per topic and
            partition, and ``without_id``), as the packaged job's Parquet sink does from the footers of the
            files it wrote; a batch that returns anything else then stops the run with an error.
        """
        if self._source is None:
            self._source = self._run.source(observe=observe)
        return self._source

    def record_id(self) -> Any:
        """The record id of a row of :meth:`read_kafka`, as a Column (the pair's ``record_id_field``)."""
        if self._record_id_reader is None:
            self._record_id_reader = register_reader(self.spark, self.settings.record_id_field)
        return record_id_column(self.settings.record_id_field, self._record_id_reader)

    def with_record_id_count(self, df: Any, column: str = "record_id") -> Any:
        """``df`` observed for the progress entries' ``without_id`` count (rows whose ``column`` is null)."""
        return record_id_counts(df, column)

    # ---- what the run writes ------------------------------------------------------------------------

    def drop_redelivered(self, df: Any, *, event_time: str, delay: str, id_column: str | None = None) -> Any:
        """``df`` without the records a switch delivers again: put it ahead of your stateful operators.

        A switch starts the new run before the old run's position, so up to the plan's ``max_duplicates``
        records arrive a second time. With ``job.state: carry`` the new run keeps the state of this
        deduplication, so those records are dropped here, and the aggregations after it count each record
        once: the results are exact across switches (docs/jobs.md, "Stateful jobs"). It is Spark's
        ``withWatermark(event_time, delay)`` and ``dropDuplicatesWithinWatermark`` on the record id.

        :param df: a streaming DataFrame built on :meth:`read_kafka`.
        :param event_time: its event-time column (a timestamp).
        :param delay: the watermark delay, e.g. ``"10 minutes"``: longer than an outage plus the time the
            re-delivered records take to arrive, since an id is forgotten once the watermark passes it (and a
            record older than the watermark is dropped as late, as any watermark does).
        :param id_column: the column holding the record id; None: the pair's ``record_id_field``, read from
            the Kafka ``value`` (or ``key``) column, which ``df`` must then still have.
        """
        from pyspark.sql import functions as F

        column = id_column or "_akf_record_id"
        if id_column is None:
            df = df.withColumn(column, self.record_id())
        elif id_column not in df.columns:
            raise ConfigError(
                f"drop_redelivered: id_column {id_column!r} is not a column of the DataFrame (it has "
                f"{', '.join(df.columns)})"
            )
        if event_time not in df.columns:
            raise ConfigError(
                f"drop_redelivered: event_time {event_time!r} is not a column of the DataFrame (it has "
                f"{', '.join(df.columns)})"
            )
        deduplicated = (
            df.where(F.col(column).isNotNull())
            .withWatermark(event_time, delay)
            .dropDuplicatesWithinWatermark([column])
        )
        return deduplicated if id_column else deduplicated.drop(column)

    def foreach_batch(
        self,
        df: Any,
        function: Callable[[Any, int], Any],
        *,
        cache_batch: bool = True,
        output_mode: str = "append",
    ) -> int:
        """Run the query, calling ``function(batch_df, batch_id)`` for each micro-batch; block until it ends.

        ``function`` must be idempotent per batch id: after a crash Spark calls it again with the same id.
        The stop request and the fence are checked before each call; a fenced run writes nothing more.

        :param cache_batch: keep the batch cached while ``function`` runs (default), so that the progress
            line counts each record once however many actions ``function`` runs; ``False`` for a function
            that runs exactly one action (one write), which saves the cache.
        :param output_mode: Spark's output mode: ``append`` (default), ``update`` (a stateful query's changed
            rows each batch: pair it with an upsert) or ``complete``.

        :return: the exit code (also kept for the ``with`` block).
        """
        self._check_built_on_source(df)
        if output_mode not in ("append", "update", "complete"):
            raise ConfigError(f"output_mode must be append, update or complete, got {output_mode!r}")
        batch = self._run.guarded(function, cache=cache_batch)
        writer = self._run.stream_writer(df.writeStream.outputMode(output_mode).foreachBatch(batch))
        return self._finish(self._run.run(writer.start))

    def write_delta(
        self,
        df: Any,
        path: str,
        *,
        mode: str = "append",
        merge_on: str | list[str] | None = None,
        partition_by: list[str] | None = None,
        merge_window: tuple[str, str] | None = None,
        output_mode: str = "append",
    ) -> int:
        """Write to the Delta table at ``path``; block until the run ends.

        :param mode: ``append`` (Delta's transaction ids ``txnAppId``/``txnVersion`` make a replayed batch
            write nothing), ``merge`` (insert the rows whose ``merge_on`` key is not in the table:
            exactly once across switches, no dedup step afterwards) or ``upsert`` (update the rows whose key
            is in the table, insert the others: the newest value of each key, for a stateful query in
            ``update`` output mode).
        :param merge_on: the key column(s) of ``merge`` mode.
        :param partition_by: the table's partition columns when the sink creates it.
        :param merge_window: ``(column, interval)``, e.g. ``("order_date", "7 days")``: a merge only looks at
            table rows whose ``column`` is within ``interval`` of the batch's oldest value, which bounds its
            cost as the table grows (partition pruning when the table is partitioned by ``column``).
        :param output_mode: Spark's output mode (:meth:`foreach_batch`); ``update`` with ``upsert``.
        :return: the exit code.
        """
        from airflow_kafka_failover.jobs.delta_sink import DeltaSink

        self._check_observed("write_delta")
        sink = DeltaSink(
            self.spark,
            path,
            mode=mode,
            merge_on=merge_on,
            partition_by=partition_by,
            merge_window=merge_window,
            app_id=self.application_id,
        )
        sink.check(df)
        # An append is one action; a merge reads the batch several times and is better off cached anyway.
        return self.foreach_batch(df, sink.write_batch, cache_batch=mode != "append", output_mode=output_mode)

    def write_stream(self, writer: Any) -> int:
        """Start ``writer`` (``df.writeStream.format(...)...``) with the run's checkpoint and trigger.

        For sinks that Spark itself keeps idempotent per batch (file sinks, Delta's streaming sink). The stop
        request and the fence are checked every ``poll_interval_seconds`` between batches: a fenced run may
        finish the batch in flight. The writer's own ``checkpointLocation`` and trigger are replaced.

        :return: the exit code.
        """
        self._check_observed("write_stream")
        return self._finish(self._run.run(self._run.stream_writer(writer).start))

    # ---- the end ------------------------------------------------------------------------------------

    def _check_built_on_source(self, df: Any) -> None:
        if self._source is None:
            raise ConfigError(
                "the job writes a DataFrame that was not built on FailoverStream.read_kafka(): read the "
                "Kafka source through it, so the run reads the active cluster at the planned offsets"
            )
        if not getattr(df, "isStreaming", True):
            raise ConfigError("foreach_batch/write_delta take the streaming DataFrame built on read_kafka()")

    def _check_observed(self, writer: str) -> None:
        if not self._run.source_observed:
            raise ConfigError(
                f"{writer} needs the Kafka source observed for the progress entries, and it was read with "
                "read_kafka(observe=False): read it with read_kafka() (observe=False is for a foreach_batch "
                "function that returns each batch's statistics)"
            )

    def _finish(self, code: int) -> int:
        self.exit_code = code
        return code

    def __enter__(self) -> FailoverStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        try:
            if error is not None and not isinstance(error, SystemExit):
                if isinstance(error, ConfigError):
                    log.error("the job cannot run: %s", error)
                    self._run.write_status("failed", reason=first_line(str(error)))
                else:
                    log.error("the job failed", exc_info=(kind, error, trace))  # type: ignore[arg-type]
                    self._run.write_status("failed", reason=first_line(f"{type(error).__name__}: {error}"))
                self.exit_code = EXIT_FAILED
            elif error is None and self.exit_code is None:
                reason = (
                    "the job ended without starting a query: call foreach_batch, write_delta or "
                    "write_stream inside the with block"
                )
                log.error(reason)
                self._run.write_status("failed", reason=reason)
                self.exit_code = EXIT_FAILED
        finally:
            self.spark.stop()
        if error is None or not isinstance(error, SystemExit):
            raise SystemExit(self.exit_code if self.exit_code is not None else EXIT_FAILED)


def _session(app_name: str | None, config: dict[str, str]) -> Any:
    """The run's SparkSession (``app_name`` None keeps spark-submit's ``--name``)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if app_name:
        builder = builder.appName(app_name)
    for key, value in config.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("AKF_SPARK_LOG_LEVEL", "WARN"))
    return spark


def _warm_standby(
    folder: str, app_name: str | None, config: dict[str, str]
) -> tuple[Any, StandbySlot, Handoff]:
    """Be a warm standby in the slot ``folder``: hold it, start Spark, load the Kafka source, wait for the
    handoff (``run_format/standby.py``); return the session, the slot (still held) and the handoff. Exits with
    code 2 when another warm driver holds the slot or the classpath lacks the Kafka source, with 0 when
    stopped before a handoff."""
    slot = StandbySlot(folder)
    try:
        slot.claim()
    except SlotBusy as exc:
        log.error("refusing to start: %s", exc)
        raise SystemExit(EXIT_BAD_INPUT) from None
    slot.write_state("starting")
    spark = _session(app_name, config)
    try:
        check_kafka_classpath(spark)
    except ConfigError as exc:
        log.error("refusing to start: %s", exc)
        slot.write_state("refused", reason=first_line(str(exc)))
        spark.stop()
        raise SystemExit(EXIT_BAD_INPUT) from None
    _rehearse(spark, slot)
    slot.write_state("waiting", application_id=spark.sparkContext.applicationId)
    log.info("warm standby in %s: Spark is up; waiting for a switch to hand over a run", folder)
    try:
        handoff = slot.wait_for_handoff()
    except StandbyStopped as exc:
        log.info("%s", exc)
        slot.write_state("stopped")
        spark.stop()
        raise SystemExit(0) from None
    except ConfigError as exc:
        log.error("refusing the handoff: %s", exc)
        slot.write_state("refused", reason=first_line(str(exc)))
        spark.stop()
        raise SystemExit(EXIT_BAD_INPUT) from None
    waited = time.time() - handoff.written_at
    log.info("handed epoch %s (%s) after %.2f s; starting it", handoff.epoch, handoff.settings, waited)
    return spark, slot, handoff


def _rehearse(spark: Any, slot: StandbySlot) -> None:
    """Rehearse a run's start on the slot's rehearsal settings (best effort: a failure is only logged, the
    handed run then pays the cold start it would have paid anyway)."""
    if not slot.rehearsal_file.exists():
        log.info("no rehearsal settings in %s: waiting without a rehearsal", slot.folder)
        return
    started = time.monotonic()
    try:
        JobRun(JobSettings.load(str(slot.rehearsal_file)), spark).rehearse_start()
    except Exception as exc:  # the rehearsal is an optimisation; the run's own start checks everything
        log.warning(
            "the start rehearsal failed (%s); waiting anyway", first_line(f"{type(exc).__name__}: {exc}")
        )
        return
    log.info(
        "rehearsed a start (Kafka admin, source analysis, an empty batch read) in %.1f s",
        time.monotonic() - started,
    )


def _refuse(settings_location: str, reason: str) -> None:
    """Write ``refused`` to the status file beside the settings file (when its store can be reached)."""
    if not locations.is_remote(settings_location):
        settings_location = os.path.abspath(settings_location)
    try:
        write_refusal(locations.parent(settings_location), reason)
    except (OSError, ConfigError) as exc:
        log.error("could not write the refusal beside %s: %s", settings_location, exc)


def _configure_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s [akf-job] %(message)s"
        )
    logging.getLogger("airflow_kafka_failover.job").setLevel(logging.INFO)
    logging.getLogger("py4j").setLevel(logging.WARNING)

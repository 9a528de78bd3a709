"""The protocol between the failover operators and one run of a streaming job, implemented once.

Every job the DAGs submit, the packaged one and a user's own (through :mod:`airflow_kafka_failover.jobs.api`),
runs it through :class:`JobRun`:

- **status**: ``<run_dir>/status.json`` says ``starting``, ``running`` (with the Spark application id),
  then ``stopped``, ``fenced`` or ``failed`` with a reason;
- **stop and fence**: before a batch is written (``foreachBatch`` sinks) and every ``poll_interval_seconds``
  between batches, the run checks the stop request and the fencing marker. A fenced or stopping run raises
  before writing, so the batch is not committed in the checkpoint and the next run reads it again; between
  batches it waits for the batch in flight and stops the query. The check before a batch is timed in the
  batch's log line (``fence check``), the checks between batches in one line when the query ends;
- **progress**: after Spark commits batch ``b``, its progress entry ``<checkpoint>/progress/<b>`` (epoch,
  batch id, the end offsets of ``offsets/<b>``, records, and per partition the newest record's timestamp and
  offset over the run, observed on the Kafka source itself so that any transformation of the user's keeps
  them; see :mod:`~airflow_kafka_failover.run_format.progress_log`);
- **bookkeeping group**: then the batch's end offsets are committed to the bookkeeping group on the cluster
  the run reads, so MirrorMaker 2 checkpoints the job's position to the other cluster.

Progress and group commit run after Spark's commit, in a streaming query listener: a run that dies between
the two leaves a committed batch without them, which makes the next switch plan from older marks (more
re-read records, never fewer). When the query ends, batches committed without a progress entry get one from
the checkpoint (without new marks).

Every file is read and written through :mod:`airflow_kafka_failover.core.storage`, so the checkpoint, the run
folder and the fencing folder may be local or on a store (``hdfs://``, ``s3a://``; on the driver through
Spark's Hadoop ``FileSystem``). A run that cannot read the fence for :data:`FENCE_BLIND_SECONDS` stops: a
job that cannot see whether it was fenced must not go on consuming.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import StoreUnavailable, open_store, replace_json
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.jobs.java_classes import JavaClasses
from airflow_kafka_failover.run_format.fencing import FencingMarker
from airflow_kafka_failover.run_format.layout import (
    claim_checkpoint,
    status_file,
    stop_request_file,
    stop_requested,
)
from airflow_kafka_failover.run_format.progress_log import (
    KEEP_RECORDS,
    batch_numbers,
    progress_folder,
    progress_location,
    read_progress,
)
from airflow_kafka_failover.run_format.settings import JobSettings
from airflow_kafka_failover.run_format.spark_checkpoint import last_committed_offsets, parse_offsets_file

log = logging.getLogger("airflow_kafka_failover.job")

EXIT_STOPPED = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

SOURCE_METRICS = "akf_source"
"""The observation on the Kafka source: records, and per partition the newest offset and timestamp."""
RECORD_ID_METRICS = "akf_record_ids"
"""An optional observation of a job's output: ``rows`` and ``with_id`` (rows that carry a record id)."""
PROGRESS_WAIT_SECONDS = 10.0
"""How long a stopping run waits for the progress entry of its last committed batch."""
FENCE_BLIND_SECONDS = 30.0
"""How long a run goes on while it cannot read the fencing folder (a store that does not answer) before it
stops: longer than a store's usual hiccup, shorter than a switch (which stops the old job, then plans)."""
RECENT_CHECKS = 600
"""How many of the newest checks between batches the median in the run's last log line is taken over."""


class RunStopping(Exception):
    """Raised inside a batch when the run must not process it (fenced or asked to stop)."""


@dataclass
class CheckTimes:
    """How long the stop-and-fence checks between batches took: count, longest, and the newest
    :data:`RECENT_CHECKS` for a median (bounded: a run may check every second for months)."""

    count: int = 0
    longest: float = 0.0
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_CHECKS))

    def add(self, seconds: float) -> None:
        self.count += 1
        self.longest = max(self.longest, seconds)
        self.recent.append(seconds)

    def describe(self, over_seconds: float) -> str:
        """``"57 in 60.2 s (0.95/s), median 0.012 s, max 0.051 s"`` (the median of the recent ones)."""
        rate = self.count / over_seconds if over_seconds > 0 else 0.0
        median = statistics.median(self.recent) if self.recent else 0.0
        return (
            f"{self.count} in {over_seconds:.1f} s ({rate:.2f}/s), median {median:.3f} s, "
            f"max {self.longest:.3f} s"
        )


def prepare(settings: JobSettings) -> None:
    """Check the checkpoint and the fence before Spark starts; raise ConfigError/CheckpointError to refuse."""
    claim_checkpoint(
        settings.checkpoint, settings.pair, settings.cluster, settings.epoch, settings.bootstrap_servers
    )
    fence = FencingMarker(settings.fencing_marker, settings.pair).read()
    if fence is None:
        raise ConfigError(
            f"fencing folder {settings.fencing_marker} holds no epoch marker; the operator creates the "
            "marker of the run's epoch before it submits the job"
        )
    if fence.epoch != settings.epoch:
        raise ConfigError(
            f"fencing folder {settings.fencing_marker} is at epoch {fence.epoch}; this run is for "
            f"epoch {settings.epoch} and must not start"
        )
    request = stop_request_file(settings.run_dir)
    open_store(request).delete(request)


def write_refusal(run_dir: str, reason: str) -> None:
    """Tell the operator why the run did not start (``status.json`` state ``refused``)."""
    replace_json(status_file(run_dir), {"state": "refused", "reason": reason, "pid": os.getpid()})


class JobRun:
    """One run of a job: its status file, stop and fence checks, progress entries and group commits.

    :param settings: the run's settings (the file the operator wrote).
    :param spark: the run's SparkSession.
    """

    def __init__(self, settings: JobSettings, spark: Any) -> None:
        self.settings = settings
        self.spark = spark
        self.fence = FencingMarker(settings.fencing_marker, settings.pair)
        self.fence_unread_since: float | None = None
        self.batch_lock = threading.Lock()
        self.stop_reason: str | None = None
        self.stop_state = "stopped"
        self.admin: Any = None
        self.last_batch: int | None = None
        self.recorded_batch = -1
        self.progress_lock = threading.Lock()
        self.write_seconds: dict[int, float] = {}
        self.fence_check_seconds: dict[int, float] = {}  # the check before each batch, for its log line
        self.between_checks = CheckTimes()
        self.written_stats: dict[int, dict[str, Any]] = {}
        self.partitions: list[TopicPartition] = []
        self.query_id: str | None = None
        self.carried: dict[str, Any] | None = None  # the run's marks and record count so far
        self.source_observed = True  # False: every batch function returns its batch's statistics
        self.java = JavaClasses(spark)

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
        replace_json(status_file(self.settings.run_dir), data)

    # ---- stop and fence -------------------------------------------------------------------------------

    def why_stop(self) -> tuple[str, str] | None:
        """Return (state, reason) when the run must stop now, else None.

        A store that does not answer is tolerated for :data:`FENCE_BLIND_SECONDS`; then the run stops.
        """
        try:
            if stop_requested(self.settings.run_dir):
                return "stopped", "a stop was requested"
            fence = self.fence.newer_than(self.settings.epoch)
        except (ConfigError, StoreUnavailable) as exc:
            now = time.monotonic()
            if self.fence_unread_since is None:
                self.fence_unread_since = now
            blind = now - self.fence_unread_since
            if blind >= FENCE_BLIND_SECONDS:
                return "failed", (
                    f"cannot read the fencing folder {self.settings.fencing_marker} for {blind:.0f} s "
                    f"({exc}); a run that cannot see whether it was fenced stops"
                )
            log.warning(
                "cannot read the fencing folder (%s); going on with epoch %s for at most %.0f s more",
                exc,
                self.settings.epoch,
                FENCE_BLIND_SECONDS - blind,
            )
            return None
        self.fence_unread_since = None
        if fence is not None:
            return "fenced", (
                f"the pair's epoch is now {fence.epoch} (cluster {fence.cluster}), this run "
                f"belongs to epoch {self.settings.epoch}"
            )
        return None

    def guarded(self, write: Callable[[Any, int], Any], cache: bool = True) -> Callable[[Any, int], None]:
        """A ``foreachBatch`` function that checks the stop request and the fence before ``write``.

        :param write: the sink's batch function ``(batch DataFrame, batch id)``. It may return the batch's
            statistics (``records``, ``max_timestamp_ms``, ``max_offset``, ``without_id``), which the
            progress entry then takes instead of the source's observation (which saw no record for a
            replayed batch that wrote nothing); with an unobserved source (:meth:`source` with
            ``observe=False``) it must, or the batch fails with a ConfigError.
        :param cache: cache the batch while ``write`` runs. Spark adds up a batch's observation over every
            action run on it, so a ``write`` that runs more than one (a MERGE, a count then a write) would
            count its records twice; from the cache the source is read, and observed, once. A ``write`` known
            to run a single action may leave it off.
        """

        def batch(batch_df: Any, batch_id: int) -> None:
            with self.batch_lock:
                if self.stop_reason is None:
                    checked = time.monotonic()
                    verdict = self.why_stop()
                    self.fence_check_seconds[batch_id] = time.monotonic() - checked
                    if verdict is not None:
                        self.stop_state, self.stop_reason = verdict
                if self.stop_reason is not None:
                    raise RunStopping(f"batch {batch_id} not processed: {self.stop_reason}")
                started = time.monotonic()
                if cache:
                    batch_df = batch_df.persist()
                try:
                    stats = write(batch_df, batch_id)
                finally:
                    if cache:
                        batch_df.unpersist()
                self.write_seconds[batch_id] = time.monotonic() - started
                if isinstance(stats, dict):
                    self.written_stats[batch_id] = stats
                elif not self.source_observed:
                    raise ConfigError(
                        f"batch {batch_id}: the batch function returned {stats!r} instead of the batch's "
                        "statistics (records, max_offset, max_timestamp_ms, without_id), and the source is "
                        "read without its observation (read_kafka(observe=False)): return them, or read "
                        "the source with read_kafka() so that the run observes them"
                    )
                self.last_batch = batch_id

        return batch

    # ---- the Kafka source -----------------------------------------------------------------------------

    def source(self, observe: bool = True) -> Any:
        """The Kafka source DataFrame of the active cluster, observed for the progress entries.

        :param observe: False for a batch function that returns each batch's statistics itself (the
            packaged Parquet sink reads them from the footers of the files it wrote): the observation's
            per-record aggregates (records, and the newest offset and timestamp of every partition) are
            then left out of the query, and :meth:`guarded` refuses a batch that comes back without them.
        """
        settings = self.settings
        reader = self._kafka_reader(self.spark.readStream).option(
            "startingOffsets", settings.starting_offsets_option
        )
        if settings.max_offsets_per_trigger is not None:
            reader = reader.option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
        self.partitions = self._subscribed_partitions()
        self.source_observed = observe
        if not observe:
            return reader.load()
        return reader.load().observe(SOURCE_METRICS, *source_metrics(self.partitions))

    def _kafka_reader(self, reader: Any) -> Any:
        """``reader`` (streaming or batch) on the run's cluster and topics with its Kafka options."""
        settings = self.settings
        reader = (
            reader.format("kafka")
            .option("kafka.bootstrap.servers", settings.bootstrap_servers)
            .option("failOnDataLoss", "true")
            .option("kafka.isolation.level", "read_committed")
        )
        if settings.topics:
            reader = reader.option("subscribe", ",".join(settings.topics))
        else:
            reader = reader.option("subscribePattern", settings.topic_pattern)
        for key, value in settings.kafka_options.items():
            reader = reader.option(f"kafka.{key}", value)
        return reader

    def rehearse_start(self) -> None:
        """What a warm standby driver does before any handoff, on a run of its cluster: open the Kafka admin
        client and analyse the source (as :meth:`source`), then count the records of one batch read from the
        partitions' end offsets to ``latest`` (the few that arrive meanwhile), which loads the Kafka consumer
        and runs a plan on the executors. Writes nothing, commits nothing; closes its client."""
        try:
            self.source().schema  # noqa: B018 (the analysis is the point)
            ends = self._cluster_end_offsets()
            if ends:
                starting: dict[str, dict[str, int]] = {tp.topic: {} for tp in ends}
                for tp, offset in ends.items():
                    starting[tp.topic][str(tp.partition)] = offset
                reader = self._kafka_reader(self.spark.read).option("startingOffsets", json.dumps(starting))
                reader.option("endingOffsets", "latest").load().count()  # what arrived since: a few records
        finally:
            if self.admin is not None:
                self.admin.close()
                self.admin = None

    def _subscribed_partitions(self) -> list[TopicPartition]:
        """The partitions the run reads now (a partition added later gets no marks, only offsets)."""
        java = self.java
        unit = java("java.util.concurrent.TimeUnit").SECONDS
        admin = self._admin()
        if self.settings.topics:
            names = list(self.settings.topics)
        else:
            listed = admin.listTopics().names().get(30, unit)
            pattern = java("java.util.regex.Pattern").compile(self.settings.topic_pattern)
            names = sorted(str(name) for name in listed if pattern.matcher(name).matches())
        if not names:
            return []
        topics = java("java.util.ArrayList")()
        for name in names:
            topics.add(name)
        described = admin.describeTopics(topics).allTopicNames().get(30, unit)
        return sorted(
            TopicPartition(str(name), int(info.partition()))
            for name in names
            for info in described.get(name).partitions()
        )

    # ---- after each batch: progress entry and group commit ---------------------------------------------

    def listener(self) -> ProgressListener:
        """A streaming query listener that records each committed batch of this run's query."""
        return ProgressListener(self)

    def on_progress(self, progress: dict[str, Any]) -> None:
        """Record the batch of a query progress event (Spark's JSON of ``StreamingQueryProgress``)."""
        if self.query_id is not None and str(progress.get("id")) != self.query_id:
            return
        batch_id: Any = progress.get("batchId")
        try:
            self.record_batch(
                int(batch_id),
                progress.get("observedMetrics") or {},
                progress.get("durationMs"),
                state_of(progress.get("stateOperators")),
            )
        except Exception:  # a listener that raises is dropped by Spark; keep it and say why
            log.exception("could not record batch %s", batch_id)

    def record_batch(
        self,
        batch_id: int,
        metrics: dict[str, dict[str, Any]],
        durations: dict[str, int] | None = None,
        state: dict[str, int] | None = None,
    ) -> None:
        """Write the progress entry of committed batch ``batch_id`` and commit it to the bookkeeping group.

        Called once per batch (a batch recorded already, or one Spark did not commit, is skipped).

        :param batch_id: the batch.
        :param metrics: the batch's observed metrics (:data:`SOURCE_METRICS`, :data:`RECORD_ID_METRICS`).
        :param durations: Spark's ``durationMs`` of the batch, for the log line.
        :param state: the stateful operators after the batch (:func:`state_of`); None for a stateless query.
        """
        with self.progress_lock:
            self._carried()
            if batch_id <= self.recorded_batch or not self._committed(batch_id):
                return
            started = time.monotonic()
            end_offsets = self._end_offsets(batch_id)
            stats = self.written_stats.pop(batch_id, None) or self._stats(
                metrics.get(SOURCE_METRICS), metrics.get(RECORD_ID_METRICS)
            )
            if stats.get("without_id"):
                log.warning(
                    "%s records of batch %s have no record id (field %r); they cannot be deduplicated",
                    stats["without_id"],
                    batch_id,
                    self.settings.record_id_field,
                )
            if state:
                stats = {**stats, "state": state}
            self._write_progress(batch_id, end_offsets, stats)
            progress_seconds = time.monotonic() - started
            self._commit_group(end_offsets)
            self.recorded_batch = batch_id
            commit_seconds = time.monotonic() - started - progress_seconds
        write = self.write_seconds.pop(batch_id, None)
        fence_check = self.fence_check_seconds.pop(batch_id, 0.0)
        if write is None and durations:
            write = durations.get("addBatch", 0) / 1000
        total = (durations or {}).get("triggerExecution", 0) / 1000 or (write or 0.0)
        log.info(
            "batch %s: %s records in %.2f s (write %.2f s, progress %.2f s, group commit %.2f s, "
            "fence check %.3f s; Spark's phases %s), end offsets %s",
            batch_id,
            stats["records"],
            max(total, write or 0.0),
            write or 0.0,
            progress_seconds,
            commit_seconds,
            fence_check,
            _phases(durations),
            _short(end_offsets),
        )

    def catch_up(self) -> None:
        """Record the committed batches the listener did not get to (a run that stops right after a batch)."""
        committed = batch_numbers(self._checkpoint("commits"))
        for batch_id in (b for b in committed if b > self.recorded_batch):
            self.record_batch(batch_id, {})

    def _checkpoint(self, *names: str) -> str:
        return locations.join(self.settings.checkpoint, *names)

    def _committed(self, batch_id: int) -> bool:
        marker = self._checkpoint("commits", str(batch_id))
        return open_store(marker).exists(marker)

    def _end_offsets(self, batch_id: int) -> dict[TopicPartition, int]:
        path = self._checkpoint("offsets", str(batch_id))
        return parse_offsets_file(path, open_store(path).read(path).decode("utf-8"))

    def _stats(self, source: dict[str, Any] | None, ids: dict[str, Any] | None) -> dict[str, Any]:
        """Records, and the newest offset and timestamp per partition, from the batch's observations."""
        newest: dict[str, dict[str, int]] = {}
        last: dict[str, dict[str, int]] = {}
        records = None
        if source is not None:
            records = int(source.get("records") or 0)
            for index, tp in enumerate(self.partitions):
                for into, key in ((last, f"o{index}"), (newest, f"t{index}")):
                    value = source.get(key)
                    if value is not None:
                        into.setdefault(tp.topic, {})[str(tp.partition)] = int(value)
        stats: dict[str, Any] = {"records": records, "max_timestamp_ms": newest, "max_offset": last}
        if ids is not None:
            stats["without_id"] = int(ids.get("rows") or 0) - int(ids.get("with_id") or 0)
        return stats

    def _carried(self) -> dict[str, Any]:
        """The run's record count and marks so far: from its newest progress entry when it resumes (whose
        batches are then not recorded again)."""
        if self.carried is None:
            last = last_committed_offsets(self.settings.checkpoint)
            summary = None if last is None else read_progress(self.settings.checkpoint, last[0])
            if summary is not None:
                self.recorded_batch = max(self.recorded_batch, summary.batch_id)
            self.carried = {
                "records_total": summary.records if summary else 0,
                "max_timestamp_ms": _nested(summary.max_timestamps_ms) if summary else {},
                "max_offset": _nested(summary.last_record_offsets) if summary else {},
            }
        return self.carried

    def _write_progress(
        self, batch_id: int, end_offsets: dict[TopicPartition, int], stats: dict[str, Any]
    ) -> None:
        """Write batch ``batch_id``'s progress entry, carrying the run's marks forward; keep the newest."""
        carried = self._carried()
        for key in ("max_timestamp_ms", "max_offset"):
            for topic, partitions in (stats.get(key) or {}).items():
                into = carried[key].setdefault(topic, {})
                for partition, mark in partitions.items():
                    into[partition] = max(mark, into.get(partition, mark))
        carried["records_total"] += int(stats.get("records") or 0)
        record = {
            "epoch": self.settings.epoch,
            "batch_id": batch_id,
            "end_offsets": _nested(end_offsets),
            **stats,
            "records_total": carried["records_total"],
            "max_timestamp_ms": carried["max_timestamp_ms"],
            "max_offset": carried["max_offset"],
            "written_at": time.time(),
        }
        replace_json(progress_location(self.settings.checkpoint, batch_id), record)
        if batch_id % KEEP_RECORDS == 0 and batch_id > KEEP_RECORDS:
            self._forget_progress_before(batch_id - KEEP_RECORDS)

    def _forget_progress_before(self, batch_id: int) -> None:
        """Remove the records of batches before ``batch_id``, but the run's first (when it started)."""
        folder = progress_folder(self.settings.checkpoint)
        store = open_store(folder)
        numbers = batch_numbers(folder)
        for old in (b for b in numbers[1:] if b < batch_id):
            store.delete(progress_location(self.settings.checkpoint, old))

    def _cluster_end_offsets(self) -> dict[TopicPartition, int]:
        """The end offset of each partition the run reads (``self.partitions``), from the admin client."""
        java = self.java
        wanted = java("java.util.HashMap")()
        for tp in self.partitions:
            wanted.put(
                java("org.apache.kafka.common.TopicPartition")(tp.topic, tp.partition),
                java("org.apache.kafka.clients.admin.OffsetSpec").latest(),
            )
        unit = java("java.util.concurrent.TimeUnit").SECONDS
        answered = self._admin().listOffsets(wanted).all().get(30, unit)
        return {
            TopicPartition(str(key.topic()), int(key.partition())): int(info.offset())
            for key, info in answered.items()
        }

    def _admin(self) -> Any:
        """The Kafka Admin client (Java, through Py4J) of the cluster the run reads; opened once."""
        if self.admin is None:
            props = self.java("java.util.Properties")()
            props.put("bootstrap.servers", self.settings.bootstrap_servers)
            for key, value in self.settings.kafka_options.items():
                props.put(key, value)
            self.admin = self.java("org.apache.kafka.clients.admin.Admin").create(props)
        return self.admin

    def _commit_group(self, end_offsets: dict[TopicPartition, int]) -> None:
        java = self.java
        offsets = java("java.util.HashMap")()
        for tp, offset in end_offsets.items():
            offsets.put(
                java("org.apache.kafka.common.TopicPartition")(tp.topic, tp.partition),
                java("org.apache.kafka.clients.consumer.OffsetAndMetadata")(offset),
            )
        unit = java("java.util.concurrent.TimeUnit").SECONDS
        self._admin().alterConsumerGroupOffsets(self.settings.bookkeeping_group, offsets).all().get(30, unit)

    # ---- the query ------------------------------------------------------------------------------------

    def run(self, start: Callable[[], Any]) -> int:
        """Start the query with ``start`` and supervise it; return the run's exit code.

        :param start: starts the query and returns it (a ``DataStreamWriter.start`` bound to its options).
        """
        # Opened before the query starts, so that the first batch does not pay for it (the client connects
        # lazily; an unusable Kafka option still fails here, before anything is read).
        self._admin()
        self._carried()  # a resumed checkpoint: what its earlier process recorded
        listener = self.listener()
        listener.register(self.spark)
        try:
            query = start()
            self.query_id = str(query.id)
            self.write_status(
                "running",
                query_id=str(query.id),
                run_id=str(query.runId),
                application_id=self.spark.sparkContext.applicationId,
            )
            log.info(
                "query %s running on cluster %s, epoch %s",
                query.id,
                self.settings.cluster,
                self.settings.epoch,
            )
            supervised = time.monotonic()
            try:
                return self._supervise(query)
            finally:
                log.info(
                    "stop and fence checks between batches: %s",
                    self.between_checks.describe(time.monotonic() - supervised),
                )
        finally:
            listener.unregister(self.spark)
            self.admin.close()

    def stream_writer(self, writer: Any) -> Any:
        """``writer`` with this run's checkpoint, trigger and query name."""
        settings = self.settings
        return (
            writer.option("checkpointLocation", settings.checkpoint)
            .trigger(processingTime=f"{settings.trigger_interval_seconds} seconds")
            .queryName(f"akf-{settings.pair}-{settings.cluster}-epoch-{settings.epoch}")
        )

    def _wait_committed(self, timeout: float = 30.0) -> None:
        """Wait until Spark marked the last processed batch committed, so stopping does not undo it.

        Spark writes ``commits/<b>`` after the batch function returns; a stop in between would leave a batch
        whose output exists but which the checkpoint does not count, and the next run would read it again.
        """
        if self.last_batch is None:
            return
        batch = self.last_batch
        deadline = time.monotonic() + timeout
        while not self._committed(batch) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not self._committed(batch):
            log.warning(
                "batch %s is still not committed after %.0f s; stopping anyway (it will be read again)",
                self.last_batch,
                timeout,
            )

    def _wait_recorded(self, timeout: float = PROGRESS_WAIT_SECONDS) -> None:
        """Give the listener the time to record the last committed batch, then record what it left."""
        committed = batch_numbers(self._checkpoint("commits"))
        if not committed:
            return
        deadline = time.monotonic() + timeout
        while self.recorded_batch < committed[-1] and time.monotonic() < deadline:
            time.sleep(0.05)
        self.catch_up()

    def _supervise(self, query: Any) -> int:
        from pyspark.errors import StreamingQueryException

        while True:
            try:
                if query.awaitTermination(self.settings.poll_interval_seconds):
                    break
            except StreamingQueryException as exc:
                if self.stop_reason is not None:
                    break
                log.error("the query failed: %s", exc)
                self._last_word("failed", first_line(str(exc)))
                return EXIT_FAILED
            checked = time.monotonic()
            verdict = self.why_stop()
            self.between_checks.add(time.monotonic() - checked)
            if verdict is not None:
                with self.batch_lock:  # lets the batch in flight finish
                    if self.stop_reason is None:
                        self.stop_state, self.stop_reason = verdict
                log.info("stopping: %s", self.stop_reason)
                self._wait_committed_quietly()
                query.stop()
                break
        try:
            self._wait_recorded()
        except StoreUnavailable as exc:
            log.error("could not record the last batches: %s", exc)
        if self.stop_reason is None:
            self.stop_reason = "the query ended"
        self._last_word(self.stop_state, self.stop_reason)
        log.info("%s: %s", self.stop_state, self.stop_reason)
        return EXIT_FAILED if self.stop_state == "failed" else EXIT_STOPPED

    def _wait_committed_quietly(self) -> None:
        try:
            self._wait_committed()
        except StoreUnavailable as exc:
            log.warning("cannot tell whether the last batch is committed (%s); stopping anyway", exc)

    def _last_word(self, state: str, reason: str) -> None:
        """Write the run's final state; a store that does not answer leaves it to the log and exit code."""
        try:
            self.write_status(state, reason=reason)
        except StoreUnavailable as exc:
            log.error(
                "could not write the final state %r (%s) to %s: %s", state, reason, self.settings.run_dir, exc
            )


class ProgressListener:
    """The run's streaming query listener, on the Java interface of Spark's Python listeners (Py4J calls
    it from the JVM).

    Each progress event is read as the JSON Spark writes of it, in one call. pyspark's
    ``StreamingQueryListener`` converts the event field by field instead, and each Java map it iterates
    ends in an exception that pyspark's error handler classifies with a dozen class lookups, each a search
    of Spark's class path: on 2026-12-01 that was 12% of a test driver's CPU at one batch a second
    (async-profiler; ``docs/concepts.md``, "What the job's own work costs"). The interface and its
    wrapper are the ones pyspark registers its listeners with, the same from Spark 3.5 to 4.2.

    :param run: the run whose batches the events record.
    """

    def __init__(self, run: JobRun) -> None:
        self.run = run
        self.wrapper: Any = None

    def register(self, spark: Any) -> None:
        """Add the listener to ``spark``'s streaming queries (before the query starts)."""
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]
        wrapper = self.run.java("org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper")
        self.wrapper = wrapper(self)
        spark._jsparkSession.streams().addListener(self.wrapper)

    def unregister(self, spark: Any) -> None:
        """Remove the listener :meth:`register` added."""
        if self.wrapper is not None:
            spark._jsparkSession.streams().removeListener(self.wrapper)
            self.wrapper = None

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        try:
            progress = json.loads(event.progress().json())
        except Exception:  # a listener that raises is dropped by Spark; keep it and say why
            log.exception("could not read a query progress event")
            return
        self.run.on_progress(progress)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def state_of(operators: Any) -> dict[str, int] | None:
    """What a progress event's ``stateOperators`` say of the query's state: ``operators``, ``rows`` (Spark's
    ``numRowsTotal``) and ``memory_bytes`` (``memoryUsedBytes``) over all of them; None for a stateless
    query. A switch carries this state (``job.state``; docs/jobs.md, "Stateful jobs")."""
    if not isinstance(operators, list) or not operators:
        return None

    def total(key: str) -> int:
        return sum(int(op.get(key) or 0) for op in operators if isinstance(op, dict))

    return {
        "operators": len(operators),
        "rows": total("numRowsTotal"),
        "memory_bytes": total("memoryUsedBytes"),
    }


def _nested(offsets: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    nested: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        nested.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return nested


def _phases(durations: dict[str, int] | None) -> str:
    """Spark's ``durationMs`` of a batch in seconds, the phases that took any time, longest first."""
    phases = sorted(
        ((name, ms) for name, ms in (durations or {}).items() if name != "triggerExecution" and ms),
        key=lambda item: -item[1],
    )
    return ", ".join(f"{name} {ms / 1000:.2f} s" for name, ms in phases) or "not reported"


def _short(offsets: dict[Any, int], limit: int = 6) -> str:
    items = [f"{tp.topic}-{tp.partition}:{offset}" for tp, offset in sorted(offsets.items())]
    return ", ".join(items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def source_metrics(partitions: list[TopicPartition]) -> list[Any]:
    """The observation of the Kafka source (:data:`SOURCE_METRICS`): records, and per partition the newest
    offset (``o<i>``) and timestamp (``t<i>``) in the order of ``partitions``."""
    from pyspark.sql import functions as F

    metrics = [F.count(F.lit(1)).alias("records")]
    for index, tp in enumerate(partitions):
        here = (F.col("topic") == tp.topic) & (F.col("partition") == tp.partition)
        metrics.append(F.max(F.when(here, F.col("offset"))).alias(f"o{index}"))
        metrics.append(F.max(F.when(here, F.expr("unix_millis(timestamp)"))).alias(f"t{index}"))
    return metrics


def record_id_counts(df: Any, column: str = "record_id") -> Any:
    """``df`` observed for :data:`RECORD_ID_METRICS`: ``rows``, and ``with_id`` (rows with a ``column``)."""
    from pyspark.sql import functions as F

    return df.observe(
        RECORD_ID_METRICS, F.count(F.lit(1)).alias("rows"), F.count(F.col(column)).alias("with_id")
    )


def first_line(text: str) -> str:
    """The first line of an error's text, cut to 500 characters (for ``status.json``)."""
    return text.strip().splitlines()[0][:500] if text.strip() else ""

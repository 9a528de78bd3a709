"""The job's default sink: Parquet, one directory per (epoch, batch), and its deduplicating reader.

Layout under the sink root (a local folder or a store URI: ``hdfs://``, ``s3a://``)::

    epoch=<e>/_epoch.json                 the epoch's source cluster, written before its first batch
    epoch=<e>/batch=<b>/part-*.parquet    one micro-batch
    epoch=<e>/batch=<b>/_SUCCESS          written by Spark's output committer once every file is in place

A batch is complete when its ``_SUCCESS`` is there: Spark's committer writes it last, after the batch's files
were committed into the folder, on a file system as on an object store (where a folder cannot be renamed in
one step). A batch id that Spark replays after a crash finds its ``_SUCCESS`` and writes nothing new: the sink
is idempotent per (epoch, batch). A folder without it (a crash during the write) is written again, and never
read.

Columns of a record: ``record_id`` (from a JSON field of the value, or the key), ``key``, ``value``,
``source_cluster``, ``topic``, ``partition``, ``offset``, ``timestamp_ms``, ``epoch``, ``batch_id``. The
files hold the ones that differ from record to record (:data:`FILE_COLUMNS`); the three that are the same
for every record of a batch are not written into every row, where they cost more CPU than the record id
(docs/concepts.md, "What the job's own work costs"): ``epoch`` and ``batch_id`` are the folder names
(``epoch=<e>/batch=<b>``, which Spark's and pyarrow's partition discovery read back as columns ``epoch``
and ``batch``), ``source_cluster`` is the epoch's (an epoch is one run on one cluster), in
``epoch=<e>/_epoch.json``. Files written before 2026-12-01 carry all ten columns; the reader takes them too.

:func:`read_sink` returns the records deduplicated by record id, with all ten columns, which is how the end
result of any number of switches is checked for exactly-once.
"""

from __future__ import annotations

import io
import logging
import re
from collections import Counter
from collections.abc import Container
from dataclasses import dataclass, field
from typing import Any

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import open_store, read_json, replace_json
from airflow_kafka_failover.run_format.spark_checkpoint import read_checkpoint

log = logging.getLogger("airflow_kafka_failover.job")

COMPLETE = "_SUCCESS"
"""The file Spark's output committer writes into a folder once the write is committed."""
COLUMNS = (
    "record_id",
    "key",
    "value",
    "source_cluster",
    "topic",
    "partition",
    "offset",
    "timestamp_ms",
    "epoch",
    "batch_id",
)
"""The columns of a record as :func:`read_sink` gives them."""
BATCH_COLUMNS = ("source_cluster", "epoch", "batch_id")
"""The columns that are the same for every record of a batch: kept in the folders, not in the files."""
FILE_COLUMNS = tuple(name for name in COLUMNS if name not in BATCH_COLUMNS)
"""The columns of the Parquet files."""
EPOCH_FILE = "_epoch.json"
"""The file in an epoch's folder that names its source cluster: ``{"epoch": e, "source_cluster": c}``."""
WRITE_OPTIONS = {
    # Values, ids, offsets and timestamps are unique or nearly so: a dictionary never pays off for them.
    # Parquet would start one in each column chunk, hash every value into it and drop it once it outgrows
    # its page.
    **{
        f"parquet.enable.dictionary#{name}": "false"
        for name in ("value", "record_id", "offset", "timestamp_ms")
    },
    # Nothing filters on a value's minimum and maximum; keeping them compares every value with both.
    "parquet.column.statistics.enabled#value": "false",
    # The per-page size histograms of Parquet 1.15 (for nested and variable-width columns) help no reader of
    # this flat sink. Parquet before 1.15 (Spark 3.5) has neither option and ignores both.
    "parquet.size.statistics.enabled": "false",
}
"""The Parquet writer's options of the sink (docs/concepts.md, "What the job's own work costs")."""
_MAGIC = b"PAR1"
_TAIL_GUESS = 64 * 1024  # a batch file's footer is a few KB: one read gets it
_BATCH_DIR = re.compile(r"^batch=(\d+)$")
_EPOCH_DIR = re.compile(r"^epoch=(\d+)$")


def batch_dir(sink_root: str, epoch: int, batch_id: int) -> str:
    """The folder of one micro-batch."""
    return locations.join(str(sink_root), f"epoch={epoch}", f"batch={batch_id}")


def epoch_file(sink_root: str, epoch: int) -> str:
    """The file that names the source cluster of ``epoch``."""
    return locations.join(str(sink_root), f"epoch={epoch}", EPOCH_FILE)


def epoch_cluster(sink_root: str, epoch: int) -> str | None:
    """The source cluster of ``epoch`` from its ``_epoch.json``; None when there is none (a folder written
    before 2026-12-01, whose files carry ``source_cluster`` in every row)."""
    location = epoch_file(sink_root, epoch)
    try:
        recorded = read_json(location)
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise ConfigError(f"{location}: not the sink's epoch file ({exc}); it must be JSON") from None
    cluster = recorded.get("source_cluster") if isinstance(recorded, dict) else None
    if not isinstance(cluster, str) or not cluster:
        raise ConfigError(
            f"{location}: {recorded!r} names no source cluster; the sink writes "
            '{"epoch": <e>, "source_cluster": "<cluster>"} there before the epoch\'s first batch'
        )
    return cluster


def is_complete(batch: str) -> bool:
    """Whether a batch folder holds a committed write (its ``_SUCCESS``)."""
    marker = locations.join(batch, COMPLETE)
    return open_store(marker).exists(marker)


def parquet_files(batch: str) -> list[str]:
    """The Parquet files of a batch folder, in name order."""
    return [
        locations.join(batch, name) for name in open_store(batch).names(batch) if name.endswith(".parquet")
    ]


def batch_dirs(sink_root: str, known: Container[str] = ()) -> list[tuple[int, int, str]]:
    """Every complete batch folder as (epoch, batch_id, location), in order.

    :param known: batch folders already seen complete: not listed again (a complete batch never changes).
    """
    root = str(sink_root)
    store = open_store(root)
    found: list[tuple[int, int, str]] = []
    for epoch_name in store.names(root):
        epoch_match = _EPOCH_DIR.match(epoch_name)
        if not epoch_match:
            continue
        epoch_dir = locations.join(root, epoch_name)
        for batch_name in store.names(epoch_dir):
            batch_match = _BATCH_DIR.match(batch_name)
            batch = locations.join(epoch_dir, batch_name)
            if batch_match and (batch in known or COMPLETE in store.names(batch)):
                found.append((int(epoch_match.group(1)), int(batch_match.group(1)), batch))
    return sorted(found)


def _footer(location: str) -> Any:
    """The Parquet footer (pyarrow ``FileMetaData``) of a file anywhere.

    Only the end of the file is read: locally by pyarrow, on the driver's remote stores by a ranged read
    (:meth:`~airflow_kafka_failover.jobs.hadoop_store.HadoopStore.read_tail`); a store without ranged reads
    (the Airflow side's) gives the whole file.
    """
    import pyarrow.parquet as pq

    if not locations.is_remote(location):
        return pq.read_metadata(location)
    store = open_store(location)
    read_tail = getattr(store, "read_tail", None)
    if read_tail is None:
        return pq.read_metadata(io.BytesIO(store.read(location)))
    tail = read_tail(location, _TAIL_GUESS)
    size = int.from_bytes(tail[-8:-4], "little") + 8  # the footer, its length and the closing "PAR1"
    if size > len(tail):
        tail = read_tail(location, size)
    # The footer parsed on its own: a file of the opening magic and the file's last bytes.
    return pq.read_metadata(io.BytesIO(_MAGIC + tail[-size:]))


def rows_written_after(sink_root: str, epoch: int, batch_id: int) -> int:
    """Rows of the batches of ``epoch`` numbered above ``batch_id`` (read from the Parquet footers)."""
    return sum(
        _footer(file).num_rows
        for batch_epoch, batch, path in batch_dirs(sink_root)
        if batch_epoch == epoch and batch > batch_id
        for file in parquet_files(path)
    )


def uncommitted_output_records(checkpoint: str, sink_root: str, epoch: int) -> int:
    """Rows a run wrote to the sink in batches its checkpoint does not count as committed.

    A run killed between a batch's output and Spark's commit (for instance while its group commit to a
    dead cluster hangs) leaves such a batch; the next run reads those records again, on top of what the
    translation re-delivers, so they add to a switch's duplicate bound. The sink is the evidence: its
    batch directories only appear once complete.
    """
    root = str(checkpoint)
    offsets = locations.join(root, "offsets")
    committed = read_checkpoint(root).position if open_store(offsets).exists(offsets) else None
    last = committed.batch_id if committed is not None and committed.batch_id is not None else -1
    return rows_written_after(sink_root, epoch, last)


class ParquetBatchSink:
    """The packaged job's ``foreachBatch`` writer: one complete directory per (epoch, batch).

    :param sink_root: the sink's root (a local folder or a store URI every writer of the pair reaches).
    :param epoch: the run's epoch.
    :param cluster: the cluster the run reads (the epoch's ``source_cluster``).
    """

    write_options: dict[str, str] = WRITE_OPTIONS
    """The Parquet writer's options of every batch."""

    def __init__(self, sink_root: str, epoch: int, cluster: str) -> None:
        self.sink_root = sink_root
        self.epoch = epoch
        self.cluster = cluster
        self._committer_chosen = locations.scheme(sink_root) != "s3a"
        self._epoch_recorded = False

    def write_batch(self, batch_df: Any, batch_id: int) -> dict[str, Any] | None:
        """Write ``batch_df`` (:data:`FILE_COLUMNS`) unless the batch's directory is already there.

        :return: the batch's statistics for its progress entry (records, the newest offset and timestamp of
            each partition, records without an id), from the Parquet footers of the batch's files: those
            just written, or for a replayed batch those already there. The job reads its source without
            an observation (``read_kafka(observe=False)``), so that no record pays for aggregates whose
            figures the footers hold anyway.
        """
        final = batch_dir(self.sink_root, self.epoch, batch_id)
        if is_complete(final):
            log.info("batch %s: output %s already exists (replayed batch); nothing written", batch_id, final)
            return batch_stats(final)
        if not self._epoch_recorded:
            self.record_epoch()
        if not self._committer_chosen:
            from airflow_kafka_failover.jobs.committers import use_s3a_committer

            in_place = use_s3a_committer(batch_df.sparkSession)
            how = "in place (S3A magic committer)" if in_place else "by copying"
            log.info("sink %s: batches committed %s", self.sink_root, how)
            self._committer_chosen = True
        # "overwrite" replaces what a crashed attempt left without its _SUCCESS.
        batch_df.write.mode("overwrite").options(**self.write_options).parquet(final)
        return batch_stats(final)

    def record_epoch(self) -> None:
        """Write the epoch's ``_epoch.json`` unless it is there; refuse one that names another cluster.

        The file's content is the same for every run of the epoch (an epoch is one cluster: the fence gives
        it to one), so a plain write serves where a store offers no create-only write (S3 from the driver).

        :raises ConfigError: the epoch's folder belongs to a run on another cluster (two pairs, or a pair and
            something else, writing into one sink root).
        """
        location = epoch_file(self.sink_root, self.epoch)
        recorded = epoch_cluster(self.sink_root, self.epoch)
        if recorded is None:
            replace_json(location, {"epoch": self.epoch, "source_cluster": self.cluster})
        elif recorded != self.cluster:
            raise ConfigError(
                f"{location} says epoch {self.epoch} read cluster {recorded!r}, but this run of epoch "
                f"{self.epoch} reads {self.cluster!r}: another job writes into sink root "
                f"{self.sink_root}; give each pair a sink root of its own (job.sink_root)"
            )
        self._epoch_recorded = True


def batch_id_column(batch_id: int) -> Any:
    """The ``batch_id`` column (a long) of batch ``batch_id``, in code that is the same for every batch: for
    a job of your own that writes the batch id into its rows (the packaged sink keeps it in the folder name).

    Spark writes a numeric constant into the Java code it generates for a query (``F.lit(7)`` becomes
    ``7L`` in the source), so with a plain literal every batch's code is new: Spark compiles two classes
    again for each batch (its codegen metrics), and the JVM runs them interpreted until its JIT has
    compiled them once more. An array constant is kept out of the code (Spark hands it to the generated
    class as an object), and an index the optimizer cannot fold (``spark_partition_id() * 0``, known
    only when the task runs, always 0) keeps it from turning the element back into a numeric constant.
    Measured 2026-11-29 in one warm local SparkSession writing batches of 500,000 rows: 0 compilations
    per batch instead of 2, 0.363 s and 0.375 s per batch against 0.402 s and 0.414 s (median of the
    10th to 30th batch, two runs each).
    """
    from pyspark.sql import functions as F

    return F.lit([batch_id]).cast("array<long>")[F.spark_partition_id() * 0]


def batch_stats(batch: str) -> dict[str, Any]:
    """The statistics of a complete batch folder for its progress entry: from its files' footers, or when
    they cannot tell (a file that holds several partitions) from four columns of its rows."""
    stats = footer_stats(batch)
    if stats is not None:
        return stats
    log.info("%s: the Parquet footers do not give the batch's marks; reading them from its rows", batch)
    return row_stats(batch)


def row_stats(batch: str) -> dict[str, Any]:
    """Batch statistics from the rows of a batch folder: its ``topic``, ``partition``, ``offset``,
    ``timestamp_ms`` and ``record_id`` columns, grouped per partition by pyarrow."""
    import pyarrow.parquet as pq

    records = without_id = 0
    newest: dict[str, dict[str, int]] = {}
    last: dict[str, dict[str, int]] = {}
    for file in parquet_files(batch):
        source = file if not locations.is_remote(file) else io.BytesIO(open_store(file).read(file))
        table = pq.read_table(source, columns=["topic", "partition", "offset", "timestamp_ms", "record_id"])
        grouped = table.group_by(["topic", "partition"]).aggregate(
            [("offset", "max"), ("timestamp_ms", "max"), ("offset", "count"), ("record_id", "count")]
        )
        for group in grouped.to_pylist():
            key = str(group["partition"])
            for into, column in ((newest, "timestamp_ms_max"), (last, "offset_max")):
                partitions = into.setdefault(group["topic"], {})
                partitions[key] = max(group[column], partitions.get(key, group[column]))
            records += group["offset_count"]
            without_id += group["offset_count"] - group["record_id_count"]
    return {"records": records, "without_id": without_id, "max_timestamp_ms": newest, "max_offset": last}


def footer_stats(batch: str) -> dict[str, Any] | None:
    """Batch statistics from Parquet footers, or None when they cannot give them (no pyarrow, mixed files)."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return None
    records = without_id = 0
    newest: dict[str, dict[str, int]] = {}
    last: dict[str, dict[str, int]] = {}
    for file in parquet_files(batch):
        metadata = _footer(file)
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


@dataclass
class SinkContents:
    """What the sink holds.

    :param rows: rows written, over all batches (duplicates included).
    :param records: the first row of every record id, in (epoch, batch, topic, partition, offset) order.
    :param duplicates: rows whose record id was already seen (re-deliveries across switches).
    :param without_id: rows that have no record id (they cannot be deduplicated).
    :param rows_by_cluster: rows per source cluster.
    :param duplicates_by_epoch: ``duplicates`` by the epoch of the run that wrote the repeated row (a switch's
        re-delivery shows under the epoch it switched to).
    """

    rows: int = 0
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    duplicates: int = 0
    without_id: int = 0
    rows_by_cluster: Counter[str] = field(default_factory=Counter)
    duplicates_by_epoch: Counter[int] = field(default_factory=Counter)

    @property
    def record_ids(self) -> set[str]:
        return set(self.records)


def read_sink(sink_root: str, columns: tuple[str, ...] = COLUMNS) -> SinkContents:
    """Read every complete batch and deduplicate by record id.

    :param sink_root: the job's sink root.
    :param columns: columns to keep in ``records`` (``record_id`` and ordering columns are always read).
    """
    return SinkReader(columns)(sink_root)


class SinkReader:
    """Reads a growing sink again and again, each complete batch once.

    A complete batch never changes (a replay finds its ``_SUCCESS`` and writes nothing), so a reader that
    polls a sink while its job runs (the tests, the demo, the benchmarks waiting for every acknowledged id)
    keeps the rows of the batches it has read and lists and reads only the batches completed since: on a
    store reached over HTTP (WebHDFS, S3), the whole sink of a long run is hundreds of requests per poll.

    :param columns: columns to keep in ``records`` (``record_id`` and ordering columns are always read).
    """

    def __init__(self, columns: tuple[str, ...] = COLUMNS) -> None:
        self.columns = columns
        self._needed = [
            name
            for name in dict.fromkeys(("record_id", "topic", "partition", "offset", *columns))
            if name in FILE_COLUMNS
        ]
        self._rows: dict[str, list[dict[str, Any]]] = {}
        self._clusters: dict[int, str | None] = {}

    def __call__(self, sink_root: str) -> SinkContents:
        """The sink's records as they are now, deduplicated by record id."""
        contents = SinkContents()
        for epoch, batch, path in batch_dirs(sink_root, known=self._rows):
            rows = self._rows.get(path)
            if rows is None:
                rows = self._rows[path] = self._read_batch(sink_root, epoch, batch, path)
            for row in rows:
                _add(contents, row, self.columns, epoch)
        return contents

    def _read_batch(self, sink_root: str, epoch: int, batch: int, path: str) -> list[dict[str, Any]]:
        import pyarrow.parquet as pq

        if epoch not in self._clusters:
            self._clusters[epoch] = epoch_cluster(sink_root, epoch)
        cluster = self._clusters[epoch]
        # A batch written before 2026-12-01 has no epoch file; its rows carry their cluster.
        needed = self._needed if cluster is not None else [*self._needed, "source_cluster"]
        rows = [
            {"source_cluster": cluster, **row, "epoch": epoch, "batch_id": batch}
            for file in parquet_files(path)
            for row in pq.read_table(io.BytesIO(open_store(file).read(file)), columns=needed).to_pylist()
        ]
        rows.sort(key=lambda row: (row["topic"], row["partition"], row["offset"]))
        return rows


def _add(contents: SinkContents, row: dict[str, Any], columns: tuple[str, ...], epoch: int) -> None:
    contents.rows += 1
    contents.rows_by_cluster[row["source_cluster"]] += 1
    record_id = row["record_id"]
    if record_id is None:
        contents.without_id += 1
    elif record_id in contents.records:
        contents.duplicates += 1
        contents.duplicates_by_epoch[epoch] += 1
    else:
        contents.records[record_id] = {name: row[name] for name in columns}

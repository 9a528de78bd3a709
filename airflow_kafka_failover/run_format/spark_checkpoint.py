"""Read a Spark Structured Streaming checkpoint's Kafka position: what the job has processed.

Layout (Spark's ``HDFSMetadataLog``): ``offsets/<batchId>`` is text, line 1 ``v1``, line 2 a
JSON metadata object, then one line per source (the Kafka source writes
``{"orders":{"0":1234}}``; a source with no offset writes ``-``). ``commits/<batchId>`` marks
the batch as completed. The processed position is the end offsets of the last batch that has
both files; a newer ``offsets`` file is a batch that was planned but not finished. Files that
are not plain batch numbers (``.3.crc`` checksums, ``.3.<uuid>.tmp`` temporaries) are ignored,
as Spark ignores them.

The job also writes a progress entry per committed batch
(:mod:`~airflow_kafka_failover.run_format.progress_log`), which carries what Spark's checkpoint does not
keep: the newest record timestamp and the newest record offset per partition. The position is the next
offset after the batch, which may lie past transaction markers; the newest record offset tells the planner
that the offsets between it and the position held no record.

The checkpoint may be a local folder or a store URI (``hdfs://``, ``s3a://``): it is read through
``core/storage``. On an object store a "folder" is a prefix: one that holds no object does not exist.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from airflow_kafka_failover.core.exceptions import CheckpointError, ConfigError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import StoreUnavailable, open_store
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.run_format.progress_log import batch_numbers, check_against, read_progress
from airflow_kafka_failover.run_format.source_offsets import kafka_offsets_from_json

OFFSET_LOG_VERSION = "v1"
_WHERE_HINT = "check the path: a job's checkpoint is the folder <checkpoint_root>/<pair>/<cluster>/epoch-<n>"
_DAMAGED_HINT = (
    "the job's position cannot be read from it: restore the checkpoint from a backup, or plan from "
    "the job's bookkeeping group instead (kafka-failover plan --group <group>)"
)


@dataclass(frozen=True)
class StreamPosition:
    """Where a streaming job stands: per partition, the next offset to process.

    :param offsets: next offset to process, per partition of the cluster the job read.
    :param batch_id: the committed batch this position comes from; None for an explicit position.
    :param max_timestamps_ms: newest record timestamp processed, per partition, when known.
    :param last_record_offsets: offset of the newest record processed, per partition, when known; the
        offsets from it to the position held no record the job read (transaction markers, aborted records).
    """

    offsets: dict[TopicPartition, int]
    batch_id: int | None = None
    max_timestamps_ms: dict[TopicPartition, int] = field(default_factory=dict)
    last_record_offsets: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def topics(self) -> list[str]:
        """The topics the position covers, sorted."""
        return sorted({tp.topic for tp in self.offsets})

    def to_json(self) -> str:
        """The offsets as Spark-style JSON: ``{"orders": {"0": 12, "1": 7}}``, partitions in numeric order."""
        nested: dict[str, dict[str, int]] = {}
        for tp in sorted(self.offsets):
            nested.setdefault(tp.topic, {})[str(tp.partition)] = self.offsets[tp]
        return json.dumps(nested)

    @classmethod
    def from_json(cls, text: str) -> StreamPosition:
        """Parse an explicit position given by an operator, e.g. ``{"orders": {"0": 12}}``.

        :param text: the JSON text.
        """
        where = "explicit stream position"
        try:
            data = json.loads(text)
        except (TypeError, json.JSONDecodeError) as err:
            raise ConfigError(
                f'{where} is not valid JSON ({err}): {text!r}; expected e.g. {{"orders": {{"0": 12}}}}'
            ) from None
        offsets = kafka_offsets_from_json(data, where, ConfigError)
        if not offsets:
            example = '{"orders": {"0": 12}}'
            raise ConfigError(f"{where} names no partitions: {text!r}; expected e.g. {example}")
        return cls(offsets)


@dataclass(frozen=True)
class CheckpointReading:
    """The result of reading a checkpoint: a position, or the reason there is none yet.

    :param position: the committed position; None when no batch was committed.
    :param reason: why ``position`` is None (the caller falls back to the initial position and logs it).
    """

    position: StreamPosition | None
    reason: str | None = None


def last_committed_offsets(path: str) -> tuple[int, dict[TopicPartition, int]] | None:
    """The last committed batch of a checkpoint and its offsets, reading nothing else (no progress entry).

    The light read for a caller that looks often (the keeper): two listings and one offsets file.

    :param path: the checkpoint (a local folder or a store URI).
    :return: ``(batch id, offsets)``, or None before the first committed batch (or without a checkpoint).
    :raises CheckpointError: an offsets file that cannot be parsed.
    """
    root = str(path)
    complete = set(batch_numbers(locations.join(root, "offsets"))) & set(
        batch_numbers(locations.join(root, "commits"))
    )
    if not complete:
        return None
    batch_id = max(complete)
    offsets_file = locations.join(root, "offsets", str(batch_id))
    return batch_id, parse_offsets_file(offsets_file, _read_text(offsets_file))


def in_flight_offsets(path: str, after_batch: int | None = None) -> int:
    """Offsets of the batches Spark planned after the switch's position (or the last commit), which may
    still commit.

    Spark writes a batch's ``offsets/<id>`` before it runs the batch and ``commits/<id>`` after; the job
    checks its fence inside the batch, after the offsets file. A batch that passed its check before a switch
    moved the fence can therefore commit after the switch read the position, and the new job reads its
    records again; its offsets file, written before the fence moved, says how many at most. Offsets count
    transaction markers too, so this is an upper bound in records.

    :param path: the checkpoint (a local folder or a store URI).
    :param after_batch: the committed batch the switch's position came from. Every batch planned after it
        counts, committed or not: one that committed between the switch's read of the position and this
        call is exactly such a batch. Without it, the batches after the newest commit count.
    :return: the sum over partitions of the newest planned end minus the position's; 0 when no batch is
        planned beyond that position, or when no batch was committed (the plan then starts from the
        initial position, whose own rules state what it reads again).
    :raises CheckpointError: an offsets file that cannot be parsed.
    """
    root = str(path)
    planned = batch_numbers(locations.join(root, "offsets"))
    committed = set(batch_numbers(locations.join(root, "commits")))
    complete = [batch for batch in planned if batch in committed]
    if after_batch is not None and after_batch in complete:
        complete = [after_batch]
        committed = {batch for batch in committed if batch <= after_batch}
    if not planned or planned[-1] in committed or not complete:
        return 0  # nothing in flight, or nothing committed (the plan's initial position rules apply)

    def offsets_of(batch: int) -> dict[TopicPartition, int]:
        offsets_file = locations.join(root, "offsets", str(batch))
        return parse_offsets_file(offsets_file, _read_text(offsets_file))

    starts, ends = offsets_of(complete[-1]), offsets_of(planned[-1])
    # A partition new in the planned batch starts at its earliest offset, 0 at most.
    return sum(max(0, end - starts.get(tp, 0)) for tp, end in ends.items())


def _read_text(path: str) -> str:
    try:
        return open_store(path).read(path).decode("utf-8")
    except UnicodeDecodeError as err:
        raise CheckpointError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except StoreUnavailable:
        raise
    except OSError as err:
        raise CheckpointError(f"{path}: cannot be read ({err.strerror or err})") from None


def parse_offsets_file(path: str, text: str) -> dict[TopicPartition, int]:
    """Parse one ``offsets/<batchId>`` file into the merged Kafka offsets of all its sources.

    :param path: the file, named in error messages.
    :param text: its contents.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    _check_offsets_header(path, lines)
    offsets: dict[TopicPartition, int] = {}
    first_line_of: dict[TopicPartition, int] = {}
    for line_number, line in enumerate(lines[2:], start=3):
        if line.strip() == "-":
            continue
        for tp, offset in _source_offsets(f"{path}:{line_number}", line).items():
            if tp in offsets and offsets[tp] != offset:
                raise CheckpointError(
                    f"{path}:{line_number}: {tp} has offset {offset}, but line {first_line_of[tp]} gives "
                    f"{offsets[tp]}; two sources read the same partition to different offsets"
                )
            offsets[tp] = offset
            first_line_of.setdefault(tp, line_number)
    return offsets


def _written_by(version: str) -> str:
    """What wrote an offset log of another ``version``, and what to do about it."""
    if version == "v2":
        return (
            "Spark 4.2 writes 'v2' when the job sets spark.sql.streaming.offsetLog.formatVersion=2; run the "
            "job with the default (1): the job's position, which failover translates, is read from 'v1' only"
        )
    return "was the checkpoint written by a newer Spark?"


def _check_offsets_header(path: str, lines: list[str]) -> None:
    if not lines:
        raise CheckpointError(f"{path}:1: empty offsets file; expected '{OFFSET_LOG_VERSION}' on line 1")
    if lines[0].strip() != OFFSET_LOG_VERSION:
        raise CheckpointError(
            f"{path}:1: unsupported offset log version {lines[0]!r}; only {OFFSET_LOG_VERSION!r} is "
            f"supported ({_written_by(lines[0].strip())})"
        )
    if len(lines) < 2:
        raise CheckpointError(f"{path}:2: missing the metadata line")
    try:
        metadata = json.loads(lines[1])
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path}:2: corrupt metadata JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(metadata, dict):
        raise CheckpointError(f"{path}:2: metadata must be a JSON object, got {metadata!r}")
    if len(lines) < 3:
        raise CheckpointError(f"{path}:3: no source offsets after the metadata line")


def _source_offsets(where: str, line: str) -> dict[TopicPartition, int]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        raise CheckpointError(
            f"{where}: corrupt source offset JSON ({err.msg} at column {err.colno})"
        ) from None
    return kafka_offsets_from_json(data, where)


def read_checkpoint(path: str) -> CheckpointReading:
    """Read the committed Kafka position of a checkpoint, or why there is none.

    :param path: the checkpoint (a local folder or a store URI).
    """
    root = str(path)
    offsets_dir, commits_dir = locations.join(root, "offsets"), locations.join(root, "commits")
    store = open_store(root)
    if not store.exists(root):
        raise CheckpointError(f"{root}: checkpoint directory does not exist; {_WHERE_HINT}")
    planned = set(batch_numbers(offsets_dir))
    committed = set(batch_numbers(commits_dir))
    if not planned and not store.exists(offsets_dir):
        raise CheckpointError(
            f"{offsets_dir}: no offsets directory; is {root} a Spark streaming checkpoint? {_WHERE_HINT}"
        )
    complete = planned & committed
    if not complete:
        if committed:
            raise CheckpointError(
                f"{commits_dir}: batches {sorted(committed)[-5:]} are committed but none has an offsets "
                f"file in {offsets_dir}; the checkpoint is damaged"
            )
        if planned:
            reason = (
                f"{root}: no committed batch (planned batches {sorted(planned)[-5:]} never completed); "
                "nothing was processed"
            )
        else:
            reason = f"{root}: no batch was ever planned; nothing was processed"
        return CheckpointReading(None, reason)
    batch_id = max(complete)
    offsets_file = locations.join(offsets_dir, str(batch_id))
    try:
        offsets = parse_offsets_file(offsets_file, _read_text(offsets_file))
        timestamps, last_records = _progress_marks(root, batch_id, offsets)
    except CheckpointError as err:
        raise CheckpointError(f"{err}; {_DAMAGED_HINT}") from None
    return CheckpointReading(StreamPosition(offsets, batch_id, timestamps, last_records))


def _progress_marks(
    root: str, batch_id: int, offsets: dict[TopicPartition, int]
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Newest record timestamp and offset per partition from the progress entries up to ``batch_id``."""
    summary = read_progress(root, batch_id)
    if summary is None:
        return {}, {}
    check_against(summary, batch_id, offsets)
    return (
        {tp: ts for tp, ts in summary.max_timestamps_ms.items() if tp in offsets},
        {tp: offset for tp, offset in summary.last_record_offsets.items() if tp in offsets},
    )

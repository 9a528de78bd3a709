"""How far a run of the job got: its committed position and the records it processed.

The position is the last batch Spark committed in the checkpoint (``offsets/`` + ``commits/``); the record
count sums the job's progress records (``progress.jsonl``) of the batches up to that one, each batch once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_kafka_failover.translation.spark_checkpoint import (
    PROGRESS_FILE,
    last_committed_offsets,
    read_checkpoint,
)
from airflow_kafka_failover.types import TopicPartition


@dataclass(frozen=True)
class JobProgress:
    """A run's committed progress.

    :param batch_id: the last committed batch; None before the first.
    :param offsets: the committed position (next offset per partition).
    :param records: records written by the committed batches.
    :param committed_at: unix seconds when the job wrote the progress record of ``batch_id`` (its
        ``written_at``), None before the first batch or when that batch has no progress record.
    :param written_any: whether the job wrote any progress record (a job that never does breaks the contract).
    """

    batch_id: int | None
    offsets: dict[TopicPartition, int]
    records: int
    committed_at: float | None = None
    written_any: bool = field(default=False, compare=False)

    def reached(self, position: dict[TopicPartition, int]) -> list[str]:
        """The partitions of ``position`` not reached yet, as ``topic-partition: committed < wanted``."""
        behind = []
        for tp, wanted in sorted(position.items()):
            have = self.offsets.get(tp)
            if have is None or have < wanted:
                behind.append(f"{tp.topic}-{tp.partition}: {have if have is not None else 'none'} < {wanted}")
        return behind


def _progress_per_batch(root: Path) -> dict[int, dict[str, Any]]:
    """The progress record of each batch the job wrote (the last progress line of a batch id wins)."""
    try:
        lines = (root / PROGRESS_FILE).read_text().splitlines()
    except OSError:
        return {}
    batches: dict[int, dict[str, Any]] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line; read_checkpoint reports corruption elsewhere
        batch = record.get("batch_id") if isinstance(record, dict) else None
        if isinstance(batch, int) and not isinstance(batch, bool):
            batches[batch] = record
    return batches


def _written_at(record: dict[str, Any] | None) -> float | None:
    value = (record or {}).get("written_at")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def uncommitted_output_records(
    checkpoint: str | os.PathLike[str], sink_root: str | os.PathLike[str], epoch: int
) -> int:
    """Rows a run wrote to the sink in batches its checkpoint does not count as committed.

    A run killed between a batch's output and Spark's commit (for instance while its group commit to a
    dead cluster hangs) leaves such a batch; the next run reads those records again, on top of what the
    translation re-delivers, so they add to a switch's duplicate bound. The sink is the evidence: its
    batch directories only appear once complete.
    """
    from airflow_kafka_failover.jobs.sink import rows_written_after

    root = Path(checkpoint)
    committed = read_checkpoint(root).position if (root / "offsets").is_dir() else None
    last = committed.batch_id if committed is not None and committed.batch_id is not None else -1
    return rows_written_after(sink_root, epoch, last)


TAIL_BYTES = 256 * 1024
"""How much of the end of ``progress.jsonl`` :func:`read_last_commit` reads (thousands of batches)."""


@dataclass(frozen=True)
class LastCommit:
    """A run's last committed batch, read cheaply (see :func:`read_last_commit`).

    :param batch_id: the last committed batch; None before the first.
    :param offsets: its position (next offset per partition).
    :param committed_at: unix seconds of its progress record, None when that record is not in the file's tail.
    """

    batch_id: int | None
    offsets: dict[TopicPartition, int]
    committed_at: float | None = None


def _tail_records(path: Path, max_bytes: int = TAIL_BYTES) -> list[dict[str, Any]]:
    """The complete JSON lines in the last ``max_bytes`` of ``path`` (oldest first); [] when unreadable."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - max_bytes))
            chunk = handle.read()
    except OSError:
        return []
    lines = chunk.split(b"\n")
    if size > max_bytes:
        lines = lines[1:]  # the first line was cut by the seek
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue  # an empty or torn line
        if isinstance(record, dict):
            records.append(record)
    return records


def read_last_commit(checkpoint: str | os.PathLike[str]) -> LastCommit:
    """The last committed batch and when it was written, without reading the whole progress file.

    :raises CheckpointError: an offsets file that cannot be parsed.
    """
    root = Path(checkpoint)
    last = last_committed_offsets(root)
    if last is None:
        return LastCommit(None, {})
    batch_id, offsets = last
    written = next(
        (
            record
            for record in reversed(_tail_records(root / PROGRESS_FILE))
            if record.get("batch_id") == batch_id
        ),
        None,
    )
    return LastCommit(batch_id, offsets, _written_at(written))


def read_progress(checkpoint: str | os.PathLike[str]) -> JobProgress:
    """Read a run's committed progress (raises CheckpointError for a damaged checkpoint)."""
    root = Path(checkpoint)
    if not (root / "offsets").is_dir():
        return JobProgress(None, {}, 0)
    reading = read_checkpoint(root)
    if reading.position is None:
        return JobProgress(None, {}, 0)
    committed = reading.position.batch_id
    batches = _progress_per_batch(root)
    records = sum(
        int(record.get("records") or 0)
        for batch, record in batches.items()
        if committed is not None and batch <= committed
    )
    committed_at = _written_at(batches.get(committed)) if committed is not None else None
    return JobProgress(committed, dict(reading.position.offsets), records, committed_at, bool(batches))

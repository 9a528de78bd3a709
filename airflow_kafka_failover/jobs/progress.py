"""How far a run of the job got: its committed position and the records it processed.

The position is the last batch Spark committed in the checkpoint (``offsets/`` + ``commits/``); the record
count sums the job's progress records (``progress.jsonl``) of the batches up to that one, each batch once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from airflow_kafka_failover.translation.rules import TopicPartition
from airflow_kafka_failover.translation.spark_checkpoint import PROGRESS_FILE, read_checkpoint


@dataclass(frozen=True)
class JobProgress:
    """A run's committed progress.

    :param batch_id: the last committed batch; None before the first.
    :param offsets: the committed position (next offset per partition).
    :param records: records written by the committed batches.
    """

    batch_id: int | None
    offsets: dict[TopicPartition, int]
    records: int

    def reached(self, position: dict[TopicPartition, int]) -> list[str]:
        """The partitions of ``position`` not reached yet, as ``topic-partition: committed < wanted``."""
        behind = []
        for tp, wanted in sorted(position.items()):
            have = self.offsets.get(tp)
            if have is None or have < wanted:
                behind.append(f"{tp.topic}-{tp.partition}: {have if have is not None else 'none'} < {wanted}")
        return behind


def read_progress(checkpoint: str | os.PathLike[str]) -> JobProgress:
    """Read a run's committed progress (raises CheckpointError for a damaged checkpoint)."""
    root = Path(checkpoint)
    if not (root / "offsets").is_dir():
        return JobProgress(None, {}, 0)
    reading = read_checkpoint(root)
    if reading.position is None:
        return JobProgress(None, {}, 0)
    committed = reading.position.batch_id
    records_per_batch: dict[int, int] = {}
    try:
        lines = (root / PROGRESS_FILE).read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line; read_checkpoint reports corruption elsewhere
        batch = record.get("batch_id") if isinstance(record, dict) else None
        if isinstance(batch, int) and committed is not None and batch <= committed:
            records_per_batch[batch] = int(record.get("records") or 0)
    return JobProgress(committed, dict(reading.position.offsets), sum(records_per_batch.values()))

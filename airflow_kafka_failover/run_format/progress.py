"""How far a run of the job got: its committed position and the records it processed.

The position is the last batch Spark committed in the checkpoint (``offsets/`` + ``commits/``); the record
count and the time of the commit come from the job's progress entry of that batch
(:mod:`~airflow_kafka_failover.run_format.progress_log`). The checkpoint may be a local folder or a store
URI.

A checkpoint carried from another run (:mod:`~airflow_kafka_failover.run_format.state_carry`) starts with the
batch it was carried from: that batch is the old run's, so until the run commits one of its own it has none
here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import open_store
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.run_format import progress_log
from airflow_kafka_failover.run_format.progress_log import progress_folder, read_batch_record
from airflow_kafka_failover.run_format.spark_checkpoint import last_committed_offsets, read_checkpoint
from airflow_kafka_failover.run_format.state_carry import carried_batch


@dataclass(frozen=True)
class JobProgress:
    """A run's committed progress.

    :param batch_id: the last committed batch; None before the first.
    :param offsets: the committed position (next offset per partition).
    :param records: records written by the committed batches.
    :param committed_at: unix seconds when the job wrote the progress entry of ``batch_id`` (its
        ``written_at``); while that record is still being written (the job writes it after Spark's commit),
        the newest earlier record's, so that the age is never understated; None before the first record.
    :param written_any: whether the job wrote any progress entry (a job that never does breaks the contract).
    :param state: the query's stateful operators after the newest recorded batch (``operators``, ``rows``,
        ``memory_bytes``); None for a stateless query.
    """

    batch_id: int | None
    offsets: dict[TopicPartition, int]
    records: int
    committed_at: float | None = None
    written_any: bool = field(default=False, compare=False)
    state: dict[str, int] | None = field(default=None, compare=False)

    def reached(self, position: dict[TopicPartition, int]) -> list[str]:
        """The partitions of ``position`` not reached yet, as ``topic-partition: committed < wanted``."""
        behind = []
        for tp, wanted in sorted(position.items()):
            have = self.offsets.get(tp)
            if have is None or have < wanted:
                behind.append(f"{tp.topic}-{tp.partition}: {have if have is not None else 'none'} < {wanted}")
        return behind


def _written_at(record: dict[str, object] | None) -> float | None:
    value = (record or {}).get("written_at")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class LastCommit:
    """A run's last committed batch, read cheaply (see :func:`read_last_commit`).

    :param batch_id: the last committed batch; None before the first.
    :param offsets: its position (next offset per partition).
    :param committed_at: unix seconds of its progress entry (of the newest earlier one while the job
        writes it), None before the first record.
    """

    batch_id: int | None
    offsets: dict[TopicPartition, int]
    committed_at: float | None = None


def read_last_commit(checkpoint: str) -> LastCommit:
    """The last committed batch and when it was written: two listings and two small reads.

    :raises CheckpointError: an offsets file that cannot be parsed.
    """
    last = last_committed_offsets(checkpoint)
    if last is None:
        return LastCommit(None, {})
    batch_id, offsets = last
    record = read_batch_record(checkpoint, batch_id)
    if record is not None:
        return LastCommit(batch_id, offsets, _written_at(record))
    # the job writes the record just after Spark's commit: until then the newest earlier record tells when
    # the run last made progress
    summary = progress_log.read_progress(checkpoint, batch_id)
    return LastCommit(batch_id, offsets, summary.written_at if summary is not None else None)


def read_progress(checkpoint: str) -> JobProgress:
    """Read a run's committed progress (raises CheckpointError for a damaged checkpoint)."""
    root = str(checkpoint)
    offsets = locations.join(root, "offsets")
    if not open_store(offsets).exists(offsets):
        return JobProgress(None, {}, 0)
    reading = read_checkpoint(root)
    if reading.position is None or reading.position.batch_id is None:
        return JobProgress(None, {}, 0)
    committed = reading.position.batch_id
    if committed == carried_batch(root):
        return JobProgress(None, {}, 0, None, True)  # only the batch it was carried from: none of its own
    summary = progress_log.read_progress(root, committed)
    wrote_any = summary is not None or bool(open_store(root).names(progress_folder(root)))
    if summary is None:
        return JobProgress(committed, dict(reading.position.offsets), 0, None, wrote_any)
    # summary.batch_id < committed while the job writes the committed batch's record: its time is older
    position = dict(reading.position.offsets)
    return JobProgress(committed, position, summary.records, summary.written_at, wrote_any, summary.state)

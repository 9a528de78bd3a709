"""The job's progress entries: what Spark's checkpoint does not keep, one object per committed batch.

After Spark commits batch ``b``, the job writes ``<checkpoint>/progress/<b>`` (JSON, replaced whole, so a
store without appends, S3, holds it as well as a file system)::

    {"epoch": 3, "batch_id": 41, "end_offsets": {"orders": {"0": 1200}}, "records": 150,
     "records_total": 6150, "max_timestamp_ms": {"orders": {"0": 1764115200123}},
     "max_offset": {"orders": {"0": 1199}}, "written_at": 1764115201.5}

``records`` counts the batch, ``records_total`` the run's batches up to this one. ``max_timestamp_ms`` and
``max_offset`` are the newest record timestamp and offset per partition **over the run so far** (each record
carries forward the partitions earlier batches saw), so the newest record at or below the committed batch is
the whole answer: a reader reads one object, however old the run. The job keeps the last 100 records and
the run's first (when it began) and removes the others.

A stateful query's entry also holds ``state``: ``{"operators": 2, "rows": 8123, "memory_bytes": 901234}``
(from Spark's ``stateOperators``), which the status shows. The first entry of a carried checkpoint
(:mod:`~airflow_kafka_failover.run_format.state_carry`) is the old run's batch, marked ``"carried": true``.

A job of your own that writes per-batch marks instead of cumulative ones is safe: the planner then knows
less (older timestamps, fewer known-empty offsets), which re-reads more, never less.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from airflow_kafka_failover.core.exceptions import CheckpointError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import StoreUnavailable, open_store
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.run_format.source_offsets import kafka_offsets_from_json

PROGRESS_DIR = "progress"
"""The folder of per-batch progress entries in a checkpoint."""
KEEP_RECORDS = 100
"""How many of the newest progress entries the job keeps (each is cumulative: the newest is enough)."""
_BATCH_NAME = re.compile(r"[0-9]+")


def progress_folder(checkpoint: str) -> str:
    return locations.join(str(checkpoint), PROGRESS_DIR)


def progress_location(checkpoint: str, batch_id: int) -> str:
    """The location of batch ``batch_id``'s progress entry."""
    return locations.join(progress_folder(checkpoint), str(batch_id))


@dataclass(frozen=True)
class ProgressSummary:
    """What the progress entries say of a run up to one batch.

    :param batch_id: the newest batch with a record (at or below the batch asked about).
    :param records: records written by the run's batches up to it.
    :param max_timestamps_ms: newest record timestamp per partition over the run.
    :param last_record_offsets: newest record offset per partition over the run.
    :param end_offsets: that batch's end offsets (None when the record has none).
    :param written_at: unix seconds when that record was written (None when unknown).
    :param source: where the record was read, for messages.
    :param state: the query's stateful operators after that batch (``operators``, ``rows``, ``memory_bytes``);
        None for a stateless query (or a job that does not record it).
    """

    batch_id: int
    records: int
    max_timestamps_ms: dict[TopicPartition, int] = field(default_factory=dict)
    last_record_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    end_offsets: dict[TopicPartition, int] | None = None
    written_at: float | None = None
    source: str = ""
    state: dict[str, int] | None = None


def batch_numbers(folder: str) -> list[int]:
    """The batch numbers named in a folder (``offsets/``, ``commits/``, ``progress/``), in order."""
    return sorted(int(name) for name in open_store(folder).names(folder) if _BATCH_NAME.fullmatch(name))


def read_progress(checkpoint: str, up_to: int) -> ProgressSummary | None:
    """The run's progress up to batch ``up_to``: its newest per-batch record at or below that batch.

    :param checkpoint: the run's checkpoint.
    :param up_to: the batch asked about (the last committed one); newer records are ignored.
    :return: None when the run wrote no progress entry up to that batch.
    :raises CheckpointError: a damaged record.
    """
    numbers = [batch for batch in batch_numbers(progress_folder(checkpoint)) if batch <= up_to]
    if not numbers:
        return None
    where = progress_location(checkpoint, numbers[-1])
    return summary_of(_read_record(where), where)


def read_batch_record(checkpoint: str, batch_id: int) -> dict[str, Any] | None:
    """The progress entry of exactly ``batch_id`` as written (None: none, or unreadable)."""
    where = progress_location(checkpoint, batch_id)
    try:
        return _read_record(where)
    except CheckpointError:
        return None


def _read_record(where: str) -> dict[str, Any]:
    try:
        text = open_store(where).read(where).decode("utf-8")
    except FileNotFoundError:
        raise CheckpointError(f"{where}: progress entry vanished while it was read") from None
    except StoreUnavailable:
        raise
    except (UnicodeDecodeError, OSError) as exc:
        raise CheckpointError(f"{where}: cannot be read ({exc})") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{where}: corrupt progress JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{where}: progress entry must be a JSON object, got {value!r}")
    return value


def summary_of(value: dict[str, Any], where: str) -> ProgressSummary:
    """Validate one per-batch record and return what it says."""
    batch_id, end_offsets, timestamps, last_records = parse_record(value, where)
    total = value.get("records_total", value.get("records"))
    return ProgressSummary(
        batch_id,
        _count(total),
        timestamps,
        last_records,
        end_offsets,
        _seconds(value.get("written_at")),
        where,
        _state(value.get("state")),
    )


def parse_record(
    value: Any, where: str
) -> tuple[int, dict[TopicPartition, int] | None, dict[TopicPartition, int], dict[TopicPartition, int]]:
    """``(batch_id, end_offsets, max_timestamp_ms, max_offset)`` of a progress entry; raises naming
    ``where``."""

    if not isinstance(value, dict):
        raise CheckpointError(f"{where}: progress entry must be a JSON object, got {value!r}")
    batch_id = value.get("batch_id")
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise CheckpointError(f"{where}: progress entry has invalid batch_id {batch_id!r}")
    epoch = value.get("epoch")
    if epoch is not None and (isinstance(epoch, bool) or not isinstance(epoch, int)):
        raise CheckpointError(f"{where}: progress entry has invalid epoch {epoch!r}")
    end_offsets = None
    if value.get("end_offsets") is not None:
        end_offsets = kafka_offsets_from_json(value["end_offsets"], f"{where} end_offsets")
    timestamps = kafka_offsets_from_json(value.get("max_timestamp_ms") or {}, f"{where} max_timestamp_ms")
    last_records = kafka_offsets_from_json(value.get("max_offset") or {}, f"{where} max_offset")
    return batch_id, end_offsets, timestamps, last_records


def check_against(
    summary: ProgressSummary, committed_batch: int, committed: dict[TopicPartition, int]
) -> None:
    """Refuse progress entries that do not belong to the checkpoint whose committed position is given.

    The record of the committed batch must end where ``offsets/<batch>`` ends, and no newest-record offset may
    lie at or beyond the committed position.
    """
    if (
        summary.batch_id == committed_batch
        and summary.end_offsets is not None
        and summary.end_offsets != committed
    ):
        raise CheckpointError(
            f"{summary.source}: progress entry of batch {committed_batch} has end offsets that differ from "
            f"offsets/{committed_batch}; are these progress entries from another checkpoint directory?"
        )
    for tp, offset in summary.last_record_offsets.items():
        if tp in committed and offset >= committed[tp]:
            raise CheckpointError(
                f"{summary.source}: progress entry of batch {summary.batch_id} names record offset {offset} "
                f"of {tp}, "
                f"at or beyond the committed position {committed[tp]}; are these progress entries from "
                "another checkpoint directory?"
            )


def _state(value: Any) -> dict[str, int] | None:
    """The entry's ``state``, its counts kept when they are numbers (an entry is never refused for it)."""
    if not isinstance(value, dict):
        return None
    return {key: _count(value.get(key)) for key in ("operators", "rows", "memory_bytes")}


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

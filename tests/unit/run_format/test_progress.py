from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_kafka_failover.core.exceptions import CheckpointError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.jobs.sink import uncommitted_output_records
from airflow_kafka_failover.run_format.progress import (
    JobProgress,
    LastCommit,
    read_last_commit,
    read_progress,
)

METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}'
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def write_offsets(root: Path, batch: int, offsets: dict) -> None:
    path = root / "offsets" / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(["v1", METADATA, json.dumps(offsets)]))


def write_commit(root: Path, batch: int) -> None:
    path = root / "commits" / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('v1\n{"nextBatchWatermarkMs":0}')


def write_record(root: Path, batch_id: int, **fields) -> None:
    """The job's progress record of one batch (``<checkpoint>/progress/<batch>``)."""
    path = root / "progress" / str(batch_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"epoch": 0, "batch_id": batch_id, **fields}))


def batch(root: Path, batch_id: int, end: dict, committed: bool = True) -> None:
    write_offsets(root, batch_id, end)
    if committed:
        write_commit(root, batch_id)


def test_no_offsets_directory(tmp_path):
    assert read_progress(tmp_path) == JobProgress(None, {}, 0)
    assert read_progress(tmp_path / "never-created") == JobProgress(None, {}, 0)


def test_planned_but_uncommitted_batch_is_no_progress(tmp_path):
    batch(tmp_path, 0, {"t": {"0": 5}}, committed=False)
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5}}, records=5, records_total=5)
    assert read_progress(tmp_path) == JobProgress(None, {}, 0)


def test_committed_batches_without_progress_records(tmp_path):
    batch(tmp_path, 0, {"t": {"0": 5, "1": 2}})
    assert read_progress(tmp_path) == JobProgress(0, {T0: 5, T1: 2}, 0)


def test_newest_uncommitted_batch_is_ignored(tmp_path):
    batch(tmp_path, 0, {"t": {"0": 5, "1": 1}})
    batch(tmp_path, 1, {"t": {"0": 8, "1": 4}})
    batch(tmp_path, 2, {"t": {"0": 20, "1": 9}}, committed=False)
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5, "1": 1}}, records=6, records_total=6)
    write_record(tmp_path, 1, end_offsets={"t": {"0": 8, "1": 4}}, records=6, records_total=12)
    write_record(tmp_path, 2, end_offsets={"t": {"0": 20, "1": 9}}, records=17, records_total=29)
    assert read_progress(tmp_path) == JobProgress(1, {T0: 8, T1: 4}, 12)


def test_a_record_without_a_run_total_counts_its_batch_and_a_null_count_is_zero(tmp_path):
    batch(tmp_path, 0, {"t": {"0": 5}})
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5}}, records=4)
    assert read_progress(tmp_path).records == 4
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5}}, records=None)
    assert read_progress(tmp_path).records == 0


def test_damaged_checkpoint_is_reported(tmp_path):
    write_commit(tmp_path, 0)
    (tmp_path / "offsets").mkdir()
    with pytest.raises(CheckpointError, match=r"batches \[0\] are committed but none has an offsets file"):
        read_progress(tmp_path)


# ---------------------------------------------------------------- reached


def test_reached_lists_partitions_behind_in_order():
    progress = JobProgress(3, {T0: 10, T1: 4}, 14)
    wanted = {TopicPartition("u", 0): 1, T1: 5, T0: 10}
    assert progress.reached(wanted) == ["t-1: 4 < 5", "u-0: none < 1"]


def test_reached_is_empty_at_or_past_the_position():
    progress = JobProgress(3, {T0: 10, T1: 4}, 14)
    assert progress.reached({T0: 10, T1: 3}) == []
    assert progress.reached({}) == []


def test_reached_before_any_batch():
    assert JobProgress(None, {}, 0).reached({T0: 0}) == ["t-0: none < 0"]


def test_uncommitted_output_is_what_the_sink_holds_past_the_committed_batch(tmp_path):
    from tests.unit.jobs.test_sink import row, write_batch

    checkpoint, sink = tmp_path / "ckpt", tmp_path / "sink"
    write_offsets(checkpoint, 0, {"t": {"0": 2}})
    write_commit(checkpoint, 0)
    write_offsets(checkpoint, 1, {"t": {"0": 5}})  # planned, output written, never committed
    write_batch(sink, 7, 0, [row("a", 0), row("b", 1)])
    write_batch(sink, 7, 1, [row("c", 2), row("d", 3), row("e", 4)])
    assert uncommitted_output_records(checkpoint, sink, 7) == 3
    assert uncommitted_output_records(checkpoint, sink, 8) == 0
    assert uncommitted_output_records(tmp_path / "empty", sink, 7) == 5


def test_committed_at_is_the_progress_time_of_the_committed_batch(tmp_path):
    batch(tmp_path, 0, {"t": {"0": 5}})
    batch(tmp_path, 1, {"t": {"0": 9}})
    batch(tmp_path, 2, {"t": {"0": 12}}, committed=False)
    for n, end in ((0, 5), (1, 9), (2, 12)):
        write_record(tmp_path, n, end_offsets={"t": {"0": end}}, records=1, written_at=100.0 + n)
    assert read_progress(tmp_path).committed_at == 101.0
    # batch 1 committed, its record not written yet: the time of batch 0's, never a fresher one
    for n in (1, 2):
        (tmp_path / "progress" / str(n)).unlink()
    assert read_progress(tmp_path).committed_at == 100.0
    assert read_last_commit(tmp_path).committed_at == 100.0
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5}}, records=1)  # a record without a time
    assert read_progress(tmp_path).committed_at is None


def test_while_the_committed_batch_has_no_record_its_time_is_the_previous_batch(tmp_path):
    for batch_id, end in ((0, 5), (1, 9), (2, 12)):
        batch(tmp_path, batch_id, {"t": {"0": end}})
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5}}, written_at=100.0)
    write_record(tmp_path, 1, end_offsets={"t": {"0": 9}}, written_at=101.0)
    assert (read_progress(tmp_path).batch_id, read_progress(tmp_path).committed_at) == (2, 101.0)
    assert read_last_commit(tmp_path) == LastCommit(2, {T0: 12}, 101.0)
    write_record(tmp_path, 2, end_offsets={"t": {"0": 12}}, written_at=102.0)
    assert read_last_commit(tmp_path).committed_at == read_progress(tmp_path).committed_at == 102.0


def test_the_last_commit_read_cheaply_agrees_with_the_full_read(tmp_path):
    assert read_last_commit(tmp_path) == LastCommit(None, {})
    batch(tmp_path, 0, {"t": {"0": 5, "1": 2}})
    batch(tmp_path, 1, {"t": {"0": 9, "1": 4}})
    batch(tmp_path, 2, {"t": {"0": 12, "1": 4}}, committed=False)  # planned, not committed
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5, "1": 2}}, written_at=100.0)
    write_record(tmp_path, 1, end_offsets={"t": {"0": 9, "1": 4}}, written_at=101.5)
    full, light = read_progress(tmp_path), read_last_commit(tmp_path)
    assert light == LastCommit(1, {T0: 9, T1: 4}, 101.5)
    assert (light.batch_id, light.offsets, light.committed_at) == (
        full.batch_id,
        full.offsets,
        full.committed_at,
    )


def test_the_last_commit_reads_one_record_however_long_the_run(tmp_path, monkeypatch):
    """4,000 batches: the last commit is two listings and the record of the committed batch."""
    from airflow_kafka_failover.core.storage.store import LOCAL
    from airflow_kafka_failover.run_format import progress

    batch(tmp_path, 3999, {"t": {"0": 4000}})
    for n in range(3900, 4000):
        write_record(tmp_path, n, end_offsets={"t": {"0": n + 1}}, written_at=1000.0 + n)
    reads = []
    real_read = LOCAL.read
    monkeypatch.setattr(LOCAL, "read", lambda location: reads.append(location) or real_read(location))
    assert progress.read_last_commit(tmp_path).committed_at == 4999.0
    assert [Path(r).name for r in reads] == ["3999", "3999"]  # offsets/3999, progress/3999


def test_records_total_counts_the_whole_run(tmp_path):
    batch(tmp_path, 0, {"t": {"0": 5}})
    batch(tmp_path, 1, {"t": {"0": 9}})
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5}}, records=5, records_total=5)
    write_record(tmp_path, 1, end_offsets={"t": {"0": 9}}, records=4, records_total=9, written_at=7.0)
    assert read_progress(tmp_path) == JobProgress(1, {T0: 9}, 9, 7.0, True)


def test_written_any_tells_a_job_that_writes_no_progress_records(tmp_path):
    batch(tmp_path, 0, {"t": {"0": 5}})
    assert read_progress(tmp_path).written_any is False
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5}}, records=5)
    assert read_progress(tmp_path).written_any is True


def test_the_state_of_a_stateful_query_is_read_from_its_newest_entry(tmp_path):
    batch(tmp_path, 0, {"t": {"0": 5}})
    state = {"operators": 2, "rows": 40, "memory_bytes": 4096}
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5}}, records=5, records_total=5, state=state)
    assert read_progress(tmp_path).state == state
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5}}, records=5, records_total=5, state="junk")
    assert read_progress(tmp_path).state is None  # never a reason to refuse the entry
    write_record(tmp_path, 0, end_offsets={"t": {"0": 5}}, records=5, records_total=5)
    assert read_progress(tmp_path).state is None

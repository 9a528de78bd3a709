from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_kafka_failover.core.exceptions import CheckpointError, ConfigError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.run_format.source_offsets import kafka_offsets_from_json
from airflow_kafka_failover.run_format.spark_checkpoint import (
    StreamPosition,
    in_flight_offsets,
    read_checkpoint,
)

METADATA = (
    '{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{"spark.sql.shuffle.partitions":"2"}}'
)


def write_offsets(
    root: Path, batch: int, *sources: str, version: str = "v1", metadata: str = METADATA
) -> Path:
    path = root / "offsets" / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Spark writes no trailing newline after the last source line.
    path.write_text("\n".join([version, metadata, *sources]), encoding="utf-8")
    return path


def write_commit(root: Path, batch: int) -> None:
    path = root / "commits" / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('v1\n{"nextBatchWatermarkMs":0}', encoding="utf-8")


def write_record(root: Path, record: Any, batch: int | None = None) -> Path:
    """The job's progress record of one batch, ``<checkpoint>/progress/<batch>`` (the record's
    ``batch_id`` when ``batch`` is None)."""
    path = root / "progress" / str(record["batch_id"] if batch is None else batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    root = tmp_path / "ckpt"
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    return root


def test_last_committed_batch_wins_over_planned(checkpoint):
    write_offsets(checkpoint, 0, '{"orders":{"0":10,"1":5}}')
    write_commit(checkpoint, 0)
    write_offsets(checkpoint, 1, '{"orders":{"0":20,"1":9}}')
    write_commit(checkpoint, 1)
    write_offsets(checkpoint, 2, '{"orders":{"0":30,"1":12}}')  # planned, not committed
    position = read_checkpoint(checkpoint).position
    assert position is not None
    assert position.batch_id == 1
    assert position.offsets == {TopicPartition("orders", 0): 20, TopicPartition("orders", 1): 9}


def test_in_flight_batch_counts_the_offsets_planned_beyond_the_commit(checkpoint):
    """The batch planned after the last commit may still commit after a switch read the position."""
    assert in_flight_offsets(checkpoint) == 0  # nothing planned
    write_offsets(checkpoint, 0, '{"orders":{"0":10,"1":5}}')
    assert in_flight_offsets(checkpoint) == 0  # nothing committed: the initial position's rules apply
    write_commit(checkpoint, 0)
    assert in_flight_offsets(checkpoint) == 0  # the newest planned batch is committed
    # 10 + 4 more offsets, and a partition new in this batch (starts at 0): 3
    write_offsets(checkpoint, 1, '{"orders":{"0":20,"1":9,"2":3}}')
    assert in_flight_offsets(checkpoint) == 10 + 4 + 3
    write_commit(checkpoint, 1)
    assert in_flight_offsets(checkpoint) == 0


def test_a_batch_that_committed_after_the_position_was_read_still_counts(checkpoint):
    """CI: the plan read the position at batch 9, batch 10 committed before the in-flight read (0 counted),
    and its records were re-delivered beyond the bound. Counted from the position's batch, it is in."""
    write_offsets(checkpoint, 0, '{"orders":{"0":10,"1":5}}')
    write_commit(checkpoint, 0)
    write_offsets(checkpoint, 1, '{"orders":{"0":20,"1":9}}')
    assert in_flight_offsets(checkpoint, after_batch=0) == 10 + 4
    write_commit(checkpoint, 1)
    assert in_flight_offsets(checkpoint) == 0  # from the newest commit: nothing beyond it
    assert in_flight_offsets(checkpoint, after_batch=0) == 10 + 4  # from the position's batch: batch 1
    assert in_flight_offsets(checkpoint, after_batch=1) == 0
    write_offsets(checkpoint, 2, '{"orders":{"0":25,"1":9}}')
    assert in_flight_offsets(checkpoint, after_batch=0) == 15 + 4  # batches 1 and 2


def test_several_topics_and_sources_are_merged(checkpoint):
    write_offsets(
        checkpoint,
        4,
        '{"orders":{"0":1,"1":2},"payments":{"0":3}}',
        "-",
        '{"refunds":{"2":7},"orders":{"1":2}}',
    )
    write_commit(checkpoint, 4)
    position = read_checkpoint(checkpoint).position
    assert position is not None
    assert position.offsets == {
        TopicPartition("orders", 0): 1,
        TopicPartition("orders", 1): 2,
        TopicPartition("payments", 0): 3,
        TopicPartition("refunds", 2): 7,
    }
    assert position.topics == ["orders", "payments", "refunds"]


def test_same_partition_with_two_offsets_is_an_error(checkpoint):
    path = write_offsets(checkpoint, 0, '{"orders":{"0":1}}', '{"orders":{"0":2}}')
    write_commit(checkpoint, 0)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(checkpoint)
    assert f"{path}:4" in str(err.value) and "line 3 gives 1" in str(err.value)


def test_crc_and_temp_files_are_ignored(checkpoint):
    write_offsets(checkpoint, 0, '{"orders":{"0":10}}')
    write_commit(checkpoint, 0)
    (checkpoint / "offsets" / ".0.crc").write_bytes(b"\x00garbage")
    (checkpoint / "offsets" / ".1.crc").write_bytes(b"\x00garbage")
    (checkpoint / "offsets" / ".1.3f2a.tmp").write_text("half written")
    (checkpoint / "commits" / ".1.crc").write_bytes(b"\x00")
    (checkpoint / "commits" / "1.tmp").write_text("v1")
    position = read_checkpoint(checkpoint).position
    assert position is not None and position.batch_id == 0


def test_trailing_newline_is_accepted(checkpoint):
    path = write_offsets(checkpoint, 0, '{"orders":{"0":10}}')
    path.write_text(path.read_text() + "\n")
    write_commit(checkpoint, 0)
    assert read_checkpoint(checkpoint).position.offsets == {TopicPartition("orders", 0): 10}


def test_only_dash_sources_give_an_empty_position(checkpoint):
    write_offsets(checkpoint, 0, "-")
    write_commit(checkpoint, 0)
    position = read_checkpoint(checkpoint).position
    assert position is not None and position.offsets == {}


def test_no_committed_batch_returns_a_reason(checkpoint):
    write_offsets(checkpoint, 0, '{"orders":{"0":10}}')
    reading = read_checkpoint(checkpoint)
    assert reading.position is None
    assert "no committed batch" in reading.reason and "[0]" in reading.reason
    assert read_checkpoint(checkpoint).position is None


def test_fresh_checkpoint_returns_a_reason(checkpoint):
    reading = read_checkpoint(checkpoint)
    assert reading.position is None and "no batch was ever planned" in reading.reason


def test_missing_commits_directory_means_nothing_committed(tmp_path):
    write_offsets(tmp_path, 0, '{"orders":{"0":10}}')
    assert read_checkpoint(tmp_path).position is None


def test_commits_without_offsets_are_damage(checkpoint):
    write_commit(checkpoint, 3)
    with pytest.raises(CheckpointError, match="none has an offsets file"):
        read_checkpoint(checkpoint)


def test_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist") as err:
        read_checkpoint(tmp_path / "nope")
    assert "nope" in str(err.value)


def test_missing_offsets_directory(tmp_path):
    with pytest.raises(CheckpointError, match="no offsets directory") as err:
        read_checkpoint(tmp_path)
    assert str(tmp_path / "offsets") in str(err.value)


@pytest.mark.parametrize(
    ("sources", "kwargs", "line", "message"),
    [
        (['{"orders":{"0":10}}'], {"version": "v2"}, 1, "spark.sql.streaming.offsetLog.formatVersion=2"),
        (['{"orders":{"0":10}}'], {"version": "v3"}, 1, "unsupported offset log version 'v3'"),
        (['{"orders":{"0":10}}'], {"version": ""}, 1, "unsupported offset log version"),
        (['{"orders":{"0":10}}'], {"metadata": "{not json"}, 2, "corrupt metadata JSON"),
        (['{"orders":{"0":10}}'], {"metadata": "[1]"}, 2, "must be a JSON object"),
        ([], {}, 3, "no source offsets"),
        (['{"orders":{"0":10}'], {}, 3, "corrupt source offset JSON"),
        (["-", '{"orders":{"0":-2}}'], {}, 4, "negative offset -2"),
        (['{"orders":{"0":-1}}'], {}, 3, "negative offset -1"),
        (['{"orders":{"0":"10"}}'], {}, 3, "non-numeric offset '10'"),
        (['{"orders":{"0":1.5}}'], {}, 3, "non-numeric offset 1.5"),
        (['{"orders":{"0":true}}'], {}, 3, "non-numeric offset True"),
        (['{"orders":{"zero":1}}'], {}, 3, "partition key 'zero'"),
        (['{"orders":{"-1":1}}'], {}, 3, "partition key '-1'"),
        (['{"orders":5}'], {}, 3, "is this a Kafka source?"),
        (["[1,2]"], {}, 3, "expected a JSON object of topics"),
        (['{"":{"0":1}}'], {}, 3, "empty topic name"),
    ],
)
def test_corrupt_offsets_files_name_file_and_line(checkpoint, sources, kwargs, line, message):
    path = write_offsets(checkpoint, 7, *sources, **kwargs)
    write_commit(checkpoint, 7)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(checkpoint)
    assert f"{path}:{line}:" in str(err.value)
    assert message in str(err.value)


def test_empty_offsets_file(checkpoint):
    path = checkpoint / "offsets" / "0"
    path.write_text("")
    write_commit(checkpoint, 0)
    with pytest.raises(CheckpointError, match=f"{path}:1: empty offsets file"):
        read_checkpoint(checkpoint)


def test_non_utf8_offsets_file(checkpoint):
    path = checkpoint / "offsets" / "0"
    path.write_bytes(b"v1\n{}\n\xff\xfe")
    write_commit(checkpoint, 0)
    with pytest.raises(CheckpointError, match="not UTF-8"):
        read_checkpoint(checkpoint)


def test_progress_record_of_committed_batch_gives_timestamps(checkpoint):
    write_offsets(checkpoint, 0, '{"orders":{"0":10,"1":4}}')
    write_commit(checkpoint, 0)
    write_offsets(checkpoint, 1, '{"orders":{"0":20,"1":9}}')
    write_commit(checkpoint, 1)
    write_offsets(checkpoint, 2, '{"orders":{"0":30,"1":12}}')
    write_record(
        checkpoint,
        {
            "epoch": 3,
            "batch_id": 0,
            "end_offsets": {"orders": {"0": 10, "1": 4}},
            "max_timestamp_ms": {"orders": {"0": 100}},
        },
    )
    write_record(
        checkpoint,
        {
            "epoch": 3,
            "batch_id": 1,
            "end_offsets": {"orders": {"0": 20, "1": 9}},
            "max_timestamp_ms": {"orders": {"0": 200, "1": 190}, "other": {"0": 5}},
        },
    )
    # Batch 2 is not committed: its record must not be used.
    write_record(
        checkpoint,
        {
            "epoch": 3,
            "batch_id": 2,
            "end_offsets": {"orders": {"0": 30, "1": 12}},
            "max_timestamp_ms": {"orders": {"0": 300, "1": 190}},
        },
    )
    position = read_checkpoint(checkpoint).position
    assert position.max_timestamps_ms == {TopicPartition("orders", 0): 200, TopicPartition("orders", 1): 190}


def test_older_progress_record_is_used_when_the_newest_is_missing(checkpoint):
    write_offsets(checkpoint, 5, '{"orders":{"0":50}}')
    write_commit(checkpoint, 5)
    write_record(checkpoint, {"epoch": 1, "batch_id": 4, "max_timestamp_ms": {"orders": {"0": 40}}})
    assert read_checkpoint(checkpoint).position.max_timestamps_ms == {TopicPartition("orders", 0): 40}


def test_no_progress_record_means_no_timestamps(checkpoint):
    write_offsets(checkpoint, 0, '{"orders":{"0":10}}')
    write_commit(checkpoint, 0)
    assert read_checkpoint(checkpoint).position.max_timestamps_ms == {}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"epoch": 1}, "invalid batch_id None"),
        ({"epoch": 1, "batch_id": -1}, "invalid batch_id -1"),
        ({"epoch": "x", "batch_id": 1}, "invalid epoch 'x'"),
        ({"epoch": 1, "batch_id": 1, "max_timestamp_ms": {"orders": {"0": "late"}}}, "max_timestamp_ms"),
        ({"epoch": 1, "batch_id": 1, "end_offsets": {"orders": {"0": -1}}}, "end_offsets"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_invalid_progress_records(checkpoint, record, message):
    write_offsets(checkpoint, 1, '{"orders":{"0":10}}')
    write_commit(checkpoint, 1)
    path = write_record(checkpoint, record, batch=1)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(checkpoint)
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_explicit_position_json_round_trip():
    position = StreamPosition.from_json('{"orders": {"10": 5, "2": 7}, "a": {"0": 0}}')
    assert position.batch_id is None
    assert position.offsets[TopicPartition("orders", 10)] == 5
    assert position.to_json() == '{"a": {"0": 0}, "orders": {"2": 7, "10": 5}}'
    assert StreamPosition.from_json(position.to_json()) == position


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ("{}", "names no partitions"),
        ('{"orders": {"0": -2}}', "negative offset -2"),
        ('{"orders": {"0": "5"}}', "non-numeric"),
        ('{"orders": [5]}', "partition -> offset"),
        ("[]", "JSON object of topics"),
    ],
)
def test_explicit_position_validation(text, message):
    with pytest.raises(ConfigError, match=message) as err:
        StreamPosition.from_json(text)
    assert "explicit stream position" in str(err.value)


def test_kafka_offsets_from_json_rejects_non_string_keys():
    with pytest.raises(CheckpointError, match="partition key 0"):
        kafka_offsets_from_json({"orders": {0: 1}}, "test")


def test_progress_gives_the_newest_record_offset_before_trailing_markers(checkpoint):
    # Batch 1 ends at 78, but its newest record is at 76: 77 is a transaction's commit marker.
    write_offsets(checkpoint, 0, '{"orders":{"0":40,"1":9}}')
    write_commit(checkpoint, 0)
    write_offsets(checkpoint, 1, '{"orders":{"0":78,"1":9}}')
    write_commit(checkpoint, 1)
    write_record(checkpoint, {"batch_id": 0, "max_offset": {"orders": {"0": 38, "1": 7}}})
    # orders-1 had no new record: its mark is carried forward
    write_record(checkpoint, {"batch_id": 1, "max_offset": {"orders": {"0": 76, "1": 7}}})
    position = read_checkpoint(checkpoint).position
    assert position.last_record_offsets == {TopicPartition("orders", 0): 76, TopicPartition("orders", 1): 7}


def test_a_record_offset_at_the_position_is_refused(checkpoint):
    write_offsets(checkpoint, 0, '{"orders":{"0":40}}')
    write_commit(checkpoint, 0)
    path = write_record(checkpoint, {"batch_id": 0, "max_offset": {"orders": {"0": 40}}})
    with pytest.raises(CheckpointError, match=f"{path}: .*record offset 40 of orders-0, at or beyond"):
        read_checkpoint(checkpoint)


# ---------------------------------------------------------------- per-batch progress entries


def test_the_newest_record_at_or_below_the_committed_batch_answers(checkpoint):
    """Records carry the run's marks forward: the record of the committed batch is the whole answer; a
    record of a batch Spark did not commit yet is not read."""
    for batch, end in ((0, 40), (1, 78), (2, 90)):
        write_offsets(checkpoint, batch, f'{{"orders":{{"0":{end},"1":9}}}}')
    write_commit(checkpoint, 0)
    write_commit(checkpoint, 1)
    write_record(checkpoint, {"batch_id": 0, "max_offset": {"orders": {"0": 38, "1": 7}}})
    write_record(
        checkpoint,
        {
            "batch_id": 1,
            "end_offsets": {"orders": {"0": 78, "1": 9}},
            "max_offset": {"orders": {"0": 76, "1": 7}},
            "max_timestamp_ms": {"orders": {"0": 1700000000500, "1": 1700000000100}},
        },
    )
    write_record(checkpoint, {"batch_id": 2, "max_offset": {"orders": {"0": 89, "1": 8}}})  # not committed
    position = read_checkpoint(checkpoint).position
    assert position.batch_id == 1
    assert position.last_record_offsets == {TopicPartition("orders", 0): 76, TopicPartition("orders", 1): 7}
    assert position.max_timestamps_ms[TopicPartition("orders", 1)] == 1700000000100


def test_a_record_of_another_checkpoint_is_refused_naming_it(checkpoint):
    write_offsets(checkpoint, 3, '{"orders":{"0":40}}')
    write_commit(checkpoint, 3)
    path = write_record(checkpoint, {"batch_id": 3, "end_offsets": {"orders": {"0": 999}}})
    with pytest.raises(
        CheckpointError, match=f"{path}: progress entry of batch 3 has end offsets that differ"
    ):
        read_checkpoint(checkpoint)


def test_a_damaged_record_is_refused_naming_it(checkpoint):
    write_offsets(checkpoint, 0, '{"orders":{"0":40}}')
    write_commit(checkpoint, 0)
    path = checkpoint / "progress" / "0"
    path.parent.mkdir()
    path.write_text('{"batch_id": 0, "max_offset": {"orders": {"0": 3')
    with pytest.raises(CheckpointError, match=f"{path}: corrupt progress JSON"):
        read_checkpoint(checkpoint)

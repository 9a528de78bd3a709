"""The state carry (``run_format/state_carry.py``) on checkpoints laid out as Spark 4.0 writes them.

The checkpoints here copy the one Spark 4.0 wrote for a ``dropDuplicatesWithinWatermark`` + windowed count
query (HDFS-backed state store, ``spark.sql.shuffle.partitions=3``): ``metadata``, ``offsets/<b>`` and
``commits/<b>`` with their ``.crc`` files, ``sources/0/0``, and per operator
``state/<op>/<part>/<v>.delta`` (version = batch + 1), ``state/<op>/0/_metadata/schema`` and
``state/<op>/_metadata/metadata``; the RocksDB, stream-stream join and Spark 4 batch-indexed layouts are
added where a test needs them. These tests add to ``tests/unit/run_format/test_state_carry.py``: exact file
sets, every refusal naming its file, the order of the writes, a store that goes down after any number of
files, and the carried checkpoint as the job and the status read it (``claim_checkpoint``,
``read_progress``, ``read_checkpoint``).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_kafka_failover.core.exceptions import CheckpointError
from airflow_kafka_failover.core.storage.store import LocalStore, StoreUnavailable
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.run_format.layout import OWNER_FILE, claim_checkpoint
from airflow_kafka_failover.run_format.progress import read_progress
from airflow_kafka_failover.run_format.spark_checkpoint import parse_offsets_file, read_checkpoint
from airflow_kafka_failover.run_format.state_carry import (
    CARRYING_FILE,
    CarriedCheckpoint,
    carried_batch,
    carried_from,
    carry_checkpoint,
    clear_interrupted_carry,
    inspect_state,
    rewrite_offsets,
    state_operators,
)
from tests.property_examples import examples

QUERY_ID = "0b4f3a4e-7c1d-4f7e-9a3b-5e1f2d3c4b5a"
PARTITIONS = 3
OPERATORS = ("0", "1")
SOURCE = tuple(TopicPartition("orders", p) for p in range(2))
TARGET = tuple(TopicPartition("A.orders", p) for p in range(2))
TARGETS = dict(zip(SOURCE, TARGET, strict=True))
STARTS = {TARGET[0]: 48, TARGET[1]: 47}
OWNER = {"pair": "orders", "cluster": "B", "epoch": 4, "bootstrap_servers": "b1:9092"}
WHAT_TO_DO = "job.state: fresh"


def metadata_line(partitions: int | str = PARTITIONS, watermark: int = 1_700_000_000_000) -> str:
    """The second line of ``offsets/<b>`` as Spark 4.0 writes it (compact JSON, the session's settings)."""
    conf = {
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
        ),
        "spark.sql.streaming.join.stateFormatVersion": "2",
        "spark.sql.streaming.stateStore.compression.codec": "lz4",
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.streaming.multipleWatermarkPolicy": "min",
    }
    metadata = {"batchWatermarkMs": watermark, "batchTimestampMs": watermark + 5000, "conf": conf}
    return json.dumps(metadata, separators=(",", ":"))


def put(root: Path, name: str, data: str | bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def put_with_crc(root: Path, name: str, data: str | bytes) -> None:
    """A file and the ``.<name>.crc`` checksum Hadoop's local file system writes beside it."""
    put(root, name, data)
    folder, _, base = name.rpartition("/")
    put(root, f"{folder}/.{base}.crc" if folder else f".{base}.crc", b"crc\x00\x01")


def write_offsets(root: Path, batch: int, *sources: str, partitions: int | str = PARTITIONS) -> None:
    put_with_crc(root, f"offsets/{batch}", "\n".join(["v1", metadata_line(partitions), *sources]))


def write_commit(root: Path, batch: int, version: str = "v1") -> None:
    put_with_crc(root, f"commits/{batch}", f'{version}\n{{"nextBatchWatermarkMs":{1000 * batch}}}')


def end_offsets(batch: int) -> str:
    return json.dumps({"orders": {"0": 50 * (batch + 1), "1": 50 * (batch + 1)}}, separators=(",", ":"))


def spark_checkpoint(
    root: Path, committed: int = 2, partitions: int = PARTITIONS, operators: int = 2, planned: int = 0
) -> Path:
    """A stateful query's checkpoint with batches ``0 .. committed - 1`` committed and ``planned`` more
    batches planned but not committed (their offsets and state versions written, no commit)."""
    put_with_crc(root, "metadata", json.dumps({"id": QUERY_ID}))
    put_with_crc(root, "sources/0/0", "v1\n" + json.dumps({"orders": {"0": 0, "1": 0}}))
    put(
        root, OWNER_FILE, json.dumps({"pair": "orders", "cluster": "A", "epoch": 3, "bootstrap_servers": "a"})
    )
    for batch in range(committed + planned):
        write_offsets(root, batch, end_offsets(batch), partitions=partitions)
        if batch < committed:
            write_commit(root, batch)
            put(root, f"progress/{batch}", json.dumps({"epoch": 3, "batch_id": batch, "records": 5}))
    for op in range(operators):
        put_with_crc(root, f"state/{op}/_metadata/metadata", f"v1\n{{operator {op}}}")
        for part in range(partitions):
            for version in range(1, committed + planned + 1):
                put_with_crc(root, f"state/{op}/{part}/{version}.delta", f"delta {op}/{part}/{version}")
        put_with_crc(root, f"state/{op}/0/_metadata/schema", f"schema of {op}")
    return root


def state_files(operators: int = 2, partitions: int = PARTITIONS, versions: int = 2) -> set[str]:
    """The state files of :func:`spark_checkpoint` up to a store version, as ``inspect_state`` names them."""
    names = set()
    for op in range(operators):
        names.add(f"state/{op}/_metadata/metadata")
        names.add(f"state/{op}/0/_metadata/schema")
        for part in range(partitions):
            names.update(f"state/{op}/{part}/{version}.delta" for version in range(1, versions + 1))
    return names


def files_of(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` with the hash of its bytes and its modification time."""
    return {
        path.relative_to(
            root
        ).as_posix(): f"{hashlib.sha256(path.read_bytes()).hexdigest()}@{path.stat().st_mtime_ns}"
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def carried_into(tmp_path: Path, **checkpoint) -> tuple[Path, Path, CarriedCheckpoint]:
    old, new = spark_checkpoint(tmp_path / "old", **checkpoint), tmp_path / "new"
    state = inspect_state(str(old))
    assert state is not None
    return old, new, carry_checkpoint(state, str(new), OWNER, TARGETS, STARTS)


# ---------------------------------------------------------------------------------------------------------
# state_operators


def test_a_stateless_checkpoint_has_no_state_operators(tmp_path):
    root = tmp_path / "stateless"
    write_offsets(root, 0, end_offsets(0))
    write_commit(root, 0)
    assert state_operators(str(root)) == []
    assert state_operators(str(tmp_path / "never-written")) == []
    assert inspect_state(str(root)) is None


def test_state_operators_are_the_numeric_folders_in_numeric_order(tmp_path):
    for op in ("10", "9", "0", "2", "1"):
        put(tmp_path, f"state/{op}/0/1.delta", "x")
    put(tmp_path, "state/_metadata/whatever", "not an operator")
    put(tmp_path, "state/.1.crc", "a checksum")
    put(tmp_path, "state/3a/0/1.delta", "not an operator id")
    assert state_operators(str(tmp_path)) == ["0", "1", "2", "9", "10"]


# ---------------------------------------------------------------------------------------------------------
# inspect_state: the files chosen


def test_the_files_of_the_last_committed_batch_are_chosen_and_nothing_else(tmp_path):
    # batches 0 and 1 committed, batch 2 planned (offsets/2 and state version 3 written, never committed)
    root = spark_checkpoint(tmp_path / "old", committed=2, planned=1)
    put(root, "state/0/1/.3.delta.1c9e.tmp", "Spark's temporary")
    state = inspect_state(str(root))
    assert state is not None
    assert (state.checkpoint, state.batch_id, state.operators) == (str(root), 1, OPERATORS)
    assert set(state.files) == state_files(versions=2)
    assert len(state.files) == len(set(state.files))
    assert state.describe() == f"2 stateful operators (0, 1) at batch 1 of {root}"


def test_an_earlier_committed_batch_keeps_the_store_versions_up_to_its_own(tmp_path):
    root = spark_checkpoint(tmp_path / "old", committed=3)
    state = inspect_state(str(root), 0)
    assert state is not None and state.batch_id == 0
    assert set(state.files) == state_files(versions=1)
    middle = inspect_state(str(root), 1)
    assert middle is not None and set(middle.files) == state_files(versions=2)


def test_one_operator_is_described_in_the_singular(tmp_path):
    root = spark_checkpoint(tmp_path / "old", operators=1)
    state = inspect_state(str(root))
    assert state is not None and state.describe() == f"1 stateful operator (0) at batch 1 of {root}"


def rocksdb_checkpoint(root: Path) -> Path:
    """Batches 0 and 1 committed, 2 planned; one RocksDB operator over 2 partitions (both naming schemes)."""
    put(root, "metadata", json.dumps({"id": QUERY_ID}))
    for batch in range(3):
        write_offsets(root, batch, end_offsets(batch), partitions=2)
        if batch < 2:
            write_commit(root, batch)
    for version in (1, 2, 3):
        put_with_crc(root, f"state/0/0/{version}.zip", f"zip {version}")
        put_with_crc(root, f"state/0/0/{version}.changelog", f"changelog {version}")
        put_with_crc(
            root, f"state/0/1/{version}_8c1f0d2e-4b1f-4c7a-9a3b-6d2e1f0a9b8c.zip", f"zip v2 {version}"
        )
    put(root, "state/0/0/SSTs/000008-81696597-2b1e-4c3d-8e9f-0a1b2c3d4e5f.sst", "shared")
    put(root, "state/0/0/SSTs/000012-5a1b2c3d-2b1e-4c3d-8e9f-0a1b2c3d4e5f.sst", "shared, of version 3")
    put(root, "state/0/1/SSTs/000004-9c8b7a6d-2b1e-4c3d-8e9f-0a1b2c3d4e5f.sst", "shared")
    put(root, "state/0/0/logs/000003.log", "RocksDB's log")
    put(root, "state/0/_metadata/metadata", "operator metadata")
    return root


def test_rocksdb_files_are_chosen_by_version_and_its_shared_files_kept_whole(tmp_path):
    state = inspect_state(str(rocksdb_checkpoint(tmp_path / "old")))
    assert state is not None and state.batch_id == 1
    assert set(state.files) == {
        "state/0/_metadata/metadata",
        "state/0/0/1.zip",
        "state/0/0/2.zip",
        "state/0/0/1.changelog",
        "state/0/0/2.changelog",
        "state/0/0/SSTs/000008-81696597-2b1e-4c3d-8e9f-0a1b2c3d4e5f.sst",
        "state/0/0/SSTs/000012-5a1b2c3d-2b1e-4c3d-8e9f-0a1b2c3d4e5f.sst",
        "state/0/0/logs/000003.log",
        "state/0/1/1_8c1f0d2e-4b1f-4c7a-9a3b-6d2e1f0a9b8c.zip",
        "state/0/1/2_8c1f0d2e-4b1f-4c7a-9a3b-6d2e1f0a9b8c.zip",
        "state/0/1/SSTs/000004-9c8b7a6d-2b1e-4c3d-8e9f-0a1b2c3d4e5f.sst",
    }


JOIN_STORES = (
    "left-keyToNumValues",
    "left-keyWithIndexToValue",
    "right-keyToNumValues",
    "right-keyWithIndexToValue",
)


def join_checkpoint(root: Path, partitions: int = 2) -> Path:
    """A stream-stream join (operator 0): four stores under each partition folder; batch 1 committed."""
    put(root, "metadata", json.dumps({"id": QUERY_ID}))
    for batch in range(2):
        write_offsets(root, batch, end_offsets(batch), partitions=partitions)
        write_commit(root, batch)
    for part in range(partitions):
        for store in JOIN_STORES:
            for version in (1, 2, 3):
                put_with_crc(root, f"state/0/{part}/{store}/{version}.delta", f"{store} {version}")
    put(root, "state/0/0/left-keyToNumValues/_metadata/schema", "schema")
    put(root, "state/0/_metadata/metadata", "operator metadata")
    return root


def test_a_join_s_store_folders_are_each_chosen_by_version(tmp_path):
    state = inspect_state(str(join_checkpoint(tmp_path / "old")))
    assert state is not None
    expected = {"state/0/_metadata/metadata", "state/0/0/left-keyToNumValues/_metadata/schema"}
    expected |= {
        f"state/0/{part}/{store}/{version}.delta"
        for part in (0, 1)
        for store in JOIN_STORES
        for version in (1, 2)
    }
    assert set(state.files) == expected


def test_a_join_store_without_the_batch_s_version_is_named(tmp_path):
    root = join_checkpoint(tmp_path / "old")
    (root / "state/0/1/right-keyWithIndexToValue/2.delta").unlink()
    with pytest.raises(CheckpointError) as refused:
        inspect_state(str(root))
    message = str(refused.value)
    assert f"{root}/state/0/1/right-keyWithIndexToValue: no file of state version 2" in message
    assert "in 1 of the operator's 8 stores" in message and WHAT_TO_DO in message


def test_spark_4_metadata_and_schema_files_are_chosen_by_batch_id(tmp_path):
    root = spark_checkpoint(tmp_path / "old", committed=2, planned=1)
    for batch in (0, 1, 2):
        put(root, f"state/0/_metadata/v2/{batch}", f"operator metadata of batch {batch}")
        put(root, f"state/0/_stateSchema/default/{batch}_5e1f2d3c-7c1d-4f7e-9a3b-0b4f3a4e4b5a", "schema")
    put(root, "state/0/_metadata/v2/.1.crc", "crc")
    state = inspect_state(str(root))
    assert state is not None and state.batch_id == 1
    added = set(state.files) - state_files(versions=2)
    assert added == {
        "state/0/_metadata/v2/0",
        "state/0/_metadata/v2/1",
        "state/0/_stateSchema/default/0_5e1f2d3c-7c1d-4f7e-9a3b-0b4f3a4e4b5a",
        "state/0/_stateSchema/default/1_5e1f2d3c-7c1d-4f7e-9a3b-0b4f3a4e4b5a",
    }


def test_the_state_is_checked_from_listings_the_two_logs_and_the_query_metadata_only(tmp_path, monkeypatch):
    root = spark_checkpoint(tmp_path / "old")
    read = []
    real = LocalStore.read

    def recording(self, location):
        read.append(Path(location).relative_to(root).as_posix())
        return real(self, location)

    monkeypatch.setattr(LocalStore, "read", recording)
    assert inspect_state(str(root)) is not None
    assert sorted(read) == [
        "commits/1",
        "metadata",
        "offsets/0",
        "offsets/1",
    ]  # never a state file's contents


# ---------------------------------------------------------------------------------------------------------
# inspect_state: refusals


def test_a_query_that_never_committed_a_batch_has_nothing_to_carry(tmp_path):
    # Its state files hold nothing processed: nothing to carry, nothing dropped.
    root = spark_checkpoint(tmp_path / "old", committed=0, planned=1)
    assert (root / "state/0/0/1.delta").exists() and not (root / "commits").exists()
    assert inspect_state(str(root)) is None


@pytest.mark.parametrize("batch", [2, 5])
def test_a_batch_that_is_not_committed_is_refused(tmp_path, batch):
    root = spark_checkpoint(tmp_path / "old", committed=2, planned=1)  # batch 2 planned only
    with pytest.raises(CheckpointError) as refused:
        inspect_state(str(root), batch)
    message = str(refused.value)
    assert message.startswith(
        f"{root}/commits/{batch}: batch {batch}, where the switch's plan starts, is not"
    )
    assert WHAT_TO_DO in message


def remove(name: str):
    return lambda root: (root / name).unlink()


def remove_folder(name: str):
    def damage(root: Path) -> None:
        for path in sorted((root / name).rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (root / name).rmdir()

    return damage


def overwrite(name: str, data: str | bytes):
    return lambda root: put(root, name, data)


DAMAGES = {
    "offsets of b-1 missing": (remove("offsets/0"), "offsets/0: the offsets of batch 0 is missing"),
    "offsets of b missing": (remove("offsets/1"), "offsets/1: the offsets of batch 1 is missing"),
    "offset log v2": (
        overwrite("offsets/1", f"v2\n{metadata_line()}\n{end_offsets(1)}"),
        "offsets/1:1: unsupported offset log version 'v2'",
    ),
    "offset log v2 in b-1": (
        overwrite("offsets/0", f"v2\n{metadata_line()}\n{end_offsets(0)}"),
        "offsets/0:1: unsupported offset log version 'v2'",
    ),
    "commit log v2": (
        overwrite("commits/1", 'v2\n{"nextBatchWatermarkMs":0}'),
        "commits/1:1: commit log version 'v2'",
    ),
    "commit log empty": (overwrite("commits/1", ""), "commits/1:1: commit log version ''"),
    "commit metadata corrupt": (
        overwrite("commits/1", "v1\n{nextBatch"),
        "commits/1:2: corrupt commit metadata",
    ),
    "store lacks version b+1": (remove("state/1/2/2.delta"), "state/1/2: no file of state version 2"),
    "only the checksum of b+1 left": (
        remove("state/0/0/2.delta"),
        "state/0/0: no file of state version 2",
    ),
    "partition folder missing": (
        remove_folder("state/1/2"),
        "state/1/2: the state of partition 2 is missing",
    ),
    "offsets metadata corrupt": (
        overwrite("offsets/1", "v1\n{batchWatermarkMs\n" + end_offsets(1)),
        "offsets/1:2: corrupt metadata JSON",
    ),
    "offsets metadata of b-1 corrupt": (
        overwrite("offsets/0", "v1\n{batchWatermarkMs\n" + end_offsets(0)),
        "offsets/0:2: corrupt metadata JSON",
    ),
    "source line corrupt": (
        overwrite("offsets/1", f"v1\n{metadata_line()}\n{{orders"),
        "offsets/1:3: corrupt source offset JSON",
    ),
    "shuffle partitions not a number": (
        overwrite("offsets/1", f"v1\n{metadata_line('many')}\n{end_offsets(1)}"),
        "offsets/1:2: spark.sql.shuffle.partitions is 'many', not a number",
    ),
    "offsets not UTF-8": (overwrite("offsets/1", b"v1\n\xff\xfe"), "offsets/1: not UTF-8 text"),
    "operator without stores": (
        lambda root: [remove_folder(f"state/1/{part}")(root) for part in range(PARTITIONS)],
        "state/1: the operator holds no state store files",
    ),
}


@pytest.mark.parametrize(("damage", "message"), DAMAGES.values(), ids=DAMAGES.keys())
def test_a_damaged_checkpoint_is_refused_naming_the_file_and_what_to_do(tmp_path, damage, message):
    root = spark_checkpoint(tmp_path / "old")
    damage(root)
    with pytest.raises(CheckpointError) as refused:
        inspect_state(str(root))
    assert f"{root}/{message}" in str(refused.value)
    assert WHAT_TO_DO in str(refused.value)


def test_fewer_partition_folders_than_shuffle_partitions_are_counted(tmp_path):
    root = spark_checkpoint(tmp_path / "old", partitions=2)
    for batch in (0, 1):  # the session said 4 partitions; the operators have 2
        write_offsets(root, batch, end_offsets(batch), partitions=4)
    with pytest.raises(CheckpointError) as refused:
        inspect_state(str(root))
    assert f"{root}/state/0/2: the state of partition 2 is missing (2 of 4 partitions have no store)" in str(
        refused.value
    )


@pytest.mark.parametrize(
    "damage",
    [remove("metadata"), overwrite("metadata", "{not json"), overwrite("metadata", '{"name":"orders"}')],
    ids=["missing", "corrupt", "without id"],
)
def test_a_checkpoint_whose_query_metadata_cannot_be_carried_is_refused_before_the_fence(tmp_path, damage):
    root = spark_checkpoint(tmp_path / "old")
    damage(root)
    with pytest.raises(CheckpointError, match="metadata"):
        inspect_state(str(root))


def test_the_carry_itself_refuses_a_query_metadata_that_broke_after_the_check(tmp_path):
    """A metadata file damaged between the check and the copy is refused by the carry; no owner is written."""
    for name, text, message in [
        ("missing", None, "the query's metadata is missing"),
        ("corrupt", "{not json", "corrupt query metadata"),
        ("without id", '{"name":"orders"}', "query metadata without an id"),
    ]:
        root = spark_checkpoint(tmp_path / name / "old")
        state = inspect_state(str(root))
        assert state is not None
        if text is None:
            (root / "metadata").unlink()
        else:
            put(root, "metadata", text)
        new = tmp_path / name / "new"
        with pytest.raises(CheckpointError, match=message):
            carry_checkpoint(state, str(new), OWNER, TARGETS, STARTS)
        assert not (new / OWNER_FILE).exists()


# ---------------------------------------------------------------------------------------------------------
# rewrite_offsets


def offsets_text(*sources: str, metadata: str | None = None) -> str:
    return "\n".join(["v1", metadata_line() if metadata is None else metadata, *sources])


def source_lines(text: str) -> list[dict | str]:
    return [line if line == "-" else json.loads(line) for line in text.split("\n")[2:]]


def test_the_topics_are_renamed_and_the_offsets_taken_from_the_starts():
    text = offsets_text('{"orders":{"0":50,"1":50}}')
    rewritten, merged = rewrite_offsets("offsets/1", text, TARGETS, STARTS)
    lines = rewritten.split("\n")
    assert lines[:2] == ["v1", metadata_line()]  # the watermark and the session's settings as they were
    assert lines[2] == '{"A.orders":{"0":48,"1":47}}'  # compact, as Spark writes it
    assert merged == {TARGET[0]: 48, TARGET[1]: 47}
    assert parse_offsets_file("offsets/1", rewritten) == merged


def test_a_failback_renames_the_mirrored_topic_back():
    text = offsets_text('{"A.orders":{"0":900,"1":901}}')
    back = {t: s for s, t in TARGETS.items()}
    rewritten, merged = rewrite_offsets("offsets/1", text, back, {SOURCE[0]: 870, SOURCE[1]: 871})
    assert source_lines(rewritten) == [{"orders": {"0": 870, "1": 871}}]
    assert merged == {SOURCE[0]: 870, SOURCE[1]: 871}


def test_the_metadata_line_is_kept_byte_for_byte_and_a_trailing_newline_dropped():
    metadata = '{"batchWatermarkMs": 0, "conf": {"z": "1", "a": "\\u00e9"}, "batchTimestampMs": 3}'
    rewritten, _ = rewrite_offsets(
        "offsets/1", offsets_text('{"orders":{"0":1,"1":2}}', metadata=metadata) + "\n", TARGETS, STARTS
    )
    assert rewritten.split("\n") == ["v1", metadata, '{"A.orders":{"0":48,"1":47}}']


def test_no_offset_lines_are_kept_in_their_place():
    text = offsets_text("-", '{"orders":{"0":50}}', "-", '{"orders":{"1":51}}')
    rewritten, merged = rewrite_offsets("offsets/1", text, TARGETS, STARTS)
    assert source_lines(rewritten) == ["-", {"A.orders": {"0": 48}}, "-", {"A.orders": {"1": 47}}]
    assert merged == STARTS


def test_an_untracked_partition_joins_the_line_of_its_topic():
    payments = TopicPartition("payments", 0), TopicPartition("A.payments", 0)
    text = offsets_text('{"orders":{"0":50,"1":51}}', '{"payments":{"0":7}}')
    targets = {**TARGETS, payments[0]: payments[1]}
    new_partition = TopicPartition("A.orders", 2)  # the target's topic has a partition more
    starts = {**STARTS, payments[1]: 6, new_partition: 0}
    rewritten, merged = rewrite_offsets("offsets/1", text, targets, starts)
    assert source_lines(rewritten) == [{"A.orders": {"0": 48, "1": 47, "2": 0}}, {"A.payments": {"0": 6}}]
    assert merged == starts


def test_an_untracked_topic_joins_the_only_kafka_source_line():
    text = offsets_text("-", '{"orders":{"0":50,"1":51}}')
    other = TopicPartition("refunds", 0)  # a topic the old run never read
    rewritten, merged = rewrite_offsets("offsets/1", text, TARGETS, {**STARTS, other: 12})
    assert source_lines(rewritten) == ["-", {"A.orders": {"0": 48, "1": 47}, "refunds": {"0": 12}}]
    assert merged[other] == 12


def test_an_untracked_topic_with_two_kafka_sources_is_refused_naming_it():
    text = offsets_text('{"orders":{"0":50}}', '{"orders":{"1":51}}')
    other = TopicPartition("refunds", 0)
    with pytest.raises(CheckpointError, match=r"offsets/1: the new run reads refunds-0, which none of the "):
        rewrite_offsets("offsets/1", text, TARGETS, {**STARTS, other: 12})


def test_a_source_partition_the_plan_does_not_cover_is_refused_naming_it():
    text = offsets_text("-", '{"orders":{"0":50,"1":51,"7":3}}')
    with pytest.raises(CheckpointError) as refused:
        rewrite_offsets("offsets/1", text, TARGETS, STARTS)
    message = str(refused.value)
    assert message.startswith("offsets/1:4: the checkpoint's batch reads orders-7, which the switch's plan")
    assert "orders-0" not in message and "job.state: fresh" in message


def test_a_covered_partition_without_a_start_on_the_target_is_refused():
    with pytest.raises(CheckpointError, match=r"offsets/1:3: .*counterparts A.orders-1 the target does not"):
        rewrite_offsets("offsets/1", offsets_text('{"orders":{"0":50,"1":51}}'), TARGETS, {TARGET[0]: 48})


def test_an_offsets_file_spark_would_not_read_is_refused_before_any_rewrite():
    with pytest.raises(CheckpointError, match="unsupported offset log version 'v2'"):
        rewrite_offsets("offsets/1", "v2\n{}\n{}", TARGETS, STARTS)


@settings(max_examples=examples(60))
@given(
    counts=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    extra=st.integers(0, 2),
    offsets=st.lists(st.integers(0, 10**12), min_size=30, max_size=30),
    dashes=st.lists(st.booleans(), min_size=0, max_size=2),
)
def test_every_source_line_holds_the_starts_of_its_partitions_on_the_target(counts, extra, offsets, dashes):
    """Any number of topics, each read by its own source line, the target's first topic with ``extra``
    partitions more: the rewritten file parses back to exactly the start map."""
    topics = [f"t{index}" for index in range(len(counts))]
    targets = {
        TopicPartition(topic, p): TopicPartition(f"A.{topic}", p)
        for topic, count in zip(topics, counts, strict=True)
        for p in range(count)
    }
    starts = {target: offsets[index] for index, target in enumerate(sorted(targets.values()))}
    starts.update({TopicPartition("A.t0", counts[0] + p): offsets[-1 - p] for p in range(extra)})
    lines = [
        json.dumps({topic: {str(p): 99 for p in range(count)}})
        for topic, count in zip(topics, counts, strict=True)
    ]
    for dash in dashes:
        lines.insert(1 if dash else 0, "-")
    rewritten, merged = rewrite_offsets("offsets/3", offsets_text(*lines), targets, starts)
    assert merged == starts
    assert parse_offsets_file("offsets/3", rewritten) == starts
    assert [line == "-" for line in rewritten.split("\n")[2:]] == [line == "-" for line in lines]


# ---------------------------------------------------------------------------------------------------------
# carry_checkpoint


def test_a_carry_writes_exactly_the_files_spark_reads_for_the_next_batch(tmp_path):
    old, new, carried = carried_into(tmp_path)
    written = files_of(new)
    assert set(written) == {
        "metadata",
        "offsets/0",
        "offsets/1",
        "commits/1",
        "progress/1",
        OWNER_FILE,
        *state_files(versions=2),
    }  # no sources/, no .crc, no commits/0, no old progress or owner, no _carrying.json
    for name in state_files(versions=2) | {"commits/1"}:
        assert written[name] == (old / name).read_bytes(), name
    for batch in (0, 1):
        lines = written[f"offsets/{batch}"].decode().split("\n")
        assert lines == ["v1", metadata_line(), '{"A.orders":{"0":48,"1":47}}']
    metadata = json.loads(written["metadata"])
    assert set(metadata) == {"id"} and metadata["id"] != QUERY_ID and uuid.UUID(metadata["id"]).version == 4
    progress = json.loads(written["progress/1"])
    assert isinstance(progress.pop("written_at"), float)
    assert progress == {
        "epoch": 4,
        "batch_id": 1,
        "end_offsets": {"A.orders": {"0": 48, "1": 47}},
        "records": 0,
        "records_total": 0,
        "max_timestamp_ms": {},
        "max_offset": {},
        "carried": True,
    }
    owner = json.loads(written[OWNER_FILE])
    assert owner == {
        **OWNER,
        "carried_from": {
            "checkpoint": str(old),
            "batch_id": 1,
            "operators": ["0", "1"],
            "files": len(written) - 1,
            "bytes": sum(len(data) for name, data in written.items() if name != OWNER_FILE),
            "seconds": round(carried.seconds, 3),
        },
    }
    assert (carried.checkpoint, carried.source, carried.batch_id, carried.operators) == (
        str(new),
        str(old),
        1,
        OPERATORS,
    )
    assert (carried.files, carried.bytes) == (owner["carried_from"]["files"], owner["carried_from"]["bytes"])
    assert carried_from(str(new)) == replace(carried, seconds=round(carried.seconds, 3))
    assert carried_batch(str(new)) == 1


def test_the_query_metadata_keeps_its_other_keys(tmp_path):
    old = spark_checkpoint(tmp_path / "old")
    put(old, "metadata", json.dumps({"id": QUERY_ID, "name": "orders-query"}))
    carry_checkpoint(inspect_state(str(old)), str(tmp_path / "new"), OWNER, TARGETS, STARTS)
    metadata = json.loads((tmp_path / "new/metadata").read_text())
    assert metadata["name"] == "orders-query" and metadata["id"] != QUERY_ID


@pytest.mark.parametrize("layout", ["hdfs", "rocksdb", "join"])
def test_the_old_checkpoint_is_left_byte_for_byte_as_it_was(tmp_path, layout):
    build = {"hdfs": lambda root: spark_checkpoint(root, planned=1), "rocksdb": rocksdb_checkpoint}
    old = build.get(layout, join_checkpoint)(tmp_path / "old")
    before = digest(old)
    state = inspect_state(str(old))
    carried = carry_checkpoint(state, str(tmp_path / "new"), OWNER, TARGETS, STARTS)
    assert digest(old) == before
    assert set(state.files) <= set(files_of(tmp_path / "new")) and carried.files == len(state.files) + 5


def test_the_marker_is_written_first_and_the_owner_file_last(tmp_path, monkeypatch):
    old, new = spark_checkpoint(tmp_path / "old"), tmp_path / "new"
    calls: list[tuple[str, str]] = []
    lock = threading.Lock()

    def recorder(name, real):
        def call(self, location, *args, **kwargs):
            result = real(self, location, *args, **kwargs)
            with lock:
                calls.append((name, Path(location).relative_to(new).as_posix()))
            return result

        return call

    for name in ("replace", "create", "delete"):
        monkeypatch.setattr(LocalStore, name, recorder(name, getattr(LocalStore, name)))
    carry_checkpoint(inspect_state(str(old)), str(new), OWNER, TARGETS, STARTS)
    assert calls[0] == ("replace", CARRYING_FILE)
    assert calls[-2:] == [("create", OWNER_FILE), ("delete", CARRYING_FILE)]
    assert {name for name, _ in calls[1:-2]} == {"replace"} and len(calls) == len(files_of(new)) + 2


def test_a_carry_run_again_returns_the_first_one_and_writes_nothing(tmp_path, monkeypatch):
    old, new, first = carried_into(tmp_path)
    written = digest(new)

    def no_write(self, location, *args, **kwargs):
        raise AssertionError(f"{location} written again")

    for name in ("replace", "create", "delete"):
        monkeypatch.setattr(LocalStore, name, no_write)
    again = carry_checkpoint(inspect_state(str(old)), str(new), OWNER, TARGETS, STARTS)
    assert digest(new) == written
    # the same carry, its time as the owner file keeps it (rounded to the millisecond)
    assert again == replace(first, seconds=round(first.seconds, 3))


def test_a_half_written_carry_is_cleared_and_written_whole(tmp_path):
    old, new = spark_checkpoint(tmp_path / "old"), tmp_path / "new"
    put(new, CARRYING_FILE, json.dumps({"from": "elsewhere", "batch_id": 7}))
    put(new, "state/0/0/8.delta", "left by a carry of another batch")
    put(new, "state/5/0/1.delta", "an operator the query does not have")
    put(new, "offsets/7", "v1\n{}\n{}")
    put(new, "metadata", '{"id":"half"}')
    carry_checkpoint(inspect_state(str(old)), str(new), OWNER, TARGETS, STARTS)
    assert set(files_of(new)) == {
        "metadata",
        "offsets/0",
        "offsets/1",
        "commits/1",
        "progress/1",
        OWNER_FILE,
        *state_files(versions=2),
    }
    assert json.loads((new / "metadata").read_text())["id"] != "half"


@pytest.mark.parametrize(
    ("owner", "message"),
    [
        (
            {"pair": "orders", "cluster": "B", "epoch": 4},
            "already belongs to a run that started without state",
        ),
        (
            {**OWNER, "carried_from": {"checkpoint": "/elsewhere", "batch_id": 1}},
            "already belongs to a run carried from batch 1 of /elsewhere, not to a carry of batch 1 of",
        ),
        (
            {**OWNER, "carried_from": {"checkpoint": "OLD", "batch_id": 0}},
            "already belongs to a run carried from batch 0 of OLD, not to a carry of batch 1 of",
        ),
    ],
    ids=["started without state", "carried from another checkpoint", "carried from another batch"],
)
def test_a_checkpoint_owned_by_another_run_is_refused_and_left_alone(tmp_path, owner, message):
    old, new = spark_checkpoint(tmp_path / "old"), tmp_path / "new"
    owner = json.loads(json.dumps(owner).replace('"OLD"', json.dumps(str(old))))
    put(new, OWNER_FILE, json.dumps(owner))
    put(new, "offsets/0", "v1\n{}\n{}")
    before = digest(new)
    with pytest.raises(CheckpointError, match=re.escape(message.replace("OLD", str(old)))):
        carry_checkpoint(inspect_state(str(old)), str(new), OWNER, TARGETS, STARTS)
    assert digest(new) == before


def test_a_plan_that_does_not_cover_the_checkpoint_leaves_only_the_marker(tmp_path):
    old, new = spark_checkpoint(tmp_path / "old"), tmp_path / "new"
    with pytest.raises(CheckpointError, match="orders-1, which the switch's plan does not cover"):
        carry_checkpoint(inspect_state(str(old)), str(new), OWNER, {SOURCE[0]: TARGET[0]}, STARTS)
    assert set(files_of(new)) == {CARRYING_FILE}
    assert clear_interrupted_carry(str(new)) is True and files_of(new) == {}


def test_a_state_file_that_vanished_since_the_check_is_named(tmp_path):
    old, new = spark_checkpoint(tmp_path / "old"), tmp_path / "new"
    state = inspect_state(str(old))
    (old / "state/1/2/2.delta").unlink()
    with pytest.raises(CheckpointError, match=r"state/1/2/2.delta vanished while the state was copied"):
        carry_checkpoint(state, str(new), OWNER, TARGETS, STARTS)
    assert not (new / OWNER_FILE).exists() and (new / CARRYING_FILE).exists()


class FailingStore:
    """``LocalStore.replace`` that writes ``allowed`` files, then refuses every write whose location
    contains ``only`` (every write when empty), as a store that went down or filled up."""

    def __init__(self, allowed: int, only: str = "") -> None:
        self.allowed, self.only = allowed, only
        self.real = LocalStore.replace
        self.lock = threading.Lock()
        self.refused = 0

    def replace(self) -> Callable[..., None]:
        """The function to put in ``LocalStore.replace``'s place."""

        def replace(store: LocalStore, location: str, data: bytes, private: bool = False) -> None:
            with self.lock:
                counted = self.only in location
                if counted and self.allowed <= 0:
                    self.refused += 1
                    raise StoreUnavailable(location, "No space left on device")
                if counted:
                    self.allowed -= 1
            self.real(store, location, data, private)

        return replace


@pytest.mark.parametrize("allowed", [0, 1, 2, 7, 15, 21])
def test_a_store_that_goes_down_half_way_leaves_no_owner_and_the_next_carry_writes_it_whole(
    tmp_path, monkeypatch, allowed
):
    old, new = spark_checkpoint(tmp_path / "old"), tmp_path / "new"
    state = inspect_state(str(old))
    store = FailingStore(allowed)  # 22 writes in all: the marker, 16 state files, 5 others
    monkeypatch.setattr(LocalStore, "replace", store.replace())
    with pytest.raises(StoreUnavailable, match="No space left on device"):
        carry_checkpoint(state, str(new), OWNER, TARGETS, STARTS)
    monkeypatch.setattr(LocalStore, "replace", store.real)
    left = files_of(new)
    assert OWNER_FILE not in left and carried_from(str(new)) is None and carried_batch(str(new)) is None
    assert (CARRYING_FILE in left) is (allowed > 0)  # the marker came first: nothing without it
    assert len(left) == allowed
    carried = carry_checkpoint(state, str(new), OWNER, TARGETS, STARTS)
    assert set(files_of(new)) == {
        "metadata",
        "offsets/0",
        "offsets/1",
        "commits/1",
        "progress/1",
        OWNER_FILE,
        *state_files(versions=2),
    }
    assert carried.files == 21


def test_a_copy_that_stopped_in_the_state_files_is_refused_by_the_job_and_cleared_by_a_submit(
    tmp_path, monkeypatch
):
    old, new = spark_checkpoint(tmp_path / "old"), tmp_path / "new"
    state = inspect_state(str(old))
    store = FailingStore(5, only="/state/")  # 5 state files written, the other 11 refused
    monkeypatch.setattr(LocalStore, "replace", store.replace())
    with pytest.raises(StoreUnavailable):
        carry_checkpoint(state, str(new), OWNER, TARGETS, STARTS)
    monkeypatch.setattr(LocalStore, "replace", store.real)
    assert store.refused == 11
    assert not (new / OWNER_FILE).exists() and (new / "offsets/1").exists()  # the other files went on
    with pytest.raises(
        CheckpointError, match=re.escape(f"checkpoint {new} holds batches but no _owner.json")
    ):
        claim_checkpoint(str(new), "orders", "B", 4, "b1:9092")
    assert not (new / OWNER_FILE).exists()
    assert clear_interrupted_carry(str(new)) is True  # what a run's submit does first
    assert files_of(new) == {}
    assert claim_checkpoint(str(new), "orders", "B", 4, "b1:9092") is False  # an empty checkpoint now


# ---------------------------------------------------------------------------------------------------------
# the carried checkpoint as the job and the status read it


def test_the_carried_batch_is_not_the_run_s_own_until_it_plans_the_next(tmp_path):
    _old, new, _carried = carried_into(tmp_path)

    def claim() -> bool:
        return claim_checkpoint(str(new), "orders", "B", 4, "b1:9092")

    assert claim() is False  # Spark will start at batch 2 from the carried offsets, not "resume" a run
    assert read_progress(str(new)).batch_id is None
    put(new, "offsets/2", offsets_text('{"A.orders":{"0":60,"1":61}}'))  # planned by the new run
    assert claim() is True
    assert read_progress(str(new)).batch_id is None  # planned, not committed
    put(new, "commits/2", 'v1\n{"nextBatchWatermarkMs":0}')
    progress = read_progress(str(new))
    assert (progress.batch_id, progress.offsets, progress.records) == (2, {TARGET[0]: 60, TARGET[1]: 61}, 0)


def test_a_commit_without_its_offsets_is_not_a_batch_of_the_run(tmp_path):
    _old, new, _carried = carried_into(tmp_path)
    put(new, "commits/2", 'v1\n{"nextBatchWatermarkMs":0}')
    assert read_progress(str(new)).batch_id is None
    assert claim_checkpoint(str(new), "orders", "B", 4, "b1:9092") is False


def test_a_carried_checkpoint_belongs_to_its_run_only(tmp_path):
    _old, new, _carried = carried_into(tmp_path)
    with pytest.raises(CheckpointError, match="belongs to"):
        claim_checkpoint(str(new), "orders", "B", 5, "b1:9092")
    with pytest.raises(CheckpointError, match="belongs to"):
        claim_checkpoint(str(new), "orders", "A", 4, "a:9092")


def test_the_carried_position_reads_back_as_the_start_offsets(tmp_path):
    old, new = spark_checkpoint(tmp_path / "old"), tmp_path / "new"
    starts = {**STARTS, TopicPartition("A.orders", 2): 0}  # a partition more on the target
    carry_checkpoint(inspect_state(str(old)), str(new), OWNER, TARGETS, starts)
    position = read_checkpoint(str(new)).position  # its progress entry agrees with offsets/1
    assert position is not None and (position.batch_id, position.offsets) == (1, starts)


def test_a_carry_of_batch_0_writes_no_earlier_offsets(tmp_path):
    old, new, carried = carried_into(tmp_path, committed=1)
    assert carried.batch_id == 0
    assert set(files_of(new)) == {
        "metadata",
        "offsets/0",
        "commits/0",
        "progress/0",
        OWNER_FILE,
        *state_files(versions=1),
    }
    assert claim_checkpoint(str(new), "orders", "B", 4, "b1:9092") is False
    assert read_progress(str(new)).batch_id is None
    put(new, "offsets/1", offsets_text('{"A.orders":{"0":60,"1":61}}'))
    assert claim_checkpoint(str(new), "orders", "B", 4, "b1:9092") is True


def test_a_checkpoint_that_was_not_carried_has_no_carried_batch(tmp_path):
    assert carried_from(str(tmp_path)) is None
    put(tmp_path, OWNER_FILE, json.dumps({"pair": "orders", "cluster": "B", "epoch": 4}))
    assert carried_from(str(tmp_path)) is None and carried_batch(str(tmp_path)) is None
    put(tmp_path, OWNER_FILE, "{half")
    assert carried_from(str(tmp_path)) is None


def test_a_carry_that_was_whole_is_not_cleared(tmp_path):
    _old, new, _carried = carried_into(tmp_path)
    put(new, CARRYING_FILE, "{}")  # a marker whose removal failed after the owner file was written
    before = digest(new)
    assert clear_interrupted_carry(str(new)) is False
    assert digest(new) == before

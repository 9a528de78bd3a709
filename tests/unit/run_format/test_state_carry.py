"""The state carry on local disk: what it copies, rewrites and refuses, and that it is all or nothing.

The layouts are those Spark 3.5 to 4.2 write (seen on 2026-12-05 for a dropDuplicatesWithinWatermark and
windowed-count query): ``state/<operator>/<partition>/<version>.delta`` for the HDFS-backed store,
``<version>.zip`` and a shared ``SSTs/`` folder for RocksDB, ``_metadata/`` files per operator.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from airflow_kafka_failover.core.exceptions import CheckpointError
from airflow_kafka_failover.core.storage.store import LocalStore, StoreUnavailable
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.run_format.layout import claim_checkpoint
from airflow_kafka_failover.run_format.progress import read_progress
from airflow_kafka_failover.run_format.state_carry import (
    CARRYING_FILE,
    carried_from,
    carry_checkpoint,
    clear_interrupted_carry,
    inspect_state,
    rewrite_offsets,
    state_operators,
)

A0, A1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
B0, B1 = TopicPartition("A.orders", 0), TopicPartition("A.orders", 1)
TARGETS = {A0: B0, A1: B1}
STARTS = {B0: 48, B1: 50}
OWNER = {"pair": "orders", "cluster": "B", "epoch": 1, "bootstrap_servers": "b:9092"}


def metadata_line(partitions: int = 2, watermark: int = 5) -> str:
    conf = {"spark.sql.shuffle.partitions": str(partitions)}
    return json.dumps({"batchWatermarkMs": watermark, "batchTimestampMs": 7, "conf": conf})


def write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def stateful_checkpoint(root: Path, batches: int = 2, partitions: int = 2, operators: int = 2) -> Path:
    """A checkpoint with ``batches`` committed batches of a query with ``operators`` stateful operators."""
    write(root, "metadata", '{"id":"5d0c7b0e-4a52-4b1e-9a53-2d5b1a1c0f00"}')
    for batch in range(batches):
        ends = json.dumps({"orders": {"0": 10 * (batch + 1), "1": 11 * (batch + 1)}})
        write(root, f"offsets/{batch}", f"v1\n{metadata_line(partitions)}\n{ends}")
        write(root, f"commits/{batch}", 'v1\n{"nextBatchWatermarkMs":9}')
        write(root, f"offsets/.{batch}.crc", "crc")
    write(root, "sources/0/0", "initial")
    write(root, "_owner.json", json.dumps({"pair": "orders", "cluster": "A", "epoch": 0}))
    write(root, "progress/0", "{}")
    for op in range(operators):
        write(root, f"state/{op}/_metadata/metadata", "operator metadata")
        for part in range(partitions):
            for version in range(1, batches + 1):
                write(root, f"state/{op}/{part}/{version}.delta", f"delta {op}/{part}/{version}")
                write(root, f"state/{op}/{part}/.{version}.delta.crc", "crc")
        write(root, f"state/{op}/0/_metadata/schema", "schema")
    return root


def digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_a_stateless_checkpoint_has_no_operators_and_nothing_to_carry(tmp_path):
    write(tmp_path, "offsets/0", f"v1\n{metadata_line()}\n" + '{"orders":{"0":1}}')
    assert state_operators(str(tmp_path)) == []
    assert inspect_state(str(tmp_path)) is None


def test_the_operators_are_named_in_numeric_order(tmp_path):
    for op in (10, 2, 0):
        write(tmp_path, f"state/{op}/0/1.delta", "x")
    write(tmp_path, "state/notes.txt", "not an operator")
    assert state_operators(str(tmp_path)) == ["0", "2", "10"]


def test_the_files_of_the_last_committed_batch_are_chosen(tmp_path):
    root = stateful_checkpoint(tmp_path / "old", batches=3)
    write(root, "offsets/3", f"v1\n{metadata_line()}\n" + '{"orders":{"0":99,"1":99}}')  # planned only
    write(root, "state/0/0/4.delta", "written by the batch that never committed")
    state = inspect_state(str(root))
    assert state is not None and (state.batch_id, state.operators) == (2, ("0", "1"))
    assert "state/0/0/3.delta" in state.files and "state/0/0/4.delta" not in state.files
    assert "state/0/0/_metadata/schema" in state.files and "state/1/_metadata/metadata" in state.files
    assert not any("/." in name for name in state.files)  # no checksum, no temporary


def test_rocksdb_files_and_a_join_s_store_folders_are_chosen_by_version(tmp_path):
    root = tmp_path / "old"
    write(root, "metadata", '{"id":"x"}')
    for batch in (0, 1):
        write(root, f"offsets/{batch}", f"v1\n{metadata_line(1)}\n" + '{"orders":{"0":5}}')
        write(root, f"commits/{batch}", "v1\n{}")
    for version in (1, 2, 3):
        write(root, f"state/0/0/{version}.zip", "zip")
        write(root, f"state/1/0/left-keyToNumValues/{version}_8c1f.changelog", "changelog")
    write(root, "state/0/0/SSTs/000008-81696597.sst", "shared")
    write(root, "state/1/_metadata/v2/1", "metadata of batch 1")
    write(root, "state/1/_metadata/v2/2", "metadata of batch 2, never committed")
    state = inspect_state(str(root))
    assert state is not None
    assert set(state.files) == {
        "state/0/0/1.zip",
        "state/0/0/2.zip",
        "state/0/0/SSTs/000008-81696597.sst",
        "state/1/0/left-keyToNumValues/1_8c1f.changelog",
        "state/1/0/left-keyToNumValues/2_8c1f.changelog",
        "state/1/_metadata/v2/1",
    }


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda root: (root / "offsets" / "0").unlink(), "offsets/0: the offsets of batch 0 is missing"),
        (lambda root: write(root, "offsets/1", "v2\n{}\n{}"), "unsupported offset log version 'v2'"),
        (lambda root: write(root, "commits/1", "v2\n{}"), "commit log version 'v2'"),
        (lambda root: write(root, "commits/1", "v1\n{oops"), "corrupt commit metadata"),
        (lambda root: (root / "state" / "1" / "1" / "2.delta").unlink(), "no file of state version 2"),
        (
            lambda root: [p.unlink() for p in (root / "state" / "0" / "1").iterdir()],
            "the state of partition 1 is missing",
        ),
        (lambda root: write(root, "offsets/1", "v1\n{not json\n{}"), "corrupt metadata JSON"),
    ],
)
def test_a_damaged_checkpoint_is_refused_naming_the_file(tmp_path, damage, message):
    root = stateful_checkpoint(tmp_path / "old")
    damage(root)
    with pytest.raises(CheckpointError, match=message) as refused:
        inspect_state(str(root))
    assert "job.state: fresh" in str(refused.value)  # and what to do


def test_a_query_that_never_committed_a_batch_has_no_state_to_carry(tmp_path):
    root = stateful_checkpoint(tmp_path / "old")
    for commit in (root / "commits").iterdir():
        commit.unlink()
    assert inspect_state(str(root)) is None


def test_a_batch_that_is_not_committed_cannot_be_carried(tmp_path):
    root = stateful_checkpoint(tmp_path / "old")
    with pytest.raises(CheckpointError, match="batch 5, where the switch's plan starts, is not committed"):
        inspect_state(str(root), 5)


def test_the_offsets_are_rewritten_to_the_target_s_topics_and_start_offsets():
    text = f"v1\n{metadata_line()}\n" + '{"orders":{"0":50,"1":51}}'
    rewritten, offsets = rewrite_offsets("offsets/1", text, TARGETS, STARTS)
    lines = rewritten.split("\n")
    assert lines[:2] == ["v1", metadata_line()]  # the watermark and the session conf kept as they were
    assert json.loads(lines[2]) == {"A.orders": {"0": 48, "1": 50}}
    assert offsets == {B0: 48, B1: 50}


def test_partitions_the_old_run_never_read_join_the_line_of_their_topic():
    text = f"v1\n{metadata_line()}\n" + '{"orders":{"0":50}}'
    starts = {**STARTS, TopicPartition("orders", 0): 7}  # the target's own topic, never read before
    rewritten, offsets = rewrite_offsets("offsets/1", text, {A0: B0}, starts)
    assert json.loads(rewritten.split("\n")[2]) == {"A.orders": {"0": 48, "1": 50}, "orders": {"0": 7}}
    assert len(offsets) == 3


def test_a_line_that_reads_what_the_plan_does_not_cover_is_refused():
    text = f"v1\n{metadata_line()}\n" + '{"payments":{"0":3}}'
    with pytest.raises(CheckpointError, match="payments-0, which the switch's plan does not cover"):
        rewrite_offsets("offsets/1", text, TARGETS, STARTS)


def test_a_target_with_fewer_partitions_is_refused():
    text = f"v1\n{metadata_line()}\n" + '{"orders":{"0":50,"1":51}}'
    with pytest.raises(CheckpointError, match="the target does not have"):
        rewrite_offsets("offsets/1", text, TARGETS, {B0: 48})


def test_two_kafka_sources_keep_their_lines_and_a_no_offset_source_its_dash():
    text = "\n".join(["v1", metadata_line(), '{"orders":{"0":50}}', "-", '{"orders":{"1":51}}'])
    rewritten, _ = rewrite_offsets("offsets/1", text, TARGETS, STARTS)
    assert rewritten.split("\n")[2:] == ['{"A.orders":{"0":48}}', "-", '{"A.orders":{"1":50}}']


def test_a_new_topic_that_no_single_source_reads_is_refused():
    text = "\n".join(["v1", metadata_line(), '{"orders":{"0":50}}', '{"orders":{"1":51}}'])
    starts = {**STARTS, TopicPartition("orders", 0): 7}
    with pytest.raises(CheckpointError, match="cannot be placed in one of them"):
        rewrite_offsets("offsets/1", text, TARGETS, starts)


def test_a_carry_copies_the_batch_rewrites_its_positions_and_leaves_the_old_checkpoint_alone(tmp_path):
    old, new = stateful_checkpoint(tmp_path / "old"), tmp_path / "new"
    before = digest(old)
    state = inspect_state(str(old))
    carried = carry_checkpoint(state, str(new), OWNER, TARGETS, STARTS)
    assert digest(old) == before
    names = set(digest(new))
    assert names == {
        "_owner.json",
        "metadata",
        "offsets/0",
        "offsets/1",
        "commits/1",
        "progress/1",
        *state.files,
    }
    assert json.loads((new / "offsets/1").read_text().split("\n")[2]) == {"A.orders": {"0": 48, "1": 50}}
    assert (
        json.loads((new / "metadata").read_text())["id"] != json.loads((old / "metadata").read_text())["id"]
    )
    first = json.loads((new / "progress/1").read_text())
    assert (first["epoch"], first["carried"], first["records_total"]) == (1, True, 0)
    owner = json.loads((new / "_owner.json").read_text())
    assert owner["carried_from"]["batch_id"] == 1 and owner["carried_from"]["checkpoint"] == str(old)
    assert (carried.files, carried.operators) == (len(names) - 1, ("0", "1"))
    # the carried batch is not one of the new run's own
    assert claim_checkpoint(str(new), "orders", "B", 1, "b:9092") is False
    assert read_progress(str(new)).batch_id is None
    write(new, "offsets/2", f"v1\n{metadata_line()}\n" + '{"A.orders":{"0":60,"1":60}}')
    write(new, "commits/2", "v1\n{}")
    assert claim_checkpoint(str(new), "orders", "B", 1, "b:9092") is True
    assert read_progress(str(new)).batch_id == 2


def test_a_second_carry_of_the_same_batch_does_nothing(tmp_path):
    old, new = stateful_checkpoint(tmp_path / "old"), tmp_path / "new"
    state = inspect_state(str(old))
    carry_checkpoint(state, str(new), OWNER, TARGETS, STARTS)
    written = digest(new)
    again = carry_checkpoint(state, str(new), OWNER, TARGETS, STARTS)
    assert digest(new) == written and again == carried_from(str(new))


def test_a_checkpoint_of_another_run_is_not_carried_into(tmp_path):
    old, new = stateful_checkpoint(tmp_path / "old"), tmp_path / "new"
    write(new, "_owner.json", json.dumps({"pair": "orders", "cluster": "B", "epoch": 1}))
    with pytest.raises(CheckpointError, match="already belongs to a run that started without state"):
        carry_checkpoint(inspect_state(str(old)), str(new), OWNER, TARGETS, STARTS)


def test_files_of_unknown_origin_are_never_copied_over(tmp_path):
    old, new = stateful_checkpoint(tmp_path / "old"), tmp_path / "new"
    write(new, "notes.txt", "somebody's")
    with pytest.raises(CheckpointError, match="were not written by a carry or a run of this provider"):
        carry_checkpoint(inspect_state(str(old)), str(new), OWNER, TARGETS, STARTS)
    assert (new / "notes.txt").read_text() == "somebody's"


def test_a_store_that_fails_half_way_leaves_no_checkpoint_a_run_could_start(tmp_path, monkeypatch):
    old, new = stateful_checkpoint(tmp_path / "old"), tmp_path / "new"
    state = inspect_state(str(old))
    real = LocalStore.replace

    def failing(self, location, data, private=False):
        if location.endswith("state/1/1/2.delta"):
            raise StoreUnavailable(location, "disk full")
        real(self, location, data, private)

    monkeypatch.setattr(LocalStore, "replace", failing)
    with pytest.raises(StoreUnavailable, match="disk full"):
        carry_checkpoint(state, str(new), OWNER, TARGETS, STARTS)
    monkeypatch.setattr(LocalStore, "replace", real)
    assert not (new / "_owner.json").exists() and (new / CARRYING_FILE).exists()
    assert (new / "offsets" / "1").exists()  # the other files went on being copied
    with pytest.raises(CheckpointError, match="holds batches but no _owner.json"):  # a run would be refused
        claim_checkpoint(str(new), "orders", "B", 1, "b:9092")
    # the next carry clears the half copy and writes it whole
    carry_checkpoint(state, str(new), OWNER, TARGETS, STARTS)
    assert (new / "_owner.json").exists() and not (new / CARRYING_FILE).exists()


def test_a_run_started_without_state_clears_an_interrupted_carry(tmp_path):
    new = tmp_path / "new"
    write(new, CARRYING_FILE, "{}")
    write(new, "state/0/0/1.delta", "left by the interrupted carry")
    write(new, "offsets/1", "v1\n{}\n{}")
    assert clear_interrupted_carry(str(new)) is True
    assert list(new.rglob("*.delta")) == [] and not (new / CARRYING_FILE).exists()
    assert clear_interrupted_carry(str(new)) is False
    assert claim_checkpoint(str(new), "orders", "B", 1, "b:9092") is False  # an empty checkpoint now

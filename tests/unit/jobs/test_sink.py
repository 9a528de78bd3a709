from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.storage.store import create_json
from airflow_kafka_failover.jobs.sink import (
    COLUMNS,
    COMPLETE,
    FILE_COLUMNS,
    ParquetBatchSink,
    SinkReader,
    batch_dir,
    batch_dirs,
    epoch_cluster,
    epoch_file,
    read_sink,
    rows_written_after,
)

# The ten columns of a record, as files written before 2026-12-01 held them all.
SCHEMA = pa.schema(
    [
        ("record_id", pa.string()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("source_cluster", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp_ms", pa.int64()),
        ("epoch", pa.int32()),
        ("batch_id", pa.int64()),
    ]
)
# The columns of the files the sink writes now (the others are its folders).
FILE_SCHEMA = pa.schema([column for column in SCHEMA if column.name in FILE_COLUMNS])


def row(
    record_id: str | None, offset: int, cluster: str = "A", topic: str = "orders", partition: int = 0
) -> dict:
    return {
        "record_id": record_id,
        "key": None if record_id is None else record_id.encode(),
        "value": f'{{"id": "{record_id}", "offset": {offset}}}'.encode(),
        "source_cluster": cluster,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp_ms": 1_700_000_000_000 + offset,
    }


def write_batch(
    root: Path,
    epoch: int,
    batch: int,
    rows: list[dict],
    name: str = "part-00000.parquet",
    complete: bool = True,
    ten_columns: bool = False,
) -> Path:
    """A batch folder as the sink writes it (the epoch's cluster in its ``_epoch.json``), or with
    ``ten_columns`` as it wrote them before 2026-12-01 (every column in the files, no epoch file)."""
    directory = Path(batch_dir(str(root), epoch, batch))
    directory.mkdir(parents=True, exist_ok=True)
    if ten_columns:
        table = pa.Table.from_pylist([{**r, "epoch": epoch, "batch_id": batch} for r in rows], schema=SCHEMA)
    else:
        for cluster in {r["source_cluster"] for r in rows}:
            if not create_json(epoch_file(str(root), epoch), {"epoch": epoch, "source_cluster": cluster}):
                assert epoch_cluster(str(root), epoch) == cluster, "one cluster per epoch"
        table = pa.Table.from_pylist(rows, schema=FILE_SCHEMA)
    path = directory / name
    pq.write_table(table, path)
    if complete:
        (directory / COMPLETE).write_text("")
    return path


def test_schema_matches_the_sink_columns():
    assert tuple(SCHEMA.names) == COLUMNS
    assert FILE_COLUMNS == ("record_id", "key", "value", "topic", "partition", "offset", "timestamp_ms")


def test_the_epoch_file_names_the_epochs_cluster(tmp_path):
    assert epoch_file("s3a://bucket/sink", 3) == "s3a://bucket/sink/epoch=3/_epoch.json"
    assert epoch_cluster(str(tmp_path), 3) is None
    sink = ParquetBatchSink(str(tmp_path), 3, "B")
    sink.record_epoch()
    assert epoch_cluster(str(tmp_path), 3) == "B"
    ParquetBatchSink(str(tmp_path), 3, "B").record_epoch()  # a second run of the epoch: the same file
    assert epoch_cluster(str(tmp_path), 3) == "B"


def test_an_epoch_folder_of_another_cluster_is_refused_by_name(tmp_path):
    ParquetBatchSink(str(tmp_path), 3, "A").record_epoch()
    before = Path(epoch_file(str(tmp_path), 3)).read_bytes()
    with pytest.raises(ConfigError) as refused:
        ParquetBatchSink(str(tmp_path), 3, "B").record_epoch()
    message = str(refused.value)
    assert epoch_file(str(tmp_path), 3) in message
    assert "'A'" in message and "'B'" in message and "job.sink_root" in message
    assert Path(epoch_file(str(tmp_path), 3)).read_bytes() == before  # left as it was


@pytest.mark.parametrize(
    ("content", "problem"),
    [("not json", "must be JSON"), ('{"epoch": 3}', "names no source cluster"), ("[1]", "names no")],
)
def test_a_broken_epoch_file_is_named(tmp_path, content, problem):
    location = Path(epoch_file(str(tmp_path), 3))
    location.parent.mkdir(parents=True)
    location.write_text(content)
    with pytest.raises(ConfigError, match=problem) as refused:
        epoch_cluster(str(tmp_path), 3)
    assert str(location) in str(refused.value)


def test_batches_written_with_ten_columns_are_read_beside_the_new_ones(tmp_path):
    write_batch(tmp_path, 0, 0, [row("r1", 0), row("r2", 1)], ten_columns=True)
    write_batch(tmp_path, 1, 0, [row("r2", 1, cluster="B"), row("r3", 2, cluster="B")])
    contents = read_sink(tmp_path)
    assert contents.rows_by_cluster == {"A": 2, "B": 2}
    assert (contents.duplicates, contents.duplicates_by_epoch) == (1, {1: 1})
    assert contents.records["r1"]["source_cluster"] == "A"
    assert (contents.records["r3"]["source_cluster"], contents.records["r3"]["batch_id"]) == ("B", 0)


def test_paths():
    assert batch_dir("/sink", 2, 17) == "/sink/epoch=2/batch=17"
    assert batch_dir("s3a://bucket/sink", 2, 17) == "s3a://bucket/sink/epoch=2/batch=17"


# ---------------------------------------------------------------- batch_dirs


def test_batch_dirs_of_missing_root_is_empty(tmp_path):
    assert batch_dirs(tmp_path / "missing") == []


def test_batch_dirs_numeric_order_and_junk_ignored(tmp_path):
    for epoch, batch in [(10, 0), (2, 10), (2, 9), (0, 1)]:
        Path(batch_dir(str(tmp_path), epoch, batch)).mkdir(parents=True)
        (Path(batch_dir(str(tmp_path), epoch, batch)) / COMPLETE).write_text("")
    (tmp_path / "epoch=x" / "batch=1").mkdir(parents=True)
    (tmp_path / "epoch=4").write_text("a file, not a directory")
    (tmp_path / "epoch=2" / "batch=11").write_text("a file")
    (tmp_path / "epoch=2" / "batch=12.tmp").mkdir()
    (tmp_path / "epoch=2" / "batch=13").mkdir()  # a write that crashed: no _SUCCESS
    (tmp_path / "epoch=2" / "_temporary").mkdir()
    (tmp_path / "epoch=-1" / "batch=0").mkdir(parents=True)
    assert batch_dirs(tmp_path) == [
        (0, 1, str(tmp_path / "epoch=0" / "batch=1")),
        (2, 9, str(tmp_path / "epoch=2" / "batch=9")),
        (2, 10, str(tmp_path / "epoch=2" / "batch=10")),
        (10, 0, str(tmp_path / "epoch=10" / "batch=0")),
    ]


# ---------------------------------------------------------------- read_sink


def test_read_sink_of_empty_root(tmp_path):
    contents = read_sink(tmp_path)
    assert (contents.rows, contents.duplicates, contents.without_id) == (0, 0, 0)
    assert contents.duplicates_by_epoch == {}
    assert contents.records == {}
    assert contents.rows_by_cluster == {}


def test_read_sink_counts_and_deduplicates(tmp_path):
    write_batch(tmp_path, 0, 0, [row("r1", 0), row("r2", 1), row(None, 2)])
    write_batch(tmp_path, 0, 1, [row("r3", 3), row("r2", 1)])  # r2 again in a later batch
    write_batch(tmp_path, 1, 0, [row("r3", 40, cluster="B"), row("r4", 41, cluster="B"), row(None, 42, "B")])
    contents = read_sink(tmp_path)
    assert contents.rows == 8
    assert contents.duplicates == 2
    assert contents.duplicates_by_epoch == {0: 1, 1: 1}  # each under the epoch that wrote it again
    assert contents.without_id == 2
    assert contents.rows_by_cluster == {"A": 5, "B": 3}
    assert contents.record_ids == {"r1", "r2", "r3", "r4"}
    assert list(contents.records) == ["r1", "r2", "r3", "r4"]
    assert contents.records["r3"] == {
        "record_id": "r3",
        "key": b"r3",
        "value": b'{"id": "r3", "offset": 3}',
        "source_cluster": "A",
        "topic": "orders",
        "partition": 0,
        "offset": 3,
        "timestamp_ms": 1_700_000_000_003,
        "epoch": 0,
        "batch_id": 1,
    }


def test_read_sink_keeps_the_first_occurrence_in_epoch_then_batch_order(tmp_path):
    # Written newest first, so directory creation order cannot explain the result.
    write_batch(tmp_path, 10, 0, [row("r1", 100, cluster="B")])
    write_batch(tmp_path, 2, 10, [row("r1", 20)])
    write_batch(tmp_path, 2, 9, [row("r1", 9)])
    contents = read_sink(tmp_path)
    assert contents.records["r1"]["epoch"] == 2
    assert contents.records["r1"]["batch_id"] == 9
    assert contents.records["r1"]["offset"] == 9
    assert contents.duplicates == 2
    assert contents.duplicates_by_epoch == {2: 1, 10: 1}
    assert contents.rows_by_cluster == {"A": 2, "B": 1}


def test_read_sink_orders_rows_of_a_file_by_topic_partition_offset(tmp_path):
    write_batch(
        tmp_path,
        0,
        0,
        [
            row("r1", 7, topic="orders", partition=1),
            row("r1", 9, topic="orders", partition=0),
            row("r1", 3, topic="orders", partition=1),
            row("r1", 1, topic="zeta", partition=0),
        ],
    )
    contents = read_sink(tmp_path)
    assert (contents.records["r1"]["partition"], contents.records["r1"]["offset"]) == (0, 9)
    assert contents.duplicates == 3


def test_read_sink_reads_every_part_file_and_skips_incomplete_batches(tmp_path):
    write_batch(tmp_path, 0, 0, [row("r1", 0)], name="part-00000.parquet")
    write_batch(tmp_path, 0, 0, [row("r2", 1)], name="part-00001.parquet")
    write_batch(tmp_path, 0, 1, [row("r9", 5)], complete=False)  # a crashed write: never read
    contents = read_sink(tmp_path)
    assert contents.rows == 2
    assert contents.record_ids == {"r1", "r2"}


def test_read_sink_keeps_only_the_asked_columns(tmp_path):
    write_batch(tmp_path, 0, 0, [row("r1", 0), row("r1", 1)])
    contents = read_sink(tmp_path, columns=("record_id", "value"))
    assert contents.records == {"r1": {"record_id": "r1", "value": b'{"id": "r1", "offset": 0}'}}
    assert contents.duplicates == 1
    assert contents.rows_by_cluster == {"A": 2}


def test_a_reader_polling_a_growing_sink_reads_each_complete_batch_once(tmp_path, monkeypatch):
    write_batch(tmp_path, 0, 0, [row("r1", 0), row("r2", 1)])
    write_batch(tmp_path, 0, 1, [row("r3", 2)], complete=False)  # being written
    reader = SinkReader()
    assert reader(tmp_path).record_ids == {"r1", "r2"}
    (Path(batch_dir(str(tmp_path), 0, 1)) / COMPLETE).write_text("")  # its write committed
    write_batch(tmp_path, 1, 0, [row("r2", 1, cluster="B"), row("r4", 7, cluster="B")])
    opened: list[str] = []
    real_read = pq.read_table
    monkeypatch.setattr(
        pq, "read_table", lambda source, **kw: opened.append(source) or real_read(source, **kw)
    )
    contents = reader(tmp_path)
    assert len(opened) == 2  # the two batches completed since; batch 0 of epoch 0 came from memory
    assert contents.record_ids == {"r1", "r2", "r3", "r4"}
    assert (contents.rows, contents.duplicates, contents.duplicates_by_epoch) == (5, 1, {1: 1})
    # The same counts as a fresh read of the whole sink, and again on the next poll.
    fresh = read_sink(tmp_path)
    again = reader(tmp_path)
    for seen in (fresh, again):
        assert (seen.rows, seen.duplicates, seen.records) == (
            contents.rows,
            contents.duplicates,
            contents.records,
        )
    assert len(opened) == 2 + 3  # the fresh read opened all three; the next poll opened nothing


def test_rows_written_after_a_batch_count_only_that_epoch(tmp_path):
    write_batch(tmp_path, 2, 3, [row("a", 1), row("b", 2)])
    write_batch(tmp_path, 2, 4, [row("c", 3)])
    write_batch(tmp_path, 2, 4, [row("d", 4)], name="part-00001.parquet")
    write_batch(tmp_path, 3, 9, [row("e", 5)])
    assert rows_written_after(tmp_path, 2, 3) == 2
    assert rows_written_after(tmp_path, 2, 2) == 4
    assert rows_written_after(tmp_path, 2, 4) == 0
    assert rows_written_after(tmp_path, 3, -1) == 1


def test_batch_statistics_come_from_the_parquet_footers(tmp_path):
    from airflow_kafka_failover.jobs.sink import footer_stats as _footer_stats

    write_batch(tmp_path, 1, 0, [row("a", 5, partition=0), row(None, 6, partition=0)], name="part-0.parquet")
    write_batch(tmp_path, 1, 0, [row("b", 9, partition=1)], name="part-1.parquet")
    write_batch(tmp_path, 1, 0, [row("c", 3, topic="B.orders", partition=1)], name="part-2.parquet")
    stats = _footer_stats(batch_dir(str(tmp_path), 1, 0))
    base = 1_700_000_000_000
    assert stats == {
        "records": 4,
        "without_id": 1,
        "max_timestamp_ms": {"orders": {"0": base + 6, "1": base + 9}, "B.orders": {"1": base + 3}},
        # The newest record offset per partition: the planner's gap measure skips what lies beyond it.
        "max_offset": {"orders": {"0": 6, "1": 9}, "B.orders": {"1": 3}},
    }


def test_batch_statistics_need_one_kafka_partition_per_file(tmp_path):
    from airflow_kafka_failover.jobs.sink import footer_stats as _footer_stats

    write_batch(tmp_path, 1, 0, [row("a", 5, partition=0), row("b", 6, partition=1)])
    assert _footer_stats(batch_dir(str(tmp_path), 1, 0)) is None


def test_a_batch_whose_footers_cannot_tell_gets_its_statistics_from_its_rows(tmp_path):
    from airflow_kafka_failover.jobs.sink import batch_stats, footer_stats, row_stats

    # Partitions mixed in one file (the footers keep one min and max per column), and a file of its own.
    write_batch(
        tmp_path,
        1,
        0,
        [
            row("a", 5, partition=0),
            row(None, 8, partition=1),
            row("c", 7, partition=0),
            row("d", 2, partition=1),
        ],
        name="part-0.parquet",
    )
    write_batch(
        tmp_path,
        1,
        0,
        [row("e", 9, partition=0), row("f", 1, topic="B.orders", partition=1)],
        name="part-1.parquet",
    )
    batch = batch_dir(str(tmp_path), 1, 0)
    assert footer_stats(batch) is None
    base = 1_700_000_000_000
    assert (
        batch_stats(batch)
        == row_stats(batch)
        == {
            "records": 6,
            "without_id": 1,
            "max_timestamp_ms": {"orders": {"0": base + 9, "1": base + 8}, "B.orders": {"1": base + 1}},
            "max_offset": {"orders": {"0": 9, "1": 8}, "B.orders": {"1": 1}},
        }
    )


def test_batch_statistics_prefer_the_footers(tmp_path, monkeypatch):
    from airflow_kafka_failover.jobs import sink

    write_batch(tmp_path, 1, 0, [row("a", 5, partition=0)])
    monkeypatch.setattr(
        sink, "row_stats", lambda batch: pytest.fail("read the rows although the footers tell")
    )
    assert sink.batch_stats(batch_dir(str(tmp_path), 1, 0))["records"] == 1


class _FolderStore:
    """A remote store (``mem://bucket``) over a local folder, counting the bytes it hands out."""

    def __init__(self, folder: Path, ranged: bool) -> None:
        self.folder = folder
        self.bytes_read = 0
        if ranged:
            self.read_tail = self._read_tail

    def _local(self, location: str) -> Path:
        return self.folder / location.removeprefix("mem://bucket/")

    def read(self, location: str) -> bytes:
        data = self._local(location).read_bytes()
        self.bytes_read += len(data)
        return data

    def _read_tail(self, location: str, size: int) -> bytes:
        data = self._local(location).read_bytes()[-size:]
        self.bytes_read += len(data)
        return data

    def exists(self, location: str) -> bool:
        return self._local(location).exists()

    def names(self, folder: str) -> list[str]:
        local = self._local(folder)
        return sorted(p.name for p in local.iterdir()) if local.is_dir() else []


def test_batch_statistics_of_a_remote_batch_read_only_the_footers_where_the_store_can(tmp_path):
    from airflow_kafka_failover.core.storage import store
    from airflow_kafka_failover.jobs.sink import footer_stats as _footer_stats

    rows = [row(f"r{n}", n, partition=n % 2) for n in range(20_000)]
    write_batch(tmp_path, 1, 0, [r for r in rows if r["partition"] == 0], name="part-0.parquet")
    write_batch(tmp_path, 1, 0, [r for r in rows if r["partition"] == 1], name="part-1.parquet")
    sizes = [p.stat().st_size for p in tmp_path.rglob("*.parquet")]
    local = _footer_stats(batch_dir(str(tmp_path), 1, 0))
    assert local is not None and local["records"] == 20_000
    for ranged in (True, False):
        store.forget_all()
        remote = _FolderStore(tmp_path, ranged)
        store.register("mem://bucket", lambda root, remote=remote: remote)
        try:
            assert _footer_stats(batch_dir("mem://bucket", 1, 0)) == local
        finally:
            store.forget_all()
        # A ranged read takes each file's last 64 KB; without one, every byte of every file.
        assert remote.bytes_read == sum(min(size, 64 * 1024) if ranged else size for size in sizes)
    assert min(sizes) > 64 * 1024  # so that the ranged reads read less

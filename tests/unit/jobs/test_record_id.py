"""The record id column: the record-id jar's JSON reader agrees with ``get_json_object`` on every value.

The equivalence test runs a real local SparkSession with the jar ``make setup`` compiles (``spark``
marker): a few thousand values, hand-written edge cases and generated documents, valid and broken, are
read both ways. It also checks that both paths are taken (the reader answers most valid records itself
and leaves the rest), so it cannot pass by one side never answering. The same session checks the
``batch_id`` column of a job of your own and the packaged sink's files and writer options (one Spark session
for the job's columns: each costs a JVM start).
"""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from airflow_kafka_failover.jobs import record_id
from airflow_kafka_failover.jobs.sink import batch_id_column
from airflow_kafka_failover.run_format.settings import RECORD_ID_FROM_KEY

EDGE_CASES = [
    '{"id": "r-1"}',
    '{"id":"r-1"}',
    '  {"id" : "r-1" }  ',
    '\n{\t"id":\r"r-1"}\n',
    '{"id": ""}',
    '{"id": "a\\"b"}',
    '{"id": "a\\\\b"}',
    '{"id": "\\u00e9t\\u00E9"}',
    '{"id": "\\ud83d\\ude00"}',
    '{"id": "tab\\there"}',
    '{"id": "slash\\/"}',
    '{"\\u0069d": "escaped name"}',
    '{"id": "é ☃ 😀"}',
    '{"id": "first", "id": "second"}',
    '{"id": 42, "id": "second"}',
    '{"x": {"id": "nested"}, "id": "top"}',
    '{"x": {"id": "nested"}}',
    '{"id": 42}',
    '{"id": -1.5e3}',
    '{"id": true}',
    '{"id": null}',
    '{"id": {"a": 1}}',
    '{"id": ["a"]}',
    '{"ids": "no"}',
    '{"Id": "case"}',
    "{}",
    "[]",
    '["id"]',
    '"id"',
    "42",
    "",
    " ",
    "null",
    '{"id": "a"} trailing',
    '{"id": "a"}{"id": "b"}',
    '{"id": "a",}',
    '{"id": "a" "b"}',
    '{"id": "a", "n": 01}',
    '{"id": "a", "n": 1.}',
    '{"id": "a", "n": .5}',
    '{"id": "a", "n": 1-2}',
    '{"id": "a", "n": +1}',
    '{"id": "a", "n": NaN}',
    '{"id": "a", "n": tru}',
    "{'id': 'single'}",
    '{id: "unquoted"}',
    '{"id": "a", /* c */ "b": 1}',
    '{"id": "raw\ttab"}',
    '{"id": "raw\nnewline"}',
    '{"id": "bad \\x escape"}',
    '{"id": "short \\u12"}',
    '{"id": "a"',
    '{"id": "a',
    '{"id"',
    "{",
    '{"id": "a", "deep": ' + "[" * 600 + "]" * 600 + "}",
    '{"id": "a", "deep": ' + "[" * 100 + "]" * 100 + "}",
    '{"a": [1, 2.5, -0, 0.0e0, 1E+2, true, false, null, "s", {"b": []}], "id": "after"}',
]

# Values that are not well-formed UTF-8: a stray continuation byte, a truncated sequence, an overlong form,
# an encoded surrogate, a code point above U+10FFFF, a byte that never starts a sequence; in the id and in
# another member. Both paths read the value cast to a string, where Spark's decoding replaces what is bad.
RAW_BYTES = [
    *(
        b'{"id": "a' + bad + b'b"}'
        for bad in (b"\x80", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xff")
    ),
    *(b'{"x": "' + bad + b'", "id": "ok"}' for bad in (b"\x80", b"\xe2\x82", b"\xf0\x80\x80\xaf", b"\xfe")),
    b'{"id": "ok"}\xa0',
    b'{"id": "\xc3\xa9\xe2\x98\x83\xf0\x9f\x98\x80", "x": "\xf4\x8f\xbf\xbf"}',
]


def generated(count: int, seed: int) -> list[str]:
    """JSON documents of varied shape, then about a third of them broken by one mutation."""
    rng = random.Random(seed)
    alphabet = 'abcxyz0189 "\\/\t\né☃😀{}[],:'

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))

    def value(depth: int):
        kind = rng.randint(0, 7 if depth < 3 else 4)
        return [
            text,
            lambda: rng.randint(-(10**6), 10**6),
            lambda: rng.random() * 1e6,
            lambda: None,
            lambda: rng.choice([True, False]),
            lambda: {rng.choice(["id", "x", "y"]): value(depth + 1)},
            lambda: [value(depth + 1) for _ in range(rng.randint(0, 3))],
            text,
        ][kind]()

    values = []
    for _ in range(count):
        doc = {rng.choice(["id", "x", "y", "z"]): value(0) for _ in range(rng.randint(0, 4))}
        if rng.random() < 0.6:
            doc["id"] = text()
        encoded = json.dumps(doc, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 1]))
        if rng.random() < 0.35 and encoded:
            at = rng.randrange(len(encoded))
            encoded = rng.choice(
                [
                    encoded[:at],
                    encoded[:at] + encoded[at + 1 :],
                    encoded[:at] + rng.choice('"{}[],:\\x') + encoded[at:],
                ]
            )
        values.append(encoded)
    return values


@pytest.mark.spark
def test_the_reader_agrees_with_get_json_object_on_every_value(spark):
    from pyspark.sql import functions as F

    assert record_id.register_reader(spark, "id")
    values = [v.encode("utf-8") for v in EDGE_CASES + generated(4000, seed=20261122)] + RAW_BYTES
    frame = spark.createDataFrame([(v,) for v in values], "value binary")
    rows = frame.select(
        F.col("value").cast("string").alias("text"),
        record_id.record_id_column("id", reader=True).alias("combined"),
        record_id.record_id_column("id", reader=False).alias("reference"),
        F.call_function(record_id.FUNCTION, F.col("value").cast("string"), F.lit("id")).alias("reader"),
    ).collect()
    disagreements = [(row.text, row.combined, row.reference) for row in rows if row.combined != row.reference]
    assert not disagreements, disagreements[:10]
    wrong = [
        (row.text, row.reader, row.reference)
        for row in rows
        if row.reader is not None and row.reader != row.reference
    ]
    assert not wrong, wrong[:10]
    answered = sum(row.reader is not None for row in rows)
    left = sum(row.reader is None and row.reference is not None for row in rows)
    assert answered > 1000 and left > 50, (answered, left)
    by_text = {row.text: row for row in rows}
    assert by_text['{"id": "first", "id": "second"}'].reader == "first"
    assert by_text['{"x": {"id": "nested"}, "id": "top"}'].reader == "top"
    assert by_text['{"id": "\\ud83d\\ude00"}'].reader == "😀"
    assert by_text['{"id": "é☃😀", "x": "\U0010ffff"}'].reader == "é☃😀"
    assert by_text['{"id": 42}'].reader is None and by_text['{"id": 42}'].combined == "42"


@pytest.mark.spark
def test_a_different_field_name_is_read_too(spark):
    from pyspark.sql import functions as F

    assert record_id.register_reader(spark, "order_id")
    frame = spark.createDataFrame(
        [(b'{"id": "x", "order_id": "o-7"}',), (b'{"order_id": 7}',)], "value binary"
    )
    rows = frame.select(record_id.record_id_column("order_id", reader=True).alias("id")).collect()
    assert [row.id for row in rows] == ["o-7", "7"]
    assert F is not None


class FakeUdfs:
    def __init__(self, error: Exception | None = None) -> None:
        self.error, self.registered = error, []

    def registerJavaFunction(self, name, class_name, return_type):  # the PySpark name
        if self.error:
            raise self.error
        self.registered.append((name, class_name))


def test_keys_and_json_paths_do_not_use_the_reader(caplog):
    caplog.set_level("INFO", logger="airflow_kafka_failover.job")
    spark = SimpleNamespace(udf=FakeUdfs())
    assert not record_id.register_reader(spark, RECORD_ID_FROM_KEY)
    assert not record_id.register_reader(spark, "order.id")
    assert not record_id.register_reader(spark, "items[0]")
    assert spark.udf.registered == []
    assert "Kafka keys" in caplog.text and "$.order.id with get_json_object" in caplog.text


def test_a_missing_jar_falls_back_to_get_json_object_and_says_so(caplog):
    caplog.set_level("INFO", logger="airflow_kafka_failover.job")
    spark = SimpleNamespace(udf=FakeUdfs(RuntimeError("Can not load class akf.jobs.JsonStringField\nmore")))
    assert not record_id.register_reader(spark, "id")
    assert "record-id jar is not on the classpath (RuntimeError: Can not load class" in caplog.text
    ok = SimpleNamespace(udf=FakeUdfs())
    assert record_id.register_reader(ok, "id")
    assert ok.udf.registered == [(record_id.FUNCTION, record_id.UDF_CLASS)]


@pytest.mark.spark
def test_every_batch_runs_the_same_generated_code(spark):
    """The batch id column holds the batch's id, and the Java code Spark generates for a batch is the same
    for every batch id: a numeric constant would be compiled into it, and every batch would run new code
    that Spark compiles again and the JVM interprets until its JIT has caught up."""
    from pyspark.sql import functions as F

    rows = spark.range(3).select(F.col("id"), F.lit(0).alias("epoch"), F.lit("A").alias("source_cluster"))

    def code_and_ids(batch_id: int) -> tuple[list[str], list[int]]:
        batch = rows.withColumn("batch_id", batch_id_column(batch_id))
        plan = batch._jdf.queryExecution().executedPlan()
        subtrees = spark._jvm.org.apache.spark.sql.execution.debug.package.codegenStringSeq(plan)
        code = [subtrees.apply(index)._2() for index in range(subtrees.size())]
        return code, [written.batch_id for written in batch.collect()]

    code_7, ids_7 = code_and_ids(7)
    code_8, ids_8 = code_and_ids(8)
    assert (ids_7, ids_8) == ([7, 7, 7], [8, 8, 8])
    assert code_7, "no generated code to compare"
    assert code_7 == code_8


@pytest.mark.spark
def test_the_sink_writes_the_record_columns_with_its_writer_options(spark, tmp_path):
    """The packaged sink's files hold the columns that differ between records, without a dictionary or a
    minimum and maximum for the value; the epoch's cluster is its ``_epoch.json``; the reader gives every
    record all ten columns back (the epoch and the batch from the folder names)."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from airflow_kafka_failover.jobs.sink import FILE_COLUMNS, ParquetBatchSink, batch_dir, read_sink
    from airflow_kafka_failover.jobs.stream_job import sink_columns

    kafka = spark.range(500).select(
        F.concat(F.lit("k-"), F.col("id") % 3).cast("binary").alias("key"),
        # Values (and with them ids) and timestamps that repeat, where a dictionary would pay off: Parquet
        # drops one that does not, so only these can show that the sink turned it off.
        F.concat(F.lit('{"id": "r-'), F.col("id") % 50, F.lit('"}')).cast("binary").alias("value"),
        F.lit("orders").alias("topic"),
        F.lit(0).alias("partition"),
        F.col("id").alias("offset"),
        F.timestamp_seconds(F.col("id") % 7 + 1_700_000_000).alias("timestamp"),
    )
    records = sink_columns(kafka, record_id.record_id_column("id", False)).coalesce(1)
    stats = ParquetBatchSink(str(tmp_path), 4, "B").write_batch(records, 9)
    assert stats is not None and (stats["records"], stats["max_offset"]) == (500, {"orders": {"0": 499}})
    (file,) = [p for p in (tmp_path / "epoch=4" / "batch=9").iterdir() if p.suffix == ".parquet"]
    assert batch_dir(str(tmp_path), 4, 9) == str(file.parent)
    metadata = pq.read_metadata(file)
    assert tuple(metadata.schema.to_arrow_schema().names) == FILE_COLUMNS
    group = metadata.row_group(0)
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    for name in ("value", "record_id", "timestamp_ms"):
        assert not any("DICTIONARY" in encoding for encoding in chunks[name].encodings), name
    assert any("DICTIONARY" in encoding for encoding in chunks["key"].encodings)  # keys repeat: kept
    if tuple(int(part) for part in spark.version.split(".")[:2]) >= (4, 0):  # Parquet 1.15's options
        assert not chunks["value"].is_stats_set
    assert chunks["offset"].statistics.max == 499  # the footer statistics the progress entries read
    contents = read_sink(str(tmp_path))
    assert (contents.rows_by_cluster, contents.duplicates) == ({"B": 500}, 450)
    assert contents.records["r-7"] == {
        "record_id": "r-7",
        "key": b"k-1",
        "value": b'{"id": "r-7"}',
        "source_cluster": "B",
        "topic": "orders",
        "partition": 0,
        "offset": 7,
        "timestamp_ms": 1_700_000_000_000,  # offset 7: 7 % 7 seconds after the first
        "epoch": 4,
        "batch_id": 9,
    }

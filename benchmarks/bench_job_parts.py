"""What each part of the job's query costs: the same Kafka topic read by Structured Streaming queries that add
the job's parts one at a time.

``bench_job.py`` compares the whole job (spark-submit, status, fence checks, progress entries, group commits)
with a plain query; this script takes the job's query apart, in one SparkSession (``local[2]``, the job's
jars), on a sandbox's cluster A (MirrorMaker 2 stopped). Each query reads the whole topic from ``earliest``
with ``trigger(availableNow=True)`` and ``maxOffsetsPerTrigger`` = a quarter of it (4 batches), into a fresh
checkpoint and output folder; the order of the queries is the same in every round, and the first round
warms the JVM up and is not counted. The figures are the median wall time and the driver JVM's CPU time
(``/proc``; the executor runs in it in local mode) of each query, and what each row adds to the row above
it per million records:

1. ``plain``: Kafka's columns with Spark's Parquet file sink (``bench_job.py``'s baseline);
2. ``foreach_batch``: the same columns written by a ``foreachBatch`` function, a folder per batch;
3. ``query_columns``: the columns of the sink's files that the query computes (``stream_job.sink_columns``:
   ``timestamp_ms`` and a null ``record_id``), written by row 2's function;
4. ``job_columns``: the same columns written by the packaged job's sink (``ParquetBatchSink.write_batch``:
   its Parquet writer options ``sink.WRITE_OPTIONS``, the epoch's ``_epoch.json``, each batch's statistics
   read from its files' footers);
5. ``record_id``: the record id through the record-id jar's reader (``jobs/record_id.py``): the packaged
   job's query without its run protocol;
6. ``one_observation``: a count observed on the source (one ``observe``, Spark's CollectMetrics node);
7. ``observed_query``: the two observations of a job of a user's instead (the source's count and
   per-partition marks, the output's record-id count), which the packaged job leaves out
   (``read_kafka(observe=False)``).

From row 3 on, the queries are built with the job's own pieces (``stream_job.sink_columns``,
``job_run.source_metrics``, ``job_run.record_id_counts``), and from row 4 on written by the job's sink;
rows 3 and 4 have a null record id. Rows off the chain, each against the row it names:

- ``record_id_get_json``: row 5 with Spark's ``get_json_object`` alone, as without the jar (against row 4);
- ``default_writer``: row 5 written with Spark's default Parquet options (no dictionary for ``record_id``
  only, as before 2026-12-01) instead of ``sink.WRITE_OPTIONS`` (against row 5);
- ``row_constants``: row 5 with the three columns that are the same for a whole batch (``source_cluster``,
  ``epoch``, ``batch_id`` from ``sink.batch_id_column``) written into every row, as the sink did before
  2026-12-01, instead of keeping them in its folders (against row 5);
- ``batch_id_literal``: ``row_constants`` with the batch id as a numeric literal, as before 2026-11-29
  (``sink.batch_id_column`` says why not), with ids that do not repeat from one round to the next, as a
  running job's do not (against ``row_constants``);
- ``plain_writer_options``: row 1 with the sink's Parquet writer options where its columns have them
  (``value``, ``offset``), so that what the options alone are worth to a plain query shows (against row 1).

Each row also gives the classes Spark's code generator compiled for the query (its ``CodegenMetrics``): a
query whose code is the same for every batch compiles only in the warm-up round.

    .venv/bin/python benchmarks/bench_job_parts.py [--records 2000000] [--partitions 4] [--rounds 5]

Progress and the table go to stderr; the last line on stdout is JSON with each query's median seconds and
CPU seconds and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akf_devtools.sandbox.jars import job_jars  # noqa: E402
from akf_devtools.sandbox.sandbox import Sandbox  # noqa: E402

from airflow_kafka_failover.core.types import TopicPartition  # noqa: E402
from airflow_kafka_failover.jobs import sink as sink_module  # noqa: E402
from airflow_kafka_failover.jobs.job_run import SOURCE_METRICS, record_id_counts, source_metrics  # noqa: E402
from airflow_kafka_failover.jobs.record_id import record_id_column, register_reader  # noqa: E402
from airflow_kafka_failover.jobs.sink import ParquetBatchSink, batch_id_column  # noqa: E402
from airflow_kafka_failover.jobs.stream_job import sink_columns  # noqa: E402
from benchmarks.bench_job import SPARK_CONF, load_topic, say  # noqa: E402
from benchmarks.json_output import json_line_output  # noqa: E402

TOPIC = "bench-parts"
CHAIN = (
    "plain",
    "foreach_batch",
    "query_columns",
    "job_columns",
    "record_id",
    "one_observation",
    "observed_query",
)
AGAINST = {  # the rows off the chain
    "record_id_get_json": "job_columns",
    "default_writer": "record_id",
    "row_constants": "record_id",
    "batch_id_literal": "row_constants",
    "plain_writer_options": "plain",
}
KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000, help="records in the topic (2,000,000)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic (4)")
    parser.add_argument("--rounds", type=int, default=5, help="counted rounds, after one warm-up round (5)")
    return parser.parse_args()


class Queries:
    """The queries of the comparison, over one SparkSession and one topic."""

    def __init__(self, spark: Any, bootstrap: str, records: int, partitions: int) -> None:
        from pyspark.sql import functions as F

        self.F = F
        self.spark = spark
        self.bootstrap = bootstrap
        self.per_trigger = max(records // 4, 1)
        self.partitions = [TopicPartition(TOPIC, p) for p in range(partitions)]
        self.reader = register_reader(spark, "id")
        if not self.reader:
            raise SystemExit("the record-id jar is not on the classpath: run `make setup` first")

    def source(self) -> Any:
        return (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(self.per_trigger))
            .option("failOnDataLoss", "true")
            .option("kafka.isolation.level", "read_committed")
            .load()
        )

    def observed_source(self, marks: bool) -> Any:
        """The source with the job's observation (``JobRun.source``): a count, and the marks if asked."""
        metrics = source_metrics(self.partitions)
        return self.source().observe(SOURCE_METRICS, *(metrics if marks else metrics[:1]))

    def build(self, name: str) -> Any:
        """The DataFrame of query ``name``."""
        F = self.F
        jar_id, no_id = record_id_column("id", True), F.lit(None).cast("string")
        if name in ("plain", "foreach_batch", "plain_writer_options"):
            return self.source().select(*KAFKA_COLUMNS)
        if name in ("query_columns", "job_columns"):
            return sink_columns(self.source(), no_id)
        if name in ("record_id", "default_writer"):
            return sink_columns(self.source(), jar_id)
        if name in ("row_constants", "batch_id_literal"):
            return sink_columns(self.source(), jar_id).select(
                "*", F.lit("A").alias("source_cluster"), F.lit(0).alias("epoch")
            )
        if name == "record_id_get_json":
            return sink_columns(self.source(), record_id_column("id", False))
        if name == "one_observation":
            return sink_columns(self.observed_source(marks=False), jar_id)
        if name == "observed_query":
            return record_id_counts(sink_columns(self.observed_source(marks=True), jar_id))
        raise ValueError(name)

    def run(self, name: str, folder: Path) -> None:
        """Run query ``name`` over the whole topic into ``folder``; return when it has read everything."""
        df = self.build(name)
        output = str(folder / "out")
        if name in ("plain", "plain_writer_options"):
            writer = df.writeStream.format("parquet").option("path", output)
            if name == "plain_writer_options":
                writer = writer.options(**PLAIN_WRITER_OPTIONS)
        elif name == "default_writer":
            writer = df.writeStream.foreachBatch(DefaultWriterSink(output, 0, "A").write_batch)
        elif name == "row_constants":
            writer = df.writeStream.foreachBatch(RowConstantsSink(output, 0, "A").write_batch)
        elif name == "batch_id_literal":
            writer = df.writeStream.foreachBatch(LiteralBatchIdSink(output, 0, "A").write_batch)
        elif name in ("foreach_batch", "query_columns"):

            def write(batch: Any, batch_id: int) -> None:
                batch.write.mode("overwrite").parquet(f"{output}/batch={batch_id}")

            writer = df.writeStream.foreachBatch(write)
        else:
            writer = df.writeStream.foreachBatch(ParquetBatchSink(output, 0, "A").write_batch)
        query = (
            writer.option("checkpointLocation", str(folder / "checkpoint"))
            .trigger(availableNow=True)
            .queryName(f"parts-{name}")
            .start()
        )
        query.awaitTermination()


PLAIN_WRITER_OPTIONS = {
    key: value
    for key, value in sink_module.WRITE_OPTIONS.items()
    if "#" not in key or key.split("#", 1)[1] in KAFKA_COLUMNS
}
"""The sink's Parquet writer options that apply to the plain query's columns."""


class DefaultWriterSink(ParquetBatchSink):
    """The job's sink with Spark's default Parquet options but for ``record_id``'s dictionary, as before
    2026-12-01."""

    write_options = {"parquet.enable.dictionary#record_id": "false"}


class RowConstantsSink(DefaultWriterSink):
    """The job's sink as before 2026-12-01: Spark's default Parquet options, and the batch id in every row
    (the query adds ``source_cluster`` and ``epoch``)."""

    def batch_id(self, batch_id: int) -> Any:
        return batch_id_column(batch_id)

    def write_batch(self, batch_df: Any, batch_id: int) -> dict[str, Any] | None:
        return super().write_batch(batch_df.withColumn("batch_id", self.batch_id(batch_id)), batch_id)


class LiteralBatchIdSink(RowConstantsSink):
    """:class:`RowConstantsSink` with the batch id as a numeric literal (``F.lit(batch_id)``), as before
    2026-11-29.

    Every query here starts at batch 0, so its literals would repeat those of the rounds before, whose code
    Spark keeps compiled; a running job's batch ids only grow. The literal is therefore the batch id plus
    ``BATCHES_PER_RUN`` times the number of this sink's queries before it: new code in every batch, as in a
    job that has run for a while (the column's value is not read).
    """

    runs = 0
    BATCHES_PER_RUN = 1000

    def __init__(self, sink_root: str, epoch: int, cluster: str) -> None:
        super().__init__(sink_root, epoch, cluster)
        self.shift = LiteralBatchIdSink.runs * self.BATCHES_PER_RUN
        LiteralBatchIdSink.runs += 1

    def batch_id(self, batch_id: int) -> Any:
        from pyspark.sql import functions as F

        return F.lit(batch_id + self.shift).cast("long")


def compilations(spark: Any) -> int:
    """Classes Spark's code generator has compiled in this JVM so far."""
    return int(
        spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()
    )


def jvm_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(run: Callable[[], None], pid: int) -> tuple[float, float]:
    cpu = jvm_cpu_seconds(pid)
    started = time.perf_counter()
    run()
    return time.perf_counter() - started, jvm_cpu_seconds(pid) - cpu


def report(args: argparse.Namespace, results: dict[str, list[tuple[float, float, int]]]) -> dict[str, Any]:
    medians = {
        name: (statistics.median(w for w, _, _ in runs), statistics.median(c for _, c, _ in runs))
        for name, runs in results.items()
    }
    compiled = {name: statistics.median(n for _, _, n in runs) for name, runs in results.items()}
    per_million = 1_000_000 / args.records
    say(f"median of {args.rounds} rounds, {args.records} records in {args.partitions} partitions")
    header = f"{'query':<20} {'wall s':>7} {'CPU s':>7} {'adds wall s/M':>14} {'adds CPU s/M':>13}"
    say(f"  {header} {'compiled':>8}")
    previous = None
    for name in (*CHAIN, *AGAINST):
        wall, cpu = medians[name]
        against = AGAINST.get(name, previous)
        if against is None:
            adds = f"{'':>14} {'':>13}"
        else:
            adds = (
                f"{(wall - medians[against][0]) * per_million:14.2f} "
                f"{(cpu - medians[against][1]) * per_million:13.2f}"
            )
        say(f"  {name:<20} {wall:7.2f} {cpu:7.2f} {adds} {compiled[name]:8.0f}")
        if name in CHAIN:
            previous = name
    plain, job, observed = medians["plain"], medians["record_id"], medians["observed_query"]
    packaged = f"wall {plain[0] / job[0]:.3f}, CPU {plain[1] / job[1]:.3f}"
    say(f"  plain / record_id (the packaged job's query): {packaged}")
    say(f"  plain / observed_query: wall {plain[0] / observed[0]:.3f}, CPU {plain[1] / observed[1]:.3f}")
    adds = {
        f"{name}_adds_s_per_million": round((medians[name][0] - medians[before][0]) * per_million, 3)
        for before, name in zip(CHAIN, CHAIN[1:], strict=False)
    }
    return {
        **adds,
        "records": args.records,
        "partitions": args.partitions,
        "rounds": args.rounds,
        "median_s": {name: round(wall, 3) for name, (wall, _) in medians.items()},
        "median_cpu_s": {name: round(cpu, 3) for name, (_, cpu) in medians.items()},
        "median_compilations": compiled,
        "plain_over_job_query": round(plain[0] / job[0], 3),
        "plain_over_observed_query": round(plain[0] / observed[0], 3),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}",
    }


def main() -> int:
    args = parse_args()
    json_out = json_line_output()
    root = REPO / ".run" / f"bench-job-parts-{os.getpid()}"
    sandbox = Sandbox(root / "sandbox")
    spark = None
    try:
        jars = ",".join(str(jar) for jar in job_jars())
        sandbox.up()
        sandbox.stop_mirrormaker()
        load_s = load_topic(sandbox.bootstrap("A"), TOPIC, args.records, args.partitions)
        say(f"loaded {args.records} records into {args.partitions} partitions in {load_s:.1f} s")
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master("local[2]").appName("bench-job-parts")
        for key, value in {**SPARK_CONF, "spark.jars": jars, "spark.ui.showConsoleProgress": "false"}.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        queries = Queries(spark, sandbox.bootstrap("A"), args.records, args.partitions)
        results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in (*CHAIN, *AGAINST)}
        for round_no in range(args.rounds + 1):
            for name in results:
                folder = root / f"{name}-{round_no}"
                compiled = compilations(spark)
                wall, cpu = timed(lambda name=name, folder=folder: queries.run(name, folder), pid)
                compiled = compilations(spark) - compiled
                shutil.rmtree(folder, ignore_errors=True)
                counted = "warm-up" if round_no == 0 else f"round {round_no}"
                say(f"{counted}: {name} {wall:.2f} s, CPU {cpu:.2f} s, {compiled} classes compiled")
                if round_no:
                    results[name].append((wall, cpu, compiled))
        figures = report(args, results)
    finally:
        if spark is not None:
            spark.stop()
        sandbox.down()
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(figures), file=json_out, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

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
3. ``job_columns``: the sink's columns (``source_cluster``, ``timestamp_ms``, ``epoch``, ``batch_id``);
4. ``record_id``: the record id through the record-id jar's reader (``jobs/record_id.py``);
5. ``one_observation``: a count observed on the source (one ``observe``, Spark's CollectMetrics node);
6. ``job_query``: the job's two observations instead (the source's count and per-partition marks, the
   output's record-id count): the packaged job's query without its run protocol.

Every query writes with Spark's default Parquet options (the job's sink also turns off the dictionary of
``record_id``, about 0.1 s per million records). ``record_id_get_json`` (not in the chain) is row 4 with
Spark's ``get_json_object`` alone, as without the jar; its figure is against row 3.

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
from airflow_kafka_failover.jobs.job_run import RECORD_ID_METRICS, SOURCE_METRICS  # noqa: E402
from airflow_kafka_failover.jobs.record_id import record_id_column, register_reader  # noqa: E402
from benchmarks.bench_job import SPARK_CONF, load_topic, say  # noqa: E402
from benchmarks.json_output import json_line_output  # noqa: E402

TOPIC = "bench-parts"
CHAIN = ("plain", "foreach_batch", "job_columns", "record_id", "one_observation", "job_query")
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
        F = self.F
        metrics = [F.count(F.lit(1)).alias("records")]
        for index, tp in enumerate(self.partitions if marks else []):
            here = (F.col("topic") == tp.topic) & (F.col("partition") == tp.partition)
            metrics.append(F.max(F.when(here, F.col("offset"))).alias(f"o{index}"))
            metrics.append(F.max(F.when(here, F.expr("unix_millis(timestamp)"))).alias(f"t{index}"))
        return self.source().observe(SOURCE_METRICS, *metrics)

    def job_columns(self, df: Any, record_id: Any | None) -> Any:
        """The packaged job's select (``jobs/stream_job.py``), with ``record_id`` when given."""
        F = self.F
        first = [record_id.alias("record_id")] if record_id is not None else []
        return df.select(
            *first,
            "key",
            "value",
            F.lit("A").alias("source_cluster"),
            "topic",
            "partition",
            "offset",
            F.expr("unix_millis(timestamp)").alias("timestamp_ms"),
            F.lit(0).alias("epoch"),
        )

    def build(self, name: str) -> tuple[Any, bool]:
        """The DataFrame of query ``name`` and whether it adds ``batch_id`` (the job's sink does)."""
        F = self.F
        jar_id = record_id_column("id", True)
        if name in ("plain", "foreach_batch"):
            return self.source().select(*KAFKA_COLUMNS), False
        if name == "job_columns":
            return self.job_columns(self.source(), None), True
        if name == "record_id":
            return self.job_columns(self.source(), jar_id), True
        if name == "record_id_get_json":
            return self.job_columns(self.source(), record_id_column("id", False)), True
        if name == "one_observation":
            return self.job_columns(self.observed_source(marks=False), jar_id), True
        if name == "job_query":
            output = self.job_columns(self.observed_source(marks=True), jar_id)
            ids = (F.count(F.lit(1)).alias("rows"), F.count(F.col("record_id")).alias("with_id"))
            return output.observe(RECORD_ID_METRICS, *ids), True
        raise ValueError(name)

    def run(self, name: str, folder: Path) -> None:
        """Run query ``name`` over the whole topic into ``folder``; return when it has read everything."""
        F = self.F
        df, with_batch_id = self.build(name)
        output = str(folder / "out")
        if name == "plain":
            writer = df.writeStream.format("parquet").option("path", output)
        else:

            def write(batch: Any, batch_id: int) -> None:
                if with_batch_id:
                    batch = batch.withColumn("batch_id", F.lit(batch_id).cast("long"))
                batch.write.mode("overwrite").parquet(f"{output}/batch={batch_id}")

            writer = df.writeStream.foreachBatch(write)
        query = (
            writer.option("checkpointLocation", str(folder / "checkpoint"))
            .trigger(availableNow=True)
            .queryName(f"parts-{name}")
            .start()
        )
        query.awaitTermination()


def jvm_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(run: Callable[[], None], pid: int) -> tuple[float, float]:
    cpu = jvm_cpu_seconds(pid)
    started = time.perf_counter()
    run()
    return time.perf_counter() - started, jvm_cpu_seconds(pid) - cpu


def report(args: argparse.Namespace, results: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    medians = {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in results.items()
    }
    per_million = 1_000_000 / args.records
    say(f"median of {args.rounds} rounds, {args.records} records in {args.partitions} partitions")
    say(f"  {'query':<20} {'wall s':>7} {'CPU s':>7} {'adds wall s/M':>14} {'adds CPU s/M':>13}")
    previous = None
    for name in (*CHAIN, "record_id_get_json"):
        wall, cpu = medians[name]
        against = "job_columns" if name == "record_id_get_json" else previous
        if against is None:
            adds = f"{'':>14} {'':>13}"
        else:
            adds = (
                f"{(wall - medians[against][0]) * per_million:14.2f} "
                f"{(cpu - medians[against][1]) * per_million:13.2f}"
            )
        say(f"  {name:<20} {wall:7.2f} {cpu:7.2f} {adds}")
        if name in CHAIN:
            previous = name
    plain, job = medians["plain"], medians["job_query"]
    say(f"  plain / job_query: wall {plain[0] / job[0]:.3f}, CPU {plain[1] / job[1]:.3f}")
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
        "plain_over_job_query": round(plain[0] / job[0], 3),
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
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in (*CHAIN, "record_id_get_json")}
        for round_no in range(args.rounds + 1):
            for name in results:
                folder = root / f"{name}-{round_no}"
                wall, cpu = timed(lambda name=name, folder=folder: queries.run(name, folder), pid)
                shutil.rmtree(folder, ignore_errors=True)
                counted = "warm-up" if round_no == 0 else f"round {round_no}"
                say(f"{counted}: {name} {wall:.2f} s, CPU {cpu:.2f} s")
                if round_no:
                    results[name].append((wall, cpu))
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

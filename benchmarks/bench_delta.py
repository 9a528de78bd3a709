"""Delta benchmark: the job-side API into Delta Lake (append and MERGE modes) against a plain Spark
Kafka->Delta append query, and what a MERGE costs as the table grows.

Starts a sandbox, stops MirrorMaker 2 (its replication would compete for the CPU), pre-loads ``--records``
small records into ``--partitions`` partitions on A, then runs one after the other (never together), each
from ``earliest`` with a fresh checkpoint and a fresh table:

1. **plain**: a Structured Streaming query, Kafka -> ``writeStream.format("delta")`` (Spark's own Delta
   streaming sink), columns ``record_id`` (``get_json_object(value, '$.id')``), key, value, topic,
   partition, offset, timestamp;
2. **append**: the same columns through ``FailoverStream.write_delta(mode="append")``: fence check, Delta
   transaction ids, progress entry and bookkeeping-group commit per batch;
3. **merge**: the same through ``write_delta(mode="merge", merge_on="record_id")`` into an empty table.

Then the MERGE's growth: for each size of ``--table-sizes`` (1M and 5M rows by default) a table of that
many rows (ids that never match, 30 days of ``day`` partitions) is made, and the merge job runs
``--growth-records`` records into it, once without a bound and once with ``merge_window=("day", "2
days")`` (the batch's rows are of today, so the window reads 3 of the 30 partitions).

Throughput is measured as in ``bench_job.py``, from each query's checkpoint: records / (mtime of
``commits/<b>`` of the batch reaching the records - mtime of ``offsets/0``). Same spark-submit, master,
``--conf``, ``--jars`` (the job_jars option: Kafka source, Delta, record-id jar), driver memory, reader
options, ``maxOffsetsPerTrigger`` and trigger for every query. One run each: the figures move with other
work on the machine; ``other_load_max_share`` says how busy it was.

    .venv/bin/python benchmarks/bench_delta.py [--records 500000] [--partitions 4]
        [--table-sizes 1000000,5000000] [--growth-records 200000] [--skip-growth]

Progress goes to stderr; the last line on stdout is JSON with the rates, ``append_ratio`` (append / plain;
target >= 0.85), ``merge_ratio`` (merge / plain) and ``growth`` (records/s per table size, with and
without the window).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akf_devtools.sandbox.sandbox import Sandbox  # noqa: E402

from airflow_kafka_failover.cluster_managers.local import job_environment  # noqa: E402
from airflow_kafka_failover.core.process_group import ManagedProcess  # noqa: E402
from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook  # noqa: E402
from airflow_kafka_failover.run_format.layout import PROCESS_NAME  # noqa: E402
from benchmarks.bench_job import (  # noqa: E402
    MASTER,
    SPARK_CONF,
    SPARK_CONN_ID,
    Bench,
    jars_option,
    load_topic,
    say,
    wait_for_records,
)
from benchmarks.json_output import json_line_output  # noqa: E402

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

JOB = '''"""bench_delta.py's job: the source's columns into Delta through the job-side API."""
from pyspark.sql import functions as F

from airflow_kafka_failover.jobs.api import FailoverStream

MODE, WINDOW = {mode!r}, {window!r}

with FailoverStream.from_args(delta=True) as stream:
    rows = stream.read_kafka().select(
        F.get_json_object(F.col("value").cast("string"), "$.id").alias("record_id"),
        "key", "value", "topic", "partition", "offset", "timestamp", F.current_date().alias("day"),
    )
    if MODE == "append":
        stream.write_delta(rows, stream.sink_root, mode="append")
    else:
        stream.write_delta(
            rows, stream.sink_root, mode="merge", merge_on="record_id", partition_by=["day"],
            merge_window=("day", "2 days") if WINDOW else None,
        )
'''

PLAIN = '''"""bench_delta.py's baseline: Kafka -> Spark's Delta streaming sink, the same columns."""
import argparse, os
from pyspark.sql import SparkSession, functions as F

parser = argparse.ArgumentParser()
for name in ("--bootstrap", "--topic", "--checkpoint", "--output", "--max-offsets-per-trigger",
             "--trigger-interval", "--stop-file"):
    parser.add_argument(name, required=True)
args = parser.parse_args()
spark = SparkSession.builder.appName("bench-plain-delta").getOrCreate()
spark.sparkContext.setLogLevel("WARN")
query = (
    spark.readStream.format("kafka")
    .option("kafka.bootstrap.servers", args.bootstrap)
    .option("subscribe", args.topic)
    .option("startingOffsets", "earliest")
    .option("failOnDataLoss", "true")
    .option("kafka.isolation.level", "read_committed")
    .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
    .load()
    .select(F.get_json_object(F.col("value").cast("string"), "$.id").alias("record_id"),
            "key", "value", "topic", "partition", "offset", "timestamp", F.current_date().alias("day"))
    .writeStream.format("delta")
    .option("checkpointLocation", args.checkpoint)
    .trigger(processingTime=args.trigger_interval + " seconds")
    .start(args.output)
)
while not os.path.exists(args.stop_file):
    if query.awaitTermination(0.5):
        break
query.stop()
spark.stop()
'''

PREFILL = '''"""bench_delta.py: a Delta table of N rows whose ids never match, 30 days of partitions."""
import sys
from pyspark.sql import SparkSession, functions as F

path, rows = sys.argv[1], int(sys.argv[2])
spark = SparkSession.builder.appName("bench-prefill").getOrCreate()
spark.sparkContext.setLogLevel("WARN")
(
    spark.range(rows)
    .select(
        F.concat(F.lit("old-"), F.col("id").cast("string")).alias("record_id"),
        F.lit(None).cast("binary").alias("key"),
        F.lit(b"{}").alias("value"),
        F.lit("old").alias("topic"),
        F.lit(0).alias("partition"),
        F.col("id").alias("offset"),
        F.current_timestamp().alias("timestamp"),
        F.date_sub(F.current_date(), (F.col("id") % 30).cast("int") + 1).alias("day"),
    )
    .repartition(8)
    .write.format("delta").partitionBy("day").save(path)
)
spark.stop()
'''


class DeltaBench(Bench):
    """Bench_job's bench, with Delta applications of the API and Spark's Delta sink as the baseline."""

    def run_api(
        self, topic: str, name: str, records: int, mode: str, window: bool, table: Path | None
    ) -> dict:
        settings, layout = self.job_settings(f"bench-{name}", topic)
        if table is not None:
            settings = settings.model_copy(update={"sink_root": str(table)})
        application = self.root / f"job-{name}.py"
        application.write_text(JOB.format(mode=mode, window=window))
        self.processes.append(ManagedProcess(PROCESS_NAME, layout.run_dir))
        hook = StreamingJobHook(
            SPARK_CONN_ID,
            conf={**SPARK_CONF, **DELTA_CONF},
            jars=jars_option(),
            driver_memory=self.args.driver_memory,
        )
        handle = hook.submit(settings, layout, application, startup_timeout=240)
        say(f"  {name} running (log {handle.log_file})")
        try:
            timing, cpu = wait_for_records(
                Path(settings.checkpoint),
                topic,
                records,
                handle.process,
                name,
                self.args.timeout,
                self.our_pgids,
            )
        finally:
            hook.stop(handle, timeout=60)
            handle.process.stop(timeout=10)
        return {"timing": timing, **cpu}

    def run_plain_delta(self, topic: str) -> dict:
        folder = self.root / "plain"
        folder.mkdir(parents=True)
        script = folder / "plain_delta.py"
        script.write_text(PLAIN)
        stop_file = folder / "stop-request"
        command = [str(Path(sys.executable).parent / "spark-submit"), "--master", MASTER]
        for key, value in {**SPARK_CONF, **DELTA_CONF}.items():
            command += ["--conf", f"{key}={value}"]
        command += ["--jars", jars_option(), "--driver-memory", self.args.driver_memory, str(script)]
        command += [
            "--bootstrap",
            self.bootstrap,
            "--topic",
            topic,
            "--checkpoint",
            str(folder / "checkpoint"),
        ]
        command += ["--output", str(folder / "table"), "--max-offsets-per-trigger"]
        command += [
            str(self.args.max_offsets_per_trigger),
            "--trigger-interval",
            str(self.args.trigger_interval),
        ]
        command += ["--stop-file", str(stop_file)]
        process = ManagedProcess("plain", folder)
        self.processes.append(process)
        process.start(command, env=job_environment(None))
        try:
            timing, cpu = wait_for_records(
                folder / "checkpoint",
                topic,
                self.args.records,
                process,
                "plain",
                self.args.timeout,
                self.our_pgids,
            )
        finally:
            stop_file.write_text("stop")
            deadline = time.monotonic() + 60
            while process.is_running() and time.monotonic() < deadline:
                time.sleep(0.25)
            process.stop(timeout=10)
        return {"timing": timing, **cpu}

    def prefill(self, table: Path, rows: int) -> float:
        script = self.root / "prefill.py"
        script.write_text(PREFILL)
        command = [str(Path(sys.executable).parent / "spark-submit"), "--master", MASTER]
        for key, value in {**SPARK_CONF, **DELTA_CONF}.items():
            command += ["--conf", f"{key}={value}"]
        command += ["--jars", jars_option(), "--driver-memory", self.args.driver_memory]
        command += [str(script), str(table), str(rows)]
        started = time.monotonic()
        process = ManagedProcess(f"prefill-{rows}", self.root / f"prefill-{rows}")
        self.processes.append(process)
        process.start(command, env=job_environment(None))
        while process.is_running():
            time.sleep(0.5)
        if not (table / "_delta_log").is_dir():
            raise RuntimeError(f"could not make the {rows}-row table:\n{process.log_tail(40)}")
        return time.monotonic() - started


def rate(result: dict) -> float:
    return result["timing"].records_per_s


def busy_share(result: dict) -> float:
    return result["other_cpu_s"] / (result["timing"].seconds * (os.cpu_count() or 1))


def measure(args: argparse.Namespace, sandbox: Sandbox, bench: DeltaBench) -> dict:
    sandbox.up()
    sandbox.stop_mirrormaker()
    bench.bootstrap = sandbox.bootstrap("A")
    bench.our_pgids = {pid for pid in (b.process.pid() for b in sandbox.brokers.values()) if pid is not None}
    if not args.skip_throughput:
        say(f"loading {args.records} records into {args.partitions} partitions")
        load_topic(bench.bootstrap, "bench-delta", args.records, args.partitions)
    results: dict = {}
    if not args.skip_throughput:
        say("plain Kafka -> Delta append query")
        results["plain"] = bench.run_plain_delta("bench-delta")
        for mode in ("append", "merge"):
            say(f"the API, mode {mode}")
            results[mode] = bench.run_api("bench-delta", mode, args.records, mode, False, None)
        for name in ("plain", "append", "merge"):
            say(f"  {name}: {rate(results[name]):.0f} records/s, CPU {results[name]['cpu_s']:.1f} s")
    growth = []
    if not args.skip_growth:
        load_topic(bench.bootstrap, "bench-growth", args.growth_records, args.partitions)
        windows = {"both": (False, True), "window": (True,), "none": (False,)}[args.growth_windows]
        for size in args.table_sizes:
            for window in windows:
                table = bench.root / f"table-{size}-{'window' if window else 'all'}"
                say(f"MERGE into a table of {size} rows ({'2-day window' if window else 'no bound'})")
                made = bench.prefill(table, size)
                say(f"  table made in {made:.0f} s")
                name = f"grow-{size}-{int(window)}"
                result = bench.run_api("bench-growth", name, args.growth_records, "merge", window, table)
                say(f"  {rate(result):.0f} records/s")
                growth.append(
                    {
                        "table_rows": size,
                        "window": window,
                        "records_per_s": round(rate(result)),
                        "other_load_share": round(busy_share(result), 2),
                    }
                )
    return {"results": results, "growth": growth}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--records", type=int, default=500_000, help="records of the throughput topic (500000)"
    )
    parser.add_argument("--partitions", type=int, default=4, help="partitions (4)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=100_000, help="(100000)")
    parser.add_argument("--trigger-interval", type=float, default=1.0, help="seconds (1)")
    parser.add_argument("--driver-memory", default="1g", help="(1g)")
    parser.add_argument(
        "--table-sizes",
        type=lambda text: [int(x) for x in text.split(",")],
        default=[1_000_000, 5_000_000],
        help="rows of the tables a MERGE grows into (1000000,5000000)",
    )
    parser.add_argument(
        "--growth-records", type=int, default=200_000, help="records merged per size (200000)"
    )
    parser.add_argument("--skip-growth", action="store_true", help="only the three throughput runs")
    parser.add_argument(
        "--growth-windows",
        choices=("both", "window", "none"),
        default="both",
        help="the growth runs with the 2-day window, without a bound, or both (both)",
    )
    parser.add_argument(
        "--skip-throughput", action="store_true", help="only the growth runs (no plain/append/merge runs)"
    )
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds one query may take (1200)")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    json_out = json_line_output()
    machine = f"{os.cpu_count()} cores, Python {platform.python_version()}"
    root = REPO / ".run" / f"bench-delta-{os.getpid()}"
    os.environ[f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}"] = json.dumps({"conn_type": "spark", "host": MASTER})
    sandbox = Sandbox(root / "sandbox")
    bench = DeltaBench(root, "", args, [], set())
    figures = None
    try:
        figures = measure(args, sandbox, bench)
    finally:
        for process in bench.processes:
            process.stop(timeout=10)
        sandbox.down()
        if figures is not None and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    results = figures["results"]
    summary: dict = {"records": args.records, "partitions": args.partitions}
    if results:
        summary.update(
            {
                "plain_records_per_s": round(rate(results["plain"])),
                "append_records_per_s": round(rate(results["append"])),
                "merge_records_per_s": round(rate(results["merge"])),
                "append_ratio": round(rate(results["append"]) / rate(results["plain"]), 3),
                "merge_ratio": round(rate(results["merge"]) / rate(results["plain"]), 3),
                "cpu_s": {name: round(result["cpu_s"], 1) for name, result in results.items()},
                "other_load_max_share": round(max(busy_share(r) for r in results.values()), 2),
            }
        )
        say(
            f"append / plain {summary['append_ratio']} (target >= 0.85); "
            f"merge / plain {summary['merge_ratio']}"
        )
    summary.update({"growth": figures["growth"], "machine": machine})
    print(json.dumps(summary), file=json_out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

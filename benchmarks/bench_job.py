"""Job benchmark: throughput of the streaming job against a plain Spark Kafka->Parquet query, and the time
from submit to the first committed batch, in local mode.

Starts a sandbox (two KRaft clusters and MirrorMaker 2) and stops MirrorMaker 2 right away, so that its
replication of the benchmark topic to B does not compete for the CPU. Then, in one run:

1. **Submit to first batch**: a small fresh topic (1,000 records), a fresh run (own pair, checkpoint and
   fencing marker); the wall time from calling ``StreamingJobHook.submit()`` until ``read_progress`` of the
   run's checkpoint shows a committed batch. JVM and Spark start-up are included on purpose.
2. **Pre-load** ``--records`` small records (``{"id": "r-<n>"}``, about 18 bytes) into a topic of
   ``--partitions`` partitions on cluster A, round-robin so the partitions hold equal counts.
3. **Throughput**, the job and the plain query one after the other (never together: the machine may have
   only 2 cores), each from ``earliest`` on the same topic, each with a fresh checkpoint and output folder.
   ``--rounds`` rounds (3) with the order alternating (job first in odd rounds); a round's ratio compares
   two runs close in time. The rates and ``throughput_ratio`` reported are those of the median round (by
   ratio), ``round_ratios`` lists every round's.

Same Spark settings for both: the same spark-submit (this interpreter's ``bin/spark-submit``, the one the
hook finds first on the PATH it gives the job), ``--master local[2]``, the same ``--conf`` values,
``--driver-memory`` and ``--jars`` (what ``make setup`` puts in the provider's ``job_jars`` option,
``job_jars()``: Spark's Kafka source and the record-id jar), the same Python for the driver. Same reader:
``startingOffsets=earliest``, the same ``maxOffsetsPerTrigger`` (so both split the topic into the same
batches), ``failOnDataLoss=true`` and ``kafka.isolation.level=read_committed`` as the job sets them, and a
processing-time trigger of the same interval. The plain query writes the Kafka columns (key, value, topic,
partition, offset, timestamp) with Spark's Parquet file sink; the job (on the job-side API) writes its own
sink (the record id beside them; a folder per epoch and batch, complete once its ``_SUCCESS`` is written),
reads the progress entry's statistics from the footers of the files it wrote, and after each batch writes
``progress/<batch>`` and commits the bookkeeping group (from a query listener); the difference is the job's
cost.

How throughput is measured, identically for both, from the Spark checkpoint each query writes: Spark
writes ``offsets/<b>`` when batch ``b`` starts (after planning its offset range) and ``commits/<b>`` when
it has finished (sink written; for the job, after its batch function returned). The interval runs from
the modification time of ``offsets/0`` to that of ``commits/<b>``, where ``b`` is the first batch whose end
offsets cover ``--records`` records; throughput = records / interval. JVM start-up, SparkSession creation
and query start-up are excluded for both; the first batch's one-off costs (Kafka consumers, code
generation) are included for both. For the job the result is cross-checked against its progress entries
(``written_at`` of the last batch) and its log's per-batch seconds (the batch's time as Spark measured it,
and of that the time in the batch function), and the records each query wrote are counted in its Parquet
output.
``steady_throughput_ratio`` compares the batches after the first one alone (records after batch 0 / time
from ``commits/0`` to the end).

Wall time on a shared machine moves with other work, so the CPU is sampled too (``/proc``, when
``offsets/0`` appears and when the last commit appears, polled every 0.1 s): ``cpu_s`` of each query's
process group (the driver JVM, which runs the executor in local mode, and its Python), ``cpu_ratio`` =
plain CPU / job CPU (what the throughput ratio would be if both were CPU-bound on the same cores), and
``other_load_max_share``, the largest share of the machine's cores that processes other than the query,
the sandbox's brokers and this script used during a measurement (0 on a quiet machine). Above
``LOADED_SHARE`` the JSON says ``"measured_under_load": true`` and a warning says so: the wall-clock rates,
and with them the ratio, then say more about the other work than about the job (runs under load on the
same code gave ratios from 0.26 to 0.97).

    .venv/bin/python benchmarks/bench_job.py [--records 1000000] [--partitions 4]
        [--max-offsets-per-trigger 250000] [--trigger-interval 1] [--rounds 3] [--keep]

Progress and a table go to stderr; the last line on stdout is JSON with job_records_per_s,
plain_records_per_s, throughput_ratio (job / plain; target >= 0.95), steady_throughput_ratio, job_cpu_s,
plain_cpu_s, cpu_ratio, submit_to_first_batch_s and the machine.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akf_devtools.sandbox.jars import job_jars  # noqa: E402
from akf_devtools.sandbox.kafka_io import create_topic, end_offsets  # noqa: E402
from akf_devtools.sandbox.sandbox import Sandbox  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

from airflow_kafka_failover.cluster_managers.handle import JobHandle  # noqa: E402
from airflow_kafka_failover.cluster_managers.local import job_environment  # noqa: E402
from airflow_kafka_failover.core.process_group import ManagedProcess  # noqa: E402
from airflow_kafka_failover.core.storage import locations  # noqa: E402
from airflow_kafka_failover.core.storage.store import open_store  # noqa: E402
from airflow_kafka_failover.hooks.streaming_job import (  # noqa: E402
    JOB_APPLICATION,
    LOG4J_CONFIG,
    StreamingJobHook,
)
from airflow_kafka_failover.io.planner import load_position  # noqa: E402
from airflow_kafka_failover.jobs.sink import uncommitted_output_records  # noqa: E402
from airflow_kafka_failover.run_format.fencing import FencingMarker  # noqa: E402
from airflow_kafka_failover.run_format.layout import PROCESS_NAME, RunLayout  # noqa: E402
from airflow_kafka_failover.run_format.progress import read_progress  # noqa: E402
from airflow_kafka_failover.run_format.progress_log import read_batch_record  # noqa: E402
from airflow_kafka_failover.run_format.settings import JobSettings  # noqa: E402
from airflow_kafka_failover.run_format.spark_checkpoint import parse_offsets_file, read_checkpoint  # noqa: E402
from benchmarks.json_output import json_line_output  # noqa: E402
from benchmarks.state_store import KINDS, STORAGE_TIMEOUT_S, StateStore  # noqa: E402

SPARK_CONN_ID = "spark_bench"
MASTER = "local[2]"
# The settings of both queries (the integration tests' settings; the driver holds the executor in local mode).
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}",
}
LATENCY_RECORDS = 1000
LOADED_SHARE = 0.2  # other work's share of the cores above which a measurement is flagged as under load
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# "batch 3: 250000 records in 1.52 s (write 1.47 s, progress 0.00 s, group commit 0.02 s,
#  fence check 0.004 s; Spark's phases addBatch 1.47 s, ...), ..."
JOB_BATCH_LINE = re.compile(
    r"\[akf-job\] batch (\d+): (\d+) records in ([0-9.]+) s(?: \(write ([0-9.]+) s)?"
    r"(?:, progress [0-9.]+ s, group commit [0-9.]+ s, fence check (?P<fence>[0-9.]+) s)?"
)
# "stop and fence checks between batches: 57 in 60.2 s (0.95/s), median 0.012 s, max 0.051 s"
BETWEEN_CHECKS_LINE = re.compile(
    r"\[akf-job\] stop and fence checks between batches: (?P<count>\d+) in (?P<seconds>[0-9.]+) s "
    r"\((?P<rate>[0-9.]+)/s\), median (?P<median>[0-9.]+) s, max (?P<max>[0-9.]+) s"
)

# The plain query, written into the run directory and run with the same spark-submit as the job.
PLAIN_QUERY = '''"""Plain Structured Streaming query: Kafka -> Parquet file sink (bench_job.py's baseline)."""
import argparse
import os

from pyspark.sql import SparkSession

parser = argparse.ArgumentParser()
for name in ("--bootstrap", "--topic", "--checkpoint", "--output", "--max-offsets-per-trigger",
             "--trigger-interval", "--stop-file"):
    parser.add_argument(name, required=True)
args = parser.parse_args()
spark = SparkSession.builder.appName("bench-plain").getOrCreate()
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
    .select("key", "value", "topic", "partition", "offset", "timestamp")
    .writeStream.format("parquet")
    .option("path", args.output)
    .option("checkpointLocation", args.checkpoint)
    .trigger(processingTime=args.trigger_interval + " seconds")
    .queryName("bench-plain")
    .start()
)
print("plain query running", flush=True)
while not os.path.exists(args.stop_file):
    if query.awaitTermination(0.5):
        break
query.stop()
spark.stop()
print("plain query stopped", flush=True)
'''


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def jars_option() -> str:
    """The ``--jars`` of both queries (the job_jars option): Spark's Kafka source and the record-id jar."""
    return ",".join(str(jar) for jar in job_jars())


# ---- measuring from a checkpoint ---------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """How a query got through ``records`` records, read from its checkpoint.

    :param batches: per batch (id, records, seconds from ``offsets/<b>`` to ``commits/<b>``).
    :param started: mtime of ``offsets/0`` (epoch seconds).
    :param finished: mtime of ``commits/<b>`` of the batch that reached the records.
    :param first_committed: mtime of ``commits/0``.
    """

    records: int
    batches: tuple[tuple[int, int, float], ...]
    started: float
    finished: float
    first_committed: float

    @property
    def seconds(self) -> float:
        return self.finished - self.started

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def steady_records_per_s(self) -> float | None:
        """Records per second of the batches after the first (from the end of batch 0), None for one batch."""
        if len(self.batches) < 2:
            return None
        after_first = sum(count for _, count, _ in self.batches[1:])
        return after_first / (self.finished - self.first_committed)


def checkpoint_timing(
    store: StateStore, checkpoint: str, topic: str, records: int
) -> tuple[Timing | None, dict[int, float], dict[int, float]]:
    """The timing once the batch covering ``records`` records of ``topic`` is committed (else None), with
    when each batch's offsets and commit files were written (see StateStore.batch_times)."""
    offsets, commits = store.batch_times(checkpoint)
    batches = []
    before = 0
    for batch in sorted(offsets):
        if batch not in commits:
            return None, offsets, commits
        path = locations.join(checkpoint, "offsets", str(batch))
        text = store.read_once(path).decode("utf-8")
        covered = sum(o for tp, o in parse_offsets_file(path, text).items() if tp.topic == topic)
        batches.append((batch, covered - before, commits[batch] - offsets[batch]))
        before = covered
        if covered >= records:
            if 0 not in offsets:
                raise RuntimeError(f"{checkpoint} has no offsets/0; it is not a fresh checkpoint")
            return Timing(covered, tuple(batches), offsets[0], commits[batch], commits[0]), offsets, commits
    return None, offsets, commits


def _cpu_ticks_by_group() -> collections.Counter[int]:
    """CPU ticks (user + system) of every live process, summed per process group."""
    ticks: collections.Counter[int] = collections.Counter()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()  # fields 3.. of proc(5): state, ppid, pgrp, ...
            ticks[int(fields[2])] += int(fields[11]) + int(fields[12])
    return ticks


def _busy_ticks() -> int:
    """CPU ticks the whole machine spent busy (user, nice, system, irq, softirq) since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return values[0] + values[1] + values[2] + values[5] + values[6]


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds so far: of the query's process group, of the store's server, of this benchmark's
    processes (the query, the server, the brokers, this script), of the machine."""

    query: float
    store: float
    ours: float
    busy: float

    @classmethod
    def take(cls, query_pgid: int, our_pgids: set[int], store_pgid: int | None) -> CpuSample:
        groups = _cpu_ticks_by_group()
        ours = sum(groups[g] for g in our_pgids | {query_pgid}) / CLOCK_TICKS
        own = os.times()
        return cls(
            query=groups[query_pgid] / CLOCK_TICKS,
            store=groups[store_pgid] / CLOCK_TICKS if store_pgid is not None else 0.0,
            ours=ours + own.user + own.system,
            busy=_busy_ticks() / CLOCK_TICKS,
        )


def wait_for_records(
    store: StateStore,
    checkpoint: str,
    topic: str,
    records: int,
    process: ManagedProcess,
    what: str,
    timeout: float,
    our_pgids: set[int],
) -> tuple[Timing, dict[str, float]]:
    """Wait until ``records`` records are committed; return the timing and the CPU seconds in between.

    The CPU is sampled when ``offsets/0`` first shows and when the last batch's commit shows (polled every
    0.1 s): ``cpu_s`` of the query's process group, ``store_cpu_s`` of the store's server (moto, HDFS; 0 on
    local disk), ``other_cpu_s`` of processes that are neither the query, the server, the sandbox's brokers
    nor this script (other work on the machine).
    """
    deadline = time.monotonic() + timeout
    reported = -1
    pgid = process.pid()
    store_pgid = store.server_pgid()
    first: CpuSample | None = None
    while time.monotonic() < deadline:
        timing, offsets, commits = checkpoint_timing(store, checkpoint, topic, records)
        if first is None and 0 in offsets and pgid is not None:
            first = CpuSample.take(pgid, our_pgids, store_pgid)
        if timing is not None:
            if first is None or pgid is None:
                raise RuntimeError(f"{what} finished before its CPU could be sampled")
            last = CpuSample.take(pgid, our_pgids, store_pgid)
            return timing, {
                "cpu_s": last.query - first.query,
                "store_cpu_s": last.store - first.store,
                "other_cpu_s": (last.busy - first.busy) - (last.ours - first.ours),
            }
        committed = max(commits, default=-1)
        if committed != reported:
            if committed >= 0:
                say(f"  {what}: batch {committed} committed")
            reported = committed
        if not process.is_running():
            raise RuntimeError(
                f"{what} exited before committing {records} records; log {process.log_file}:\n"
                f"{process.log_tail(40)}"
            )
        time.sleep(0.1)
    raise RuntimeError(
        f"{what} did not commit {records} records within {timeout:.0f} s; log {process.log_file}"
    )


# ---- the topic ---------------------------------------------------------------------------------------


def load_topic(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    """Create ``topic`` and produce ``records`` small JSON records round-robin; return the seconds taken."""
    create_topic(bootstrap, topic, partitions)
    started = time.perf_counter()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": "none",
        }
    )
    for n in range(records):
        value = b'{"id": "r-%d"}' % n
        while True:
            try:
                producer.produce(topic, value=value, partition=n % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if n % 50_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"could not deliver every record to {topic} within 120 s")
    seconds = time.perf_counter() - started
    loaded = sum((end_offsets(bootstrap, topic) or {}).values())
    if loaded != records:
        raise RuntimeError(f"{topic} holds {loaded} records after loading, expected {records}")
    return seconds


# ---- the two queries ---------------------------------------------------------------------------------


@dataclass
class Bench:
    """What every query of one benchmark run shares."""

    root: Path
    bootstrap: str
    args: argparse.Namespace
    processes: list[ManagedProcess]
    our_pgids: set[int]
    store: StateStore

    @property
    def spark_conf(self) -> dict[str, str]:
        """The job's ``--conf`` settings: the benchmark's and the store's."""
        return {**SPARK_CONF, **self.store.spark_conf()}

    @functools.cached_property
    def hook(self) -> StreamingJobHook:
        return StreamingJobHook(
            SPARK_CONN_ID,
            conf=self.spark_conf,
            jars=jars_option(),
            driver_memory=self.args.driver_memory,
            storage_connections=self.store.connections,
            storage_timeout_seconds=STORAGE_TIMEOUT_S,
        )

    def job_settings(
        self, pair: str, topic: str, max_offsets: int | None = None, trigger: float | None = None
    ) -> tuple[JobSettings, RunLayout]:
        """A fresh run of ``pair`` on ``topic``: its checkpoint, run folder, sink and fence on the store."""
        local_root = None if self.store.kind == "local" else str(self.root / "local")
        layout = RunLayout(
            pair, "A", 0, self.store.location("checkpoints"), self.store.location("runs"), local_root
        )
        fence = self.store.location(f"fence-{pair}")
        FencingMarker(fence, pair).advance(None, 0, "A")
        settings = JobSettings(
            pair=pair,
            cluster="A",
            epoch=0,
            bootstrap_servers=self.bootstrap,
            checkpoint=layout.checkpoint,
            sink_root=self.store.location(f"sink-{pair}"),
            bookkeeping_group=f"bk-{pair}",
            fencing_marker=fence,
            run_dir=layout.run_dir,
            topics=(topic,),
            starting_offsets="earliest",
            record_id_field="id",
            max_offsets_per_trigger=max_offsets or self.args.max_offsets_per_trigger,
            trigger_interval_seconds=trigger or self.args.trigger_interval,
        )
        return settings, layout

    def submit(self, settings: JobSettings, layout: RunLayout, application: Path | None = None) -> JobHandle:
        """Start a run of ``application`` (the packaged job when None) and wait until it runs."""
        # Known for the clean-up before submit returns (it raises when the job fails to start).
        self.processes.append(ManagedProcess(PROCESS_NAME, Path(layout.local_dir)))
        return self.hook.submit(settings, layout, application or JOB_APPLICATION, startup_timeout=240)

    def stop_job(self, handle: JobHandle) -> None:
        outcome = self.hook.stop(handle, timeout=60)
        handle.process.stop(timeout=10)  # no-op once it stopped on request
        say(f"  job stopped ({outcome})")

    def submit_to_first_batch(self, topic: str) -> tuple[float, float]:
        """Submit a fresh run on ``topic``; return seconds until it runs and until its first batch commits."""
        settings, layout = self.job_settings("bench-latency", topic)
        started = time.monotonic()
        handle = self.submit(settings, layout)
        running = time.monotonic() - started
        deadline = started + 240
        while not self.store.batch_times(settings.checkpoint)[1]:
            if not handle.process.is_running():
                raise RuntimeError(f"the job exited before its first batch:\n{handle.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no batch committed within 240 s of submit:\n{handle.log_tail()}")
            time.sleep(0.05)
        first_batch = time.monotonic() - started
        self.stop_job(handle)
        return running, first_batch

    def run_job(
        self,
        topic: str,
        pair: str,
        records: int,
        max_offsets: int | None = None,
        trigger: float | None = None,
    ) -> dict:
        """Run the job on ``topic`` until ``records`` records are committed; stop it; return its figures."""
        settings, layout = self.job_settings(pair, topic, max_offsets, trigger)
        handle = self.submit(settings, layout)
        say(f"  job running (log {handle.log_file})")
        try:
            timing, cpu = wait_for_records(
                self.store,
                settings.checkpoint,
                topic,
                records,
                handle.process,
                "job",
                self.args.timeout,
                self.our_pgids,
            )
        finally:
            self.stop_job(handle)
        progress = read_progress(settings.checkpoint)
        last_written_at = (read_batch_record(settings.checkpoint, progress.batch_id) or {})["written_at"]
        log_text = handle.log_file.read_text()
        matches = list(JOB_BATCH_LINE.finditer(log_text))
        inside = {int(m[1]): (float(m[3]), float(m[4]) if m[4] else None) for m in matches}
        fence_checks = {int(m[1]): float(m["fence"]) for m in matches if m["fence"] is not None}
        between = BETWEEN_CHECKS_LINE.search(log_text)
        return {
            "timing": timing,
            **cpu,
            "progress_records": progress.records,
            "last_written_at": last_written_at,
            "inside_batch_s": inside,
            "fence_check_s": fence_checks,
            "between_checks": {k: float(v) for k, v in between.groupdict().items()} if between else None,
            "rows": self.store.parquet_rows(settings.sink_root),
            "checkpoint": settings.checkpoint,
            "sink_root": settings.sink_root,
        }

    def run_plain(self, topic: str, round_no: int) -> dict:
        folder = self.root / f"plain-r{round_no}"
        folder.mkdir(parents=True)
        script = folder / "plain_query.py"
        script.write_text(PLAIN_QUERY)
        stop_file = folder / "stop-request"
        checkpoint = self.store.location(f"plain-r{round_no}", "checkpoint")
        output = self.store.location(f"plain-r{round_no}", "output")
        command = [str(Path(sys.executable).parent / "spark-submit"), "--master", MASTER]
        for key, value in {**SPARK_CONF, **self.store.spark_conf()}.items():
            command += ["--conf", f"{key}={value}"]
        properties = self.store.properties_file(folder, [checkpoint, output])
        if properties is not None:  # as the job's submit passes the store's keys: never on a command line
            command += ["--properties-file", str(properties), "--load-spark-defaults"]
        command += [
            "--jars",
            jars_option(),
            "--driver-memory",
            self.args.driver_memory,
            "--name",
            "bench-plain",
            str(script),
            "--bootstrap",
            self.bootstrap,
            "--topic",
            topic,
            "--checkpoint",
            checkpoint,
            "--output",
            output,
            "--max-offsets-per-trigger",
            str(self.args.max_offsets_per_trigger),
            "--trigger-interval",
            str(self.args.trigger_interval),
            "--stop-file",
            str(stop_file),
        ]
        process = ManagedProcess("plain", folder)
        self.processes.append(process)
        process.start(command, env=job_environment(None))  # the PATH and Python the job gets
        say(f"  plain query started (log {process.log_file})")
        try:
            timing, cpu = wait_for_records(
                self.store,
                checkpoint,
                topic,
                self.args.records,
                process,
                "plain query",
                self.args.timeout,
                self.our_pgids,
            )
        finally:
            stop_file.write_text("stop")
            deadline = time.monotonic() + 60
            while process.is_running() and time.monotonic() < deadline:
                time.sleep(0.25)
            process.stop(timeout=10)
            say("  plain query stopped")
        return {"timing": timing, **cpu, "rows": self.store.parquet_rows(output)}


# ---- the plan's reads of a checkpoint -----------------------------------------------------------------


def time_plan_reads(store: StateStore, checkpoint: str, sink_root: str, repeats: int) -> dict[str, float]:
    """Seconds the switch's plan step spends reading the old run's checkpoint and sink, median of
    ``repeats``, each in a freshly registered store (as in a new task process): opening the store (its
    connection and first check), ``load_position`` then ``uncommitted_output_records`` (what
    ``steps.make_plan`` reads from the store, in its order), and ``read_checkpoint`` once more alone."""
    samples: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(repeats):
        store.register()
        started = time.perf_counter()
        open_store(checkpoint)
        opened = time.perf_counter()
        position = load_position(checkpoint=checkpoint)
        loaded = time.perf_counter()
        uncommitted = uncommitted_output_records(checkpoint, sink_root, 0)
        counted = time.perf_counter()
        read_checkpoint(checkpoint)
        read = time.perf_counter()
        if position is None or uncommitted != 0:
            raise RuntimeError(f"{checkpoint}: no position ({position}) or uncommitted rows ({uncommitted})")
        samples["open_store_s"].append(opened - started)
        samples["load_position_s"].append(loaded - opened)
        samples["uncommitted_output_s"].append(counted - loaded)
        samples["read_checkpoint_s"].append(read - counted)
        samples["plan_store_reads_s"].append(counted - started)
    return {key: round(statistics.median(values), 4) for key, values in samples.items()}


def measure_plan(bench: Bench, topic: str, records: int) -> dict:
    """Run the job in ``--plan-batches`` small batches; time the plan's reads of the checkpoint it leaves,
    on the store and on a local copy of it; return those and the run's fence checks."""
    args, store = bench.args, bench.store
    per_batch = max(1, -(-records // args.plan_batches))
    say(f"plan: the job in {args.plan_batches} batches of {per_batch} records (trigger 0.1 s)")
    run = bench.run_job(topic, "bench-plan", records, max_offsets=per_batch, trigger=0.1)
    timing = run["timing"]
    say(f"  {len(timing.batches)} batches in {timing.seconds:.1f} s ({timing.records_per_s:.0f} records/s)")
    checkpoint, sink_root = run["checkpoint"], run["sink_root"]
    figures = {
        "plan_batches": len(timing.batches),
        "plan_run_records_per_s": round(timing.records_per_s),
        "plan_run": run,
        "on_store": time_plan_reads(store, checkpoint, sink_root, args.plan_repeats),
    }
    say(f"  plan reads on {store.kind}: {figures['on_store']}")
    if store.kind != "local":
        local = bench.root / "plan-local-copy"
        copied = store.copy_to_local(checkpoint, local / "checkpoint")
        copied += store.copy_to_local(sink_root, local / "sink")
        figures["local_copy_objects"] = copied
        figures["on_local_copy"] = time_plan_reads(
            store, str(local / "checkpoint"), str(local / "sink"), args.plan_repeats
        )
        say(f"  plan reads on a local copy ({copied} files): {figures['on_local_copy']}")
    return figures


# ---- reporting ---------------------------------------------------------------------------------------


def report_round(round_no: int, job: dict, plain: dict) -> None:
    say(f"round {round_no}: per batch (records, seconds from offsets/<b> to commits/<b>)")
    say(
        f"  {'batch':>5} {'records':>9} {'plain s':>8} {'job s':>8} {'job in batch fn s':>18} "
        f"{'of which write s':>17} {'fence check s':>14}"
    )
    plain_batches = {b: (n, s) for b, n, s in plain["timing"].batches}
    for batch, count, seconds in job["timing"].batches:
        plain_s = f"{plain_batches[batch][1]:8.2f}" if batch in plain_batches else f"{'-':>8}"
        inside, write = job["inside_batch_s"].get(batch, (None, None))
        inside_s = f"{inside:18.2f}" if inside is not None else f"{'-':>18}"
        write_s = f"{write:17.2f}" if write is not None else f"{'-':>17}"
        fence = job["fence_check_s"].get(batch)
        fence_s = f"{fence:14.3f}" if fence is not None else f"{'-':>14}"
        say(f"  {batch:>5} {count:>9} {plain_s} {seconds:8.2f} {inside_s} {write_s} {fence_s}")
    say(
        f"  {'query':<6} {'batches':>7} {'records':>9} {'seconds':>8} {'records/s':>10} {'after b0/s':>10} "
        f"{'CPU s':>6} {'store CPU s':>11} {'other CPU s':>11} {'rows':>8}"
    )
    for name, result in (("plain", plain), ("job", job)):
        timing = result["timing"]
        steady = timing.steady_records_per_s
        steady_s = f"{steady:10.0f}" if steady is not None else f"{'-':>10}"
        say(
            f"  {name:<6} {len(timing.batches):>7} {timing.records:>9} {timing.seconds:8.2f} "
            f"{timing.records_per_s:10.0f} {steady_s} {result['cpu_s']:6.1f} {result['store_cpu_s']:11.1f} "
            f"{result['other_cpu_s']:11.1f} {result['rows']:>8}"
        )
    lag = job["timing"].finished - job["last_written_at"]
    say(
        f"  job cross-check: progress entries count {job['progress_records']} records; last written_at is "
        f"{lag:.2f} s before the commit; records/s up to written_at "
        f"{job['timing'].records / (job['last_written_at'] - job['timing'].started):.0f}"
    )


def _median_round(rounds: list[tuple[dict, dict]], ratio) -> tuple[dict, dict]:
    """The round whose ``ratio(job, plain)`` is the median (the lower one for an even count)."""
    ordered = sorted(rounds, key=lambda pair: ratio(*pair))
    return ordered[(len(ordered) - 1) // 2]


def _stats(prefix: str, values: list[float]) -> dict[str, float | None]:
    return {
        f"{prefix}_median_s": round(statistics.median(values), 4) if values else None,
        f"{prefix}_max_s": round(max(values), 4) if values else None,
    }


def fence_figures(rounds: list[tuple[dict, dict]], plan: dict | None) -> dict:
    """The stop-and-fence check: before each batch (on the batch's critical path) over every batch of the
    job's throughput runs, and its share of those batches' time; over the small batches of the plan run;
    and the checks between batches of the plan run (how many per second, how long)."""
    checks = [s for job, _ in rounds for s in job["fence_check_s"].values()]
    batch_seconds = sum(seconds for job, _ in rounds for _, _, seconds in job["timing"].batches)
    figures: dict = {
        **_stats("fence_check", checks),
        "fence_check_share_of_batch_time": round(sum(checks) / batch_seconds, 4) if checks else None,
    }
    if plan is not None:
        run = plan["plan_run"]
        figures.update(_stats("fence_check_small_batches", list(run["fence_check_s"].values())))
        between = run["between_checks"] or {}
        figures.update(
            {
                "between_checks": int(between["count"]) if between else None,
                "between_checks_per_s": between.get("rate"),
                "between_check_median_s": between.get("median"),
                "between_check_max_s": between.get("max"),
            }
        )
    return figures


def plan_figures(plan: dict | None) -> dict:
    """The plan's reads of the plan run's checkpoint, on the store and on a local copy."""
    if plan is None:
        return {}
    figures = {"plan_batches": plan["plan_batches"], "plan_run_records_per_s": plan["plan_run_records_per_s"]}
    figures.update({f"plan_{key}": value for key, value in plan["on_store"].items()})
    for key, value in plan.get("on_local_copy", {}).items():
        figures[f"plan_local_{key}"] = value
    return figures


def summarize(args: argparse.Namespace, figures: dict, machine: str) -> dict:
    """The final figures: rates and ratio of the median round by throughput ratio, CPU of the median round
    by CPU ratio, the median of the rounds' steady-state ratios."""
    rounds = figures["rounds"]

    def throughput(job: dict, plain: dict) -> float:
        return job["timing"].records_per_s / plain["timing"].records_per_s

    def cpu(job: dict, plain: dict) -> float:
        return plain["cpu_s"] / job["cpu_s"]

    def cpu_with_store(job: dict, plain: dict) -> float:
        return (plain["cpu_s"] + plain["store_cpu_s"]) / (job["cpu_s"] + job["store_cpu_s"])

    job, plain = _median_round(rounds, throughput)
    job_cpu, plain_cpu = _median_round(rounds, cpu)
    steady = [(j["timing"].steady_records_per_s, p["timing"].steady_records_per_s) for j, p in rounds]
    steady_ratios = [j / p for j, p in steady if j and p]
    busy = [r["other_cpu_s"] / (r["timing"].seconds * (os.cpu_count() or 1)) for pair in rounds for r in pair]
    return {
        "store": args.store,
        "store_start_s": round(figures["store_start_s"], 1),
        "records": args.records,
        "partitions": args.partitions,
        "max_offsets_per_trigger": args.max_offsets_per_trigger,
        "trigger_interval_s": args.trigger_interval,
        "rounds": len(rounds),
        "load_s": round(figures["load_s"], 2),
        "job_records_per_s": round(job["timing"].records_per_s),
        "plain_records_per_s": round(plain["timing"].records_per_s),
        "throughput_ratio": round(throughput(job, plain), 3),
        "round_ratios": [round(throughput(j, p), 3) for j, p in rounds],
        "steady_throughput_ratio": round(statistics.median(steady_ratios), 3) if steady_ratios else None,
        "job_cpu_s": round(job_cpu["cpu_s"], 1),
        "plain_cpu_s": round(plain_cpu["cpu_s"], 1),
        "cpu_ratio": round(cpu(job_cpu, plain_cpu), 3),
        "job_store_cpu_s": round(job_cpu["store_cpu_s"], 1),
        "plain_store_cpu_s": round(plain_cpu["store_cpu_s"], 1),
        "cpu_with_store_ratio": round(cpu_with_store(*_median_round(rounds, cpu_with_store)), 3),
        **fence_figures(rounds, figures.get("plan")),
        **plan_figures(figures.get("plan")),
        "other_load_max_share": round(max(busy), 2),
        "measured_under_load": max(busy) > LOADED_SHARE,
        "submit_to_running_s": round(figures["to_running"], 2),
        "submit_to_first_batch_s": round(figures["to_first_batch"], 2),
        "mirrormaker": "stopped during the measurements",
        "machine": machine,
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the topic (1000000)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic (4)")
    parser.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=250_000,
        help="maxOffsetsPerTrigger of both queries (250000)",
    )
    parser.add_argument(
        "--trigger-interval",
        type=float,
        default=1.0,
        help="processing-time trigger interval of both queries, seconds (1)",
    )
    parser.add_argument("--driver-memory", default="1g", help="--driver-memory of both queries (1g)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of job + plain, order alternating (3)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one query may take (900)")
    parser.add_argument(
        "--store",
        choices=KINDS,
        default="local",
        help="where both queries keep checkpoint and sink, and the job its run folder and fence: local disk, "
        "moto's S3 server (s3a://) or HDFS (hdfs://), started and stopped by the benchmark (local)",
    )
    parser.add_argument(
        "--plan-batches",
        type=int,
        help="after the rounds, run the job in this many small batches (trigger 0.1 s) and time the plan's "
        "reads of the checkpoint it leaves; 0 skips it (300 on a store, 0 locally)",
    )
    parser.add_argument("--plan-repeats", type=int, default=5, help="timings of the plan's reads (5)")
    parser.add_argument("--keep", action="store_true", help="keep the run directory (logs, data)")
    args = parser.parse_args()
    if args.plan_batches is None:
        args.plan_batches = 0 if args.store == "local" else 300
    return args


def measure(args: argparse.Namespace, sandbox: Sandbox, bench: Bench) -> dict:
    """Bring the sandbox up and run every measurement; return the figures."""
    job_jars()  # resolve and compile before timing anything
    started = time.monotonic()
    sandbox.up()
    say(f"sandbox up in {time.monotonic() - started:.1f} s")
    sandbox.stop_mirrormaker()
    say("stopped MirrorMaker 2 so that replicating the topic to B does not compete for the CPU")
    bench.bootstrap = sandbox.bootstrap("A")
    store_start_s = bench.store.start()
    if args.store != "local":
        say(f"{args.store} store up in {store_start_s:.1f} s: {bench.store.location()}")
    servers = [broker.process.pid() for broker in sandbox.brokers.values()] + [bench.store.server_pgid()]
    bench.our_pgids = {pid for pid in servers if pid is not None}  # each server leads its process group

    load_topic(bench.bootstrap, "bench-latency", LATENCY_RECORDS, args.partitions)
    say(f"submit to first batch: a fresh run on {LATENCY_RECORDS} records")
    to_running, to_first_batch = bench.submit_to_first_batch("bench-latency")
    say(f"  running after {to_running:.1f} s, first batch committed after {to_first_batch:.1f} s")

    say(f"loading {args.records} records into {args.partitions} partitions")
    load_s = load_topic(bench.bootstrap, "bench-records", args.records, args.partitions)
    say(f"  loaded in {load_s:.1f} s ({args.records / load_s:.0f} records/s)")

    rounds = []
    for round_no in range(1, args.rounds + 1):
        order = ("job", "plain") if round_no % 2 else ("plain", "job")
        results = {}
        for name in order:
            say(f"round {round_no}: {name}")
            if name == "job":
                results[name] = bench.run_job("bench-records", f"bench-r{round_no}", args.records)
            else:
                results[name] = bench.run_plain("bench-records", round_no)
            timing = results[name]["timing"]
            say(
                f"  {name}: {timing.records} records in {timing.seconds:.2f} s = "
                f"{timing.records_per_s:.0f} records/s"
            )
            if results[name]["rows"] != args.records:
                raise RuntimeError(f"the {name} wrote {results[name]['rows']} rows, expected {args.records}")
        rounds.append((results["job"], results["plain"]))
    plan = measure_plan(bench, "bench-records", args.records) if args.plan_batches else None
    return {
        "to_running": to_running,
        "to_first_batch": to_first_batch,
        "load_s": load_s,
        "rounds": rounds,
        "plan": plan,
        "store_start_s": store_start_s,
    }


def clean_up(bench: Bench, sandbox: Sandbox) -> None:
    """Stop every process this run started (already stopped ones are skipped), then the sandbox."""
    for process in bench.processes:
        try:
            process.stop(timeout=10)
        except Exception as exc:  # stop the rest regardless
            say(f"could not stop {process.name} in {process.run_dir}: {exc}")
    bench.store.stop()
    sandbox.down()
    say("sandbox down")


def main() -> int:
    args = parse_args()
    json_out = json_line_output()  # stdout keeps only the final JSON line

    machine = f"{os.cpu_count()} cores, Python {platform.python_version()}"
    root = REPO / ".run" / f"bench-job-{os.getpid()}"
    others = subprocess.run(["pgrep", "-c", "java"], capture_output=True, text=True, check=False).stdout
    say(
        f"machine: {platform.node()} {machine}; run dir {root}; "
        f"java processes running before the start: {others.strip() or 0}"
    )
    os.environ[f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}"] = json.dumps({"conn_type": "spark", "host": MASTER})
    sandbox = Sandbox(root / "sandbox")
    bench = Bench(root, "", args, [], set(), StateStore(args.store, root))
    figures = None
    try:
        figures = measure(args, sandbox, bench)
    finally:
        clean_up(bench, sandbox)
        if figures is not None and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            say(f"run directory kept: {root}")

    for round_no, (job, plain) in enumerate(figures["rounds"], start=1):
        report_round(round_no, job, plain)
    summary = summarize(args, figures, machine)
    say(
        f"state on {args.store}: throughput ratio job/plain: {summary['throughput_ratio']} (target >= 0.95); "
        f"submit to first batch {summary['submit_to_first_batch_s']} s; stop and fence check before a "
        f"batch: median {summary['fence_check_median_s']} s, max {summary['fence_check_max_s']} s"
    )
    if figures["plan"] is not None:
        say(
            f"plan's reads of a checkpoint of {summary['plan_batches']} batches: "
            f"{summary['plan_plan_store_reads_s']} s on {args.store}"
            + (
                f", {summary['plan_local_plan_store_reads_s']} s on a local copy"
                if args.store != "local"
                else ""
            )
        )
    if summary["measured_under_load"]:
        say(
            f"WARNING: other work used up to {summary['other_load_max_share']:.0%} of the cores during a "
            "measurement; the rates and their ratio are not reliable: run again on a quiet machine"
        )
    json_out.write(json.dumps(summary) + "\n")
    json_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

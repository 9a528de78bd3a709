"""What the packaged job costs while it runs at a low rate: its driver's CPU per minute and per batch.

``bench_job.py`` measures the job at full speed; most pairs spend their life well below it, where what
counts is the cost of each batch however small (planning, the batch function's call, the write's commit,
the progress entry, the group commit, the listener). Starts a sandbox (MirrorMaker 2 stopped), a fresh run of
the packaged job on a topic of ``--partitions`` partitions on A (spark-submit, ``local[2]``, the settings of
``bench_job.py``), waits for its first batch, produces ``--rate`` records a second for ``--warmup``
seconds (the JVM's compilers are busy with the new code for about a minute, and would be counted), then for
``--seconds`` more and samples the CPU of the driver's process group from ``/proc``: the JVM (which runs
the executor in local mode) and the driver's Python, apart. Batches are counted from the run's checkpoint
(``commits/<b>``).

    .venv/bin/python benchmarks/bench_job_steady.py [--rate 20] [--warmup 60] [--seconds 60]
        [--partitions 2] [--trigger-interval 1] [--application examples/jobs/orders_to_delta/job.py]
        [--local-spark-conf] [--conf KEY=VALUE ...]

``--application`` runs a job of your own on the job-side API instead of the packaged one (each record is an
order: ``id``, ``ts``, ``customer``, ``amount``, which the packaged job reads as records with an ``id``).
``--local-spark-conf`` gives the driver the Spark settings of the tests' and the demo's local drivers
(``akf_devtools.demo.story.LOCAL_SPARK_CONF``: the serial collector and the quick compiler, the class-sharing
archive, Hadoop's local file system without a process per file) instead of ``bench_job.py``'s; ``--conf``
adds or replaces one setting on top of either, to see what it changes.

Progress goes to stderr; the last line on stdout is JSON with jvm_cpu_s_per_min, python_cpu_s_per_min,
cpu_s_per_min, batches_per_min, cpu_s_per_batch, submit_to_first_batch_s (from the submit to the commit of
the first batch, whose records are produced once the job runs) and the machine.
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

from akf_devtools.demo.story import LOCAL_SPARK_CONF  # noqa: E402
from akf_devtools.sandbox.jars import job_jars  # noqa: E402
from akf_devtools.sandbox.kafka_io import create_topic  # noqa: E402
from akf_devtools.sandbox.sandbox import Sandbox  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

from benchmarks.bench_job import (  # noqa: E402
    MASTER,
    SPARK_CONF,
    SPARK_CONN_ID,
    Bench,
    clean_up,
    say,
)
from benchmarks.json_output import json_line_output  # noqa: E402
from benchmarks.state_store import StateStore  # noqa: E402

TOPIC = "bench-steady"
TICKS = os.sysconf("SC_CLK_TCK")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=20.0, help="records produced per second (20)")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds at the rate before (60)")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds measured (60)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the topic (2)")
    parser.add_argument("--trigger-interval", type=float, default=1.0, help="the job's trigger, seconds (1)")
    parser.add_argument("--driver-memory", default="1g", help="--driver-memory of the job (1g)")
    parser.add_argument(
        "--application", type=Path, help="a job on the job-side API to run instead of the packaged one"
    )
    parser.add_argument(
        "--local-spark-conf",
        action="store_true",
        help="the Spark settings of the tests' local drivers (LOCAL_SPARK_CONF) instead of bench_job.py's",
    )
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="one more Spark setting (repeatable)"
    )
    args = parser.parse_args()
    if args.application is not None and not args.application.is_file():
        parser.error(f"--application {args.application} is not a file: give the path of a job's Python file")
    args.spark_conf = {}
    for setting in args.conf:
        key, equals, value = setting.partition("=")
        if not equals or not key.strip():
            parser.error(
                f"--conf {setting!r} is not KEY=VALUE (for example spark.sql.adaptive.enabled=false)"
            )
        args.spark_conf[key.strip()] = value
    if min(args.rate, args.seconds, args.partitions, args.trigger_interval) <= 0 or args.warmup < 0:
        parser.error(
            "--rate, --seconds, --partitions and --trigger-interval must be positive, --warmup not negative"
        )
    args.max_offsets_per_trigger = None  # what Bench.job_settings reads
    return args


def cpu_by_kind(pgid: int) -> dict[str, float]:
    """CPU seconds used so far by the processes of group ``pgid``: ``jvm`` (java) and ``python``."""
    used = {"jvm": 0.0, "python": 0.0}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) != pgid:
            continue
        kind = "jvm" if name == "java" else "python" if name.startswith("python") else None
        if kind is not None:
            used[kind] += (int(fields[11]) + int(fields[12])) / TICKS
    return used


def produce_steadily(bootstrap: str, rate: float, seconds: float, partitions: int) -> int:
    """Produce ``rate`` small orders a second (``{"id": "s-<n>", "ts": ..., "customer": ..., "amount": ...}``)
    for ``seconds``; return how many."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    started, sent = time.monotonic(), 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate) + 1
        while sent < due:
            order = {"id": f"s-{sent}", "ts": int(time.time() * 1000), "customer": f"c-{sent % 97}"}
            order["amount"] = float(sent % 250)
            producer.produce(TOPIC, json.dumps(order).encode(), partition=sent % partitions)
            sent += 1
        producer.poll(0)
        time.sleep(min(0.05, 1 / rate))
    producer.flush(30)
    return sent


def measure(args: argparse.Namespace, sandbox: Sandbox, bench: Bench) -> dict:
    job_jars()  # resolve and compile before anything is timed
    sandbox.up()
    sandbox.stop_mirrormaker()
    bench.bootstrap = sandbox.bootstrap("A")
    create_topic(bench.bootstrap, TOPIC, args.partitions)
    settings, layout = bench.job_settings("bench-steady", TOPIC, trigger=args.trigger_interval)
    submitted = time.monotonic()
    handle = bench.submit(settings, layout, args.application)
    pgid = handle.process.pid()
    if pgid is None:
        raise RuntimeError(f"the job is not running:\n{handle.log_tail()}")
    say(f"job running (log {handle.log_file}); waiting for its first batch")
    produce_steadily(bench.bootstrap, args.rate, 2.0, args.partitions)
    deadline = time.monotonic() + 240
    while not bench.store.batch_times(settings.checkpoint)[1]:
        if time.monotonic() > deadline or not handle.process.is_running():
            raise RuntimeError(f"no first batch:\n{handle.log_tail()}")
        time.sleep(0.2)
    first_batch_s = time.monotonic() - submitted
    say(f"first batch committed {first_batch_s:.1f} s after the submit")
    say(f"warming up for {args.warmup:.0f} s at {args.rate:g} records/s")
    produce_steadily(bench.bootstrap, args.rate, args.warmup, args.partitions)
    time.sleep(2 * args.trigger_interval)  # the batches of the records produced so far
    batches_before = len(bench.store.batch_times(settings.checkpoint)[1])
    before, started = cpu_by_kind(pgid), time.monotonic()
    say(f"measuring {args.seconds:.0f} s at {args.rate:g} records/s")
    sent = produce_steadily(bench.bootstrap, args.rate, args.seconds, args.partitions)
    after, elapsed = cpu_by_kind(pgid), time.monotonic() - started
    batches = len(bench.store.batch_times(settings.checkpoint)[1]) - batches_before
    bench.stop_job(handle)
    per_min = {kind: (after[kind] - before[kind]) * 60 / elapsed for kind in after}
    total = sum(after[kind] - before[kind] for kind in after)
    return {
        "rate": args.rate,
        "records_produced": sent,
        "warmup_s": args.warmup,
        "seconds": round(elapsed, 1),
        "trigger_interval_s": args.trigger_interval,
        "partitions": args.partitions,
        "jvm_cpu_s_per_min": round(per_min["jvm"], 2),
        "python_cpu_s_per_min": round(per_min["python"], 2),
        "cpu_s_per_min": round(sum(per_min.values()), 2),
        "batches_per_min": round(batches * 60 / elapsed, 1),
        "cpu_s_per_batch": round(total / batches, 3) if batches else None,
        "submit_to_first_batch_s": round(first_batch_s, 1),
    }


class SteadyBench(Bench):
    """Bench_job's bench with the driver's Spark settings of the command line."""

    @property
    def spark_conf(self) -> dict[str, str]:
        base = LOCAL_SPARK_CONF if self.args.local_spark_conf else SPARK_CONF
        return {**base, **self.store.spark_conf(), **self.args.spark_conf}


def main() -> int:
    args = parse_args()
    json_out = json_line_output()
    root = REPO / ".run" / f"bench-job-steady-{os.getpid()}"
    os.environ[f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}"] = json.dumps({"conn_type": "spark", "host": MASTER})
    sandbox = Sandbox(root / "sandbox")
    bench = SteadyBench(root, "", args, [], set(), StateStore("local", root))
    try:
        figures = measure(args, sandbox, bench)
    finally:
        clean_up(bench, sandbox)
        shutil.rmtree(root, ignore_errors=True)
    figures["application"] = str(args.application or "packaged job")
    figures["spark_conf"] = "LOCAL_SPARK_CONF" if args.local_spark_conf else "bench_job.SPARK_CONF"
    figures["extra_conf"] = args.spark_conf
    figures["machine"] = f"{os.cpu_count()} cores, Python {platform.python_version()}"
    say(
        f"driver at {args.rate:g} records/s: {figures['cpu_s_per_min']} CPU s per minute (JVM "
        f"{figures['jvm_cpu_s_per_min']}, Python {figures['python_cpu_s_per_min']}), "
        f"{figures['batches_per_min']} batches per minute, {figures['cpu_s_per_batch']} CPU s per batch"
    )
    json_out.write(json.dumps(figures) + "\n")
    json_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

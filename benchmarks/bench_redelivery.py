"""Re-delivery benchmark: records read again, and records lost, when a consumer moves from A to B after A
crashes under a steady load, for five ways of choosing where it starts on B, side by side in one run.

One sandbox (two KRaft clusters, MirrorMaker 2, checkpoints every ``--checkpoint-interval`` s). A producer
writes ``--rate`` records/s (1,000) with unique ids to ``orders`` on A. A consumer stands in for the job: it
reads ``orders`` on A, and every second processes the records at least ``--lag`` seconds old (5: it trails
the head as a job does) as one batch (keeps their ids and newest timestamps), then commits the batch's end
offsets to the bookkeeping group on A, as the job does; MirrorMaker 2 checkpoints that group to B. After
``--warmup`` seconds A is crashed (kill -9) under load. The start offsets on B's ``A.orders`` are then
computed with each method:

- ``ours``: the provider's plan (``build_plan``, as ``kafka-failover plan --position`` and the failover DAG
  make it; A unreachable) from the consumer's last committed position and newest processed timestamps;
- ``mm2``: ``RemoteClusterUtils.translateOffsets`` of the group (MirrorMaker 2's own translation, what a
  user would do by hand), run by a small Java class compiled here with javac in a temporary directory;
- ``rewind_60s``: offsets-for-times at the newest processed record's timestamp minus 60 s, one time for
  all partitions (as Spark's ``startingTimestamp``);
- ``earliest`` and ``latest`` on B.

Counted per method over what B holds in ``A.orders`` (read in full after the crash):

- ``redelivered``: records at or after the start whose id the consumer had already processed;
- ``lost``: ids A acknowledged that the consumer did not process and that lie on B *before* the start,
  so a reader from the start never sees them.

Ids A acknowledged that never reached B (MirrorMaker 2 had not copied them when A died) are lost whatever
the start: reported once as ``lost_in_replication``. Target: ``ours_redelivered <= mm2_redelivered`` and
``ours_lost == 0``.

    .venv/bin/python benchmarks/bench_redelivery.py [--rate 1000] [--warmup 120] [--partitions 4]
        [--lag 5] [--checkpoint-interval 5]

Progress and the table go to stderr; the last line on stdout is JSON.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akf_devtools.sandbox.kafka_io import create_topic, end_offsets, read_all  # noqa: E402
from akf_devtools.sandbox.mirrormaker import ReplicationSettings  # noqa: E402
from akf_devtools.sandbox.producer import SteadyProducer  # noqa: E402
from akf_devtools.sandbox.sandbox import Sandbox  # noqa: E402
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException  # noqa: E402
from confluent_kafka import TopicPartition as KafkaTopicPartition  # noqa: E402

from airflow_kafka_failover.core.types import TopicPartition  # noqa: E402
from benchmarks.json_output import json_line_output  # noqa: E402

TOPIC = "orders"
REMOTE = f"A.{TOPIC}"
GROUP = "bk-bench-redelivery"
REWIND_S = 60
METHODS = ("ours", "mm2", "rewind_60s", "earliest", "latest")


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class JobStandIn:
    """Reads ``orders`` on A in batches of ``batch_s`` seconds; processes a batch, then commits its end.

    A batch holds the records fetched that are at least ``lag_s`` old: the stand-in trails the head as a
    job does (trigger interval, batch time, a backlog), so that it has not yet processed everything that
    reached B when A dies.

    :param bootstrap: cluster A.
    :param partitions: partitions of the topic.
    :param lag_s: how old a record must be before it is processed.
    :param batch_s: seconds between batches (the job's trigger interval).
    """

    def __init__(self, bootstrap: str, partitions: int, lag_s: float, batch_s: float = 1.0) -> None:
        self.bootstrap, self.partitions, self.lag_s, self.batch_s = bootstrap, partitions, lag_s, batch_s
        self.pending: collections.deque = collections.deque()
        self.processed: set[str] = set()
        self.newest_ms: dict[int, int] = {}
        self.next_offsets: dict[int, int] = {}
        self.committed: dict[int, int] = {}
        self.committed_newest_ms: dict[int, int] = {}
        self.processed_after_commit = 0
        self.commit_failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="job-stand-in", daemon=True)

    def start(self) -> JobStandIn:
        self._thread.start()
        return self

    def halt(self) -> None:
        """Process nothing more (the batch being fetched dies with A); its last commit is its position."""
        self._stop.set()

    def join(self) -> None:
        self._thread.join(timeout=60)

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "socket.connection.setup.timeout.ms": 2000,
                "socket.timeout.ms": 5000,
                "log_level": 0,
            }
        )
        consumer.assign([KafkaTopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        try:
            while not self._stop.is_set():
                self._batch(consumer)
        finally:
            consumer.close()

    def _batch(self, consumer: Consumer) -> None:
        end = time.monotonic() + self.batch_s
        messages = []
        while (left := end - time.monotonic()) > 0 and not self._stop.is_set():
            messages += consumer.consume(num_messages=2000, timeout=min(left, 0.5))
        if self._stop.is_set():
            return
        self.pending.extend(m for m in messages if m.error() is None)
        cut_ms = (time.time() - self.lag_s) * 1000
        records = []
        while self.pending and self.pending[0].timestamp()[1] <= cut_ms:
            records.append(self.pending.popleft())  # each partition's records stay in offset order
        if not records:
            return
        for message in records:
            self.processed.add(json.loads(message.value())["id"])
            partition = message.partition()
            self.next_offsets[partition] = message.offset() + 1
            self.newest_ms[partition] = max(self.newest_ms.get(partition, 0), message.timestamp()[1])
        self.processed_after_commit += len(records)
        offsets = [KafkaTopicPartition(TOPIC, p, o) for p, o in sorted(self.next_offsets.items())]
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException:
            self.commit_failures += 1  # A died under the batch: processed, never committed
            return
        self.committed, self.committed_newest_ms = dict(self.next_offsets), dict(self.newest_ms)
        self.processed_after_commit = 0


# ---- start offsets on B, one function per method ---------------------------------------------------------


def start_ours(conns: dict[str, str], job: JobStandIn) -> tuple[dict[int, int], dict]:
    """The provider's plan from the consumer's committed position; A is down, so its hook is None."""
    from airflow_kafka_failover.domain.config import parse_pair
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
    from airflow_kafka_failover.io.planner import build_plan
    from airflow_kafka_failover.run_format.spark_checkpoint import StreamPosition

    pair = parse_pair(
        "bench",
        {
            "clusters": {"A": {"connection": conns["A"]}, "B": {"connection": conns["B"]}},
            "primary": "A",
            "topics": [TOPIC],
            "bookkeeping_group": GROUP,
        },
    )
    position = StreamPosition(
        offsets={TopicPartition(TOPIC, p): o for p, o in job.committed.items()},
        max_timestamps_ms={TopicPartition(TOPIC, p): ts for p, ts in job.committed_newest_ms.items()},
    )
    started = time.perf_counter()
    plan = build_plan(pair, "A", "B", position, {"A": None, "B": KafkaClusterHook(conns["B"])})
    seconds = time.perf_counter() - started
    spark_offsets = json.loads(plan.to_spark_starting_offsets())[REMOTE]
    summary = {**plan.summary(), "plan_s": round(seconds, 3)}
    return {int(p): o for p, o in spark_offsets.items()}, summary


def start_mm2(bootstrap_b: str) -> dict[int, int]:
    """RemoteClusterUtils.translateOffsets of the group, through the tests' Java oracle compiled here."""
    from tests.integration.translation_support import run_oracle

    with tempfile.TemporaryDirectory(prefix="bench-mm2-") as work_dir:
        translated = run_oracle(bootstrap_b, "A", GROUP, Path(work_dir))
    return {tp.partition: offset for tp, offset in translated.items() if tp.topic == REMOTE}


def start_rewind(conns: dict[str, str], job: JobStandIn, partitions: int) -> dict[int, int | None]:
    """Offsets-for-times on B at the newest processed timestamp minus 60 s (None: no such record)."""
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook

    at_ms = max(job.newest_ms.values()) - REWIND_S * 1000
    wanted = {TopicPartition(REMOTE, p): at_ms for p in range(partitions)}
    found = KafkaClusterHook(conns["B"]).offsets_for_times(wanted)
    return {tp.partition: offset for tp, offset in found.items()}


def resolve(
    starts: dict[int, int | None], low: dict[int, int], high: dict[int, int]
) -> tuple[dict[int, int], int]:
    """Absolute offsets: Spark's -2/-1 and offsets-for-times' None resolved, missing partitions at earliest.

    :return: the offsets, and how many partitions had no answer of the method (started at earliest).
    """
    resolved, missing = {}, 0
    for partition in high:
        offset = starts.get(partition, -3)
        if offset == -3:
            missing += 1
            offset = -2
        special = {-2: low[partition], -1: high[partition], None: high[partition]}
        resolved[partition] = special.get(offset, offset)
    return resolved, missing


# ---- counting (pure) -------------------------------------------------------------------------------------


def count(
    start: dict[int, int], on_b: dict[int, list[tuple[int, str]]], processed: set[str], acked: set[str]
) -> dict[str, int]:
    """Records a reader from ``start`` sees again, and acknowledged unprocessed ids it never sees.

    :param on_b: per partition of the replica on B, ``(offset, id)`` of every record.
    :return: ``read``, ``redelivered`` and ``lost`` (ids on B before the start only).
    """
    read_ids: set[str] = set()
    before: set[str] = set()
    read = redelivered = 0
    for partition, records in on_b.items():
        for offset, record_id in records:
            if offset >= start[partition]:
                read += 1
                redelivered += record_id in processed
                read_ids.add(record_id)
            else:
                before.add(record_id)
    lost = (before & acked) - processed - read_ids
    return {"read": read, "redelivered": redelivered, "lost": len(lost)}


def compare(
    starts: dict[str, dict[int, int]],
    on_b: dict[int, list[tuple[int, str]]],
    processed: set[str],
    acked: set[str],
) -> dict:
    """Every method's counts, and the ids lost whatever the start (acknowledged, never copied to B)."""
    ids_on_b = {record_id for records in on_b.values() for _offset, record_id in records}
    results = {
        name: {"start": start, **count(start, on_b, processed, acked)} for name, start in starts.items()
    }
    return {
        "methods": results,
        "lost_in_replication": len(acked - processed - ids_on_b),
        "records_on_b": sum(len(records) for records in on_b.values()),
    }


# ---- the run ---------------------------------------------------------------------------------------------


def replica_contents(bootstrap_b: str) -> dict[int, list[tuple[int, str]]]:
    contents: dict[int, list[tuple[int, str]]] = {}
    for record in read_all(bootstrap_b, REMOTE, timeout=120):
        contents.setdefault(record.partition, []).append((record.offset, json.loads(record.value)["id"]))
    return contents


def wait_for_replica(bootstrap_b: str, partitions: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while len(end_offsets(bootstrap_b, REMOTE) or {}) != partitions:
        if time.monotonic() > deadline:
            raise TimeoutError(f"MirrorMaker 2 did not create {REMOTE} on B within {timeout:.0f} s")
        time.sleep(1)


def run_load(sandbox: Sandbox, args: argparse.Namespace) -> tuple[SteadyProducer, JobStandIn, float]:
    """Load A, let the stand-in consume, crash A under load; return the producer, the stand-in, the rate."""
    bootstrap_a = sandbox.bootstrap("A")
    create_topic(bootstrap_a, TOPIC, args.partitions)
    wait_for_replica(sandbox.bootstrap("B"), args.partitions)
    job = JobStandIn(bootstrap_a, args.partitions, args.lag).start()
    producer = SteadyProducer(
        {"A": bootstrap_a}, TOPIC, lambda: "A", rate=args.rate, prefix="r", partitions=args.partitions
    ).start()
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < args.warmup:
        time.sleep(min(10.0, args.warmup - elapsed))
        say(
            f"  {elapsed + min(10.0, args.warmup - elapsed):.0f} s: acknowledged {len(producer.acked_ids)}, "
            f"processed {len(job.processed)}, failed {producer.failed}"
        )
    rate = len(producer.acked_ids) / (time.monotonic() - started)
    job.halt()
    sandbox.fault("crash", "A")
    say(
        f"A crashed (kill -9) under load after {time.monotonic() - started:.0f} s; "
        f"producing {rate:.0f} records/s"
    )
    producer.stop(flush_timeout=8)
    job.join()
    return producer, job, rate


def watermarks_on_b(conns: dict[str, str], partitions: int) -> tuple[dict[int, int], dict[int, int]]:
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook

    found = KafkaClusterHook(conns["B"]).watermarks([TopicPartition(REMOTE, p) for p in range(partitions)])
    return {tp.partition: w.low for tp, w in found.items()}, {tp.partition: w.high for tp, w in found.items()}


def measure(sandbox: Sandbox, args: argparse.Namespace, conns: dict[str, str]) -> dict:
    """Run the load and the crash, compute every method's start on B and count; return the figures."""
    producer, job, rate = run_load(sandbox, args)
    if not job.committed:
        raise RuntimeError("the stand-in never committed a batch before the crash; raise --warmup")
    bootstrap_b = sandbox.bootstrap("B")
    low, high = watermarks_on_b(conns, args.partitions)
    ours, plan = start_ours(conns, job)
    say(f"ours: plan in {plan['plan_s']} s, methods {plan['methods']}, gap records {plan['gap_records']}")
    mm2 = start_mm2(bootstrap_b)
    say(f"mm2: RemoteClusterUtils.translateOffsets translated {len(mm2)} of {args.partitions} partitions")
    raw = {
        "ours": ours,
        "mm2": mm2,
        "rewind_60s": start_rewind(conns, job, args.partitions),
        "earliest": {p: -2 for p in high},
        "latest": {p: -1 for p in high},
    }
    starts, untranslated = {}, {}
    for name, start in raw.items():
        starts[name], untranslated[name] = resolve(start, low, high)
    acked = producer.acked_ids
    compared = compare(starts, replica_contents(bootstrap_b), job.processed, acked)
    return {
        "rate": rate,
        "acked": len(acked),
        "processed": len(job.processed),
        "plan": plan,
        "processed_after_commit": job.processed_after_commit,
        "commit_failures": job.commit_failures,
        "committed": job.committed,
        "untranslated": untranslated,
        **compared,
    }


def summarize(args: argparse.Namespace, figures: dict, machine: str) -> dict:
    """The final JSON: flat ``<method>_redelivered`` and ``<method>_lost``, details under ``methods``."""
    methods = figures["methods"]
    summary = {
        "rate_target": args.rate,
        "rate_achieved": round(figures["rate"]),
        "partitions": args.partitions,
        "warmup_s": args.warmup,
        "consumer_lag_s": args.lag,
        "checkpoint_interval_s": args.checkpoint_interval,
        "acked": figures["acked"],
        "processed": figures["processed"],
        "records_on_b": figures["records_on_b"],
        "processed_after_last_commit": figures["processed_after_commit"],
        "commit_failures": figures["commit_failures"],
        "lost_in_replication": figures["lost_in_replication"],
    }
    for name in METHODS:
        summary[f"{name}_redelivered"] = methods[name]["redelivered"]
        summary[f"{name}_lost"] = methods[name]["lost"]
    summary["target_met"] = (
        summary["ours_redelivered"] <= summary["mm2_redelivered"] and summary["ours_lost"] == 0
    )
    summary["methods"] = {
        name: {
            **result,
            "start": {str(p): o for p, o in sorted(result["start"].items())},
            "partitions_without_answer": figures["untranslated"][name],
        }
        for name, result in methods.items()
    }
    summary["committed_position"] = {str(p): o for p, o in sorted(figures["committed"].items())}
    summary["ours_plan"] = figures["plan"]
    summary["machine"] = machine
    return summary


def report(summary: dict) -> None:
    say(
        f"{summary['acked']} records acknowledged by A ({summary['rate_achieved']}/s), "
        f"{summary['processed']} processed before the crash "
        f"({summary['processed_after_last_commit']} after the last commit), "
        f"{summary['lost_in_replication']} never copied to B (lost whatever the start)"
    )
    say(f"{'method':<12} {'re-delivered':>12} {'lost':>8} {'read on B':>10}")
    for name in METHODS:
        result = summary["methods"][name]
        say(f"{name:<12} {result['redelivered']:>12} {result['lost']:>8} {result['read']:>10}")
    say(
        f"target (ours re-delivers at most what mm2 does, and loses nothing): "
        f"{'met' if summary['target_met'] else 'NOT met'}"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=1000.0, help="records per second to A (1000)")
    parser.add_argument(
        "--warmup",
        type=float,
        default=120.0,
        help="seconds of load before the crash (120; above 60, or the rewind is earliest)",
    )
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic (4)")
    parser.add_argument(
        "--lag",
        type=float,
        default=5.0,
        help="seconds the stand-in trails the head: it processes records this old (5)",
    )
    parser.add_argument(
        "--checkpoint-interval",
        type=int,
        default=5,
        help="MM2's emit.checkpoints.interval.seconds (5, as the sandbox; MM2's default 60)",
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    json_out = json_line_output()  # stdout keeps only the final JSON line
    machine = f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}"
    say(f"machine: {machine}")
    sandbox = Sandbox(
        REPO / ".run" / f"bench-redelivery-{os.getpid()}",
        settings=ReplicationSettings(checkpoint_interval_s=args.checkpoint_interval),
    )
    try:
        sandbox.up()
        from akf_devtools.sandbox.airflow_env import register_kafka_connections

        figures = measure(sandbox, args, register_kafka_connections(sandbox, "bench_rd"))
    finally:
        sandbox.down()
    shutil.rmtree(sandbox.run_dir, ignore_errors=True)  # kept (logs) when the run failed
    summary = summarize(args, figures, machine)
    report(summary)
    json_out.write(json.dumps(summary) + "\n")
    json_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

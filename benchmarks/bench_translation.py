"""Translation benchmark: the pure plan for 10,000 partitions, and the I/O part against real clusters.

Pure part: generated inputs for 10,000 partitions (``bench_translation_pure``), median of 5 runs.
I/O part: a sandbox (two KRaft clusters, MirrorMaker 2) with topics of many partitions replicated A->B;
a plan A->B is built through the real hooks, counting the requests sent to each cluster. It is built for
two sizes to show that the number of round trips per cluster does not grow with the partitions.

    .venv/bin/python benchmarks/bench_translation.py [--partitions 600]

Final line: JSON with plan_10k_partitions_s, requests_per_cluster, and the I/O timings.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_translation_pure  # noqa: E402
from akf_devtools.sandbox.kafka_io import create_topic, end_offsets, produce  # noqa: E402
from akf_devtools.sandbox.sandbox import Sandbox  # noqa: E402

from airflow_kafka_failover.core.types import TopicPartition  # noqa: E402
from airflow_kafka_failover.domain.config import parse_pair  # noqa: E402
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook  # noqa: E402
from airflow_kafka_failover.io.planner import build_plan  # noqa: E402
from airflow_kafka_failover.run_format.spark_checkpoint import StreamPosition  # noqa: E402

# Hook calls that send requests; each is one batched round trip (read_topic_to_end: metadata, two
# ListOffsets and the fetches of one consumer, counted as one read).
COUNTED = ("describe_cluster", "_list_offsets", "read_topic_to_end", "committed_offsets")


class CountingHook(KafkaClusterHook):
    """A KafkaClusterHook that counts its round trips by kind."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: collections.Counter[str] = collections.Counter()

    def __getattribute__(self, name):
        attribute = super().__getattribute__(name)
        if name in COUNTED:
            super().__getattribute__("calls")[name] += 1
        return attribute


def pure_part() -> float:
    inputs = bench_translation_pure.generate_inputs(seed=7)
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        bench_translation_pure.build_plan(inputs)
        timings.append(time.perf_counter() - started)
    timings.sort()
    return timings[len(timings) // 2]


def io_part(sandbox: Sandbox, topics: list[str], conns: dict[str, str]) -> tuple[float, dict[str, int], int]:
    pair = parse_pair(
        "bench",
        {
            "clusters": {"A": {"connection": conns["A"]}, "B": {"connection": conns["B"]}},
            "primary": "A",
            "topics": topics,
            "translation": {"methods": ["checkpoint", "offset_sync", "offset_sync_reverse", "timestamp"]},
        },
    )
    offsets = {}
    newest = {}
    now_ms = int(time.time() * 1000)
    for topic in topics:
        for partition, high in (end_offsets(sandbox.bootstrap("A"), topic) or {}).items():
            offsets[TopicPartition(topic, partition)] = high // 2
            newest[TopicPartition(topic, partition)] = now_ms
    hooks = {name: CountingHook(conn) for name, conn in conns.items()}
    started = time.perf_counter()
    plan = build_plan(pair, "A", "B", StreamPosition(offsets=offsets, max_timestamps_ms=newest), hooks)
    seconds = time.perf_counter() - started
    plan.to_spark_starting_offsets()
    return seconds, {name: sum(hook.calls.values()) for name, hook in hooks.items()}, len(plan.translations)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=600, help="partitions in the larger I/O run (600)")
    args = parser.parse_args()
    print(
        f"machine: {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}", flush=True
    )
    plan_10k = pure_part()
    print(f"pure: plan for 10,000 partitions in {plan_10k:.3f} s (median of 5)", flush=True)

    sandbox = Sandbox(REPO / ".run" / "bench-translation")
    results = {}
    try:
        sandbox.up()
        conns = {}
        for name in sandbox.cluster_names:
            conns[name] = f"bench_tr_{name.lower()}"
            os.environ[f"AIRFLOW_CONN_{conns[name].upper()}"] = json.dumps(
                {"conn_type": "kafka", "extra": {"bootstrap.servers": sandbox.bootstrap(name)}}
            )
        per_topic = 50
        sizes = [args.partitions // 4, args.partitions]
        made: list[str] = []
        for size in sizes:
            while len(made) * per_topic < size:
                topic = f"bench-{len(made)}"
                create_topic(sandbox.bootstrap("A"), topic, per_topic)
                produce(
                    sandbox.bootstrap("A"),
                    topic,
                    [(None, b"x", p, None) for p in range(per_topic) for _ in range(4)],
                )
                made.append(topic)
            topics = made[: size // per_topic]
            deadline = time.time() + 180
            while time.time() < deadline:
                counts = [sum((end_offsets(sandbox.bootstrap("B"), f"A.{t}") or {}).values()) for t in topics]
                if all(c >= per_topic * 4 for c in counts):
                    break
                time.sleep(2)
            seconds, requests, translated = io_part(sandbox, topics, conns)
            results[size] = (seconds, requests)
            print(
                f"I/O: plan for {translated} partitions in {seconds:.2f} s; requests per cluster {requests}",
                flush=True,
            )
    finally:
        sandbox.down()
    small, large = sizes
    summary = {
        "plan_10k_partitions_s": round(plan_10k, 3),
        "requests_per_cluster": results[large][1],
        "requests_per_cluster_at_quarter_size": results[small][1],
        "io_plan_partitions": large,
        "io_plan_s": round(results[large][0], 2),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the pure translation path for 10,000 partitions (100 topics x 100 partitions).

Each partition gets 64 offset syncs spaced like MM2's history (dense near the head, exponentially
sparser behind), a checkpoint of the bookkeeping group and target watermarks. One timed run goes
from raw ``(upstream, downstream)`` sync pairs to the Spark ``startingOffsets`` JSON: build the
sync histories, translate every partition, build the plan, render the JSON.

Run: ``.venv/bin/python benchmarks/bench_translation_pure.py``. The last line is JSON.
"""

from __future__ import annotations

import json
import random
import statistics
import time

from airflow_kafka_failover.core.types import TopicPartition, Watermarks
from airflow_kafka_failover.domain.translation.choosing import PartitionRequest, translate_partitions
from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint
from airflow_kafka_failover.domain.translation.plan import TranslationPlan
from airflow_kafka_failover.domain.translation.sync_history import OffsetSyncHistory

TOPICS = 100
PARTITIONS = 100
SYNCS_PER_PARTITION = 64
RUNS = 5
METHOD_ORDER = ["checkpoint", "offset_sync", "timestamp"]


def generate_partition(rng: random.Random) -> tuple[list[tuple[int, int]], int, int, int]:
    """Syncs in topic order, the job's position, the target high watermark, the group's committed offset."""
    head = rng.randint(10_000_000, 50_000_000)
    drift = rng.randint(0, 5_000)  # downstream offsets trail upstream by records dropped long ago
    # Distances behind the head grow roughly like powers of two, as in MM2's OffsetSyncStore.
    distances = sorted({0} | {int(1.3**i) + rng.randint(0, 50) for i in range(1, SYNCS_PER_PARTITION * 2)})
    upstream = sorted({head - d for d in distances[:SYNCS_PER_PARTITION] if d <= head - drift})
    syncs = [(u, u - drift + i // 8) for i, u in enumerate(upstream)]
    position = head + rng.randint(-200, 200)
    high = syncs[-1][1] + rng.randint(0, 300)
    group_offset = position - rng.randint(0, 5_000)
    return syncs, position, high, group_offset


def generate_inputs(
    seed: int = 7,
) -> list[tuple[TopicPartition, TopicPartition, list[tuple[int, int]], int, Checkpoint | None, int]]:
    """One tuple per partition: source, target, syncs, position, checkpoint, target high watermark."""
    rng = random.Random(seed)
    inputs = []
    for t in range(TOPICS):
        for p in range(PARTITIONS):
            syncs, position, high, group_offset = generate_partition(rng)
            source, target = TopicPartition(f"topic{t:03d}", p), TopicPartition(f"A.topic{t:03d}", p)
            # A checkpoint as MM2 makes it: the forward rule applied to the group's committed offset.
            older = [s for s in syncs if s[0] <= group_offset]
            checkpoint = None
            if older:
                up, down = older[-1]
                translated = down if group_offset == up else down + 1
                checkpoint = Checkpoint("spark-job", target.topic, p, group_offset, translated)
            inputs.append((source, target, syncs, position, checkpoint, high))
    return inputs


def build_plan(inputs) -> tuple[TranslationPlan, str]:
    requests = [
        PartitionRequest(
            source,
            position,
            target,
            offset_syncs=OffsetSyncHistory.from_syncs(syncs),
            checkpoint=checkpoint,
            watermarks=Watermarks(0, high),
        )
        for source, target, syncs, position, checkpoint, high in inputs
    ]
    translations = translate_partitions(requests, METHOD_ORDER)
    target_partitions = {f"A.topic{t:03d}": PARTITIONS for t in range(TOPICS)}
    plan = TranslationPlan.create("A", "B", translations, target_partitions)
    return plan, plan.to_spark_starting_offsets()


def main() -> None:
    inputs = generate_inputs()
    timings = []
    plan = None
    for _ in range(RUNS):
        started = time.perf_counter()
        plan, _starting_offsets = build_plan(inputs)
        timings.append(time.perf_counter() - started)
    median = statistics.median(timings)
    assert plan is not None
    summary = plan.summary()
    print(
        f"translation plan for {len(inputs)} partitions ({SYNCS_PER_PARTITION} syncs each): "
        f"median {median:.3f} s over {RUNS} runs (min {min(timings):.3f} s, max {max(timings):.3f} s); "
        f"methods {summary['methods']}, gap partitions {summary['gap_partitions']}, "
        f"max re-delivery {summary['max_redelivery']}"
    )
    print(json.dumps({"plan_10k_partitions_s": round(median, 4)}))


if __name__ == "__main__":
    main()

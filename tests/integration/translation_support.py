"""Test data for translation against real MirrorMaker 2: records with ids, offsets that really diverge."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from akf_devtools.sandbox.jars import MIRRORMAKER_MAIN, kafka_classpath
from akf_devtools.sandbox.kafka_io import end_offsets, read_all
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.translation.mm2_records import OffsetSync
from airflow_kafka_failover.hooks.partition_reader import consume_ranges
from tests.integration.waiting import wait_for


def _value(record_id: str) -> bytes:
    return json.dumps({"id": record_id}).encode()


def produce_ids(bootstrap: str, topic: str, ids: list[str], partitions: int) -> None:
    """Produce one record per id, spread round-robin over the partitions, with a current timestamp."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for n, record_id in enumerate(ids):
        producer.produce(topic, key=record_id.encode(), value=_value(record_id), partition=n % partitions)
    assert producer.flush(30) == 0


def produce_with_aborts(bootstrap: str, topic: str, ids: list[str], partitions: int, every: int = 20) -> int:
    """Produce ``ids`` in committed transactions with an aborted one after every ``every`` records.

    Aborted records and transaction markers take offsets on the source that MirrorMaker 2 does not copy,
    so offsets on the two clusters diverge. Returns the number of aborted records.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}-{time.time_ns()}"})
    producer.init_transactions(30)
    aborted = 0
    for start in range(0, len(ids), every):
        producer.begin_transaction()
        for n, record_id in enumerate(ids[start : start + every], start=start):
            producer.produce(topic, key=record_id.encode(), value=_value(record_id), partition=n % partitions)
        producer.commit_transaction(30)
        producer.begin_transaction()
        for p in range(partitions):
            producer.produce(topic, key=b"aborted", value=_value(f"aborted-{start}-{p}"), partition=p)
            aborted += 1
        # Written before the abort, so that the aborted records really take offsets on the log (and the
        # abort never races the partitions' registration with the transaction).
        producer.flush(30)
        producer.abort_transaction(30)
    return aborted


def read_ids(
    bootstrap: str, topic: str, start: dict[int, int] | None = None
) -> dict[int, list[tuple[int, str, int]]]:
    """Return, per partition, the committed records ``(offset, id, timestamp ms)`` from ``start`` on."""
    ends = end_offsets(bootstrap, topic)
    assert ends is not None, f"{topic} not found on {bootstrap}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    ranges = {p: ((start or {}).get(p, 0), end) for p, end in ends.items()}
    found: dict[int, list[tuple[int, str, int]]] = {p: [] for p in ends}
    try:
        for msg in consume_ranges(consumer, topic, ranges, 60.0, bootstrap):
            found[msg.partition()].append((msg.offset(), json.loads(msg.value())["id"], msg.timestamp()[1]))
    finally:
        consumer.close()
    return found


def wait_replicated(bootstrap: str, topic: str, ids: set[str], timeout: float = 90) -> None:
    """Wait until every id is present in ``topic`` on the cluster."""

    def present() -> bool:
        if end_offsets(bootstrap, topic) is None:
            return False
        seen = {record[1] for records in read_ids(bootstrap, topic).values() for record in records}
        return ids <= seen

    wait_for(present, timeout, f"{len(ids)} ids replicated into {topic}", interval=2.0)


def position_at(
    records: dict[int, list[tuple[int, str, int]]], fraction: float
) -> tuple[dict[int, int], set[str], dict[int, int]]:
    """Cut each partition at ``fraction`` of its records, as a job would have processed them.

    :return: next offset per partition, the ids before the cut, and the newest timestamp processed.
    """
    offsets, processed, newest = {}, set(), {}
    for partition, items in records.items():
        cut = int(len(items) * fraction)
        offsets[partition] = items[cut][0] if cut < len(items) else items[-1][0] + 1
        processed.update(record[1] for record in items[:cut])
        if cut:
            newest[partition] = max(record[2] for record in items[:cut])
    return offsets, processed, newest


def commit_group(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(
            offsets=[KafkaTopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def check_no_loss(
    plan, target_bootstrap: str, must_see: set[str], processed: set[str], target_topic: str
) -> tuple[int, int | None]:
    """Read the target from the plan's offsets; assert no id after the position is missing.

    :return: (records re-delivered, the plan's bound on them).
    """
    starts = {
        t.target.partition: t.target_offset for t in plan.translations if t.target.topic == target_topic
    }
    seen = read_ids(target_bootstrap, target_topic, starts)
    delivered = [record[1] for items in seen.values() for record in items]
    missing = must_see - set(delivered)
    assert not missing, (
        f"{len(missing)} records after the position are missing on the target: {sorted(missing)[:5]}"
    )
    redelivered = sum(1 for record_id in delivered if record_id in processed)
    bounds = [t.redelivery_bound for t in plan.translations if t.target.topic == target_topic]
    bound = None if any(b is None for b in bounds) else sum(bounds)
    return redelivered, bound


def run_oracle(
    target_bootstrap: str, source_alias: str, group: str, work_dir: Path
) -> dict[TopicPartition, int]:
    """Compile and run TranslateOffsets.java (RemoteClusterUtils.translateOffsets) against the target."""
    source = Path(__file__).with_name("oracle") / "TranslateOffsets.java"
    classpath = kafka_classpath(MIRRORMAKER_MAIN)  # connect-mirror-client's RemoteClusterUtils
    subprocess.run(
        ["javac", "-cp", classpath, "-d", str(work_dir), str(source)], check=True, capture_output=True
    )
    result = subprocess.run(
        [
            "java",
            "-cp",
            f"{classpath}{os.pathsep}{work_dir}",
            "TranslateOffsets",
            target_bootstrap,
            source_alias,
            group,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    translated = {}
    for line in result.stdout.splitlines():
        topic, partition, offset = line.split()
        translated[TopicPartition(topic, int(partition))] = int(offset)
    return translated


# ---- helpers of test_translation_edges (issue 18) ------------------------------------------------------


def produce_committed(
    bootstrap: str, topic: str, ids: list[str], partitions: int, per_transaction: int = 15
) -> None:
    """Produce ``ids`` round-robin in committed transactions only: each partition ends with a commit marker.

    Every transaction writes to every partition (``per_transaction`` >= ``partitions``), so the last entry of
    each partition's log is the marker of the last transaction, and its last record sits at high - 2.
    """
    assert per_transaction >= partitions, "each transaction must touch every partition"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}-{time.time_ns()}"})
    producer.init_transactions(30)
    for start in range(0, len(ids), per_transaction):
        producer.begin_transaction()
        for n, record_id in enumerate(ids[start : start + per_transaction], start=start):
            producer.produce(topic, key=record_id.encode(), value=_value(record_id), partition=n % partitions)
        producer.commit_transaction(30)


def newest_offset_syncs(bootstrap: str, syncs_topic: str, topic: str) -> dict[int, tuple[int, int]]:
    """The newest MM2 offset sync ``(upstream, downstream)`` per partition of ``topic``, in topic order."""
    return {
        partition: syncs[-1] for partition, syncs in offset_syncs_of(bootstrap, syncs_topic, topic).items()
    }


def topics_named(bootstrap: str, prefix: str) -> list[str]:
    """The topics of a cluster whose name starts with ``prefix``, sorted."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15)
    return sorted(name for name in metadata.topics if name.startswith(prefix))


def delete_topic(bootstrap: str, topic: str, timeout: float = 60) -> None:
    """Delete a topic and wait until the cluster no longer lists it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    wait_for(lambda: topic not in topics_named(bootstrap, topic), timeout, f"{topic} deleted", interval=1.0)


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> int:
    """Delete a partition's records below ``offset`` (its log then starts there); return the new low mark."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([KafkaTopicPartition(topic, partition, offset)], operation_timeout=30)
    result = next(iter(futures.values())).result(timeout=60)
    return result.low_watermark


def write_spark_checkpoint(
    path: Path, topic: str, offsets: dict[int, int], last_records: dict[int, int], batch_id: int = 0
) -> Path:
    """Write a Spark checkpoint by hand: one committed batch at ``offsets`` and its progress entry.

    The progress entry names the newest record offset per partition (``max_offset``), as the job writes it.
    """
    (path / "offsets").mkdir(parents=True)
    (path / "commits").mkdir()
    nested = {topic: {str(p): o for p, o in sorted(offsets.items())}}
    (path / "offsets" / str(batch_id)).write_text(f"v1\n{{}}\n{json.dumps(nested)}\n")
    (path / "commits" / str(batch_id)).write_text("v1\n{}\n")
    progress = {
        "epoch": 0,
        "batch_id": batch_id,
        "end_offsets": nested,
        "max_offset": {topic: {str(p): o for p, o in sorted(last_records.items())}},
    }
    (path / "progress").mkdir()
    (path / "progress" / str(batch_id)).write_text(json.dumps(progress))
    return path


# ---- helpers of test_translation_edges (issue 32) ------------------------------------------------------


def compact_soon(bootstrap: str, topic: str) -> None:
    """Have the cluster's log cleaner compact ``topic`` within seconds, as it does in production over days.

    The topic rolls a segment at its next write (``segment.ms`` 100) and any uncleaned part is worth cleaning;
    every broker's cleaner looks for work every 200 ms instead of every 15 s. Compaction keeps the newest
    record per key of the rolled segments and every record of the active one.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def settings(*pairs: tuple[str, str]) -> list[ConfigEntry]:
        return [
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in pairs
        ]

    changes = [
        ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=settings(
                ("segment.ms", "100"), ("min.cleanable.dirty.ratio", "0.01"), ("min.compaction.lag.ms", "0")
            ),
        )
    ]
    for node in admin.describe_cluster(request_timeout=15).result(timeout=30).nodes:
        changes.append(
            ConfigResource(
                ConfigResource.Type.BROKER,
                str(node.id),
                incremental_configs=settings(("log.cleaner.backoff.ms", "200")),
            )
        )
    for future in admin.incremental_alter_configs(changes).values():
        future.result(timeout=30)


def offset_syncs_of(bootstrap: str, syncs_topic: str, topic: str) -> dict[int, list[tuple[int, int]]]:
    """Every MM2 offset sync ``(upstream, downstream)`` of ``topic`` per partition, in topic order."""
    found: dict[int, list[tuple[int, int]]] = {}
    for record in read_all(bootstrap, syncs_topic):
        assert record.key is not None and record.value is not None
        sync = OffsetSync.decode(record.key, record.value)
        if sync.topic == topic:
            found.setdefault(sync.partition, []).append((sync.upstream_offset, sync.downstream_offset))
    return found

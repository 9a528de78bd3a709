"""The main job, ``make demo``: show two Kafka clusters with MirrorMaker 2 replicating between them.

This first version brings the sandbox up, produces keyed records to ``orders`` on cluster A, shows them
arriving on B as ``A.orders`` and MirrorMaker 2 checkpointing a consumer group, then takes the sandbox
down. It stops every process it started on success, on failure and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

from airflow_kafka_failover.exceptions import FailoverError


def _say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(run_dir: Path | None, records: int) -> None:
    """Run the demo.

    :param run_dir: sandbox run directory (default: .run/demo in the checkout).
    :param records: how many records to produce on cluster A.
    """
    from confluent_kafka import Consumer, TopicPartition

    from airflow_kafka_failover.sandbox.kafka_io import create_topic, end_offsets, produce, read_all
    from airflow_kafka_failover.sandbox.jars import project_root
    from airflow_kafka_failover.sandbox.sandbox import Sandbox
    from airflow_kafka_failover.translation.records import Checkpoint

    sandbox = Sandbox(run_dir or project_root() / ".run" / "demo")
    _say(f"starting Kafka clusters A and B (KRaft) and MirrorMaker 2 in {sandbox.run_dir} ...")
    started = time.monotonic()
    try:
        info = sandbox.up()
        _say(f"sandbox ready in {time.monotonic() - started:.1f} s: A={info['clusters']['A']['bootstrap']} "
             f"B={info['clusters']['B']['bootstrap']}, flows {', '.join(info['replication']['flows'])}")
        a, b = sandbox.bootstrap("A"), sandbox.bootstrap("B")
        topic = f"orders-{uuid.uuid4().hex[:6]}"
        create_topic(a, topic, 6)
        _say(f"producing {records} records with unique ids to {topic} on A (6 partitions) ...")
        produce(a, topic, [(f"id-{i}".encode(), f'{{"id": {i}}}'.encode(), None, None) for i in range(records)])

        remote = f"A.{topic}"
        deadline = time.monotonic() + 90
        replicated = 0
        while time.monotonic() < deadline:
            replicated = sum((end_offsets(b, remote) or {}).values())
            _say(f"  {remote} on B holds {replicated}/{records} records")
            if replicated >= records:
                break
            time.sleep(1.0)
        if replicated < records:
            raise FailoverError(f"replication stalled at {replicated}/{records}; see {sandbox.run_dir}/logs")

        group = "demo-bookkeeping"
        consumer = Consumer({"bootstrap.servers": a, "group.id": group, "enable.auto.commit": False})
        half = {p: high // 2 for p, high in (end_offsets(a, topic) or {}).items()}
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in half.items()], asynchronous=False)
        consumer.close()
        _say(f"group {group} committed half of each partition on A; waiting for MirrorMaker 2's checkpoint on B")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = [
                Checkpoint.decode(r.key, r.value) for r in read_all(b, "A.checkpoints.internal")
            ]
            mine = {c.partition: c for c in found if c.group == group and c.topic == remote}
            if len(mine) == len(half):
                for partition, checkpoint in sorted(mine.items()):
                    _say(f"  {remote}[{partition}]: A offset {checkpoint.upstream_offset} -> "
                         f"B offset {checkpoint.downstream_offset}")
                break
            time.sleep(1.0)
        else:
            raise FailoverError(f"no checkpoint for group {group} within 60 s; see {sandbox.run_dir}/logs")
        _say("replication and checkpoints work; the failover story is added on top of this sandbox")
    finally:
        _say("stopping the sandbox ...")
        sandbox.down()
        _say("done")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_kafka_failover.demo", description=__doc__)
    parser.add_argument("--run-dir", type=Path, help="sandbox run directory (default: .run/demo)")
    parser.add_argument("--records", type=int, default=3000, help="records to produce (default: 3000)")
    args = parser.parse_args(argv)
    if args.records <= 0:
        parser.error(f"--records must be positive, got {args.records}")
    try:
        run(args.run_dir, args.records)
    except FailoverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; the sandbox was stopped", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Detection benchmark: time from fault injection to a "down" decision, false alarms, and trigger CPU.

Runs the same watch the sensors and ClusterHealthTrigger drive, with default thresholds, against a real
sandbox (two KRaft clusters and MirrorMaker 2) that it starts and stops itself.

    .venv/bin/python benchmarks/bench_detection.py [--trials 5] [--blips 10] [--cpu-seconds 60]
    .venv/bin/python benchmarks/bench_detection.py --brokers 3 [--trials 5] [--kills 10] [--rolls 3] \
        [--partitions 100] [--cpu-seconds 60]

Prints one line per trial, a summary, and a final line of JSON. With one broker per cluster (the
default): detection_crash_median_s, detection_hang_median_s, false_alarms over 2-second hangs and
trigger_cpu_s_per_min. With ``--brokers 3`` (three brokers and three controllers per cluster, topics with
replication factor 3 and min.insync.replicas 2), the watch the DAG sensors drive, judging the topic's
partitions, with ``count_under_min_isr`` on: detection of a whole-cluster crash and hang, false alarms
over single-broker kills (each broker down 25 s, then back) and rolling restarts, and the cost of probing
``--partitions`` partitions against a metadata-only probe (CPU of one trigger per minute, and the wall
time of one probe).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akf_devtools.sandbox.kafka_io import create_topic  # noqa: E402
from akf_devtools.sandbox.sandbox import Sandbox  # noqa: E402

from airflow_kafka_failover.domain.health.verdict import HealthThresholds  # noqa: E402
from airflow_kafka_failover.io.health_watch import DownWatch, observe_until, watch_until  # noqa: E402


def _connections(sandbox: Sandbox) -> dict[str, str]:
    ids = {}
    for name in sandbox.cluster_names:
        conn_id = f"bench_{name.lower()}"
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": sandbox.bootstrap(name)}}
        )
        ids[name] = conn_id
    return ids


def _watch(conns: dict[str, str], count_under_min_isr: bool = False) -> DownWatch:
    return DownWatch(
        cluster="A",
        kafka_config_id=conns["A"],
        topics=["bench-orders"],
        thresholds=HealthThresholds(),
        peer_kafka_config_id=conns["B"],
        heartbeats_topic="A.heartbeats",
        count_under_min_isr=count_under_min_isr,
    )


def detect(sandbox: Sandbox, conns: dict[str, str], fault: str, count_under_min_isr: bool = False) -> float:
    """Inject ``fault`` on A after a healthy warm-up and return seconds until the watch says down."""
    wait_ok(conns, ["bench-orders"])
    watch = _watch(conns, count_under_min_isr)
    watch_until(watch, time.time() + 4)
    if not (watch.history and watch.history[-1].ok):
        raise RuntimeError(f"cluster A was not healthy before the fault: {watch.decide().reason}")
    fault_at = time.time()
    sandbox.fault(fault, "A")
    try:
        decision = watch_until(watch, fault_at + 60)
        if not decision.is_down:
            raise RuntimeError(f"{fault} not detected within 60 s: {decision.reason}")
        return time.time() - fault_at
    finally:
        sandbox.fault("resume" if fault == "hang" else "restart", "A", timeout=240)


def blip(sandbox: Sandbox, conns: dict[str, str], seconds: float = 2.0) -> bool:
    """Hang A for ``seconds`` and watch 15 s more; return True if the watch ever said down (a false alarm)."""
    watch = _watch(conns)
    watch_until(watch, time.time() + 4)
    decisions = []
    sandbox.fault("hang", "A")
    time.sleep(seconds)
    sandbox.fault("resume", "A")
    decisions.append(watch_until(watch, time.time() + 15, on_probe=decisions.append))
    return any(d.is_down for d in decisions)


def trigger_cpu_per_minute(
    conns: dict[str, str], seconds: float, topics: list[str] | None = None, count_under_min_isr: bool = False
) -> float:
    """Run one ClusterHealthTrigger against healthy clusters for ``seconds``; return CPU s per minute.

    :param topics: the topics its probes judge (``bench-orders`` by default; empty: metadata only).
    """
    from airflow_kafka_failover.triggers.cluster_health import ClusterHealthTrigger

    trigger = ClusterHealthTrigger(
        kind="down",
        watch_kwargs={
            "cluster": "A",
            "kafka_config_id": conns["A"],
            "topics": ["bench-orders"] if topics is None else topics,
            "canary_topic": None,
            "count_under_min_isr": count_under_min_isr,
            "peer_kafka_config_id": conns["B"],
            "heartbeats_topic": "A.heartbeats",
            "require_corroboration": True,
        },
        thresholds={},
        deadline=time.time() + seconds,
    )
    cpu_before = time.process_time()
    event = asyncio.run(anext(trigger.run()))
    cpu = time.process_time() - cpu_before
    if event.payload["status"] != "timeout":
        raise RuntimeError(
            f"healthy clusters gave a {event.payload['status']} event: {event.payload['message']}"
        )
    return cpu * 60.0 / seconds


def _watch_while(watch: DownWatch, busy: threading.Thread, seconds_after: float) -> list:
    """Drive ``watch`` until ``busy`` ended and ``seconds_after`` more passed, or until it says down.

    :return: every decision seen.
    """
    decisions: list = []
    ended: list[float] = []

    def done(decision) -> bool:
        if not busy.is_alive() and not ended:
            ended.append(time.time())
        return decision.is_down or bool(ended and time.time() > ended[0] + seconds_after)

    asyncio.run(observe_until(watch, time.time() + 900, decisions.append, until=done))
    return decisions


def single_broker_kill(sandbox: Sandbox, conns: dict[str, str], broker: int) -> bool:
    """Crash one broker of A for 25 s while watching, then restart it; True if the watch said down."""
    wait_ok(conns, ["bench-orders"])
    watch = _watch(conns, count_under_min_isr=True)
    watch_until(watch, time.time() + 4)
    sandbox.fault("crash", "A", broker=broker)
    down_for = threading.Thread(target=time.sleep, args=(25.0,))
    down_for.start()
    decisions = _watch_while(watch, down_for, 0.0)
    back = threading.Thread(
        target=sandbox.fault, args=("restart", "A"), kwargs={"broker": broker, "timeout": 180}
    )
    back.start()
    decisions += _watch_while(watch, back, 8.0)
    back.join()
    sandbox.cluster("A").wait_serving(180, fully_replicated=True)
    return any(d.is_down for d in decisions)


def rolling_restart(sandbox: Sandbox, conns: dict[str, str]) -> tuple[bool, float]:
    """Roll A's brokers while watching; return (whether the watch said down, seconds the roll took)."""
    wait_ok(conns, ["bench-orders"])
    watch = _watch(conns, count_under_min_isr=True)
    watch_until(watch, time.time() + 4)
    began = time.monotonic()
    roll = threading.Thread(target=sandbox.cluster("A").rolling_restart, args=(240.0,))
    roll.start()
    decisions = _watch_while(watch, roll, 8.0)
    roll.join()
    return any(d.is_down for d in decisions), time.monotonic() - began


def probe_seconds(conns: dict[str, str], topics: list[str], rounds: int = 20) -> float:
    """The median wall time of one probe of A judging ``topics`` (a metadata request when empty)."""
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
    from airflow_kafka_failover.io.probe import probe_cluster

    hook = KafkaClusterHook(conns["A"], timeout_seconds=2.0)
    took = []
    for _ in range(rounds):
        began = time.monotonic()
        probe = probe_cluster(hook, "A", topics, 2.0)
        took.append(time.monotonic() - began)
        if not probe.ok:
            raise RuntimeError(f"a healthy cluster gave a {probe.outcome} probe: {probe}")
    return statistics.median(took)


def wait_ok(conns: dict[str, str], topics: list[str], timeout: float = 60.0) -> None:
    """Probe until a probe of ``topics`` is OK (a topic just created may not serve every partition yet)."""
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
    from airflow_kafka_failover.io.probe import probe_cluster

    hook = KafkaClusterHook(conns["A"], timeout_seconds=2.0)
    deadline = time.monotonic() + timeout
    while not (probe := probe_cluster(hook, "A", topics, 2.0)).ok:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topics} not served after {timeout:.0f} s: {probe}")
        time.sleep(1.0)


def three_brokers(args: argparse.Namespace) -> dict:
    """The three-broker figures (see the module's docstring)."""
    sandbox = Sandbox(REPO / ".run" / "bench-detection-3", brokers=3)
    try:
        sandbox.up(timeout=300)
        conns = _connections(sandbox)
        create_topic(sandbox.client_config("A"), "bench-orders", 6)
        create_topic(sandbox.client_config("A"), "bench-wide", args.partitions)
        # The cost first, on a cluster no fault has touched yet.
        wide = ["bench-wide"]
        wait_ok(conns, wide)
        cost = {
            "probe_metadata_only_s": round(probe_seconds(conns, []), 4),
            "probe_partitions_s": round(probe_seconds(conns, wide), 4),
            "trigger_cpu_metadata_only_s_per_min": round(
                trigger_cpu_per_minute(conns, args.cpu_seconds, []), 3
            ),
            "trigger_cpu_partitions_s_per_min": round(
                trigger_cpu_per_minute(conns, args.cpu_seconds, wide, count_under_min_isr=True), 3
            ),
        }
        print(f"probe cost: {cost}", flush=True)
        results: dict[str, list[float]] = {"crash": [], "hang": []}
        for fault in ("crash", "hang"):
            for trial in range(1, args.trials + 1):
                seconds = detect(sandbox, conns, fault, count_under_min_isr=True)
                results[fault].append(seconds)
                print(f"whole-cluster {fault} trial {trial}: detected after {seconds:.1f} s", flush=True)
        kill_alarms = 0
        for trial in range(args.kills):
            broker = 1 + trial % 3
            alarm = single_broker_kill(sandbox, conns, broker)
            kill_alarms += alarm
            print(
                f"kill of broker {broker} ({trial + 1}): {'FALSE ALARM' if alarm else 'no alarm'}", flush=True
            )
        roll_alarms, roll_seconds = 0, []
        for trial in range(1, args.rolls + 1):
            alarm, seconds = rolling_restart(sandbox, conns)
            roll_alarms += alarm
            roll_seconds.append(seconds)
            print(
                f"rolling restart {trial} ({seconds:.0f} s): {'FALSE ALARM' if alarm else 'no alarm'}",
                flush=True,
            )
    finally:
        sandbox.down()
    return {
        "brokers": 3,
        "detection3_crash_median_s": round(statistics.median(results["crash"]), 2),
        "detection3_crash_max_s": round(max(results["crash"]), 2),
        "detection3_hang_median_s": round(statistics.median(results["hang"]), 2),
        "detection3_hang_max_s": round(max(results["hang"]), 2),
        "single_broker_kills": args.kills,
        "single_broker_false_alarms": kill_alarms,
        "rolling_restarts": args.rolls,
        "rolling_false_alarms": roll_alarms,
        "rolling_restart_median_s": round(statistics.median(roll_seconds), 1) if roll_seconds else None,
        "partitions": args.partitions,
        **cost,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--brokers", type=int, choices=(1, 3), default=1, help="brokers per cluster (1)")
    parser.add_argument("--kills", type=int, default=10, help="single-broker kills, with --brokers 3 (10)")
    parser.add_argument("--rolls", type=int, default=3, help="rolling restarts, with --brokers 3 (3)")
    parser.add_argument(
        "--partitions", type=int, default=100, help="partitions for the probe's cost, with --brokers 3 (100)"
    )
    parser.add_argument("--trials", type=int, default=5, help="trials per fault kind (default 5)")
    parser.add_argument(
        "--blips", type=int, default=10, help="2-second hangs for the false-alarm count (default 10)"
    )
    parser.add_argument(
        "--cpu-seconds", type=float, default=60.0, help="seconds to run the trigger for CPU (60)"
    )
    args = parser.parse_args()

    print(
        f"machine: {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}", flush=True
    )
    if args.brokers == 3:
        summary3 = three_brokers(args)
        for fault in ("crash", "hang"):
            print(
                f"whole-cluster {fault} (3 brokers): median {summary3[f'detection3_{fault}_median_s']} s, "
                f"max {summary3[f'detection3_{fault}_max_s']} s"
            )
        print(json.dumps(summary3))
        return 0
    sandbox = Sandbox(REPO / ".run" / "bench-detection")
    try:
        sandbox.up()
        conns = _connections(sandbox)
        create_topic(sandbox.bootstrap("A"), "bench-orders", 3)
        results: dict[str, list[float]] = {"crash": [], "hang": []}
        for fault in ("crash", "hang"):
            for trial in range(1, args.trials + 1):
                seconds = detect(sandbox, conns, fault)
                results[fault].append(seconds)
                print(f"{fault} trial {trial}: detected after {seconds:.1f} s", flush=True)
        false_alarms = 0
        for trial in range(1, args.blips + 1):
            alarm = blip(sandbox, conns)
            false_alarms += alarm
            print(f"2 s hang {trial}: {'FALSE ALARM' if alarm else 'no alarm'}", flush=True)
        cpu = trigger_cpu_per_minute(conns, args.cpu_seconds)
        print(f"trigger CPU: {cpu:.2f} s per minute at the default 2 s interval", flush=True)
    finally:
        sandbox.down()
    summary = {
        "detection_crash_median_s": round(statistics.median(results["crash"]), 2),
        "detection_crash_max_s": round(max(results["crash"]), 2),
        "detection_hang_median_s": round(statistics.median(results["hang"]), 2),
        "detection_hang_max_s": round(max(results["hang"]), 2),
        "false_alarms": false_alarms,
        "blips": args.blips,
        "trigger_cpu_s_per_min": round(cpu, 3),
    }
    for fault in ("crash", "hang"):
        print(
            f"{fault}: median {summary[f'detection_{fault}_median_s']} s, "
            f"max {summary[f'detection_{fault}_max_s']} s"
        )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

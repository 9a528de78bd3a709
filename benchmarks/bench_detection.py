"""Detection benchmark: time from fault injection to a "down" decision, false alarms, and trigger CPU.

Runs the same watch the sensors and ClusterHealthTrigger drive, with default thresholds, against a real
sandbox (two KRaft clusters and MirrorMaker 2) that it starts and stops itself.

    .venv/bin/python benchmarks/bench_detection.py [--trials 5] [--blips 10] [--cpu-seconds 60]

Prints one line per trial, a summary, and a final line of JSON with detection_crash_median_s,
detection_hang_median_s, false_alarms and trigger_cpu_s_per_min.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akf_devtools.sandbox.kafka_io import create_topic  # noqa: E402
from akf_devtools.sandbox.sandbox import Sandbox  # noqa: E402

from airflow_kafka_failover.health.verdict import HealthThresholds  # noqa: E402
from airflow_kafka_failover.health.watch import DownWatch, watch_until  # noqa: E402


def _connections(sandbox: Sandbox) -> dict[str, str]:
    ids = {}
    for name in sandbox.cluster_names:
        conn_id = f"bench_{name.lower()}"
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": sandbox.bootstrap(name)}}
        )
        ids[name] = conn_id
    return ids


def _watch(conns: dict[str, str]) -> DownWatch:
    return DownWatch(
        cluster="A",
        kafka_config_id=conns["A"],
        topics=["bench-orders"],
        thresholds=HealthThresholds(),
        peer_kafka_config_id=conns["B"],
        heartbeats_topic="A.heartbeats",
    )


def detect(sandbox: Sandbox, conns: dict[str, str], fault: str) -> float:
    """Inject ``fault`` on A after a healthy warm-up and return seconds until the watch says down."""
    watch = _watch(conns)
    if watch_until(watch, time.time() + 4).is_down:
        raise RuntimeError("cluster A looked down before the fault")
    fault_at = time.time()
    sandbox.fault(fault, "A")
    try:
        decision = watch_until(watch, fault_at + 60)
        if not decision.is_down:
            raise RuntimeError(f"{fault} not detected within 60 s: {decision.reason}")
        return time.time() - fault_at
    finally:
        sandbox.fault("resume" if fault == "hang" else "restart", "A")


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


def trigger_cpu_per_minute(conns: dict[str, str], seconds: float) -> float:
    """Run one ClusterHealthTrigger against healthy clusters for ``seconds``; return CPU s per minute."""
    from airflow_kafka_failover.triggers.cluster_health import ClusterHealthTrigger

    trigger = ClusterHealthTrigger(
        kind="down",
        watch_kwargs={
            "cluster": "A",
            "kafka_config_id": conns["A"],
            "topics": ["bench-orders"],
            "canary_topic": None,
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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=5, help="trials per fault kind (default 5)")
    parser.add_argument(
        "--blips", type=int, default=10, help="2-second hangs for the false-alarm count (default 10)"
    )
    parser.add_argument(
        "--cpu-seconds", type=float, default=60.0, help="seconds to run the trigger for CPU (60)"
    )
    args = parser.parse_args()

    sandbox = Sandbox(REPO / ".run" / "bench-detection")
    print(
        f"machine: {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}", flush=True
    )
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

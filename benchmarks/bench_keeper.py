"""Keeper benchmark: time from kill -9 of the driver to the next committed batch, and the keeper's CPU cost.

One sandbox (two KRaft clusters, MirrorMaker 2), one pair driven by the demo's engine
(``akf_devtools.demo.story``) with the provider's **default keeper settings** (a look every 10 s, restart
at once). The start DAG runs the job on A; a keeper run (``dag.test()`` of the keeper DAG in its own
process, as the scheduler would run it) watches it. Then:

1. **restart**: ``--rounds`` times, the driver is killed with SIGKILL; the figure is the time from the kill to
   the first batch the restarted job commits (its progress entries). Target: <= 30 s.
2. **CPU cost**: the keeper's trigger loop (``JobKeeperTrigger.run``: fence, lease, process, status,
   progress and the active cluster's end offsets every ``interval_seconds``, plus its metrics) runs in this
   process for ``--cpu-seconds`` against the live job; the figure is the CPU seconds it used per minute
   (``time.process_time``). Target: <= 0.5 s per minute per pair.

    .venv/bin/python benchmarks/bench_keeper.py [--rounds 3] [--cpu-seconds 120] [--rate 40]

Progress goes to stderr; the last line on stdout is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akf_devtools.demo.story import WATCHING, RunningDag, Story  # noqa: E402
from akf_devtools.sandbox.airflow_env import airflow_env, prepare_airflow_home  # noqa: E402
from akf_devtools.sandbox.sandbox import Sandbox  # noqa: E402

from benchmarks.json_output import json_line_output  # noqa: E402

PAIR = "benchkeep"
TOPIC = "orders"


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def next_batch_after(story: Story, since: float, timeout: float) -> float:
    """Unix seconds of the first batch committed after ``since`` on A at epoch 0."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        times = [
            line["written_at"]
            for line in story.progress_lines()
            if line["cluster"] == "A" and line["epoch"] == 0 and line.get("written_at", 0) > since
        ]
        if times:
            return min(times)
        time.sleep(0.5)
    raise RuntimeError(f"no batch within {timeout:.0f} s of the kill; see the keeper run's log")


def measure_restarts(story: Story, rounds: int) -> list[float]:
    figures = []
    for round_no in range(rounds):
        pid = story.job().process.pid()
        if pid is None:
            raise RuntimeError("the job is not running before the kill")
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        seconds = next_batch_after(story, killed_at, 300) - killed_at
        figures.append(round(seconds, 1))
        say(f"  round {round_no + 1}: kill -9 -> next committed batch {seconds:.1f} s")
        time.sleep(15)  # the restarted job works a while before the next kill
    return figures


def measure_cpu(story: Story, seconds: float) -> dict[str, float]:
    """Run the keeper's trigger loop in a process of its own against the live job; its CPU per minute.

    A process of its own: this one also runs the producer, whose CPU is not the keeper's. The child
    counts from after its imports, librdkafka's threads included.
    """
    env = airflow_env(story.airflow_home, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "devtools")]))
    child = subprocess.run(
        [sys.executable, __file__, "--cpu-child", str(story.config_path), story.pair, str(seconds)],
        env=env,
        capture_output=True,
        text=True,
        timeout=seconds + 120,
        check=False,
    )
    if child.returncode != 0:
        raise RuntimeError(f"the keeper loop failed: {child.stderr[-3000:]}")
    figures = json.loads(child.stdout.strip().splitlines()[-1])
    say(
        f"  keeper loop: {figures['cpu_s']:.2f} s CPU in {figures['wall_s']:.0f} s = "
        f"{figures['cpu_s_per_min']:.3f} s CPU per minute"
    )
    return figures


def keeper_loop(config_path: str, pair_name: str, seconds: float) -> int:
    """The child of :func:`measure_cpu`: drive ``JobKeeperTrigger.run`` for ``seconds``; print its CPU."""
    json_out = json_line_output()
    from akf_devtools.sandbox.airflow_env import read_variable

    from airflow_kafka_failover.domain.active_record import ActiveRecord
    from airflow_kafka_failover.domain.config import load_pair
    from airflow_kafka_failover.triggers.job_keeper import JobKeeperTrigger

    pair = load_pair(config_path, pair_name)
    home = Path(os.environ["AIRFLOW_HOME"])
    data = read_variable(home, f"kafka_failover.{pair_name}.active_record")
    record = ActiveRecord.from_dict(data, tuple(pair.clusters), "the benchmark's record")
    trigger = JobKeeperTrigger.for_record(pair, record, {"deadline": time.time() + seconds})

    async def drive() -> dict[str, Any]:
        events = [event async for event in trigger.run()]
        return events[0].payload

    cpu_before, wall_before = time.process_time(), time.monotonic()
    event = asyncio.run(drive())
    cpu, wall = time.process_time() - cpu_before, time.monotonic() - wall_before
    if event.get("status") != "window_end":
        raise RuntimeError(f"the keeper's loop ended with {event!r} instead of its window's end")
    figures = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 1), "cpu_s_per_min": round(cpu / wall * 60, 3)}
    json_out.write(json.dumps(figures) + "\n")
    json_out.flush()
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="kills of the driver (3)")
    parser.add_argument("--cpu-seconds", type=float, default=120.0, help="how long the CPU is measured (120)")
    parser.add_argument("--rate", type=float, default=40.0, help="records per second produced (40)")
    return parser.parse_args()


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--cpu-child":
        return keeper_loop(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    args = parse_args()
    json_out = json_line_output()
    machine = f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}"
    say(f"machine: {machine}")
    root = REPO / ".run" / f"bench-keeper-{os.getpid()}"
    sandbox = Sandbox(root / "sandbox")
    story: Story | None = None
    keeper: RunningDag | None = None
    result: dict[str, Any] | None = None
    try:
        say(f"starting the sandbox under {root} ...")
        sandbox.up()
        story = Story(
            sandbox,
            prepare_airflow_home(root / "airflow"),
            root / "pair",
            PAIR,
            TOPIC,
            spark_conn="spark_bench_keeper",
        )
        story.write_config()  # the provider's default keeper settings
        story.create_topics()
        story.start_producer(args.rate)
        state, _output = story.run("start")
        if state != "success":
            raise RuntimeError("the start DAG failed")
        keeper = story.start_run("keeper", window_seconds=3600)
        keeper.wait_for_text(WATCHING, 300)
        say("the keeper watches the job; killing its driver")
        restarts = measure_restarts(story, args.rounds)
        cpu = measure_cpu(story, args.cpu_seconds)
        result = {
            "restart_next_batch_median_s": statistics.median(restarts),
            "restart_next_batch_max_s": max(restarts),
            "restart_rounds": restarts,
            **{f"keeper_{key}": value for key, value in cpu.items()},
            "machine": machine,
        }
    finally:
        if keeper is not None:
            keeper.kill()
        if story is not None:
            if story.producer is not None:
                story.producer.stop(flush_timeout=2)
            story.stop_job()
        sandbox.down()
        if result is not None:
            shutil.rmtree(root, ignore_errors=True)
        else:
            say(f"run directory kept (logs of every DAG run): {root}")
    json_out.write(json.dumps(result) + "\n")
    json_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Wake-up benchmark: ``switch.wake: continuous`` against ``event`` on the real scheduler and triggerer.

For each mode, ``akf_devtools.local_airflow`` brings up the sandbox (two KRaft clusters, MirrorMaker 2)
and Airflow's api-server, scheduler, dag-processor and triggerer (LocalExecutor, SQLite) with the example
pair ``orders`` and its switch DAGs running on their own in that mode; the keeper DAG is left manual so
that only the wake-up differs. The start DAG (through the API) starts the job on A, then:

1. **idle**: for ``--idle-seconds`` nothing happens to the clusters; the figures are the CPU seconds per
   minute of the scheduler's and the triggerer's process trees (``/proc/<pid>/stat``: user + system of
   every live process of the tree, with what its reaped children used; task processes are children of
   the scheduler's LocalExecutor, so the tasks' own CPU counts as the scheduler's), and the switch DAGs'
   runs queued in that time, extrapolated to a day.
2. **reaction**: cluster A is crashed (``sandbox.fault("crash", "A")``, kill -9); the figure is the time
   from the kill to the start of the failover's first switch task (``fence_and_stop``) as the API reports
   it, with the detection (the end of ``wait_for_down``) on the way.

    nice -n 10 .venv/bin/python benchmarks/bench_wakeup.py [--modes continuous,event] [--idle-seconds 300]
        [--watch-timeout 600] [--settle-seconds 30]

In event mode the failback trigger finds the primary healthy when the triggerer starts, so it wakes the
failback DAG once; that run's ``gate`` waits ``--watch-timeout`` seconds (the failback does not apply while
the primary is active) and ends skipped. With the default ``--settle-seconds`` the idle window includes
that start-up run; ``--settle-seconds`` longer than ``--watch-timeout`` measures after it.

Progress goes to stderr; the last line on stdout is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akf_devtools.local_airflow import PAIR, LocalAirflow  # noqa: E402
from akf_devtools.sandbox.loopback import free_ports  # noqa: E402

from benchmarks.json_output import json_line_output  # noqa: E402
from benchmarks.process_usage import tree_cpu_seconds  # noqa: E402

MODES = ("continuous", "event")
SWITCH_DAGS = (f"kafka_failover_{PAIR}_failover", f"kafka_failover_{PAIR}_failback")
FAILOVER_DAG = SWITCH_DAGS[0]
START_DAG = f"kafka_failover_{PAIR}_start"


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---- Airflow's API -------------------------------------------------------------------------------------


def _when(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


def switch_runs(airflow: LocalAirflow, dag_id: str) -> list[dict[str, Any]]:
    answer = airflow.api_get(f"/api/v2/dags/{dag_id}/dagRuns?limit=1000")
    if not isinstance(answer, dict):
        raise RuntimeError(f"the API did not list the runs of {dag_id}: {answer!r}")
    runs = list(answer["dag_runs"])
    return sorted(runs, key=lambda run: run.get("queued_at") or run.get("run_after") or "")


def runs_queued_between(airflow: LocalAirflow, since: float, until: float) -> dict[str, int]:
    counts = {}
    for dag_id in SWITCH_DAGS:
        queued = [_when(run.get("queued_at") or run.get("run_after")) for run in switch_runs(airflow, dag_id)]
        counts[dag_id] = sum(1 for at in queued if at is not None and since <= at < until)
    return counts


def run_start_dag(airflow: LocalAirflow, timeout: float = 420.0) -> None:
    run = airflow.api_post(f"/api/v2/dags/{START_DAG}/dagRuns", {"logical_date": None, "conf": {}})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = (airflow.api_get(f"/api/v2/dags/{START_DAG}/dagRuns/{run['dag_run_id']}") or {}).get("state")
        if state == "success":
            return
        if state == "failed":
            raise RuntimeError(f"the start DAG failed; task logs under {airflow.run_dir / 'logs'}")
        airflow.check_components()
        time.sleep(2.0)
    raise TimeoutError(f"the start DAG did not finish within {timeout:.0f} s")


def first_switch_task(airflow: LocalAirflow, since: float, timeout: float) -> dict[str, Any]:
    """Wait until a failover run started ``fence_and_stop`` after ``since``; return its times."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run in switch_runs(airflow, FAILOVER_DAG)[-3:]:
            listed = airflow.api_get(f"/api/v2/dags/{FAILOVER_DAG}/dagRuns/{run['dag_run_id']}/taskInstances")
            tasks = {ti["task_id"]: ti for ti in (listed or {}).get("task_instances", [])}
            fence = tasks.get("fence_and_stop") or {}
            started = _when(fence.get("start_date"))
            if started is not None and started > since:
                return {
                    "run_id": run["dag_run_id"],
                    "run_type": run.get("run_type"),
                    "fence_and_stop_started": started,
                    "wait_for_down_ended": _when((tasks.get("wait_for_down") or {}).get("end_date")),
                }
        airflow.check_components()
        time.sleep(1.0)
    raise TimeoutError(f"no failover run started fence_and_stop within {timeout:.0f} s of the crash")


# ---- one mode -----------------------------------------------------------------------------------------


def measure_mode(mode: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    airflow = LocalAirflow(
        root / mode,
        free_ports(1)[0],
        automatic=True,
        login=False,
        pair_settings={
            "switch": {"wake": mode, "watch_timeout_seconds": args.watch_timeout},
            "keeper": {"automatic": False},
        },
    )
    airflow.lock_run_dir()
    try:
        airflow.clean_run_dir()
        say(f"[{mode}] starting the sandbox and Airflow in {airflow.run_dir} ...")
        airflow.start()
        say(f"[{mode}] Airflow is ready; starting the job on A (start DAG) ...")
        run_start_dag(airflow)
        say(f"[{mode}] the job runs; settling {args.settle_seconds:.0f} s")
        time.sleep(args.settle_seconds)
        pids = {name: airflow.component(name).pid() for name in ("scheduler", "triggerer")}
        if None in pids.values():
            raise RuntimeError(f"an Airflow component is not running: {pids}")
        before = {name: tree_cpu_seconds(pid) for name, pid in pids.items() if pid}
        idle_from = time.time()
        say(f"[{mode}] idle for {args.idle_seconds:.0f} s ...")
        time.sleep(args.idle_seconds)
        airflow.check_components()
        after = {name: tree_cpu_seconds(pid) for name, pid in pids.items() if pid}
        idle_to = time.time()
        minutes = (idle_to - idle_from) / 60
        runs = runs_queued_between(airflow, idle_from, idle_to)
        figures: dict[str, Any] = {
            "mode": mode,
            "idle_seconds": round(idle_to - idle_from, 1),
            "scheduler_cpu_s_per_min": round((after["scheduler"] - before["scheduler"]) / minutes, 2),
            "triggerer_cpu_s_per_min": round((after["triggerer"] - before["triggerer"]) / minutes, 2),
            "switch_runs_in_idle": sum(runs.values()),
            "switch_runs_by_dag": runs,
            "switch_runs_per_day": round(sum(runs.values()) * 86400 / (idle_to - idle_from)),
        }
        say(f"[{mode}] idle: {json.dumps(figures)}")
        say(f"[{mode}] crashing cluster A ...")
        crashed_at = time.time()
        airflow.sandbox.fault("crash", "A")
        switch = first_switch_task(airflow, crashed_at, args.reaction_timeout)
        figures["reaction_s"] = round(switch["fence_and_stop_started"] - crashed_at, 1)
        if switch["wait_for_down_ended"] is not None:
            figures["detection_s"] = round(switch["wait_for_down_ended"] - crashed_at, 1)
        figures["switch_run_type"] = switch["run_type"]
        say(f"[{mode}] crash -> fence_and_stop started: {figures['reaction_s']} s ({switch['run_type']} run)")
        return figures
    finally:
        say(f"[{mode}] stopping Airflow, the job and the sandbox ...")
        airflow.stop()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: continuous,event")
    parser.add_argument("--idle-seconds", type=float, default=300.0, help="idle measurement (300)")
    parser.add_argument(
        "--watch-timeout",
        type=float,
        default=600.0,
        help="switch.watch_timeout_seconds (600, the provider's default)",
    )
    parser.add_argument(
        "--settle-seconds", type=float, default=30.0, help="wait after the start DAG before measuring (30)"
    )
    parser.add_argument(
        "--reaction-timeout", type=float, default=300.0, help="give up on the reaction after this (300)"
    )
    args = parser.parse_args()
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown or not modes:
        parser.error(f"--modes {args.modes!r}: use one or more of {', '.join(MODES)}, comma-separated")
    args.mode_list = modes
    return args


def main() -> int:
    args = parse_args()
    json_out = json_line_output()  # stdout keeps only the final JSON line
    from akf_devtools.sandbox.jars import use_job_jars

    use_job_jars()
    machine = f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}"
    say(f"machine: {machine}; load average {os.getloadavg()[0]:.1f}")
    root = REPO / ".run" / f"bench-wakeup-{os.getpid()}"
    results = [measure_mode(mode, args, root) for mode in args.mode_list]
    summary: dict[str, Any] = {
        "idle_seconds": args.idle_seconds,
        "watch_timeout_seconds": args.watch_timeout,
        "machine": machine,
        "load_average_at_end": round(os.getloadavg()[0], 1),
    }
    for figures in results:
        for key, value in figures.items():
            if key != "mode":
                summary[f"{figures['mode']}_{key}"] = value
    json_out.write(json.dumps(summary) + "\n")
    json_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Fleet benchmark: N pairs over the same two clusters on one Airflow: quiet, a mass failover, a failback.

``akf_devtools.local_airflow`` brings up the sandbox (two KRaft clusters, MirrorMaker 2, brokers logging every
request with its client id) and Airflow's api-server, scheduler, dag-processor and triggerer (LocalExecutor,
SQLite) with N pairs (``orders``, ``orders_02``, ...), each a copy of the example pair reading a topic of its
own, with a producer of its own, its switch DAGs woken by events (``switch.wake: event``: one verdict watch
per cluster for the whole fleet). The keeper DAGs are left manual. The first ``--spark-pairs`` pairs run the
packaged PySpark job; the others run ``benchmarks/fleet_job.py``, a light job of the same contract
(submitted through spark-submit the same way, same stop request, fence, progress entries and group commits)
so that twenty or fifty jobs fit on two cores. Airflow's Kafka clients carry the connection's ``client.id``
(``akf-airflow``), the jobs' another (``akf-job``), so the brokers' request logs tell the provider's
requests apart from the jobs', MirrorMaker 2's and the producers'.

1. **baseline** (unless ``--no-baseline``): the same with one pair, quiet for ``--idle-seconds``: the requests
   the provider sends each cluster per second with one pair.
2. **idle**: the fleet's start DAGs start every job on A; after ``--settle-seconds`` the figures are the CPU
   seconds per minute of the scheduler's, the dag-processor's and the triggerer's process trees (task
   processes are the scheduler's children and count as its) over ``--idle-seconds``, divided by the pairs,
   and the provider's requests per second to each cluster.
3. **failover**: A is crashed (kill -9; producers write to whichever cluster each pair's fence names, so a
   record A did not acknowledge is not counted). Per pair: the crash to the first progress entry of its job
   on B (epoch 1).
4. **failback**: A is restarted, then MirrorMaker 2 (``Sandbox.bring_back``). Per pair: the restart to the
   first progress entry on A (epoch 2).
5. **lost**: the producers stop; every record a cluster acknowledged must reach the pair's sink (read with
   the packaged job's deduplicating reader) within ``--drain-timeout``; ``lost`` sums what is missing.

    nice -n 10 .venv/bin/python benchmarks/bench_fleet.py [--pairs 20] [--spark-pairs 2] [--idle-seconds 180]
        [--parallelism 8] [--produce-rate 2] [--no-baseline]

Progress goes to stderr; the last line on stdout is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akf_devtools.local_airflow import LocalAirflow, pair_names  # noqa: E402
from akf_devtools.sandbox.loopback import free_ports  # noqa: E402
from akf_devtools.sandbox.request_log import RequestCounter, by_client  # noqa: E402

from airflow_kafka_failover.jobs.sink import SinkReader  # noqa: E402
from airflow_kafka_failover.run_format.layout import RunLayout  # noqa: E402
from airflow_kafka_failover.run_format.progress_log import batch_numbers, progress_folder, read_batch_record  # noqa: E402
from benchmarks.json_output import json_line_output  # noqa: E402
from benchmarks.process_usage import tree_cpu_seconds  # noqa: E402

AIRFLOW_CLIENT = "akf-airflow"
"""The ``client.id`` of the ``kafka`` connections: what Airflow's hooks, sensors and triggers send."""
JOB_CLIENT = "akf-job"
"""The ``client.id`` the jobs' Kafka clients get through ``job.kafka_options``."""
LIGHT_JOB = REPO / "benchmarks" / "fleet_job.py"
WATCHERS = ("scheduler", "dag-processor", "triggerer")


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def fleet(args: argparse.Namespace, run_dir: Path, pairs: int) -> LocalAirflow:
    """A local Airflow of ``pairs`` pairs set up for this benchmark (not started)."""
    light = {"job": {"application": str(LIGHT_JOB)}}
    return LocalAirflow(
        run_dir,
        free_ports(1)[0],
        automatic=True,
        login=False,
        produce_rate=args.produce_rate,
        pairs=pairs,
        pair_settings={
            "switch": {"wake": "event", "watch_timeout_seconds": args.watch_timeout},
            "keeper": {"automatic": False},
            "job": {"kafka_options": {"client.id": JOB_CLIENT}},
        },
        kafka_extra={"client.id": AIRFLOW_CLIENT},
        request_log=True,
        parallelism=args.parallelism,
        pair_overrides={name: light for name in pair_names(pairs)[args.spark_pairs :]},
    )


# ---- Airflow's API -------------------------------------------------------------------------------------


def trigger(airflow: LocalAirflow, dag_id: str, attempts: int = 5) -> str:
    """Start a run of ``dag_id``; an answer 500 is asked again after a pause.

    With fifty pairs on SQLite the API server's writes meet the scheduler's and a trigger can fail with
    500 (seen at 50 pairs); the start DAG skips a job already running, so a repeated run does no harm.
    """
    import urllib.error

    for attempt in range(1, attempts + 1):
        try:
            run = airflow.api_post(f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {}})
            return str(run["dag_run_id"])
        except urllib.error.HTTPError as exc:
            if exc.code != 500 or attempt == attempts:
                raise
            say(f"triggering {dag_id}: HTTP 500 (attempt {attempt} of {attempts}); asking again in 3 s")
            time.sleep(3.0)
    raise AssertionError("unreachable")


def wait_runs(airflow: LocalAirflow, runs: dict[str, str], timeout: float) -> dict[str, str]:
    """Wait until every ``dag_id -> run id`` ended; return their states (``running``: did not end)."""
    states = dict.fromkeys(runs, "queued")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(
        state not in ("success", "failed") for state in states.values()
    ):
        for dag_id, run_id in runs.items():
            if states[dag_id] not in ("success", "failed"):
                answer = airflow.api_get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}") or {}
                states[dag_id] = answer.get("state") or states[dag_id]
        airflow.check_components()
        time.sleep(3.0)
    return states


def start_jobs(airflow: LocalAirflow, timeout: float) -> None:
    """Run every pair's start DAG; raise naming the pairs whose job did not start."""
    runs = {f"kafka_failover_{pair}_start": "" for pair in airflow.pair_names}
    for dag_id in runs:
        runs[dag_id] = trigger(airflow, dag_id)
    states = wait_runs(airflow, runs, timeout)
    failed = {dag_id: state for dag_id, state in states.items() if state != "success"}
    if failed:
        raise RuntimeError(
            f"start DAG runs that did not succeed: {failed}; task logs in {airflow.run_dir}/logs"
        )


# ---- the jobs' own records -----------------------------------------------------------------------------


def first_batch_at(airflow: LocalAirflow, pair: str, cluster: str, epoch: int) -> float | None:
    """When the job of ``pair`` on ``cluster`` at ``epoch`` wrote its first progress entry (Unix s)."""
    layout = RunLayout(
        pair, cluster, epoch, str(airflow.job_home / "checkpoints"), str(airflow.job_home / "runs")
    )
    numbers = batch_numbers(progress_folder(layout.checkpoint))
    if not numbers:
        return None
    record = read_batch_record(layout.checkpoint, numbers[0]) or {}
    written = record.get("written_at")
    return float(written) if isinstance(written, int | float) else None


def wait_switched(
    airflow: LocalAirflow, cluster: str, epoch: int, since: float, timeout: float, what: str
) -> dict[str, float | None]:
    """Seconds from ``since`` to each pair's first batch on ``cluster`` at ``epoch`` (None: none in time)."""
    seconds: dict[str, float | None] = dict.fromkeys(airflow.pair_names)
    deadline = time.monotonic() + timeout
    reported = 0
    while time.monotonic() < deadline:
        for pair in airflow.pair_names:
            if seconds[pair] is None:
                at = first_batch_at(airflow, pair, cluster, epoch)
                seconds[pair] = None if at is None else round(at - since, 1)
        done = sum(value is not None for value in seconds.values())
        if done != reported:
            say(
                f"{what}: {done} of {len(seconds)} pairs have a batch on {cluster} "
                f"({time.time() - since:.0f} s)"
            )
            reported = done
        if done == len(seconds):
            break
        airflow.check_components()
        time.sleep(1.0)
    return seconds


def distribution(seconds: dict[str, float | None]) -> dict[str, Any]:
    values = sorted(value for value in seconds.values() if value is not None)
    if not values:
        return {"pairs": 0}
    return {
        "pairs": len(values),
        "min": values[0],
        "median": round(statistics.median(values), 1),
        "p90": values[min(len(values) - 1, int(0.9 * len(values)))],
        "max": values[-1],
    }


def drain(airflow: LocalAirflow, timeout: float) -> dict[str, dict[str, int]]:
    """Stop the producers; wait until each sink holds every acknowledged record; what is missing, per pair."""
    acked = {}
    for pair, producer in airflow.producers.items():
        producer.stop(flush_timeout=5.0)
        acked[pair] = set(producer.acked_ids)
    readers = {pair: SinkReader(("record_id",)) for pair in acked}
    deadline = time.monotonic() + timeout
    while True:
        figures = {}
        for pair, ids in acked.items():
            contents = readers[pair](str(airflow.job_home / "sink" / pair))
            figures[pair] = {
                "acked": len(ids),
                "missing": len(ids - contents.record_ids),
                "duplicates": contents.duplicates,
            }
        if all(f["missing"] == 0 for f in figures.values()) or time.monotonic() > deadline:
            return figures
        time.sleep(2.0)


# ---- the phases ----------------------------------------------------------------------------------------


def quiet(airflow: LocalAirflow, seconds: float) -> dict[str, Any]:
    """CPU of the scheduler, dag-processor and triggerer trees, the provider's requests, over ``seconds``."""
    pids = {name: airflow.component(name).pid() for name in WATCHERS}
    if None in pids.values():
        raise RuntimeError(f"an Airflow component is not running: {pids}")
    counters = {cluster: RequestCounter(airflow.sandbox.broker_logs(cluster)) for cluster in ("A", "B")}
    for counter in counters.values():
        counter.skip()
    before = {name: tree_cpu_seconds(pid) for name, pid in pids.items() if pid}
    started = time.monotonic()
    time.sleep(seconds)
    airflow.check_components()
    after = {name: tree_cpu_seconds(pid) for name, pid in pids.items() if pid}
    elapsed = time.monotonic() - started
    requests = {cluster: by_client(counter.read(), AIRFLOW_CLIENT) for cluster, counter in counters.items()}
    cpu = {name: round((after[name] - before[name]) * 60 / elapsed, 2) for name in before}
    return {
        "over_s": round(elapsed, 1),
        "cpu_s_per_min": cpu,
        "cpu_s_per_min_total": round(sum(cpu.values()), 2),
        "requests_per_s": {
            cluster: round(sum(counts.values()) / elapsed, 2) for cluster, counts in requests.items()
        },
        "requests_by_kind": {cluster: dict(counts.most_common()) for cluster, counts in requests.items()},
    }


def baseline(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    airflow = fleet(args, root / "one-pair", 1)
    airflow.lock_run_dir()
    try:
        airflow.clean_run_dir()
        say("[baseline] starting the sandbox and Airflow with one pair ...")
        airflow.start()
        start_jobs(airflow, args.start_timeout)
        say(
            f"[baseline] the job runs; settling {args.settle_seconds:.0f} s, "
            f"then quiet for {args.idle_seconds:.0f} s"
        )
        time.sleep(args.settle_seconds)
        figures = quiet(airflow, args.idle_seconds)
        say(f"[baseline] {json.dumps(figures)}")
        return figures
    finally:
        say("[baseline] stopping Airflow, the job and the sandbox ...")
        airflow.stop()


def measure_fleet(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    airflow = fleet(args, root / "fleet", args.pairs)
    airflow.lock_run_dir()
    figures: dict[str, Any] = {}
    try:
        airflow.clean_run_dir()
        say(f"[fleet] starting the sandbox and Airflow with {args.pairs} pairs ...")
        started = time.monotonic()
        airflow.start()
        figures["airflow_ready_s"] = round(time.monotonic() - started, 1)
        say(f"[fleet] Airflow ready in {figures['airflow_ready_s']} s; starting {args.pairs} jobs on A ...")
        started = time.monotonic()
        start_jobs(airflow, args.start_timeout)
        figures["all_started_s"] = round(time.monotonic() - started, 1)
        say(f"[fleet] all jobs started in {figures['all_started_s']} s; settling {args.settle_seconds:.0f} s")
        time.sleep(args.settle_seconds)
        say(f"[fleet] quiet for {args.idle_seconds:.0f} s ...")
        figures["idle"] = quiet(airflow, args.idle_seconds)
        say(f"[fleet] idle: {json.dumps(figures['idle'])}")

        say("[fleet] crashing cluster A ...")
        crashed_at = time.time()
        airflow.sandbox.fault("crash", "A")
        failover = wait_switched(airflow, "B", 1, crashed_at, args.switch_timeout, "failover")
        figures["failover_s"] = failover
        if any(value is None for value in failover.values()):
            say(
                f"[fleet] pairs not on B within {args.switch_timeout:.0f} s: "
                f"{[pair for pair, value in failover.items() if value is None]}"
            )
            return figures
        say("[fleet] every pair is on B; restarting A and MirrorMaker 2 ...")
        restarted_at = time.time()
        airflow.sandbox.bring_back("A")
        failback = wait_switched(airflow, "A", 2, restarted_at, args.switch_timeout, "failback")
        figures["failback_s"] = failback
        say("[fleet] stopping the producers; waiting for every acknowledged record in the sinks ...")
        figures["sinks"] = drain(airflow, args.drain_timeout)
        return figures
    finally:
        say("[fleet] stopping Airflow, the jobs and the sandbox ...")
        airflow.stop()


def ratio(one: dict[str, Any] | None, idle: dict[str, Any]) -> float | None:
    """The provider's request rate with all pairs over that with one, on the cluster where it grew most."""
    if one is None or not idle:
        return None
    rates = [
        idle["requests_per_s"][cluster] / one["requests_per_s"][cluster]
        for cluster in ("A", "B")
        if one["requests_per_s"].get(cluster)
    ]
    return round(max(rates), 2) if rates else None


def summary(args: argparse.Namespace, one: dict[str, Any] | None, all_: dict[str, Any]) -> dict[str, Any]:
    idle = all_.get("idle") or {}
    failover = all_.get("failover_s") or {}
    failback = all_.get("failback_s") or {}
    sinks = all_.get("sinks") or {}

    def slowest(seconds: dict[str, float | None]) -> float | None:
        values = list(seconds.values())
        return None if not values or None in values else max(v for v in values if v is not None)

    return {
        "pairs": args.pairs,
        "spark_pairs": min(args.spark_pairs, args.pairs),
        "light_pairs": max(0, args.pairs - args.spark_pairs),
        "jobs": f"{min(args.spark_pairs, args.pairs)} packaged PySpark job(s), the others fleet_job.py",
        "idle_cpu_s_per_min_per_pair": round(idle["cpu_s_per_min_total"] / args.pairs, 3) if idle else None,
        "idle_cpu_s_per_min": idle.get("cpu_s_per_min"),
        "probes_per_s_per_cluster": {
            "one_pair": None if one is None else one["requests_per_s"],
            "all": idle.get("requests_per_s"),
        },
        "probe_rate_ratio": ratio(one, idle),
        "requests_by_kind": {
            "one_pair": None if one is None else one["requests_by_kind"],
            "all": idle.get("requests_by_kind"),
        },
        "all_failed_over_s": slowest(failover),
        "failover_distribution_s": distribution(failover),
        "all_failed_back_s": slowest(failback) if failback else None,
        "failback_distribution_s": distribution(failback) if failback else None,
        "lost": sum(f["missing"] for f in sinks.values()) if sinks else None,
        "acked": sum(f["acked"] for f in sinks.values()) if sinks else None,
        "duplicates": sum(f["duplicates"] for f in sinks.values()) if sinks else None,
        "per_pair": {
            pair: {
                "failover_s": failover.get(pair),
                "failback_s": failback.get(pair),
                **(sinks.get(pair) or {}),
            }
            for pair in failover
        },
        "airflow_ready_s": all_.get("airflow_ready_s"),
        "all_started_s": all_.get("all_started_s"),
        "parallelism": args.parallelism,
        "idle_seconds": args.idle_seconds,
        "produce_rate_per_pair": args.produce_rate,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )

    def positive(kind: type, low: float) -> Any:
        def parse(text: str) -> Any:
            try:
                value = kind(text)
            except ValueError:
                value = None
            if value is None or value < low:
                raise argparse.ArgumentTypeError(f"must be a {kind.__name__} >= {low}, got {text!r}")
            return value

        return parse

    parser.add_argument("--pairs", type=positive(int, 1), default=20, help="pairs in the fleet (20)")
    parser.add_argument(
        "--spark-pairs", type=positive(int, 0), default=2, help="pairs running the packaged PySpark job (2)"
    )
    parser.add_argument("--idle-seconds", type=positive(float, 10), default=180.0, help="quiet window (180)")
    parser.add_argument(
        "--settle-seconds",
        type=positive(float, 0),
        default=150.0,
        help="wait after the jobs started before the quiet window (150: longer than --watch-timeout, so that "
        "the failback runs the triggerer wakes at its start have ended)",
    )
    parser.add_argument(
        "--watch-timeout", type=positive(float, 30), default=120.0, help="switch.watch_timeout_seconds (120)"
    )
    parser.add_argument(
        "--parallelism", type=positive(int, 1), default=8, help="Airflow [core] parallelism (8)"
    )
    parser.add_argument(
        "--produce-rate", type=positive(float, 0.1), default=2.0, help="records per second per pair (2)"
    )
    parser.add_argument(
        "--start-timeout", type=positive(float, 30), default=900.0, help="for the start DAGs (900)"
    )
    parser.add_argument(
        "--switch-timeout", type=positive(float, 30), default=900.0, help="for every pair to switch (900)"
    )
    parser.add_argument(
        "--drain-timeout",
        type=positive(float, 10),
        default=240.0,
        help="for the sinks to hold every record (240)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the one-pair deployment")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    json_out = json_line_output()  # stdout keeps only the final JSON line
    from akf_devtools.sandbox.jars import use_job_jars

    use_job_jars(delta=False)
    machine = f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}"
    say(f"machine: {machine}; load average {os.getloadavg()[0]:.1f}")
    root = REPO / ".run" / f"bench-fleet-{os.getpid()}"
    one = None if args.no_baseline else baseline(args, root)
    result = summary(args, one, measure_fleet(args, root))
    result["machine"] = machine
    result["load_average_at_end"] = round(os.getloadavg()[0], 1)
    json_out.write(json.dumps(result) + "\n")
    json_out.flush()
    return 0 if result["lost"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""Run every benchmark, print one table of the figures, and write them with the machine to a JSON file.

Each benchmark is a script in this folder, run one after the other (never together: the figures are
timings) as its own process with this interpreter; its output goes to ``<logs>/<name>.log`` and the last
line of that output that is a JSON object is its result. A benchmark that fails (non-zero exit, no JSON
line, or over its time limit, when it is interrupted so that it stops what it started) is reported as
failed with its log; the others still run. Targets are shown and checked in the table, never asserted:
the exit code only says whether every benchmark ran.

    .venv/bin/python benchmarks/run_all.py [--only rto,redelivery] [--quick] [--output FILE]

The file is ``results/benchmarks.json`` unless ``--output`` names another; the logs go to ``bench-logs/``
next to it. ``--quick`` runs each with small settings (fewer rounds, trials and records): a smoke run, not
figures.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import operator
import os
import platform
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OPERATORS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "<": operator.lt, ">": operator.gt}
STOP_GRACE_S = 180.0  # a benchmark interrupted at its time limit gets this long to stop its processes


@dataclass(frozen=True)
class Figure:
    """One figure of a benchmark's JSON result.

    :param key: its key in the result.
    :param label: what it is; ``{name}`` fields are filled from the result.
    :param unit: its unit.
    :param target: ``"<op> <value>"``, the value a number, JSON, or another key of the result
        (e.g. ``"<= mm2_redelivered"``); empty when the figure has no target.
    """

    key: str
    label: str
    unit: str = ""
    target: str = ""


@dataclass(frozen=True)
class Benchmark:
    """A benchmark script, its arguments (full and ``--quick``), its time limit and its figures."""

    name: str
    script: str
    figures: tuple[Figure, ...]
    quick_args: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    timeout_s: float = 3600.0


def _stats(prefix: str, label: str, unit: str = "s") -> tuple[Figure, ...]:
    return tuple(Figure(f"{prefix}_{stat}_s", f"{label}, {stat}", unit) for stat in ("median", "min", "max"))


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "detection",
        "bench_detection.py",
        (
            Figure("detection_crash_median_s", "detection of a crash, median", "s"),
            Figure("detection_crash_max_s", "detection of a crash, max", "s"),
            Figure("detection_hang_median_s", "detection of a hang, median", "s"),
            Figure("detection_hang_max_s", "detection of a hang, max", "s"),
            Figure("false_alarms", "false alarms over {blips} hangs of 2 s", "", "== 0"),
            Figure("trigger_cpu_s_per_min", "trigger CPU (one watch, 2 s interval)", "s/min"),
        ),
        quick_args=("--trials", "2", "--blips", "3", "--cpu-seconds", "20"),
        timeout_s=2400,
    ),
    Benchmark(
        "detection3",
        "bench_detection.py",
        (
            Figure(
                "detection3_crash_median_s",
                "3 brokers: detection of a whole-cluster crash, median",
                "s",
                "<= 10",
            ),
            Figure(
                "detection3_crash_max_s", "3 brokers: detection of a whole-cluster crash, max", "s", "<= 10"
            ),
            Figure(
                "detection3_hang_median_s",
                "3 brokers: detection of a whole-cluster hang, median",
                "s",
                "<= 10",
            ),
            Figure(
                "detection3_hang_max_s", "3 brokers: detection of a whole-cluster hang, max", "s", "<= 10"
            ),
            Figure(
                "single_broker_false_alarms",
                "3 brokers: false alarms over {single_broker_kills} broker kills",
                "",
                "== 0",
            ),
            Figure(
                "rolling_false_alarms",
                "3 brokers: false alarms over {rolling_restarts} rolling restarts",
                "",
                "== 0",
            ),
            Figure("probe_partitions_s", "3 brokers: one probe judging {partitions} partitions", "s"),
            Figure("probe_metadata_only_s", "3 brokers: one metadata-only probe", "s"),
            Figure(
                "trigger_cpu_partitions_s_per_min",
                "3 brokers: trigger CPU judging {partitions} partitions",
                "s/min",
            ),
            Figure(
                "trigger_cpu_metadata_only_s_per_min", "3 brokers: trigger CPU, metadata-only probes", "s/min"
            ),
        ),
        args=("--brokers", "3"),
        quick_args=("--brokers", "3", "--trials", "1", "--kills", "1", "--rolls", "1", "--cpu-seconds", "20"),
        timeout_s=4800,
    ),
    Benchmark(
        "rto",
        "bench_rto.py",
        (
            *_stats("failover_detection", "failover after a crash: detection"),
            *_stats("failover_rto", "failover after a crash: RTO"),
            *_stats("failback_detection", "failback after a restart: detection"),
            *_stats("failback_rto", "failback after a restart: RTO"),
            Figure("lost", "records lost over {rounds} rounds ({health} thresholds)", "records", "== 0"),
            Figure("unread", "not read yet when the job stopped writing (not lost)", "records"),
            Figure("duplicates", "records written twice to the sink (deduplicated by id)", "records"),
        ),
        quick_args=("--rounds", "1"),
        timeout_s=5400,
    ),
    Benchmark(
        "redelivery",
        "bench_redelivery.py",
        (
            Figure("rate_achieved", "steady load on A", "records/s", ">= 950"),
            Figure("ours_redelivered", "re-delivered per switch: our plan", "records", "<= mm2_redelivered"),
            Figure("ours_lost", "lost per switch: our plan", "records", "== 0"),
            Figure("mm2_redelivered", "re-delivered: MM2 RemoteClusterUtils.translateOffsets", "records"),
            Figure("mm2_lost", "lost: MM2 RemoteClusterUtils.translateOffsets", "records"),
            Figure("rewind_60s_redelivered", "re-delivered: timestamp rewind of 60 s", "records"),
            Figure("rewind_60s_lost", "lost: timestamp rewind of 60 s", "records"),
            Figure("earliest_redelivered", "re-delivered: restart at earliest", "records"),
            Figure("earliest_lost", "lost: restart at earliest", "records"),
            Figure("latest_redelivered", "re-delivered: restart at latest", "records"),
            Figure("latest_lost", "lost: restart at latest", "records"),
            Figure("lost_in_replication", "acknowledged by A, never copied to B (any method)", "records"),
        ),
        quick_args=("--warmup", "70"),
        timeout_s=1800,
    ),
    Benchmark(
        "translation",
        "bench_translation.py",
        (
            Figure("plan_10k_partitions_s", "translation plan for 10,000 partitions (pure)", "s"),
            Figure("io_plan_s", "translation plan with I/O, {io_plan_partitions} partitions", "s"),
            Figure("requests_per_cluster", "requests per cluster for that plan", ""),
        ),
        quick_args=("--partitions", "200"),
        timeout_s=2400,
    ),
    Benchmark(
        "job",
        "bench_job.py",
        (
            Figure(
                "throughput_ratio", "job throughput / plain Spark query ({records} records)", "", ">= 0.95"
            ),
            Figure("steady_throughput_ratio", "same, after the first batch", ""),
            Figure("job_records_per_s", "job throughput", "records/s"),
            Figure("plain_records_per_s", "plain query throughput", "records/s"),
            Figure("cpu_ratio", "plain CPU / job CPU", ""),
            Figure("other_load_max_share", "largest share of the cores used by other work", ""),
            Figure("submit_to_first_batch_s", "submit to first committed batch", "s"),
        ),
        quick_args=("--records", "200000", "--max-offsets-per-trigger", "50000", "--rounds", "1"),
        timeout_s=5400,
    ),
    Benchmark(
        "job_parts",
        "bench_job_parts.py",
        (
            Figure(
                "plain_over_job_query", "plain query / the packaged job's query without its run protocol", ""
            ),
            Figure("job_columns_adds_s_per_million", "the sink's columns add, per million records", "s"),
            Figure("record_id_adds_s_per_million", "the record id (record-id jar) adds", "s"),
            Figure("one_observation_adds_s_per_million", "one observation of the source adds", "s"),
            Figure("observed_query_adds_s_per_million", "a user's job's observations instead add", "s"),
            Figure("plain_over_observed_query", "plain query / the same query observed as a user's job", ""),
        ),
        quick_args=("--records", "200000", "--rounds", "1"),
        timeout_s=1800,
    ),
    Benchmark(
        "job_steady",
        "bench_job_steady.py",
        (
            Figure("cpu_s_per_min", "the job's driver at {rate} records/s: CPU per minute", "s/min"),
            Figure("cpu_s_per_batch", "the same, per batch", "s"),
            Figure("python_cpu_s_per_min", "of which the driver's Python", "s/min"),
            Figure("batches_per_min", "batches per minute", ""),
            Figure("submit_to_first_batch_s", "from its submit to its first committed batch", "s"),
        ),
        quick_args=("--warmup", "20", "--seconds", "30"),
        timeout_s=900,
    ),
    Benchmark(
        "delta",
        "bench_delta.py",
        (
            Figure("append_ratio", "job into Delta, append mode / plain Delta query", "", ">= 0.85"),
            Figure("merge_ratio", "job into Delta, MERGE mode / plain Delta query", ""),
            Figure("plain_records_per_s", "plain Kafka -> Delta query", "records/s"),
            Figure("other_load_max_share", "largest share of the cores used by other work", ""),
        ),
        quick_args=("--records", "100000", "--skip-growth"),
        timeout_s=5400,
    ),
    Benchmark(
        "keeper",
        "bench_keeper.py",
        (
            Figure(
                "restart_next_batch_median_s",
                "keeper: kill -9 of the driver to the next batch, median",
                "s",
                "<= 30",
            ),
            Figure("restart_next_batch_max_s", "keeper: kill -9 of the driver to the next batch, max", "s"),
            Figure(
                "keeper_cpu_s_per_min", "keeper loop CPU per pair (default 10 s looks)", "s/min", "<= 0.5"
            ),
        ),
        quick_args=("--rounds", "1", "--cpu-seconds", "30"),
        timeout_s=1800,
    ),
    Benchmark(
        "fleet",
        "bench_fleet.py",
        (
            Figure(
                "idle_cpu_s_per_min_per_pair",
                "fleet of {pairs} pairs, quiet: scheduler + dag-processor + triggerer CPU per pair",
                "s/min",
                "<= 0.5",
            ),
            Figure(
                "probe_rate_ratio", "provider's requests per cluster, {pairs} pairs over one", "x", "<= 1.5"
            ),
            Figure(
                "all_failed_over_s", "mass failover: crash of A to the last pair's batch on B", "s", "<= 120"
            ),
            Figure("all_failed_back_s", "mass failback: A's restart to the last pair's batch on A", "s"),
            Figure("lost", "records lost over the fleet's failover and failback", "", "== 0"),
        ),
        quick_args=(
            "--pairs",
            "3",
            "--spark-pairs",
            "1",
            "--idle-seconds",
            "30",
            "--settle-seconds",
            "70",
            "--watch-timeout",
            "60",
        ),
        timeout_s=3600,
    ),
    Benchmark(
        "dag_parse",
        "bench_dag_parse.py",
        (
            Figure("parse_ms_median", "DAG file parse time, median", "ms"),
            Figure("heavy_imports", "Kafka/Spark clients imported while parsing", "", "== []"),
        ),
        quick_args=("--runs", "2"),
        timeout_s=600,
    ),
    Benchmark(
        "state",
        "bench_state.py",
        (
            Figure(
                "carry_added_s_100mb_local_to_local",
                "state carry adds, 100 MB on local disk, median",
                "s",
                "<= 2",
            ),
            Figure("carry_added_s_10mb_local_to_local", "state carry adds, 10 MB on local disk, median", "s"),
            Figure("carry_added_s_1gb_local_to_local", "state carry adds, 1 GB on local disk, median", "s"),
            Figure("carry_added_s_100mb_hdfs_to_hdfs", "state carry adds, 100 MB HDFS to HDFS, median", "s"),
            Figure("carried_files_100mb_local_to_local", "files the 100 MB carry writes", "files"),
            Figure("state_bytes_100mb", "the 100 MB state's size on disk", "bytes"),
        ),
        quick_args=("--quick",),
        timeout_s=3600,
    ),
)


@dataclass
class Outcome:
    """How one benchmark ran: ``ok`` with its result, or ``failed`` with the reason; its log either way."""

    name: str
    status: str
    seconds: float
    log: str
    command: list[str]
    result: dict[str, Any] | None = None
    error: str | None = None
    load_average: dict[str, list[float]] = field(default_factory=dict)


# ---- assembling results (pure) ---------------------------------------------------------------------------


def last_json_object(output: str) -> dict[str, Any] | None:
    """The last line of ``output`` that is a JSON object, or None."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def evaluate(target: str, value: Any, result: dict[str, Any]) -> tuple[str, bool | None]:
    """Return the target as shown (with a referenced figure's value) and whether ``value`` meets it."""
    if not target:
        return "", None
    op, _, reference = target.partition(" ")
    shown = target
    if reference in result:
        bound = result[reference]
        shown = f"{target} ({format_value(bound)})"
    else:
        bound = json.loads(reference)
    if value is None or bound is None:
        return shown, None
    return shown, bool(OPERATORS[op](value, bound))


def format_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _label(figure: Figure, result: dict[str, Any]) -> str:
    try:
        return figure.label.format(**result)
    except (KeyError, IndexError, ValueError):
        return figure.label


def figure_rows(benchmark: Benchmark, outcome: Outcome) -> list[dict[str, Any]]:
    """The table rows of one benchmark: one per figure, or one saying it failed and where its log is."""
    if outcome.status != "ok" or outcome.result is None:
        return [
            {
                "benchmark": benchmark.name,
                "figure": f"FAILED: {outcome.error}",
                "value": None,
                "unit": "",
                "target": "",
                "met": None,
                "log": outcome.log,
            }
        ]
    rows = []
    for figure in benchmark.figures:
        value = outcome.result.get(figure.key)
        target, met = evaluate(figure.target, value, outcome.result)
        rows.append(
            {
                "benchmark": benchmark.name,
                "figure": _label(figure, outcome.result),
                "key": figure.key,
                "value": value,
                "unit": figure.unit,
                "target": target,
                "met": met,
            }
        )
    return rows


def render_table(rows: list[dict[str, Any]]) -> str:
    """A fixed-width table: benchmark, figure, value, unit, target, met (a failed row shows its log)."""
    headers = ("benchmark", "figure", "value", "unit", "target", "met?")
    cells = []
    for row in rows:
        met = {True: "yes", False: "NO", None: ""}[row["met"]]
        if "log" in row:
            met = f"log: {row['log']}"
        cells.append(
            (
                row["benchmark"],
                row["figure"],
                format_value(row["value"]) if "log" not in row else "",
                row["unit"],
                row["target"],
                met,
            )
        )
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]
    lines = [headers, tuple("-" * w for w in widths), *cells]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def assemble(
    outcomes: list[Outcome], machine: dict[str, Any], quick: bool, started_at: str, finished_at: str
) -> dict[str, Any]:
    """The document written to the JSON file: machine, every benchmark's outcome, and the table rows."""
    by_name = {benchmark.name: benchmark for benchmark in BENCHMARKS}
    rows = [row for outcome in outcomes for row in figure_rows(by_name[outcome.name], outcome)]
    return {
        "machine": machine,
        "quick": quick,
        "started_at": started_at,
        "finished_at": finished_at,
        "benchmarks": {outcome.name: asdict(outcome) for outcome in outcomes},
        "figures": rows,
        "targets_met": all(row["met"] is not False for row in rows),
        "all_ran": all(outcome.status == "ok" for outcome in outcomes),
    }


# ---- the machine -----------------------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _first_match(pattern: str, text: str) -> str | None:
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(1).strip() if match else None


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _java_version() -> str | None:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else None


def describe_machine() -> dict[str, Any]:
    """Cores, RAM, CPU model, OS and the versions of Python, Java, Kafka, Spark and Airflow, with the date."""
    mem_kib = _first_match(r"^MemTotal:\s+(\d+)", _read("/proc/meminfo"))
    kafka_jars = sorted((REPO / ".jars" / "kafka").glob("kafka-clients-*.jar"))
    return {
        "host": platform.node(),
        "cores": os.cpu_count(),
        "ram_gib": round(int(mem_kib) / 1024**2, 1) if mem_kib else None,
        "cpu_model": _first_match(r"^model name\s*:\s*(.+)$", _read("/proc/cpuinfo")),
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": _java_version(),
        "kafka": kafka_jars[-1].stem.removeprefix("kafka-clients-") if kafka_jars else None,
        "spark": _version("pyspark"),
        "airflow": _version("apache-airflow"),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


# ---- running ---------------------------------------------------------------------------------------------


def _stop(process: subprocess.Popen, interrupt: bool) -> None:
    """Let the benchmark stop what it started (SIGINT unless it already got one), then kill it."""
    if interrupt and process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_benchmark(benchmark: Benchmark, quick: bool, logs: Path) -> Outcome:
    """Run one benchmark script; a Ctrl-C reaches it too, and is re-raised once it has cleaned up."""
    log = logs / f"{benchmark.name}.log"
    args = benchmark.quick_args if quick else benchmark.args
    command = [sys.executable, str(HERE / benchmark.script), *args]
    load = {"start": [round(x, 2) for x in os.getloadavg()]}
    started = time.monotonic()
    error = None
    with open(log, "w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, cwd=REPO)
        try:
            code = process.wait(timeout=benchmark.timeout_s)
        except subprocess.TimeoutExpired:
            _stop(process, interrupt=True)
            code, error = process.returncode, f"over its time limit of {benchmark.timeout_s:.0f} s"
        except KeyboardInterrupt:
            _stop(process, interrupt=False)  # the terminal sent SIGINT to it as well
            raise
    load["end"] = [round(x, 2) for x in os.getloadavg()]
    seconds = round(time.monotonic() - started, 1)
    result = last_json_object(log.read_text(errors="replace"))
    if error is None and code != 0:
        error = f"exit code {code}"
    elif error is None and result is None:
        error = "no JSON line in its output"
    return Outcome(
        benchmark.name,
        "failed" if error else "ok",
        seconds,
        str(log),
        command,
        result if not error else None,
        error,
        load,
    )


def select(only: str | None) -> list[Benchmark]:
    if not only:
        return list(BENCHMARKS)
    names = [name.strip() for name in only.split(",") if name.strip()]
    known = [benchmark.name for benchmark in BENCHMARKS]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; choose from {', '.join(known)}")
    return [benchmark for benchmark in BENCHMARKS if benchmark.name in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", help=f"comma-separated names among {', '.join(b.name for b in BENCHMARKS)}")
    parser.add_argument("--quick", action="store_true", help="small settings: a smoke run, not figures")
    parser.add_argument(
        "--output",
        type=Path,
        default=REPO / "results" / "benchmarks.json",
        help="the JSON file (default results/benchmarks.json); logs go next to it",
    )
    args = parser.parse_args(argv)
    chosen = select(args.only)
    logs = args.output.parent / "bench-logs"
    logs.mkdir(parents=True, exist_ok=True)
    machine = describe_machine()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    print(
        f"machine: {machine['cores']} cores, {machine['ram_gib']} GiB, {machine['cpu_model']}; "
        f"Python {machine['python']}, {machine['java']}, Kafka {machine['kafka']}, "
        f"Spark {machine['spark']}",
        flush=True,
    )
    outcomes = []
    for benchmark in chosen:
        print(
            f"[{time.strftime('%H:%M:%S')}] {benchmark.name}: running (log {logs / benchmark.name}.log)",
            flush=True,
        )
        outcome = run_benchmark(benchmark, args.quick, logs)
        outcomes.append(outcome)
        print(
            f"[{time.strftime('%H:%M:%S')}] {benchmark.name}: {outcome.status} in {outcome.seconds:.0f} s"
            + (f" ({outcome.error})" if outcome.error else ""),
            flush=True,
        )
    finished_at = datetime.now(UTC).isoformat(timespec="seconds")
    document = assemble(outcomes, machine, args.quick, started_at, finished_at)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=1) + "\n")
    print("\n" + render_table(document["figures"]))
    note = " (--quick: a smoke run, not figures)" if args.quick else ""
    print(f"\nresults: {args.output}{note}; figures are from this machine and move with its other load")
    return 0 if document["all_ran"] else 1


if __name__ == "__main__":
    sys.exit(main())

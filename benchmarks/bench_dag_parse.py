"""How long the DAG file takes to parse, as the DAG processor sees it.

Each run starts a fresh Python process that imports Airflow, then times only the parse of
``dags/kafka_failover.py`` (``DagBag`` with the file as its folder), and reports the DAGs found and
whether a Kafka or Spark client was imported (it must not be). With ``--pairs N`` the file is parsed with a
fleet: N copies of the config's first pair (each its own name and topic), as one Airflow guarding many
pairs over the same clusters would hold them. With ``--as-task`` the file is parsed as a task process
parses it before it runs a task: with Airflow's parsing context naming the failover DAG of the last pair
(the file then builds that pair's DAGs only).

    .venv/bin/python benchmarks/bench_dag_parse.py [--runs 5] [--config examples/pairs.yaml] [--pairs 50]
        [--as-task]

Prints one line per run on stderr and a final JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CHILD = """
import contextlib, json, sys, time
try:
    from airflow.dag_processing.dagbag import DagBag
except ImportError:  # Airflow before 3.2
    from airflow.models.dagbag import DagBag
from airflow.sdk.definitions._internal.dag_parsing_context import _airflow_parsing_context_manager
context = _airflow_parsing_context_manager(dag_id=sys.argv[2]) if sys.argv[2] else contextlib.nullcontext()
started = time.perf_counter()
with context:
    bag = DagBag(dag_folder=sys.argv[1])
elapsed = time.perf_counter() - started
errors = {k: str(v)[:300] for k, v in bag.import_errors.items()}
heavy = [m for m in ("confluent_kafka", "pyspark", "pyarrow") if m in sys.modules]
print(json.dumps({"parse_s": elapsed, "dags": sorted(bag.dag_ids), "errors": errors, "heavy": heavy}))
"""


def fleet_config(config: str, pairs: int, folder: Path) -> str:
    """A copy of ``config`` whose only pairs are ``pairs`` copies of its first pair (``<name>_<n>``, topic
    ``<topic>_<n>``); paths the pair names are made per pair, so that no two share a fence."""
    document = yaml.safe_load(Path(config).read_text())
    name, first = next(iter(document["pairs"].items()))
    fleet = {}
    for number in range(pairs):
        pair = yaml.safe_load(yaml.safe_dump(first))
        pair["topics"] = [f"{topic}_{number}" for topic in pair["topics"]]
        if pair.get("bookkeeping_group"):
            pair["bookkeeping_group"] = f"{pair['bookkeeping_group']}_{number}"
        job = pair.get("job") or {}
        for key in ("fencing_marker", "sink_root", "run_root", "checkpoint_root"):
            if job.get(key):
                job[key] = f"{job[key]}/{name}_{number}"
        fleet[f"{name}_{number}"] = pair
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump({"pairs": fleet}))
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--config", default=str(REPO / "examples" / "pairs.yaml"))
    parser.add_argument(
        "--pairs", type=int, default=None, help="parse a fleet of this many copies of the config's first pair"
    )
    parser.add_argument(
        "--as-task",
        action="store_true",
        help="parse as a task process does: Airflow's parsing context names the last pair's failover DAG",
    )
    args = parser.parse_args()
    if args.pairs is not None and args.pairs < 1:
        parser.error(f"--pairs {args.pairs}: give a number of pairs >= 1")
    config = args.config
    if args.pairs is not None:
        config = fleet_config(args.config, args.pairs, Path(tempfile.mkdtemp(prefix="bench-dag-parse-")))
    env = {
        **os.environ,
        "AKF_PAIRS_CONFIG": config,
        "AIRFLOW_HOME": str(REPO / ".airflow" / "bench"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    pairs = list(yaml.safe_load(Path(config).read_text())["pairs"])
    task_of = f"kafka_failover_{pairs[-1]}_failover" if args.as_task else ""
    results = []
    for run in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(REPO / "dags" / "kafka_failover.py"), task_of],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            raise SystemExit(f"the parse process failed:\n{out.stderr[-3000:]}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if result["errors"]:
            raise SystemExit(f"the DAG file failed to parse: {result['errors']}")
        results.append(result)
        print(
            f"run {run + 1}: {result['parse_s'] * 1000:.0f} ms, {len(result['dags'])} DAGs, heavy imports "
            f"{result['heavy'] or 'none'}",
            file=sys.stderr,
        )
    times = [r["parse_s"] for r in results]
    print(
        json.dumps(
            {
                "dag_file": "dags/kafka_failover.py",
                "pairs": len(pairs),
                "parsed_as": f"the task process of {task_of}" if task_of else "the dag-processor",
                "dags": results[-1]["dags"] if args.pairs is None else len(results[-1]["dags"]),
                "runs": len(times),
                "parse_ms_median": round(statistics.median(times) * 1000, 1),
                "parse_ms_max": round(max(times) * 1000, 1),
                "parse_ms_per_pair": round(statistics.median(times) * 1000 / len(pairs), 1),
                "heavy_imports": results[-1]["heavy"],
                "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}",
            }
        )
    )


if __name__ == "__main__":
    main()

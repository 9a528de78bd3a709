"""How long the DAG file takes to parse, as the DAG processor sees it.

Each run starts a fresh Python process that imports Airflow, then times only the parse of
``dags/kafka_failover.py`` (``DagBag`` with the file as its folder), and reports the DAGs found and
whether a Kafka or Spark client was imported (it must not be).

    .venv/bin/python benchmarks/bench_dag_parse.py [--runs 5] [--config examples/pairs.yaml]

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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys, time
from airflow.dag_processing.dagbag import DagBag
started = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1])
elapsed = time.perf_counter() - started
errors = {k: str(v)[:300] for k, v in bag.import_errors.items()}
heavy = [m for m in ("confluent_kafka", "pyspark", "pyarrow") if m in sys.modules]
print(json.dumps({"parse_s": elapsed, "dags": sorted(bag.dag_ids), "errors": errors, "heavy": heavy}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--config", default=str(REPO / "examples" / "pairs.yaml"))
    args = parser.parse_args()
    env = {
        **os.environ,
        "AKF_PAIRS_CONFIG": args.config,
        "AIRFLOW_HOME": str(REPO / ".airflow" / "bench"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    results = []
    for run in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(REPO / "dags" / "kafka_failover.py")],
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
                "dags": results[-1]["dags"],
                "runs": len(times),
                "parse_ms_median": round(statistics.median(times) * 1000, 1),
                "parse_ms_max": round(max(times) * 1000, 1),
                "heavy_imports": results[-1]["heavy"],
                "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}",
            }
        )
    )


if __name__ == "__main__":
    main()

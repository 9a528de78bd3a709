"""The conformance suite's job (tests/integration/test_cluster_managers.py): a PySpark application that keeps
only the run's part of the contract (docs/jobs.md, "The contract"): it reports ``running`` with Spark's
application id in ``<run_dir>/status.json``, then waits for ``<run_dir>/stop-request`` and exits writing
``stopped``. Run with the Spark setting ``spark.akf.contract.ignoreStopRequest=true``, it never stops on
its own (the cluster manager must kill it). No Kafka, no query: the SparkSession is there so that the
standalone master and YARN list a real application.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime

from pyspark.sql import SparkSession

IGNORE_STOP_REQUEST = "spark.akf.contract.ignoreStopRequest"


def main() -> None:
    with open(sys.argv[sys.argv.index("--settings") + 1]) as source:
        settings = json.load(source)
    run_dir = settings["run_dir"]
    stop_request = os.path.join(run_dir, "stop-request")

    def report(state: str, **more: str) -> None:
        status = {
            "state": state,
            "pid": os.getpid(),
            "epoch": settings["epoch"],
            "cluster": settings["cluster"],
            "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            **more,
        }
        written = os.path.join(run_dir, f".status.json.{os.getpid()}")
        with open(written, "w") as out:
            json.dump(status, out)
        os.replace(written, os.path.join(run_dir, "status.json"))

    if os.path.exists(stop_request):  # a leftover of an earlier run of this folder
        os.remove(stop_request)
    spark = SparkSession.builder.getOrCreate()
    app_id = spark.sparkContext.applicationId
    obeys = spark.conf.get(IGNORE_STOP_REQUEST, "false") != "true"
    report("running", application_id=app_id)
    print(f"contract job {app_id} running ({'obeys' if obeys else 'ignores'} the stop request)", flush=True)
    while not (obeys and os.path.exists(stop_request)):
        time.sleep(0.5)
    report("stopped", application_id=app_id, reason="stop requested")
    print(f"contract job {app_id} stopped on request", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()

"""End to end: the start, failover and failback DAGs move a running job between real clusters.

The job is a user's own, written on the job-side API: ``examples/jobs/orders_to_delta`` (JSON orders parsed,
filtered and enriched into a Delta table with a MERGE on the order id). A steady producer writes records
with unique ids; the job runs on A. The steps share one sandbox and
form one chain (STEPS): start; crash A -> failover; restart A -> failback; hang A -> failover; resume ->
failback; a dry run; a forced failover; wipe A -> failback refused. After each switch no acknowledged id
may be missing from the table, and none may be there twice: the MERGE makes the table exactly once
without a dedup step (checked again at the end by reading the table with Spark).

The jobs run on the newest Spark line the job side supports, as a deployment would choose it (``SPARK_HOME``,
``PYSPARK_PYTHON`` and the ``job_jars`` option of the DAG runs): ``.venv-newest-driver`` (Spark 4.2, Delta
4.4, no Airflow; made by ``scripts/setup.sh --compat``), while the rest of the suite runs its jobs on the
test run's own pyspark. When ``SPARK_HOME`` is set already, the story takes that Spark: the compatibility lane
(``tests/compat/test_airflow_floor.py``) runs the first steps here on its oldest stack.

Each test stands alone: it first runs, in order, the steps of the chain before its own that have not run
yet (``-k hang`` runs start, crash and restart, then hang). A step runs once per module and holds its
own assertions, so in file order every test runs only its own step, and a test whose step already ran
as another test's prerequisite passes on that run's assertions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from akf_devtools.demo.story import LOCAL_SPARK_CONF, WATCHING, WATCHING_WITHIN_S
from akf_devtools.demo.user_sinks import read_delta_orders

from airflow_kafka_failover.cluster_managers.registry import job_alive
from tests.integration.switch_story import job_logs, new_pair_story, run_chain, spark_versions, timed
from tests.packaging import JobSpark, newest_job_spark

pytestmark = pytest.mark.spark

EXAMPLE_JOB = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "orders_to_delta" / "job.py"


@pytest.fixture(scope="module")
def job_spark() -> JobSpark | None:
    """The Spark of the story's jobs: None when ``SPARK_HOME`` names one already (the compatibility lane's
    inner run), else the newest line the job side supports."""
    return None if os.environ.get("SPARK_HOME") else newest_job_spark()


@pytest.fixture(scope="module")
def story(own_sandbox, airflow_home, tmp_path_factory, job_spark):
    with new_pair_story(
        own_sandbox,
        airflow_home,
        tmp_path_factory.mktemp("story"),
        "e2e",
        job_options={"application": str(EXAMPLE_JOB)},
        sink_reader=read_delta_orders,
        run_env=job_spark.run_env() if job_spark else {},
    ) as story:
        yield story
    print("figures:", story.figures)
    # AKF_RESULTS_DIR: the compatibility lane runs this story on the oldest stack and keeps its figures apart.
    results = Path(os.environ.get("AKF_RESULTS_DIR") or Path(__file__).resolve().parents[2] / "results")
    results.mkdir(parents=True, exist_ok=True)
    (results / "e2e_switch_figures.json").write_text(
        json.dumps(
            {"figures": story.figures, "counts": story.counts, "machine": f"{os.cpu_count()} cores"}, indent=1
        )
    )


def step_start_runs_the_job_on_the_primary(story) -> None:
    state, output = story.run("start")
    assert state == "success", output[-4000:]
    record = story.record()
    assert (record["active"], record["epoch"], record["job"]["cluster"]) == ("A", 0, "A")
    assert job_alive(story.job())


def step_crash_of_a_fails_over_to_b(story) -> None:
    record, fault_at, output = switch_after_fault(story, "failover", "crash", "B")
    assert (record["active"], record["epoch"], record["job"]["cluster"]) == ("B", 1, "B")
    assert record["history"][-1]["kind"] == "failover" and record["history"][-1]["gap_records"] == 0
    timed(story, "failover after crash", fault_at, "B", 1, output)


def step_restart_of_a_fails_back_without_loss(story) -> None:
    record, fault_at, output = switch_after_fault(story, "failback", "restart", None)
    story.active_for_producer = "A"
    assert (record["active"], record["epoch"]) == ("A", 2)
    timed(story, "failback after restart", fault_at, "A", 2, output)
    check_counts(story, record)


def check_counts(story, record) -> dict:
    counts = story.check_no_loss()
    story.counts[f"epoch {record['epoch']}"] = counts
    print(f"counts at epoch {record['epoch']}:", counts)
    assert counts["lost"] == 0 and counts["without_id"] == 0
    assert counts["duplicates"] == 0, counts  # the MERGE inserts a re-delivered order id never twice
    return counts


def back_from_outage(story, fault: str) -> None:
    """A returns and MM2 is restarted as operators do after an outage (see ``Sandbox.bring_back``); the
    recovered sensor rightly waits for replication to catch up."""
    story.sandbox.bring_back("A", fault)


def switch_after_fault(story, kind: str, fault: str, producer_to: str | None) -> tuple[dict, float, str]:
    """Start the DAG, wait until its verdict sensor watches, inject the fault, wait for the run."""
    running = story.start_run(kind)
    running.wait_for_text(WATCHING, WATCHING_WITHIN_S)
    fault_at = time.time()
    if fault in ("restart", "resume"):
        back_from_outage(story, fault)
    else:
        story.sandbox.fault(fault, "A")
    if producer_to:
        story.active_for_producer = producer_to
    state, output = running.wait()
    assert state == "success", output[-6000:]
    return story.record(), fault_at, output


def step_hang_of_a_fails_over_to_b(story) -> None:
    record, fault_at, output = switch_after_fault(story, "failover", "hang", "B")
    assert (record["active"], record["epoch"]) == ("B", 3)
    timed(story, "failover after hang", fault_at, "B", 3, output)


def step_resume_of_a_fails_back_without_loss(story) -> None:
    record, fault_at, output = switch_after_fault(story, "failback", "resume", None)
    story.active_for_producer = "A"
    assert (record["active"], record["epoch"]) == ("A", 4)
    timed(story, "failback after resume", fault_at, "A", 4, output)
    check_counts(story, record)


def step_dry_run_changes_nothing(story) -> None:
    before, fence, job = story.record(), story.fence(), story.job()
    state, output = story.run("failover", dry_run=True, reason="what would happen?")
    assert state == "success", output[-6000:]
    assert "plan A -> B:" in output and "dry run: the plan is in the 'plan' task" in output
    assert story.record() == before and story.fence() == fence
    assert job_alive(story.job()) and story.job().process.pid() == job.process.pid()


def step_forced_failover_of_a_healthy_primary_loses_nothing(story) -> None:
    state, output = story.run("failover", force=True, reason="planned maintenance of A")
    assert state == "success", output[-6000:]
    story.active_for_producer = "B"
    record = story.record()
    assert (record["active"], record["epoch"]) == ("B", 5)
    entry = record["history"][-1]
    assert (entry["forced"], entry["reason"]) == (True, "planned maintenance of A")
    assert entry["triggered_by"].startswith("manual")
    check_counts(story, record)


SPARK_READ = """
import json, sys
from pyspark.sql import SparkSession
builder = (SparkSession.builder.master("local[1]").config("spark.jars", sys.argv[3])
           .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
           .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
for key, value in json.loads(sys.argv[4]).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
ids = [row[0] for row in spark.read.format("delta").load(sys.argv[1]).select("order_id").collect()]
open(sys.argv[2], "w").write(json.dumps(ids))
"""


def step_the_table_read_with_spark_holds_each_acknowledged_id_once(story) -> None:
    from akf_devtools.sandbox.jars import JOB_JARS_ENV, delta_jars

    acked = set(story.producer.acked_ids)
    counts = story.check_no_loss()
    out = story.root / "table_ids.json"
    # The reader is a driver of the Spark and Delta that wrote the table, with the settings of the jobs'
    # drivers (the serial collector and the quick compiler: the file's JVMs share the cores with the suite).
    env = {**os.environ, **story.run_env}
    python = env.get("PYSPARK_PYTHON", sys.executable)
    jars = env.get(JOB_JARS_ENV) or ",".join(str(jar) for jar in delta_jars())
    conf = {**LOCAL_SPARK_CONF, "spark.local.dir": str(story.root / "spark-local")}
    subprocess.run(
        [python, "-c", SPARK_READ, str(story.root / "sink"), str(out), jars, json.dumps(conf)],
        check=True,
        timeout=300,
        env=env,
    )
    ids = json.loads(out.read_text())
    produced = story.producer.prefix + "-"
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} order ids are in the table twice"
    assert acked <= set(ids), f"{len(acked - set(ids))} acknowledged ids are missing"
    strangers = [i for i in ids if not i.startswith(produced)]
    assert not strangers, f"ids the producer never wrote: {strangers[:5]}"
    print(f"the Delta table read with Spark: {len(ids)} rows, all distinct; {counts}")


def step_failback_to_a_wiped_primary_is_refused(story) -> None:
    before, fence = story.record(), story.fence()
    running = story.start_run("failback")
    running.wait_for_text(WATCHING, WATCHING_WITHIN_S)
    story.sandbox.fault("wipe", "A")
    state, output = running.wait()
    assert state == "failed"
    assert "DataLossError" in output or "data loss" in output.lower(), output[-4000:]
    assert story.record() == before and story.fence() == fence
    assert job_alive(story.job()) and story.job().cluster == "B"
    check_counts(story, before)


# The chain, in order: each step expects the state the steps before it leave.
STEPS: list[Callable[..., None]] = [
    step_start_runs_the_job_on_the_primary,
    step_crash_of_a_fails_over_to_b,
    step_restart_of_a_fails_back_without_loss,
    step_hang_of_a_fails_over_to_b,
    step_resume_of_a_fails_back_without_loss,
    step_dry_run_changes_nothing,
    step_forced_failover_of_a_healthy_primary_loses_nothing,
    step_the_table_read_with_spark_holds_each_acknowledged_id_once,
    step_failback_to_a_wiped_primary_is_refused,
]


STEP_TIMEOUT_S = 600
"""pytest-timeout's limit per step (the project's default per test): a test may have to run every step
before its own when it runs alone, so its limit grows with its place in the chain. Each step's waits are
bounded on their own (a DAG run 420 s), so this only catches a hang."""


def chain_timeout(step: Callable[..., None]) -> pytest.MarkDecorator:
    """The timeout marker of the test of ``step``: one step's limit for it and each step before it."""
    return pytest.mark.timeout(STEP_TIMEOUT_S * (STEPS.index(step) + 1))


@pytest.fixture(scope="module")
def steps_run() -> dict[str, str]:
    """The steps already run on the module's story: name -> "passed" or "failed"."""
    return {}


def run_through(story, outcomes: dict[str, str], step: Callable[..., None]) -> None:
    run_chain(STEPS, story, outcomes, step)


@chain_timeout(step_start_runs_the_job_on_the_primary)
def test_start_runs_the_job_on_the_primary(story, steps_run):
    run_through(story, steps_run, step_start_runs_the_job_on_the_primary)


@chain_timeout(step_crash_of_a_fails_over_to_b)
def test_crash_of_a_fails_over_to_b(story, steps_run):
    run_through(story, steps_run, step_crash_of_a_fails_over_to_b)


@chain_timeout(step_restart_of_a_fails_back_without_loss)
def test_restart_of_a_fails_back_without_loss(story, steps_run):
    run_through(story, steps_run, step_restart_of_a_fails_back_without_loss)


@chain_timeout(step_hang_of_a_fails_over_to_b)
def test_hang_of_a_fails_over_to_b(story, steps_run):
    run_through(story, steps_run, step_hang_of_a_fails_over_to_b)


@chain_timeout(step_resume_of_a_fails_back_without_loss)
def test_resume_of_a_fails_back_without_loss(story, steps_run):
    run_through(story, steps_run, step_resume_of_a_fails_back_without_loss)


@chain_timeout(step_dry_run_changes_nothing)
def test_dry_run_changes_nothing(story, steps_run):
    run_through(story, steps_run, step_dry_run_changes_nothing)


@chain_timeout(step_forced_failover_of_a_healthy_primary_loses_nothing)
def test_forced_failover_of_a_healthy_primary_loses_nothing(story, steps_run):
    run_through(story, steps_run, step_forced_failover_of_a_healthy_primary_loses_nothing)


@chain_timeout(step_the_table_read_with_spark_holds_each_acknowledged_id_once)
def test_the_table_read_with_spark_holds_each_acknowledged_id_once(story, steps_run):
    run_through(story, steps_run, step_the_table_read_with_spark_holds_each_acknowledged_id_once)


@chain_timeout(step_failback_to_a_wiped_primary_is_refused)
def test_failback_to_a_wiped_primary_is_refused(story, steps_run):
    run_through(story, steps_run, step_failback_to_a_wiped_primary_is_refused)


@chain_timeout(step_start_runs_the_job_on_the_primary)
def test_the_jobs_ran_on_the_newest_spark_and_delta(story, steps_run, job_spark):
    """The drivers' own words: the Spark version each job log names, and the Delta jar on its class path."""
    if job_spark is None:
        pytest.skip("SPARK_HOME chose the jobs' Spark (the compatibility lane checks its own)")
    run_through(story, steps_run, step_start_runs_the_job_on_the_primary)
    logs = job_logs(story.root)
    assert spark_versions(logs) == {job_spark.spark_version}
    assert f"delta-spark_2.13-{job_spark.delta_version}.jar" in logs

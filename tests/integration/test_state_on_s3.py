"""A pair whose whole state is on an S3-compatible store (moto, reached by the tasks through the Amazon
provider's file system and by the driver through S3A), with no local folder shared by the Airflow side and
the driver.

One chain on the shared Kafka sandbox and one moto server:

1. the start DAG runs the job on A; its settings, status, checkpoint, sink and fence are on S3, and the S3
   keys reach the driver only through the owner-only properties file;
2. the old job cannot be reached for a stop (its handle names a cluster manager that is gone and a run
   folder in a bucket that does not exist) and two forced failovers race: one switch, one job on B, and the
   old job stopped by the fence alone;
3. a forced failback: nothing lost, duplicates within the plans' bounds, each record once after dedup;
4. the store frozen while the job runs: a switch fails naming the store, the job stops, nothing changes;
   once the store answers again the start DAG brings the pair back to one job, with record and fence agreeing;
5. bad store inputs (a bucket that does not exist, a connection without credentials, a checkpoint of
   another pair): each refused by name, nothing changed;
6. ``kafka-failover status`` reads the pair's state from S3;
7. nothing of the pair's state was written to either side's local disk, and the S3 secret was never on a
   job process's command line or in its environment (sampled all along), in a job's log, in the record or
   in Airflow's metadata database (XCom, Variables, task logs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from akf_devtools.sandbox.airflow_env import register_s3_connection, write_variable
from akf_devtools.sandbox.jars import s3a_jars
from akf_devtools.sandbox.loopback import free_ports
from akf_devtools.sandbox.s3 import FAIL_FAST_S3A, S3Server

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.core.storage.store import forget_all, read_json
from airflow_kafka_failover.run_format.layout import read_status
from tests.integration.conftest import RUN_ROOT
from tests.integration.state_on_store import (
    a_foreign_checkpoint_is_refused,
    assert_nothing_of_the_pair_on_local_disk,
    refused_submit,
    story_fields,
)
from tests.integration.state_on_store import (
    a_frozen_store_fails_what_needs_it_and_the_pair_converges as frozen_store_step,
)
from tests.integration.switch_story import (
    JobCensus,
    Story,
    assert_history_holds_the_plan_the_job_started_from,
    assert_one_job,
    new_pair_story,
    run_chain,
)

pytestmark = pytest.mark.spark

CONNECTION = "akf_state_s3"
ONE_JOB_WITHIN_S = 90


def s3a_spark_conf() -> dict[str, str]:
    """What the driver needs of S3A that is no secret: the connector on its class path, short timeouts, and
    upload buffers in memory (nothing under the JVM's temporary folder). Endpoint, region, path-style access
    and the keys come from the ``aws`` connection through the submit's properties file."""
    return {
        "spark.driver.extraClassPath": ":".join(str(jar) for jar in s3a_jars()),
        "spark.hadoop.fs.s3a.bucket.probe": "2",
        "spark.hadoop.fs.s3a.fast.upload.buffer": "bytebuffer",
        **{f"spark.hadoop.{key}": value for key, value in FAIL_FAST_S3A.items()},
    }


class JobSecretScan:
    """The command line and environment of every job process (spark-submit's launcher, its JVM, the Python
    driver), sampled every half second, searched for a secret."""

    JOB_MARKERS = (b"org.apache.spark.deploy.SparkSubmit", b"pyspark", b"stream_job.py", b"--settings")

    def __init__(self, secret: str) -> None:
        self.secret, self.seen, self.scans, self.jobs = secret.encode(), set(), 0, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for proc in Path("/proc").iterdir():
                try:
                    cmdline = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
                    if not any(marker in cmdline for marker in self.JOB_MARKERS):
                        continue
                    self.jobs.add(proc.name)
                    if self.secret in cmdline or self.secret in (proc / "environ").read_bytes():
                        self.seen.add(proc.name)
                except OSError:
                    continue
            self.scans += 1

    def start(self) -> JobSecretScan:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


@pytest.fixture(scope="module")
def s3():
    server = S3Server(RUN_ROOT / f"state-s3-{uuid.uuid4().hex[:6]}")
    try:
        print(f"moto up in {server.start():.1f} s at {server.endpoint_url}")
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def story(sandbox, airflow_home, tmp_path_factory, s3):
    register_s3_connection(CONNECTION, s3)
    root = tmp_path_factory.mktemp("state-s3")
    fields = story_fields(root, s3.uri("pair-state"), {"s3a": CONNECTION}, s3a_spark_conf())
    fields["job_options"]["storage_timeout_seconds"] = 5
    forget_all()
    with new_pair_story(sandbox, airflow_home, root, "s3", **fields) as story:
        story.use_storage()
        story.s3 = s3
        story.census = JobCensus(story).start()
        story.scan = JobSecretScan(s3.credentials().secret_key).start()
        try:
            yield story
        finally:
            story.census.stop()
            story.scan.stop()
    print("counts:", story.counts)


def start_on_a(story: Story) -> None:
    state, output = story.run("start")
    assert state == "success", output[-6000:]
    assert_one_job(story, "A", 0, within=ONE_JOB_WITHIN_S)
    job = JobHandle.from_dict(story.record()["job"])
    assert job.run_dir.startswith("s3a://") and job.checkpoint.startswith("s3a://")
    assert read_json(f"{job.run_dir}/settings.json")["fencing_marker"] == story.state("fence")
    assert read_status(job.run_dir)["state"] == "running"
    properties = story.local_root / story.pair / "A" / "epoch-0" / "store.properties"
    assert oct(properties.stat().st_mode & 0o777) == "0o600"
    assert story.s3.credentials().secret_key in properties.read_text()
    assert story.s3.credentials().secret_key not in output
    story.counts["start"] = story.check_no_loss()


def make_the_recorded_job_unreachable(story: Story) -> JobHandle:
    """Point the record's job handle at a cluster manager that is gone and a run folder in a bucket that does
    not exist: the stop can neither ask nor kill; the real job runs on. Return the real handle."""
    record = story.record()
    real = JobHandle.from_dict(record["job"])
    record["job"] = {
        **record["job"],
        "deploy_mode": "cluster",
        "master": f"spark://127.0.0.1:{free_ports(1)[0]}",
        "driver_id": "driver-unreachable",
        "application_id": None,
        "run_dir": "s3a://akf-gone/run",
    }
    write_variable(story.airflow_home, f"kafka_failover.{story.pair}.active_record", record)
    return real


def racing_failovers_fence_an_unreachable_old_job(story: Story) -> None:
    old_job = make_the_recorded_job_unreachable(story)
    first = story.start_run("failover", force=True, reason="operator 1")
    second = story.start_run("failover", force=True, reason="operator 2")
    outcomes = [first.wait(), second.wait()]
    story.active_for_producer = "B"
    states = sorted(state for state, _output in outcomes)
    outputs = "\n".join(output for _state, output in outcomes)
    assert states in (["success", "success"], ["failed", "success"]), outputs[-8000:]
    assert "could not stop the old job" in outputs, outputs[-6000:]
    history = story.record()["history"]
    assert len(history) == 1 and history[0]["epoch"] == 1, history
    assert_one_job(story, "B", 1, within=ONE_JOB_WITHIN_S)
    assert_history_holds_the_plan_the_job_started_from(story)
    # the stop could not reach the old job: the fence on S3 stopped it
    assert not old_job.process.is_running()
    assert read_status(old_job.run_dir)["state"] == "fenced", read_status(old_job.run_dir)
    story.counts["racing failovers"] = story.check_no_loss()


def failback_loses_nothing(story: Story) -> None:
    state, output = story.run("failback", force=True, reason="back to A")
    assert state == "success", output[-6000:]
    story.active_for_producer = "A"
    assert_one_job(story, "A", 2, within=ONE_JOB_WITHIN_S)
    counts = story.check_no_loss()
    history = story.record()["history"]
    bounds = [entry["plan"]["max_duplicates"] for entry in history]
    # both clusters answered every plan: MM2's records prove each start, so each plan has a bound
    assert None not in bounds, f"a plan without a duplicate bound: {history}"
    assert counts["duplicates"] <= sum(bounds), (counts, bounds)
    contents = story.read_sink()  # deduplicated: each record once
    assert all(record_id.startswith(f"{story.producer.prefix}-") for record_id in contents.record_ids)
    story.counts["failback"] = counts


def a_frozen_store_fails_what_needs_it_and_the_pair_converges(story: Story) -> None:
    frozen_store_step(story, story.s3, "s3a", "A", 2)


def bad_store_inputs_are_refused_by_name(story: Story) -> None:
    before, fence, job = story.record(), story.fence(), JobHandle.from_dict(story.record()["job"])
    missing = refused_submit(story, "A", 2, checkpoint_root="s3a://akf-missing-bucket/checkpoints")
    assert "bucket 'akf-missing-bucket' of s3a://akf-missing-bucket does not exist" in missing, missing
    register_s3_connection("akf_state_s3_nokeys", story.s3, with_keys=False)
    no_keys = refused_submit(
        story,
        "A",
        2,
        checkpoint_root="s3a://other-bucket/x",
        storage_connections={"s3a": "akf_state_s3_nokeys"},
    )
    assert "Airflow connection 'akf_state_s3_nokeys' yields no credentials" in no_keys, no_keys
    a_foreign_checkpoint_is_refused(story, story.s3.uri("foreign"), "A", 2)
    assert story.record() == before and story.fence() == fence
    assert job.process.is_running() and read_status(job.run_dir)["state"] == "running"


def the_status_command_reads_the_state_on_s3(story: Story) -> None:
    env = {**os.environ, "AIRFLOW_HOME": str(story.airflow_home)}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    result = subprocess.run(
        [str(Path(sys.executable).with_name("kafka-failover")), "status", "--config", str(story.config_path)]
        + ["--pair", story.pair, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    status = json.loads(result.stdout)
    pair = status["pairs"][0] if "pairs" in status else status
    text = json.dumps(pair)
    assert story.state("fence") in text and '"epoch": 2' in text, text[:3000]
    assert "could not read" not in text, text[:3000]


def nothing_of_the_pair_on_local_disk_and_no_secret_out(story: Story) -> None:
    files = assert_nothing_of_the_pair_on_local_disk(story.root)
    print("local files per side:", files)
    secret = story.s3.credentials().secret_key
    story.scan.stop()
    print(f"secret scan: {story.scan.scans} samples of {len(story.scan.jobs)} job processes")
    assert story.scan.jobs and story.scan.seen == set(), story.scan.seen
    assert secret not in json.dumps(story.record())
    for log in [*story.local_root.rglob("job.log"), *story.root.glob("run-*.log")]:
        assert secret not in log.read_text(errors="replace"), log
    for database in story.airflow_home.glob("*.db"):
        assert secret.encode() not in database.read_bytes(), database


STEPS = [
    start_on_a,
    racing_failovers_fence_an_unreachable_old_job,
    failback_loses_nothing,
    a_frozen_store_fails_what_needs_it_and_the_pair_converges,
    bad_store_inputs_are_refused_by_name,
    the_status_command_reads_the_state_on_s3,
    nothing_of_the_pair_on_local_disk_and_no_secret_out,
]


@pytest.fixture(scope="module")
def steps_run() -> dict[str, str]:
    return {}


@pytest.mark.parametrize("step", STEPS, ids=lambda step: step.__name__)
def test_state_on_s3(story, steps_run, step):
    run_chain(STEPS, story, steps_run, step)

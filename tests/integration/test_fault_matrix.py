"""The fault matrix: the switch DAGs under the faults users meet while their platform is on fire.

One sandbox, one pair, one steady producer; the steps run in order and each leaves the pair in a known
state for the next (crash, hang and wipe of the active cluster are in test_switch_dags.py):

1. the job starts on A;
2. MirrorMaker 2 stopped, so B is behind, and the old job cannot be reached for a stop (its handle names
   a cluster manager that is gone): a forced failover with ``on_gap: wait`` fences the old job, which
   stops by itself at its next check, waits out the gap, and switches once MirrorMaker 2 is back, losing
   nothing;
3. the Airflow task process killed after the new job was submitted, before the record was committed:
   the retried run converges to exactly one job on the target and a consistent record;
4. two forced failovers racing: exactly one switch commits;
5. the new job crashing right after the switch: the progress sensor fails the run with the job's log
   tail, and a re-run recovers;
6. both clusters down: no switch; the run fails saying both are down; record and fence unchanged;
7. blips on the primary (short hangs): no switch; then MirrorMaker 2 stops and A really crashes with
   ``on_gap: proceed``: one switch, the gap is in the record and the log;
8. A returns with its data and MirrorMaker 2 restarts; the automatic failback waits until A has caught
   up and moves the job back: every acknowledged record is in the deduplicated sink, including those
   only A held when it crashed;
9. HDFS frozen while the job runs: a switch fails naming it, the job stops, nothing changes; once HDFS
   answers again the start DAG brings the pair back to one job;
10. bad store inputs (no webhdfs connection, a checkpoint of another pair): refused by name, nothing changed;
11. nothing of the pair's state was written to either side's local disk.

The pair's whole state (sink, checkpoints, run folders, fence) is on HDFS (the MiniDFSCluster of
``akf_devtools.sandbox.hdfs``), reached by the tasks through WebHDFS and by the driver through Spark's HDFS
client, with no local folder shared by the Airflow side and the driver (``state_on_store.py``).

A census thread samples the live job processes throughout: at no moment may two jobs of the current
fencing epoch run (an older job may live on briefly after the fence, but it can no longer commit).
"""

from __future__ import annotations

import getpass
import json
import time
from pathlib import Path

import pytest
from akf_devtools.demo.story import WATCHING, WATCHING_WITHIN_S
from akf_devtools.sandbox.airflow_env import register_webhdfs_connection, write_variable
from akf_devtools.sandbox.loopback import free_ports

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.core.storage.store import forget_all, replace_json
from airflow_kafka_failover.run_format.layout import read_status
from tests.integration.job_support import CRASH_AFTER_SINK, crash_after_sink
from tests.integration.jobs.crash_after_sink import CRASHED
from tests.integration.state_on_store import (
    a_foreign_checkpoint_is_refused,
    a_frozen_store_fails_what_needs_it_and_the_pair_converges,
    assert_nothing_of_the_pair_on_local_disk,
    refused_submit,
    running_hdfs,
    story_fields,
)
from tests.integration.switch_story import (
    JobCensus,
    Story,
    assert_history_holds_the_plan_the_job_started_from,
    assert_one_job,
    new_pair_story,
)

pytestmark = pytest.mark.spark


HDFS_CONNECTION = "akf_state_hdfs"


@pytest.fixture(scope="module")
def hdfs():
    with running_hdfs("faults-hdfs") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def story(own_sandbox, airflow_home, tmp_path_factory, hdfs):
    register_webhdfs_connection(HDFS_CONNECTION, hdfs, user=getpass.getuser())
    root = tmp_path_factory.mktemp("faults")
    fields = story_fields(root, hdfs.path("pair-state"), {"hdfs": HDFS_CONNECTION}, hdfs.spark_properties())
    forget_all()
    with new_pair_story(own_sandbox, airflow_home, root, "fm", **fields) as story:
        story.use_storage()
        story.hdfs = hdfs
        census = JobCensus(story).start()
        story.census = census
        try:
            yield story
        finally:
            census.stop()
    print("job census: most runs alive at once", census.max_alive, "of the current epoch", census.max_current)
    print("counts:", story.counts)


def test_1_the_job_starts_on_a(story):
    state, output = story.run("start")
    assert state == "success", output[-4000:]
    assert_one_job(story, "A", 0)


def make_the_recorded_job_unreachable(story: Story) -> JobHandle:
    """Point the record's job handle at a cluster manager that is gone; return the real handle.

    The handle now says cluster mode on a standalone master nobody listens on, with a run folder under a
    regular file on HDFS: the stop can neither write the stop request nor kill through the master, as when
    the old datacenter's cluster manager went down with its cluster. The real job runs on, unaware.
    """
    record = story.record()
    real = JobHandle.from_dict(record["job"])
    gone = story.state("cluster-manager-gone")
    replace_json(gone, "a regular file: no stop request can be written under it")
    record["job"] = {
        **record["job"],
        "deploy_mode": "cluster",
        "master": f"spark://127.0.0.1:{free_ports(1)[0]}",
        "driver_id": "driver-unreachable",
        "application_id": None,
        "run_dir": f"{gone}/run",
    }
    write_variable(story.airflow_home, f"kafka_failover.{story.pair}.active_record", record)
    return real


def test_2_an_unreachable_old_job_and_a_gap_are_handled_until_mirrormaker_is_back(story):
    story.write_config(on_gap="wait", gap_wait_seconds=120)
    old_job = make_the_recorded_job_unreachable(story)
    story.sandbox.stop_mirrormaker()
    time.sleep(6)  # A gets records B does not, and the job reads them
    running = story.start_run("failover", force=True, reason="maintenance while MM2 is down")
    running.wait_for_text("re-planning in 5 s", 180)
    # The stop could not reach the old job; the fence did: it stopped by itself, before the new job exists.
    output = running.output()
    assert "could not stop the old job" in output and "stops it at its next check" in output, output[-6000:]
    deadline = time.monotonic() + 30
    while old_job.process.is_running() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not old_job.process.is_running()
    assert read_status(old_job.run_dir)["state"] == "fenced", read_status(old_job.run_dir)
    story.sandbox.start_mirrormaker()
    state, output = running.wait()
    assert state == "success", output[-6000:]
    story.active_for_producer = "B"
    assert "gap:" in output and "not on B yet" in output
    assert_one_job(story, "B", 1)
    entry = story.record()["history"][-1]
    assert entry["gap_records"] == 0  # replication caught up before the switch went on
    story.counts["gap waited"] = story.check_no_loss()


def test_3_a_run_killed_after_submit_converges_when_run_again(story):
    running = story.start_run("failback", force=True, reason="killed mid-switch")
    running.wait_for_text("end task task_id=submit", 300)
    running.kill()  # the task process dies: the new job runs, the record still says B
    record = story.record()
    assert (record["active"], record["epoch"]) == ("B", 1)
    assert ("A", 2) in story.census.alive()
    state, output = story.run("failback", force=True, reason="retry after the kill")
    assert state == "success", output[-6000:]
    story.active_for_producer = "A"
    assert "adopting it instead of starting another" in output, output[-4000:]
    assert_one_job(story, "A", 2)
    assert len(story.record()["history"]) == 2
    assert_history_holds_the_plan_the_job_started_from(story)
    story.counts["killed mid-switch"] = story.check_no_loss()


def test_4_racing_failovers_commit_one_switch(story):
    first = story.start_run("failover", force=True, reason="operator 1")
    second = story.start_run("failover", force=True, reason="operator 2")
    outcomes = [first.wait(), second.wait()]
    story.active_for_producer = "B"
    history = story.record()["history"]
    assert len(history) == 3 and history[-1]["epoch"] == 3, history
    assert_one_job(story, "B", 3)
    outputs = "\n".join(output for _state, output in outcomes)
    states = sorted(state for state, _output in outcomes)
    # The loser's gate finds B already active (skipped), or its commit finds the switch committed (a
    # no-op: when both reach the same epoch together, the loser's submit adopts the winner's job) or
    # another one (fails naming the winner). The commit holds the marker's lock, so it writes once.
    assert states in (["success", "success"], ["failed", "success"]), states
    assert any(
        text in outputs
        for text in (
            "is already active at epoch",
            "already holds this switch",
            "another switch won",
            "adopting it instead of starting another",
        )
    ), outputs[-6000:]
    assert_history_holds_the_plan_the_job_started_from(story)
    story.counts["racing"] = story.check_no_loss()


def test_5_a_job_crashing_after_the_switch_fails_the_run_and_a_rerun_recovers(story):
    before = story.record()
    with story.job_application(CRASH_AFTER_SINK):  # the packaged job, its sink dying after batch 0
        state, output = story.run(
            "failback", env=crash_after_sink(0), force=True, reason="the new job crashes"
        )
    assert state == "failed"
    assert "is not running" in output and "--- log tail ---" in output, output[-6000:]
    job_log = story.local_root / story.pair / "A" / "epoch-4" / "logs" / "job.log"
    assert CRASHED.format(batch=0) in job_log.read_text()
    assert story.record() == before  # not committed: the record still names the old job (fenced)
    state, output = story.run("failback", force=True, reason="re-run after the crash")
    assert state == "success", output[-6000:]
    story.active_for_producer = "A"
    assert_one_job(story, "A", 4)
    story.counts["job crash"] = story.check_no_loss()


def test_6_both_clusters_down_means_no_switch(story):
    before, fence = story.record(), story.fence()
    running = story.start_run("failover")
    running.wait_for_text(WATCHING, WATCHING_WITHIN_S)
    story.sandbox.fault("hang", "B")
    story.sandbox.fault("hang", "A")
    try:
        state, output = running.wait()
    finally:
        story.sandbox.fault("resume", "B")
        story.sandbox.fault("resume", "A")
    assert state == "failed"
    assert "both clusters of pair" in output and "are down" in output, output[-6000:]
    assert story.record() == before and story.fence() == fence


def test_7_blips_do_not_switch_and_a_real_outage_with_a_gap_switches_once(story):
    story.write_config(on_gap="proceed")
    running = story.start_run("failover")
    running.wait_for_text(WATCHING, WATCHING_WITHIN_S)
    for _blip in range(3):  # 1.5 s freezes: fewer failed probes than the threshold's span
        story.sandbox.fault("hang", "A")
        time.sleep(1.5)
        story.sandbox.fault("resume", "A")
        time.sleep(4)
    assert running.process.poll() is None, "a blip made the failover DAG act"
    assert story.record()["epoch"] == 4
    story.sandbox.stop_mirrormaker()
    time.sleep(5)  # the job on A reads records MirrorMaker 2 no longer copies
    story.sandbox.fault("crash", "A")
    story.active_for_producer = "B"
    state, output = running.wait()
    assert state == "success", output[-6000:]
    record = story.record()
    assert (record["epoch"], len(record["history"])) == (5, 5)
    gap = record["history"][-1]["gap_records"]
    assert gap > 0 and "proceeding with a gap" in output
    assert_one_job(story, "B", 5)
    story.counts["gap proceeded"] = {"gap_records": gap, **story.sink_counts()}


def test_8_failback_after_the_gap_loses_nothing(story):
    story.write_config(on_gap="wait")
    running = story.start_run("failback")  # automatic: waits until A is stable and caught up
    running.wait_for_text(WATCHING, WATCHING_WITHIN_S)
    story.sandbox.fault("restart", "A")
    story.sandbox.start_mirrormaker()
    state, output = running.wait()
    assert state == "success", output[-6000:]
    story.active_for_producer = "A"
    assert_one_job(story, "A", 6)
    counts = story.check_no_loss()
    story.counts["after failback"] = counts
    assert counts["without_id"] == 0
    assert story.census.violations == []
    Path(story.root / "census.json").write_text(
        json.dumps({"max_alive": story.census.max_alive, "max_current_epoch": story.census.max_current})
    )
    contents = story.read_sink()  # deduplicated: each record once
    assert all(record_id.startswith(f"{story.producer.prefix}-") for record_id in contents.record_ids)
    bound = sum((entry["plan"]["max_duplicates"] or 0) for entry in story.record()["history"])
    print(f"duplicates {counts['duplicates']} against the plans' bounds {bound} (plus restarts in place)")


def test_9_a_frozen_hdfs_fails_what_needs_it_and_the_pair_converges(story):
    a_frozen_store_fails_what_needs_it_and_the_pair_converges(story, story.hdfs, "hdfs", "A", 6)


def test_10_bad_store_inputs_are_refused_by_name_and_change_nothing(story):
    before, fence, job = story.record(), story.fence(), JobHandle.from_dict(story.record()["job"])
    elsewhere = story.hdfs.path("elsewhere")
    no_connection = refused_submit(
        story, "A", 6, checkpoint_root=elsewhere, storage_connections={"hdfs": "akf_nowhere"}
    )
    assert f"Airflow connection 'akf_nowhere' for {story.hdfs.uri} does not exist" in no_connection
    a_foreign_checkpoint_is_refused(story, elsewhere, "A", 6)
    assert story.record() == before and story.fence() == fence
    assert job.process.is_running() and read_status(job.run_dir)["state"] == "running"


def test_11_nothing_of_the_pair_was_written_to_local_disk(story):
    print("local files per side:", assert_nothing_of_the_pair_on_local_disk(story.root))

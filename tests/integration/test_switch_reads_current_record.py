"""Issue 27 on the real sandbox: a switch acts on the active record as it is when each step runs.

The switch DAGs run continuously and are watching before anything else happens, as README and the runbook
tell users to set them up; meanwhile other DAGs commit. One pair, the packaged job (its Parquet sink keeps
every re-delivered row, so duplicates are counted), one chain:

1. the failover run's gate passes on the pair's initial record (no job); then the start DAG commits the
   job; A crashes: the failover stops that job, plans from its checkpoint, and the duplicates stay within
   the plan's bound;
2. the failback run's gate passes while A is down; meanwhile the job on B is killed and the keeper
   restarts it in place; A returns: the failback stops the restarted job and plans from its checkpoint;
3. a failover run watches A; a manual forced failover commits meanwhile; A crashes: the watching run finds
   that its switch no longer applies and ends, touching nothing;
4. A returns with MirrorMaker 2: every acknowledged record is in the sink, and the duplicates are within the
   sum of the plans' bounds.

The duplicates against the stated bounds are printed (``-s``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest
from akf_devtools.demo.story import WATCHING, WATCHING_WITHIN_S

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import job_alive
from tests.integration.switch_story import Story, new_pair_story, run_chain

pytestmark = pytest.mark.spark

KEEPER = {"interval_seconds": 2, "switch_lease_seconds": 12, "restart_backoff_seconds": 2, "max_restarts": 3}
WATCH_S = 600
"""How long a watching switch run waits for its verdict: long enough for the other DAG runs meanwhile."""
STALE_RECORD_SIGNS = ("no job handle given", "every partition starts at")
"""What the switch logged when it acted on its gate's view of a record without a job (issue 27)."""


@pytest.fixture(scope="module")
def story(own_sandbox, airflow_home, tmp_path_factory):
    with new_pair_story(own_sandbox, airflow_home, tmp_path_factory.mktemp("current"), "cur") as story:
        story.write_config(keeper=KEEPER, watch_timeout_seconds=WATCH_S)
        yield story
    print("duplicates against the stated bounds:", story.counts)


def watching(story: Story, kind: str, **conf: object):
    """A ``kind`` run whose gate passed and whose verdict sensor watches."""
    running = story.start_run(kind, **conf)
    running.wait_for_text(WATCHING, WATCHING_WITHIN_S)
    return running


def batches_of(story: Story, cluster: str, epoch: int, since: float = 0.0) -> list[dict]:
    return [
        line
        for line in story.progress_lines()
        if (line["cluster"], line["epoch"]) == (cluster, epoch) and line.get("written_at", 0) > since
    ]


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(1)


def finished_switch(story: Story, running, cluster: str, epoch: int, old_job: JobHandle) -> dict:
    """Wait for a switch run; check that it stopped ``old_job``, planned from its checkpoint, and that the
    new job's duplicates are within the bounds stated so far."""
    state, output = running.wait(timeout=WATCH_S + 300)
    assert state == "success", output[-6000:]
    for sign in STALE_RECORD_SIGNS:
        assert sign not in output, f"the switch acted on a stale record ({sign!r}):\n{output[-6000:]}"
    assert f"stopping the job of epoch {old_job.epoch} on {old_job.cluster}" in output, output[-6000:]
    record = story.record()
    assert (record["active"], record["epoch"]) == (cluster, epoch)
    plan = record["history"][-1]["plan"]
    assert plan["translated_partitions"] > 0 and plan["max_duplicates"] is not None, plan
    wait_until(lambda: not old_job.process.is_running(), 60, f"the end of {old_job.describe()}")
    wait_until(lambda: len(batches_of(story, cluster, epoch)) >= 3, 120, f"3 batches on {cluster}")
    check_bounds(story, f"after the switch to {cluster} at epoch {epoch}")
    return record


def check_bounds(story: Story, label: str) -> None:
    """Duplicates in the sink (each a re-delivered record) within the sum of the plans' stated bounds."""
    bounds = [entry["plan"]["max_duplicates"] for entry in story.record()["history"]]
    counts = story.sink_counts()
    story.counts[label] = {**counts, "stated_bound": sum(bounds)}
    print(label, story.counts[label])
    assert None not in bounds and counts["duplicates"] <= sum(bounds), (counts, bounds)


def step_a_failover_watching_before_the_start_stops_the_started_job(story: Story) -> None:
    failover = watching(story, "failover")  # its gate passed on the initial record: no job yet
    state, output = story.run("start")
    assert state == "success", output[-4000:]
    job = story.job()
    wait_until(lambda: len(batches_of(story, "A", 0)) >= 3, 120, "3 batches on A")
    story.sandbox.fault("crash", "A")
    story.active_for_producer = "B"
    record = finished_switch(story, failover, "B", 1, job)
    assert record["history"][-1]["plan"]["source_cluster"] == "A"


def step_a_failback_watching_over_a_keeper_restart_stops_the_restarted_job(story: Story) -> None:
    failback = watching(story, "failback")  # A is down: its verdict waits until A returns
    job = story.job()
    pid = job.process.pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    keeper = story.start_run("keeper", window_seconds=600)
    try:
        wait_until(lambda: bool(batches_of(story, "B", 1, since=killed_at)), 300, "the restarted job's batch")
        assert "restarting it in place" in keeper.output()
    finally:
        keeper.kill()
    restarted = story.job()
    assert restarted.process.pid() not in (None, pid)
    story.sandbox.bring_back("A")
    story.active_for_producer = "A"
    finished_switch(story, failback, "A", 2, restarted)


def step_a_forced_failover_ends_a_failover_run_that_was_watching(story: Story) -> None:
    stale = watching(story, "failover")  # its gate passed with A active at epoch 2
    state, output = story.run("failover", force=True, reason="maintenance of A")
    assert state == "success", output[-4000:]
    story.active_for_producer = "B"
    before, fence = story.record(), story.fence()
    assert (before["active"], before["epoch"]) == ("B", 3)
    story.sandbox.fault("crash", "A")
    state, output = stale.wait(timeout=WATCH_S + 300)
    assert state == "success", output[-6000:]  # a run whose switch no longer applies ends without failing
    assert "B is already active at epoch 3" in output and "changed since the gate read it" in output, output[
        -6000:
    ]
    assert story.record() == before and story.fence() == fence
    assert job_alive(story.job())


def step_nothing_lost_and_duplicates_within_the_stated_bounds(story: Story) -> None:
    story.sandbox.bring_back("A")
    counts = story.check_no_loss(timeout=180)
    assert counts["without_id"] == 0
    check_bounds(story, "at the end")


STEPS: list[Callable[..., None]] = [
    step_a_failover_watching_before_the_start_stops_the_started_job,
    step_a_failback_watching_over_a_keeper_restart_stops_the_restarted_job,
    step_a_forced_failover_ends_a_failover_run_that_was_watching,
    step_nothing_lost_and_duplicates_within_the_stated_bounds,
]


@pytest.fixture(scope="module")
def steps_run() -> dict[str, str]:
    return {}


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("step", STEPS, ids=[step.__name__.removeprefix("step_") for step in STEPS])
def test_switch_reads_current_record(story, steps_run, step):
    run_chain(STEPS, story, steps_run, step)

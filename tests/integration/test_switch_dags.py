"""End to end: the start, failover and failback DAGs move a running job between real clusters.

A steady producer writes records with unique ids; the job runs on A. Steps share one sandbox and run in
order: crash A -> failover; restart A -> failback; hang A -> failover; resume -> failback; a dry run; a
forced failover; wipe A -> failback refused. After each switch no acknowledged id may be missing from
the deduplicated sink.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.integration.switch_story import Story, timed

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def story(own_sandbox, airflow_home, tmp_path_factory):
    pair = f"e2e{uuid.uuid4().hex[:6]}"
    story = Story(own_sandbox, airflow_home, tmp_path_factory.mktemp("story"), pair, f"orders-{pair}")
    story.write_config()
    story.create_topics()
    story.start_producer()
    yield story
    if story.producer is not None:
        story.producer.stop()
    story.stop_job()
    print("figures:", story.figures)


def test_start_runs_the_job_on_the_primary(story):
    state, output = story.run("start")
    assert state == "success", output[-4000:]
    record = story.record()
    assert (record["active"], record["epoch"], record["job"]["cluster"]) == ("A", 0, "A")
    assert story.job().is_alive()


def test_crash_of_a_fails_over_to_b(story):
    running = story.start_run("failover")
    running.wait_for_text("Pausing task as DEFERRED", 120)  # the down sensor watches A
    fault_at = time.time()
    story.sandbox.fault("crash", "A")
    story.active_for_producer = "B"
    state, output = running.wait()
    assert state == "success", output[-6000:]
    record = story.record()
    assert (record["active"], record["epoch"], record["job"]["cluster"]) == ("B", 1, "B")
    assert record["history"][-1]["kind"] == "failover" and record["history"][-1]["lost_records"] == 0
    timed(story, "failover after crash", fault_at, "B", 1, output)


def test_restart_of_a_fails_back_without_loss(story):
    running = story.start_run("failback")
    running.wait_for_text("Pausing task as DEFERRED", 120)  # the recovered sensor watches A
    fault_at = time.time()
    story.sandbox.fault("restart", "A")
    state, output = running.wait()
    assert state == "success", output[-6000:]
    story.active_for_producer = "A"
    record = story.record()
    assert (record["active"], record["epoch"]) == ("A", 2)
    timed(story, "failback after restart", fault_at, "A", 2, output)
    counts = story.check_no_loss()
    print("counts after crash/failover/failback:", counts)
    assert counts["lost"] == 0 and counts["without_id"] == 0
    bounds = [entry["plan"]["max_duplicates"] for entry in record["history"]]
    if all(bound is not None for bound in bounds):
        assert counts["duplicates"] <= sum(bounds), (counts, bounds)

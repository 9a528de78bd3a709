"""``kafka-failover status`` and ``history`` against a real pair: the sandbox, the start DAG, a running job.

One pair, one job start, then the commands read it as an operator would: a separate process with the
Airflow home whose metadata database holds the record. Last, the fence is moved one epoch ahead of the
record (what a switch interrupted after ``fence_and_stop`` leaves): status says so and exits 4, and the job,
fenced, stops.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from akf_devtools.sandbox.airflow_env import airflow_env

from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.run_format.fencing import FencingMarker
from tests.integration.switch_story import new_pair_story

pytestmark = pytest.mark.spark

EXIT_ACT, EXIT_UNREAD = 4, 5


@pytest.fixture(scope="module")
def story(own_sandbox, airflow_home, tmp_path_factory):
    with new_pair_story(own_sandbox, airflow_home, tmp_path_factory.mktemp("status"), "st") as story:
        yield story


def kafka_failover(story, *args: str) -> subprocess.CompletedProcess:
    """Run the command in its own process, with the story's Airflow home (metadata DB) and connections."""
    return subprocess.run(
        [sys.executable, "-m", "airflow_kafka_failover.cli", *args, "--config", str(story.config_path)],
        env=airflow_env(story.airflow_home),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def status_json(story) -> tuple[int, dict]:
    result = kafka_failover(story, "status", "--pair", story.pair, "--json")
    try:
        (pair,) = json.loads(result.stdout)["pairs"]
    except (ValueError, KeyError) as exc:
        tail = result.stderr[-3000:]
        raise AssertionError(f"stdout is not the status JSON ({exc}):\n{result.stdout}\n{tail}") from None
    return result.returncode, pair


def wait_for_batches(story, batches: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(story.progress_lines()) < batches:
        assert time.monotonic() < deadline, f"the job committed fewer than {batches} batches in {timeout} s"
        time.sleep(1)


def test_before_the_first_start_the_pair_has_no_consumer(story):
    code, pair = status_json(story)
    assert code == EXIT_ACT, pair
    assert (pair["active"], pair["epoch"], pair["record_stored"]) == ("A", 0, False)
    assert pair["job"]["state"] == "none"
    assert pair["problems"][0]["action"] == f"trigger the start DAG kafka_failover_{story.pair}_start"
    assert pair["unread"] == []  # the metadata DB answered (no record), both clusters answered


def test_status_of_a_running_job(story):
    state, output = story.run("start")
    assert state == "success", output[-4000:]
    wait_for_batches(story, 4)  # progress is written just before its commit: 4 lines, 3 commits at least
    code, pair = status_json(story)
    assert (pair["unread"], pair["problems"]) == ([], []), pair
    assert code == 0
    assert (pair["active"], pair["epoch"], pair["record_stored"]) == ("A", 0, True)
    assert (pair["fence"]["epoch"], pair["fence"]["cluster"], pair["fence_agreement"]) == (0, "A", "settled")
    job = pair["job"]
    assert (job["state"], job["cluster"], job["epoch"], job["alive"]) == ("running", "A", 0, True)
    assert job["last_batch_id"] >= 2 and job["last_batch_age_seconds"] < 60
    lag = {row["partition"]: row for row in pair["active_lag"]}
    for partition in (f"{story.topic}-0", f"{story.topic}-1"):
        row = lag[partition]
        assert row["lag"] == row["end_offset"] - row["committed"] and 0 <= row["lag"] < 2000, row
    replication = pair["replication"]
    assert (replication["source"], replication["target"]) == ("A", "B")
    assert set(replication["lags"]) == {f"{story.topic}-0", f"{story.topic}-1"}
    assert replication["heartbeats_topic"] == "A.heartbeats"
    assert 0 <= replication["heartbeat_age_seconds"] < 30

    text = kafka_failover(story, "status", "--pair", story.pair)
    print(f"kafka-failover status (exit {text.returncode}):\n{text.stdout}")
    assert text.returncode == 0, text.stdout + text.stderr[-3000:]
    assert text.stdout.startswith(f"pair {story.pair}: active A at epoch 0, record updated ")
    assert "job:      running on A at epoch 0 (local, pid " in text.stdout
    assert "replication A -> B (MirrorMaker 2): lag " in text.stdout


def test_history_of_a_pair_that_never_switched(story):
    result = kafka_failover(story, "history", "--pair", story.pair)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == f"pair {story.pair}: active A at epoch 0; no switches yet\n"


def test_a_fence_ahead_of_the_record_is_an_interrupted_switch(story):
    # What a failover leaves when its worker dies right after fence_and_stop: fence at 1 for B, record at 0.
    job = story.job()
    FencingMarker(str(story.root / "fence"), story.pair).advance(None, 1, "B")
    deadline = time.monotonic() + 60
    while job.status().get("state") != "fenced" or job_alive(job):
        assert time.monotonic() < deadline, f"the job did not stop on the fence: {job.status()}"
        time.sleep(1)
    result = kafka_failover(story, "status", "--pair", story.pair)
    print(f"kafka-failover status (exit {result.returncode}):\n{result.stdout}")
    assert result.returncode == EXIT_ACT, result.stdout + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[1] == (
        "  !! INTERRUPTED SWITCH: the fence (epoch 1, B) is ahead of the record (epoch 0, A); "
        "see ACTION NEEDED below"
    )
    assert "job:      fenced on A at epoch 0" in result.stdout
    assert "ACTION NEEDED: the job of epoch 0 on A is not running (fenced" in result.stdout
    assert "settle the fence first (above)" in result.stdout

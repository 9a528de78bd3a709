"""End to end: the keeper DAG keeps the job alive and finishes interrupted switches, on the real sandbox.

One pair, one keeper run (``dag.test()`` of the keeper DAG in its own process, as the scheduler would run
it) watching the whole chain; the switches are the real failover and failback DAGs with spark-submit:

1. the job starts on A; the keeper watches it;
2. kill -9 of the driver: the keeper restarts it in place (same epoch, same checkpoint);
3. a forced failover is killed right after ``fence_and_stop`` while A is down: the keeper finishes it (B);
4. A returns; a forced failback whose submit fails (a jar that does not exist, this run only): the keeper
   finishes it with the right jars (A);
5. a forced failover is killed right after ``fence_and_stop``, and A (down for it) returns before the keeper
   acts: the keeper finishes it (B);
6. kill -9 of the driver, and a forced failback while the keeper restarts it: the restart and the switch
   race;
7. ``switch.standby: warm``: the keeper starts a warm driver on B and replaces it when it is killed while
   idle; A crashes and a forced failover hands the new run to the warm driver.

The job is the example of a user's own foreachBatch writer, ``examples/jobs/orders_to_sqlite`` (an upsert
keyed on the order id). After each step exactly one job runs, at the fence's epoch, the record names it, and
(once both clusters answer) no acknowledged record is missing from the table, and none is there twice. The
figures (kill to next batch, interruption to convergence) are printed and written to
results/keeper_figures.json.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from akf_devtools.demo.story import WATCHING, WATCHING_WITHIN_S, switch_figures
from akf_devtools.demo.user_sinks import read_sqlite_orders

from airflow_kafka_failover.cluster_managers.standby_handover import STANDBY_PROCESS
from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.run_format.layout import PROCESS_NAME
from airflow_kafka_failover.run_format.standby import StandbySlot, standby_dir
from tests.integration.switch_story import new_pair_story, run_chain

pytestmark = pytest.mark.spark

EXAMPLE_JOB = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "orders_to_sqlite" / "job.py"
"""The job is a user's own on the job-side API: a foreachBatch upsert into SQLite (examples/jobs/)."""

KEEPER = {
    "interval_seconds": 2,
    "switch_lease_seconds": 12,
    "restart_backoff_seconds": 2,
    "max_restarts": 3,
}
"""Quick keeper settings on loopback: a look every 2 s, a switch that shows no life for 12 s is finished."""
CONVERGE_WITHIN_S = 300
"""Upper bound on one convergence (lease + keeper interval + job start-up + first batch on a loaded 2-core
machine); the measured figures are printed."""
FENCE_STEP_DONE = "end task task_id=fence_and_stop"


@pytest.fixture(scope="module")
def story(own_sandbox, airflow_home, tmp_path_factory):
    with new_pair_story(
        own_sandbox,
        airflow_home,
        tmp_path_factory.mktemp("keeper"),
        "kp",
        job_options={"application": str(EXAMPLE_JOB)},
        sink_reader=read_sqlite_orders,
    ) as story:
        story.write_config(keeper=KEEPER)
        story.keeper = None
        story.keeper_ended_output = ""
        try:
            yield story
        finally:
            if story.keeper is not None:
                story.keeper.kill()
                print("keeper log:", story.keeper.log_path)
    print("keeper figures:", story.figures)
    results = Path(__file__).resolve().parents[2] / "results"
    results.mkdir(exist_ok=True)
    (results / "keeper_figures.json").write_text(
        json.dumps({"figures": story.figures, "counts": story.counts, "cores": os.cpu_count()}, indent=1)
    )


def live_jobs(story) -> list[str]:
    """The run folders (``<cluster>/epoch-<n>``) of the pair whose job process runs."""
    found = []
    for run_dir in sorted((story.root / "runs").glob("*/*/epoch-*")):
        if ManagedProcess(PROCESS_NAME, run_dir).is_running():
            found.append(f"{run_dir.parent.name}/{run_dir.name}")
    return found


def fence_epoch(story) -> int:
    return json.loads(story.fence())["epoch"]


def batches_after(story, cluster: str, epoch: int, since: float) -> list[dict]:
    return [
        line
        for line in story.progress_lines()
        if line["cluster"] == cluster and line["epoch"] == epoch and line.get("written_at", 0) > since
    ]


def wait_for(condition: Callable[[], bool], timeout: float, what: str, story) -> float:
    """Wait until ``condition()``; return when; fail naming ``what`` with the keeper's log tail."""
    deadline = time.monotonic() + timeout
    while not condition():
        ensure_keeper(
            story
        )  # a keeper run that ended (an alert) is followed by the next, as @continuous does
        if time.monotonic() > deadline:
            tail = story.keeper.output()[-6000:] if story.keeper else ""
            pytest.fail(f"{what} did not happen within {timeout:.0f} s\n--- keeper log ---\n{tail}")
        time.sleep(1)
    return time.time()


def ensure_keeper(story) -> None:
    """Start the keeper run unless it is running; wait until it watches."""
    if story.keeper is not None and story.keeper.process.poll() is None:
        return
    if story.keeper is not None:
        state, output = story.keeper.wait(1)
        print(f"the keeper run ended: {state}; its last lines:\n{output[-3000:]}")
        story.keeper_ended_output += output
    story.keeper = story.start_run("keeper", window_seconds=3000)
    story.keeper.wait_for_text(WATCHING, WATCHING_WITHIN_S)


def keeper_output(story) -> str:
    """What every keeper run of this story wrote, the ended ones first (an alert ends a run; the next one
    starts)."""
    return story.keeper_ended_output + (story.keeper.output() if story.keeper is not None else "")


def converged(story, cluster: str, epoch: int) -> dict:
    """Exactly one job runs, at the fence's epoch on ``cluster``, and the record names it."""
    record = story.record()
    assert (record["active"], record["epoch"], fence_epoch(story)) == (cluster, epoch, epoch), record
    assert record["job"]["cluster"] == cluster and record["job"]["epoch"] == epoch
    assert live_jobs(story) == [f"{cluster}/epoch-{epoch}"]
    return record


def check_no_loss(story, label: str) -> None:
    counts = story.check_no_loss(timeout=180)
    story.counts[label] = counts
    print(f"counts after {label}:", counts)
    print(story.replication_report())  # where each run started and how far each copy reaches, for the log
    assert counts["lost"] == 0 and counts["without_id"] == 0
    assert counts["duplicates"] == 0, counts  # the upsert keeps the first row of an order id


def interrupted_switch(story, kind: str, **run: object) -> float:
    """Start a forced switch, kill its process right after ``fence_and_stop``; return the kill time."""
    running = story.start_run(kind, force=True, reason="interrupted on purpose", **run)
    running.wait_for_text(FENCE_STEP_DONE, 420)
    running.kill()
    return time.time()


def record_convergence(story, label: str, since: float, cluster: str, epoch: int) -> None:
    finished = wait_for(
        lambda: story.record().get("epoch") == epoch and bool(batches_after(story, cluster, epoch, 0)),
        CONVERGE_WITHIN_S,
        f"the keeper finishing the switch to {cluster} at epoch {epoch}",
        story,
    )
    first_batch = story.first_batch_time(cluster, epoch)
    figure = {
        "case": label,
        "converged_s": round(first_batch - since, 1),
        "record_s": round(finished - since, 1),
    }
    story.figures.append(figure)
    print(figure)
    record = converged(story, cluster, epoch)
    entry = record["history"][-1]
    assert entry["triggered_by"].startswith("keeper") and "finished by the keeper" in entry["reason"], entry


# ---- the chain ------------------------------------------------------------------------------------------


def step_start_and_keep(story) -> None:
    state, output = story.run("start")
    assert state == "success", output[-4000:]
    ensure_keeper(story)
    converged(story, "A", 0)
    # The keeper's first look: the job runs, and its lag on A was measured (not "unknown").
    seen = f"keeper of pair {story.pair}: the job of epoch 0 runs"
    story.keeper.wait_for_text(seen, 60)
    line = next(line for line in story.keeper.output().splitlines() if seen in line)
    assert re.search(r"lag \d+ records", line), line


def step_killed_driver_is_restarted_in_place(story) -> None:
    ensure_keeper(story)
    job = story.job()
    pid = job.process.pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    wait_for(
        lambda: bool(batches_after(story, "A", 0, killed_at)),
        CONVERGE_WITHIN_S,
        "a batch after the kill",
        story,
    )
    next_batch = min(line["written_at"] for line in batches_after(story, "A", 0, killed_at))
    figure = {"case": "kill -9 of the driver", "next_batch_s": round(next_batch - killed_at, 1)}
    story.figures.append(figure)
    print(figure)
    assert story.job().process.pid() not in (None, pid)
    converged(story, "A", 0)
    assert "restarting it in place, restart 1" in keeper_output(story)
    check_no_loss(story, "restart in place")


def step_failover_interrupted_with_a_down(story) -> None:
    ensure_keeper(story)
    story.sandbox.fault("crash", "A")
    story.active_for_producer = "B"
    killed_at = interrupted_switch(story, "failover")
    assert fence_epoch(story) == 1 and story.record()["epoch"] == 0
    record_convergence(story, "failover interrupted, A down", killed_at, "B", 1)


def step_failback_whose_submit_fails_once(story) -> None:
    ensure_keeper(story)
    story.sandbox.bring_back("A")
    running = story.start_run(
        "failback",
        env={"AIRFLOW__KAFKA_FAILOVER__JOB_JARS": str(story.root / "no-such-kafka-source.jar")},
        force=True,
        reason="submit fails once",
    )
    state, output = running.wait()
    failed_at = time.time()
    assert state == "failed", output[-4000:]
    assert (fence_epoch(story), story.record()["epoch"]) in ((2, 1), (2, 2)), output[-4000:]
    story.active_for_producer = "A"
    record_convergence(story, "failback whose submit failed", failed_at, "A", 2)
    check_no_loss(story, "failback finished by the keeper")


def step_failover_interrupted_then_a_returns(story) -> None:
    ensure_keeper(story)
    story.sandbox.fault("crash", "A")
    story.active_for_producer = "B"
    killed_at = interrupted_switch(story, "failover")
    story.sandbox.bring_back("A")
    record_convergence(story, "failover interrupted, A back before the keeper acts", killed_at, "B", 3)
    check_no_loss(story, "failover finished by the keeper")


def step_restart_and_failback_race(story) -> None:
    """The driver dies; while the keeper restarts it in place, a forced failback starts."""
    ensure_keeper(story)
    pid = story.job().process.pid()
    assert pid is not None
    restarts_before = keeper_output(story).count("restarting it in place")
    os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: keeper_output(story).count("restarting it in place") > restarts_before,
        60,
        "the keeper's restart of the killed driver",
        story,
    )
    state, output = story.run("failback", force=True, reason="racing the keeper's restart")
    assert state == "success", output[-4000:]
    story.active_for_producer = "A"
    # Whatever the restarted job of epoch 3 managed to do, nothing of epoch 3 may run once the pair settles.
    wait_for(lambda: live_jobs(story) == ["A/epoch-4"], 120, "one job, at epoch 4", story)
    converged(story, "A", 4)
    check_no_loss(story, "a restart racing a failback")


def step_warm_standby_is_kept_and_takes_the_failover(story) -> None:
    """``switch.standby: warm``: the keeper starts a warm driver on B, replaces it when it is killed while
    idle, and the failover hands it the run instead of starting spark-submit; nothing is lost."""
    story.write_config(keeper=KEEPER, standby="warm")
    if (
        story.keeper is not None
    ):  # the running trigger was built without a slot: the next run reads the config
        story.keeper.kill()
        story.keeper = None
    ensure_keeper(story)
    slot = StandbySlot(standby_dir(str(story.root / "runs"), story.pair, "B"))
    wait_for(slot.waiting, 180, "the keeper's warm standby driver on B to wait", story)
    assert "started a warm standby driver for B" in keeper_output(story)
    first = ManagedProcess(STANDBY_PROCESS, slot.folder)
    pid = first.pid()
    assert pid is not None
    first.kill()
    killed_at = time.time()
    wait_for(lambda: first.pid() not in (None, pid) and slot.waiting(), 180, "a new warm driver on B", story)
    figure = {"case": "warm standby killed while idle", "replaced_s": round(time.time() - killed_at, 1)}
    story.figures.append(figure)
    print(figure)
    warm = first.pid()

    crashed_at = time.time()
    story.sandbox.fault("crash", "A")
    story.active_for_producer = "B"
    state, output = story.run("failover", force=True, reason="warm standby")
    assert state == "success", output[-4000:]
    assert "handed epoch 5 to the warm standby driver" in output, output[-4000:]
    job = story.job()
    assert (job.cluster, job.epoch, job.process.pid()) == ("B", 5, warm)
    print(switch_figures(story, "failover through the warm standby", crashed_at, "B", 5, output))
    converged(story, "B", 5)
    story.sandbox.bring_back("A")
    check_no_loss(story, "failover through the warm standby")


STEPS: list[Callable[..., None]] = [
    step_start_and_keep,
    step_killed_driver_is_restarted_in_place,
    step_failover_interrupted_with_a_down,
    step_failback_whose_submit_fails_once,
    step_failover_interrupted_then_a_returns,
    step_restart_and_failback_race,
    step_warm_standby_is_kept_and_takes_the_failover,
]


@pytest.fixture(scope="module")
def steps_run() -> dict[str, str]:
    return {}


def run_through(story, outcomes: dict[str, str], step: Callable[..., None]) -> None:
    run_chain(STEPS, story, outcomes, step)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("step", STEPS, ids=[step.__name__.removeprefix("step_") for step in STEPS])
def test_keeper_chain(story, steps_run, step):
    run_through(story, steps_run, step)

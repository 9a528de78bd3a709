"""A fleet on one Airflow: five pairs on the same A and B fail over together, one damaged checkpoint holds
back no one, and the four fail back.

Five pairs with topics of their own each run a job through spark-submit on A while a producer writes to
each topic: two pairs the packaged PySpark job, three ``benchmarks/fleet_job.py``, the light job of the same
contract that ``bench_fleet.py`` runs (Spark's checkpoint files, the sink layout, progress entries, stop
request and fence; no Spark session, so spark-submit's JVM is only the launcher). Five Spark drivers and
their batches held the 2-core machine for 5 to 9 minutes of every ``make test``. The five failover DAGs
are started and watch A (their verdict sensors defer); A is crashed (kill -9) and the producers move to
B. Just after the crash the newest committed batch of the fifth pair's checkpoint is overwritten with
garbage: its failover fails in ``plan`` with an error naming the file, its record still says A, and the
four others fail over, each losing nothing, with at most the duplicates their plans bound. A is restarted
with MirrorMaker 2 (as an operator does after an outage) and the four failback DAGs move the jobs back,
again losing nothing.

Marked ``fleet``: ``make test`` runs it alone after the other tests. Beside them, its jobs starting at
once on two cores (then five Spark drivers) made timing-sensitive tests of the other worker fail (a Spark
batch not yet committed, MirrorMaker 2's second copy not yet seen, a warm standby's first batch not yet
written).

It prints the crash-to-first-batch time of each pair on B (the fleet's slowest is the figure that
matters) and the failback times.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from akf_devtools.demo.story import WATCHING, WATCHING_WITHIN_S

from tests.integration.switch_story import Story, new_pair_story

pytestmark = [pytest.mark.spark, pytest.mark.fleet]

PAIRS = 5
SPARK_PAIRS = 2
"""The first pairs run the packaged PySpark job; the others (the damaged one among them) the light job."""
LIGHT_JOB = Path(__file__).resolve().parents[2] / "benchmarks" / "fleet_job.py"
RATE = 10.0
"""Records per second per pair: five jobs and their producers share the 2-core machine."""


SYNCED = "Created dag run."
"""What a ``dag.test()`` run logs once it has written every DAG of the dags folder to the metadata DB."""


def _start_in_turn(fleet: list[Story], kind: str) -> list[Any]:
    """Start the ``kind`` run of every pair, each once the one before it has synced the DAGs.

    ``dag.test()`` writes every DAG of the dags folder to the SQLite DB before its run starts; two doing it
    at once insert the same rows (``UNIQUE constraint failed: asset.name, asset.uri``). In a deployment the
    dag-processor alone writes them. The runs then go on side by side.
    """
    runs, began = [], time.monotonic()
    for story in fleet:
        runs.append(story.start_run(kind))
        runs[-1].wait_for_text(SYNCED, 120)
    print(f"fleet: {len(runs)} {kind} runs started in turn in {time.monotonic() - began:.1f} s")
    return runs


def _wait_all(runs: list[Any], timeout: float = 600) -> list[tuple[str, str]]:
    return [running.wait(timeout) for running in runs]


def _damage_newest_committed_batch(story: Story) -> Path:
    """Overwrite the offsets file of the newest committed batch of the pair's checkpoint; return its path."""
    checkpoint = Path(story.record()["job"]["checkpoint"])
    committed = max(int(name.name) for name in (checkpoint / "commits").iterdir() if name.name.isdigit())
    offsets = checkpoint / "offsets" / str(committed)
    offsets.write_text("v1\n{this is not JSON\n")
    return offsets


def _switched(fleet: list[Story], outcomes: list[tuple[str, str]], cluster: str, epoch: int) -> None:
    """Every run of ``outcomes`` succeeded and left its pair's record and job on ``cluster`` at ``epoch``."""
    for story, (state, output) in zip(fleet, outcomes, strict=True):
        assert state == "success", f"{story.pair}: {output[-6000:]}"
        record = story.record()
        assert (record["active"], record["epoch"], record["job"]["cluster"]) == (cluster, epoch, cluster)


def _loses_nothing(fleet: list[Story], label: str, a_down: bool = False) -> None:
    """Every acknowledged record of each pair is in its sink, re-delivered within the plans' bounds.

    :param a_down: A is down: the ids acknowledged by A that MirrorMaker 2 had not copied to B when it
        crashed can only be read once A is back (docs/limits.md, "Records only on a lost cluster"); they may
        be missing, and the check after the failback counts them. Every id acknowledged by B must be in the
        sink. Each id is classed by the cluster that acknowledged it, not by when its acknowledgement
        reached the producer: one written to A just before the crash is A's even when its callback ran
        after (CI once called such an id "acknowledged by B").
    """
    for story in fleet:
        if not a_down:
            counts = story.check_no_loss(180)
        else:
            acked = set(story.producer.acked_ids)
            on_a = story.producer.acked_on("A")
            deadline = time.monotonic() + 180
            missing = acked - story.read_sink().record_ids
            while missing - on_a and time.monotonic() < deadline:
                time.sleep(2)
                missing = acked - story.read_sink().record_ids
            by_b = missing - on_a
            assert not by_b, (
                f"{story.pair}: {len(by_b)} ids acknowledged by B are not in the sink:\n"
                + story.producer.where(by_b)
            )
            if missing:
                print(f"{story.pair}: {len(missing)} ids acknowledged by A and not copied before it crashed")
            counts = {**story.sink_counts(acked), "lost": 0, "only_on_a": len(missing)}
        story.counts[label] = counts
        _within_bound(story, counts)


def _within_bound(story: Story, counts: dict[str, int]) -> None:
    plans = [entry["plan"] for entry in story.record()["history"] if entry.get("plan")]
    bounds = [plan.get("max_duplicates") for plan in plans]
    assert counts["lost"] == 0 and counts["without_id"] == 0, counts
    if all(bound is not None for bound in bounds):
        assert counts["duplicates"] <= sum(bounds), (counts, bounds)


@pytest.fixture
def fleet(own_sandbox, airflow_home, tmp_path_factory) -> Any:
    with ExitStack() as stack:
        stories = [
            stack.enter_context(
                new_pair_story(
                    own_sandbox,
                    airflow_home,
                    tmp_path_factory.mktemp(f"fleet{i}"),
                    "fleet",
                    RATE,
                    job_options={} if i < SPARK_PAIRS else {"application": str(LIGHT_JOB)},
                )
            )
            for i in range(PAIRS)
        ]
        yield stories
        # The pairs' jobs stop together (one after another, the teardown took 74 s in a CI-like run); each
        # story's own exit then finds nothing left to stop.
        with ThreadPoolExecutor(len(stories)) as pool:
            list(pool.map(Story.stop_job, stories))


def test_a_fleet_fails_over_together_and_a_damaged_checkpoint_holds_back_no_one(fleet, own_sandbox):
    sandbox = own_sandbox
    print(f"fleet: {SPARK_PAIRS} pairs run the packaged PySpark job, {PAIRS - SPARK_PAIRS} {LIGHT_JOB.name}")
    for story, (state, output) in zip(fleet, _wait_all(_start_in_turn(fleet, "start")), strict=True):
        assert state == "success", f"{story.pair}: {output[-4000:]}"
    for story in fleet:
        assert story.check_no_loss(180)["rows"] > 0

    failovers = _start_in_turn(fleet, "failover")
    for running in failovers:
        running.wait_for_text(WATCHING, WATCHING_WITHIN_S)
    crashed_at = time.time()
    sandbox.fault("crash", "A")
    for story in fleet:
        story.active_for_producer = "B"
    *healthy, damaged = fleet
    time.sleep(2)  # a batch that was being written when A died has ended
    damaged_file = _damage_newest_committed_batch(damaged)

    outcomes = _wait_all(failovers)
    _switched(healthy, outcomes[:-1], "B", 1)
    state, output = outcomes[-1]
    assert state == "failed", output[-6000:]
    assert str(damaged_file) in output and "corrupt metadata JSON" in output, output[-6000:]
    assert (damaged.record()["active"], damaged.record()["epoch"]) == ("A", 0)

    on_b = {story.pair: round(story.first_batch_time("B", 1) - crashed_at, 1) for story in healthy}
    print(f"crash of A -> first batch on B, per pair (s): {on_b}; all {max(on_b.values())} s")
    _loses_nothing(healthy, "after failover", a_down=True)

    failbacks = _start_in_turn(healthy, "failback")
    for running in failbacks:
        running.wait_for_text(WATCHING, WATCHING_WITHIN_S)
    back_at = time.time()
    sandbox.bring_back("A")  # restarted, then MirrorMaker 2
    outcomes = _wait_all(failbacks)
    for story in healthy:
        story.active_for_producer = "A"
    _switched(healthy, outcomes, "A", 2)
    on_a = {story.pair: round(story.first_batch_time("A", 2) - back_at, 1) for story in healthy}
    print(f"A restarted -> first batch back on A, per pair (s): {on_a}; all {max(on_a.values())} s")
    _loses_nothing(healthy, "after failback")
    for story in healthy:
        print(f"{story.pair}: {story.counts}")

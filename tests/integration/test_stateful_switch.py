"""End to end: a stateful job keeps its state across a failover and a failback, and its results stay exact.

The job is ``examples/jobs/order_counts_to_delta``: it drops re-delivered order ids within a 10-minute
watermark, counts orders and sums their amounts per 10-second window and customer, and upserts each batch's
changed counts into a Delta table. The pair's ``job.state`` is ``carry`` (the default). The chain (STEPS):
start on A; crash A -> failover (the state carried to B); restart A -> failback (carried back); the table
equals, row for row, the counts of the acknowledged records (what the same input gives with no switch);
``job.state: refuse`` stops a forced failover before the fence moves; ``job.state: fresh`` drops the state,
and the history entry says so.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.run_format.state_carry import carried_from
from tests.integration.switch_story import new_pair_story, run_chain, timed
from tests.integration.test_switch_dags import switch_after_fault

pytestmark = pytest.mark.spark

EXAMPLE_JOB = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "order_counts_to_delta" / "job.py"
WINDOW_MS = 10_000
"""The example's window (``WINDOW``)."""
OPERATORS = 2
"""The example's stateful operators: the deduplication and the windowed aggregation."""


def read_counts(table: str) -> dict[tuple[int, str], tuple[int, float]]:
    """The example's table: (window start in ms, customer) -> (orders, amount), from its transaction log (JSON
    commits only: the tests' tables are young), read through the pair's store (local disk or HDFS)."""
    from urllib.parse import unquote

    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_kafka_failover.core.storage import locations
    from airflow_kafka_failover.core.storage.store import open_store

    store = open_store(table)
    log = locations.join(table, "_delta_log")
    live: dict[str, None] = {}
    for name in sorted(n for n in store.names(log) if n.endswith(".json")):
        for line in store.read(locations.join(log, name)).decode().splitlines():
            action = json.loads(line)
            if "add" in action:
                assert not action["add"].get("deletionVector"), "deletion vectors: not applied by this reader"
                live[unquote(action["add"]["path"])] = None
            elif "remove" in action:
                live.pop(unquote(action["remove"]["path"]), None)
    rows: dict[tuple[int, str], tuple[int, float]] = {}
    for path in live:
        data = store.read(locations.join(table, *path.split("/")))
        columns = ["window_start", "customer", "orders", "amount"]
        for row in pq.read_table(pa.BufferReader(data), columns=columns).to_pylist():
            key = (int(row["window_start"].timestamp() * 1000), row["customer"])
            assert key not in rows, f"the window {key} is in the table twice"
            rows[key] = (row["orders"], row["amount"])
    return rows


def expected_counts(producer, before_ms: int) -> tuple[dict[tuple[int, str], tuple[int, float]], Counter]:
    """The counts of the acknowledged records per window and customer (what no switch gives) in the windows
    before ``before_ms``, and per window and customer how many records whose delivery failed may be in a log
    all the same."""
    expected: dict[tuple[int, str], tuple[int, float]] = {}
    for record_id, delivery in dict(producer.acked).items():
        if delivery.produced_ms >= before_ms:
            continue
        n = int(record_id.rsplit("-", 1)[1])
        key = (delivery.produced_ms // WINDOW_MS * WINDOW_MS, f"c-{n % 50}")
        orders, amount = expected.get(key, (0, 0.0))
        expected[key] = (orders + 1, amount + n % 250)
    unsure = Counter(
        (ts // WINDOW_MS * WINDOW_MS, f"c-{int(record_id.rsplit('-', 1)[1]) % 50}")
        for record_id, ts in dict(producer.failed_records).items()
        if ts < before_ms
    )
    return expected, unsure


def differences(table: dict, expected: dict, unsure: Counter) -> list[str]:
    """The windows where the table and the counts of the acknowledged records disagree (a window holding a
    record whose delivery failed may count it: the broker may have written it before the client gave up)."""
    found = []
    for key in sorted(set(table) | set(expected)):
        have, want = table.get(key, (0, 0.0)), expected.get(key, (0, 0.0))
        if have[0] == want[0] and abs(have[1] - want[1]) < 1e-6:
            continue
        if want[0] <= have[0] <= want[0] + unsure[key]:
            continue
        found.append(f"window {key}: table {have}, acknowledged records {want}")
    return found


@pytest.fixture(scope="module")
def story(own_sandbox, airflow_home, tmp_path_factory):
    """The pair's story; its jobs run on this run's pyspark, or on the Spark ``SPARK_HOME`` names (the
    compatibility lane runs the first steps on its oldest stack: ``tests/compat/lanes.py``)."""
    with new_pair_story(
        own_sandbox,
        airflow_home,
        tmp_path_factory.mktemp("stateful"),
        "st",
        job_options={"application": str(EXAMPLE_JOB)},
    ) as story:
        yield story
    print("figures:", story.figures)
    # AKF_RESULTS_DIR: the compatibility lane keeps the figures of its oldest stack apart.
    results = Path(os.environ.get("AKF_RESULTS_DIR") or Path(__file__).resolve().parents[2] / "results")
    results.mkdir(parents=True, exist_ok=True)
    (results / "stateful_switch_figures.json").write_text(
        json.dumps({"figures": story.figures, "machine": f"{os.cpu_count()} cores"}, indent=1)
    )


def assert_carried(story, record: dict) -> None:
    """The switch's history entry and the new run's checkpoint say the state of both operators was carried."""
    entry = record["history"][-1]
    state = entry.get("state")
    assert state is not None and state["policy"] == "carry", entry
    assert len(state["operators"]) == OPERATORS and state["files"] > 0, state
    carried = carried_from(record["checkpoint"])
    assert carried is not None and carried.batch_id == state["batch_id"], (record["checkpoint"], carried)
    assert entry["plan"]["position_batch"] == state["batch_id"]


def step_start(story) -> None:
    state, output = story.run("start")
    assert state == "success", output[-4000:]
    assert (story.record()["active"], story.record()["epoch"]) == ("A", 0)
    story.first_batch_time("A", 0, timeout=120)


def step_crash_fails_over_with_the_state(story) -> None:
    record, fault_at, output = switch_after_fault(story, "failover", "crash", "B")
    assert (record["active"], record["epoch"]) == ("B", 1)
    assert "carried the state of 2 operators" in output, output[-6000:]
    assert_carried(story, record)
    timed(story, "stateful failover after crash", fault_at, "B", 1, output)


def step_restart_fails_back_with_the_state(story) -> None:
    record, fault_at, output = switch_after_fault(story, "failback", "restart", None)
    story.active_for_producer = "A"
    assert (record["active"], record["epoch"]) == ("A", 2)
    assert_carried(story, record)
    timed(story, "stateful failback after restart", fault_at, "A", 2, output)


def step_the_table_equals_the_no_switch_counts(story) -> None:
    """The job's table must come to equal the counts of the acknowledged records, in every window that ended
    5 s ago or earlier (the producer keeps writing for the steps after this one)."""
    before_ms = (int(time.time() * 1000) - 5_000) // WINDOW_MS * WINDOW_MS
    expected, unsure = expected_counts(story.producer, before_ms)
    table_path = story.state("sink")
    deadline = time.monotonic() + 180
    while True:
        table = {key: value for key, value in read_counts(table_path).items() if key[0] < before_ms}
        diff = differences(table, expected, unsure)
        if not diff or time.monotonic() > deadline:
            break
        time.sleep(3)
    total = sum(orders for orders, _ in expected.values())
    listed = "\n".join(diff[:20])
    assert not diff, f"{len(diff)} of {len(expected)} windows differ ({total} orders):\n{listed}"
    story.figures.append({"table": "stateful", "windows": len(expected), "orders": total})
    print(f"the table equals the counts of {total} acknowledged orders in {len(expected)} windows")


def set_state_policy(story, policy: str) -> None:
    config = yaml.safe_load(story.config_path.read_text())
    config["pairs"][story.pair]["job"]["state"] = policy
    story.config_path.write_text(yaml.safe_dump(config))


def step_refuse_stops_the_switch_before_the_fence(story) -> None:
    before, fence, job = story.record(), story.fence(), story.job()
    set_state_policy(story, "refuse")
    state, output = story.run("failover", force=True, reason="drill: state refused")
    assert state == "failed", output[-4000:]
    assert "job.state is 'refuse'" in output and "before the fence moves" in output, output[-4000:]
    assert story.record() == before and story.fence() == fence
    assert job_alive(story.job()) and story.job().process.pid() == job.process.pid()


def step_fresh_drops_the_state_and_says_so(story) -> None:
    set_state_policy(story, "fresh")
    state, output = story.run("failover", force=True, reason="drill: state dropped")
    assert state == "success", output[-6000:]
    story.active_for_producer = "B"
    record = story.record()
    assert (record["active"], record["epoch"]) == ("B", 3)
    entry = record["history"][-1]
    assert entry["state"]["policy"] == "fresh", entry
    assert entry["state"]["warning"] == "state of 2 operators dropped at epoch 3", entry
    assert carried_from(record["checkpoint"]) is None
    assert "state of 2 operators dropped at epoch 3" in output


STEPS: list[Callable[..., None]] = [
    step_start,
    step_crash_fails_over_with_the_state,
    step_restart_fails_back_with_the_state,
    step_the_table_equals_the_no_switch_counts,
    step_refuse_stops_the_switch_before_the_fence,
    step_fresh_drops_the_state_and_says_so,
]


def chain_timeout(step: Callable[..., None]) -> pytest.MarkDecorator:
    return pytest.mark.timeout(600 * (STEPS.index(step) + 1))


@pytest.fixture(scope="module")
def steps_run() -> dict[str, str]:
    return {}


@chain_timeout(step_start)
def test_start(story, steps_run):
    run_chain(STEPS, story, steps_run, step_start)


@chain_timeout(step_crash_fails_over_with_the_state)
def test_crash_fails_over_with_the_state(story, steps_run):
    run_chain(STEPS, story, steps_run, step_crash_fails_over_with_the_state)


@chain_timeout(step_restart_fails_back_with_the_state)
def test_restart_fails_back_with_the_state(story, steps_run):
    run_chain(STEPS, story, steps_run, step_restart_fails_back_with_the_state)


@chain_timeout(step_the_table_equals_the_no_switch_counts)
def test_the_table_equals_the_no_switch_counts(story, steps_run):
    run_chain(STEPS, story, steps_run, step_the_table_equals_the_no_switch_counts)


@chain_timeout(step_refuse_stops_the_switch_before_the_fence)
def test_refuse_stops_the_switch_before_the_fence(story, steps_run):
    run_chain(STEPS, story, steps_run, step_refuse_stops_the_switch_before_the_fence)


@chain_timeout(step_fresh_drops_the_state_and_says_so)
def test_fresh_drops_the_state_and_says_so(story, steps_run):
    run_chain(STEPS, story, steps_run, step_fresh_drops_the_state_and_says_so)

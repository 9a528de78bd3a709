"""The active record's commit: a compare-and-set built from a create-only file in the fencing folder.

The Variable backend is replaced by a dict whose reads take a moment, which is what makes a read-then-write
lose an update when two switches commit together. The create-only file is the real one, on the local store
(a ``link`` that only one writer wins), as two task processes create it.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import parse_pair
from airflow_kafka_failover.io import record_store
from airflow_kafka_failover.run_format.fencing import FencedError


class SlowVariables:
    """A Variable backend (``get``/``set``) whose reads take ``delay`` seconds; counts the writes."""

    def __init__(self, delay: float) -> None:
        self.values: dict[str, str] = {}
        self.writes: list[str] = []
        self.delay = delay

    def get(self, key: str, default=None):
        value = self.values.get(key, default)
        time.sleep(self.delay)
        return value

    def set(self, key: str, value: str) -> None:
        self.values[key] = value
        self.writes.append(value)


@pytest.fixture
def pair(tmp_path):
    return parse_pair(
        "orders",
        {
            "clusters": {"A": {"connection": "kafka_a"}, "B": {"connection": "kafka_b"}},
            "primary": "A",
            "topics": ["orders"],
            "job": {
                "sink_root": str(tmp_path / "sink"),
                "checkpoint_root": str(tmp_path / "checkpoints"),
                "run_root": str(tmp_path / "runs"),
                "fencing_marker": str(tmp_path / "fence" / "orders"),
            },
        },
    )


@pytest.fixture
def variables(monkeypatch):
    from airflow_kafka_failover import version_compat

    backend = SlowVariables(delay=0.2)
    monkeypatch.setattr(version_compat, "Variable", backend)
    return backend


def at_epoch_2(pair, variables) -> ActiveRecord:
    record = ActiveRecord(
        pair="orders",
        active="B",
        epoch=2,
        job={"cluster": "B", "epoch": 2},
        checkpoint="/c/B/2",
        updated_at="2024-01-01T00:00:00+00:00",
    )
    variables.values[record_store.variable_key("orders")] = json.dumps(record.to_dict())
    record_store.fencing_marker(pair).advance(
        None, 3, "A"
    )  # both switches below advanced the fence to (3, A)
    return record


def failback(record: ActiveRecord, job: dict, reason: str) -> ActiveRecord:
    return record.switched(
        to="A",
        job=job,
        checkpoint=job["checkpoint"],
        watermarks={},
        entry={"kind": "failback", "reason": reason},
    )


def race(pair, expected: int, records: list[ActiveRecord]) -> list[object]:
    """Commit every record from its own thread, all at once; each thread's result or exception."""
    outcomes: list[object] = [None] * len(records)
    start = threading.Barrier(len(records))

    def commit(index: int) -> None:
        start.wait()
        try:
            outcomes[index] = record_store.commit_record(pair, expected, records[index])
        except FencedError as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=commit, args=(index,)) for index in range(len(records))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


def stored(variables) -> ActiveRecord:
    return ActiveRecord.from_dict(
        json.loads(variables.values[record_store.variable_key("orders")]), ("A", "B"), "test"
    )


def committed_files(pair) -> list[str]:
    import os

    return sorted(name for name in os.listdir(pair.job.fencing_marker) if name.endswith(".record.json"))


def test_racing_commits_with_different_jobs_commit_once_and_the_loser_names_the_winner(pair, variables):
    record = at_epoch_2(pair, variables)
    job = {"cluster": "A", "epoch": 3, "checkpoint": "/c/A/3"}
    first = failback(record, {**job, "run_dir": "/r/1", "pid": 1}, "operator 1")
    second = failback(record, {**job, "run_dir": "/r/2", "pid": 2}, "operator 2")
    outcomes = race(pair, 2, [first, second])
    assert committed_files(pair) == ["epoch-0000000003.record.json"]
    winner = record_store.committed_record(pair, 3)
    assert winner in (first, second)
    assert len(variables.writes) == 1 and stored(variables) == winner
    losers = [outcome for outcome in outcomes if isinstance(outcome, FencedError)]
    assert len(losers) == 1
    assert "another switch won" in str(losers[0])
    assert winner.job["run_dir"] in str(losers[0]) or "epoch 3 (active A)" in str(losers[0])


def test_racing_commits_of_the_same_job_commit_once_and_the_later_is_a_no_op(pair, variables):
    record = at_epoch_2(pair, variables)
    job = {"cluster": "A", "epoch": 3, "checkpoint": "/c/A/3", "run_dir": "/r/A/3", "submitted_at": "t1"}
    adopted = {**job, "submitted_at": "t2"}  # the second run adopted the first's job: only the time differs
    first, second = failback(record, job, "operator 1"), failback(record, adopted, "operator 2")
    outcomes = race(pair, 2, [first, second])
    assert committed_files(pair) == ["epoch-0000000003.record.json"]
    winner = record_store.committed_record(pair, 3)
    assert not any(isinstance(outcome, Exception) for outcome in outcomes)
    assert all(outcome == winner for outcome in outcomes)
    # the later one publishes only when it finds the Variable behind (the winner may not have written yet)
    assert 1 <= len(variables.writes) <= 2
    assert all(ActiveRecord.from_dict(json.loads(w), ("A", "B"), "w") == winner for w in variables.writes)
    assert len(stored(variables).history) == 1


def test_a_commit_whose_variable_write_was_lost_is_read_from_the_store(pair, variables):
    """The worker died between the create and the Variable write: every reader takes the store's record, and a
    retry of the switch publishes it."""
    record = at_epoch_2(pair, variables)
    new = failback(record, {"cluster": "A", "epoch": 3, "checkpoint": "/c/A/3", "run_dir": "/r/A/3"}, "x")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_store, "_store", lambda pair, record: None)  # the Variable write is lost
        record_store.commit_record(pair, 2, new)
    assert stored(variables).epoch == 2
    assert record_store.load_record(pair) == new
    assert record_store.commit_record(pair, 2, new) == new
    assert stored(variables) == new


def test_a_variable_that_went_back_is_overruled_by_the_store(pair, variables):
    """A worker that stalled before its Variable write of epoch 3 writes it after epoch 4 was committed: the
    tasks still act on epoch 4."""
    record = at_epoch_2(pair, variables)
    third = failback(record, {"cluster": "A", "epoch": 3, "checkpoint": "/c/A/3", "run_dir": "/r/A/3"}, "x")
    record_store.commit_record(pair, 2, third)
    record_store.fencing_marker(pair).advance(3, 4, "B")
    fourth = third.switched(
        to="B",
        job={"cluster": "B", "epoch": 4, "checkpoint": "/c/B/4", "run_dir": "/r/B/4"},
        checkpoint="/c/B/4",
        watermarks={},
        entry={"kind": "failover", "reason": "y"},
    )
    record_store.commit_record(pair, 3, fourth)
    variables.values[record_store.variable_key("orders")] = json.dumps(third.to_dict())  # the stale write
    assert record_store.load_record(pair) == fourth


def test_a_marker_past_the_new_epoch_refuses_the_commit(pair, variables):
    record = at_epoch_2(pair, variables)
    record_store.fencing_marker(pair).advance(3, 4, "B")  # a newer switch fenced this one before it committed
    before = dict(variables.values)
    new = failback(record, {"cluster": "A", "epoch": 3, "checkpoint": "/c/A/3"}, "late")
    with pytest.raises(FencedError, match=r"is at epoch 4 \(cluster B\), past this record's epoch 3"):
        record_store.commit_record(pair, 2, new)
    assert variables.values == before and not variables.writes
    assert committed_files(pair) == []


def test_a_retry_of_a_committed_switch_writes_nothing(pair, variables):
    record = at_epoch_2(pair, variables)
    new = failback(record, {"cluster": "A", "epoch": 3, "checkpoint": "/c/A/3"}, "retry")
    assert record_store.commit_record(pair, 2, new) == new
    assert record_store.commit_record(pair, 2, new) == new
    assert len(variables.writes) == 1

"""The pair's ``job.state`` policy at a switch: before the fence, in the history entry, and the start map a
carried checkpoint holds (``switching/state.py``). The carry's own files are tested in
``tests/unit/run_format/test_state_carry.py``."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from airflow_kafka_failover.core.exceptions import CheckpointError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.config import parse_pair
from airflow_kafka_failover.run_format.state_carry import carry_checkpoint, inspect_state
from airflow_kafka_failover.switching.old_run import OldRun
from airflow_kafka_failover.switching.state import (
    StateRefused,
    check_state_policy,
    resolved_starts,
    state_entry,
)
from tests.unit.run_format.test_state_carry import OWNER, STARTS, TARGETS, stateful_checkpoint


def pair_with(tmp_path, state: str | None = None):
    job = {
        "sink_root": str(tmp_path / "sink"),
        "checkpoint_root": str(tmp_path / "checkpoints"),
        "run_root": str(tmp_path / "runs"),
        "fencing_marker": str(tmp_path / "fence"),
        **({"state": state} if state else {}),
    }
    return parse_pair(
        "orders",
        {
            "clusters": {"A": {"connection": "kafka_a"}, "B": {"connection": "kafka_b"}},
            "primary": "A",
            "topics": ["orders"],
            "job": job,
        },
    )


def old_run_at(checkpoint) -> OldRun:
    handle = {"cluster": "A", "epoch": 0, "run_dir": "/runs/orders/A/epoch-0", "checkpoint": str(checkpoint)}
    return OldRun(handle, str(checkpoint), named_by_record=True)


def test_carry_is_the_default(tmp_path):
    assert str(pair_with(tmp_path).job.state) == "carry"


def test_a_bad_policy_is_refused_naming_the_choices(tmp_path):
    with pytest.raises(Exception, match="carry.*fresh.*refuse"):
        pair_with(tmp_path, "keep")


@pytest.mark.parametrize("policy", ["carry", "fresh", "refuse"])
def test_a_stateless_job_passes_every_policy(tmp_path, policy):
    (tmp_path / "old" / "offsets").mkdir(parents=True)
    check_state_policy(pair_with(tmp_path, policy), "failover", old_run_at(tmp_path / "old"))
    check_state_policy(pair_with(tmp_path, policy), "failover", OldRun(None, None, named_by_record=False))


def test_refuse_stops_the_switch_before_the_fence_naming_the_state(tmp_path):
    old = stateful_checkpoint(tmp_path / "old")
    with pytest.raises(StateRefused) as refused:
        check_state_policy(pair_with(tmp_path, "refuse"), "failback", old_run_at(old))
    message = str(refused.value)
    assert "holds the state of 2 stateful operators" in message and str(old) in message
    assert "job.state is 'refuse': the failback stops before the fence moves (nothing was changed)" in message


def test_fresh_lets_the_switch_go_on_and_warns(tmp_path, caplog):
    old = stateful_checkpoint(tmp_path / "old")
    with caplog.at_level(logging.WARNING):
        check_state_policy(pair_with(tmp_path, "fresh"), "failover", old_run_at(old))
    assert "the new run starts without it" in caplog.text


def test_carry_checks_the_state_whole_before_the_fence(tmp_path):
    old = stateful_checkpoint(tmp_path / "old")
    check_state_policy(pair_with(tmp_path), "failover", old_run_at(old))
    (old / "state" / "0" / "1" / "2.delta").unlink()
    with pytest.raises(CheckpointError) as refused:
        check_state_policy(pair_with(tmp_path), "failover", old_run_at(old))
    message = str(refused.value)
    assert "pair 'orders', failover from epoch 0" in message and "no file of state version 2" in message
    assert "(checked before the fence moved: nothing was changed)" in message


def test_the_start_map_gets_the_target_s_watermarks_for_earliest_and_latest():
    marks = {
        TopicPartition("orders", 0): SimpleNamespace(low=3, high=90),
        TopicPartition("orders", 1): SimpleNamespace(low=4, high=80),
    }
    asked = []

    class Hook:
        def watermarks(self, partitions):
            asked.extend(partitions)
            return marks

    starts = resolved_starts(Hook(), {"orders": {"0": -2, "1": -1}, "A.orders": {"0": 48}})
    assert starts == {
        TopicPartition("orders", 0): 3,
        TopicPartition("orders", 1): 80,
        TopicPartition("A.orders", 0): 48,
    }
    assert sorted(asked) == sorted(marks)
    assert resolved_starts(None, {"A.orders": {"0": 1}}) == {TopicPartition("A.orders", 0): 1}


def test_the_history_entry_says_what_was_carried(tmp_path):
    old, new = stateful_checkpoint(tmp_path / "old"), tmp_path / "new"
    carry_checkpoint(inspect_state(str(old)), str(new), OWNER, TARGETS, STARTS)
    plan = {"old_run": {"checkpoint": str(old)}}
    entry = state_entry(pair_with(tmp_path), plan, str(new), 1)
    assert entry is not None
    assert (entry["policy"], entry["batch_id"], entry["operators"]) == ("carry", 1, ["0", "1"])
    assert entry["checkpoint"] == str(old) and entry["files"] > 0


def test_the_history_entry_warns_of_dropped_state_under_fresh(tmp_path):
    old = stateful_checkpoint(tmp_path / "old")
    plan = {"old_run": {"checkpoint": str(old)}}
    entry = state_entry(pair_with(tmp_path, "fresh"), plan, str(tmp_path / "new"), 3)
    assert entry == {
        "policy": "fresh",
        "dropped_operators": ["0", "1"],
        "warning": "state of 2 operators dropped at epoch 3",
    }


def test_a_stateless_switch_records_no_state(tmp_path):
    (tmp_path / "old" / "offsets").mkdir(parents=True)
    plan = {"old_run": {"checkpoint": str(tmp_path / "old")}}
    assert state_entry(pair_with(tmp_path), plan, str(tmp_path / "new"), 1) is None
    assert state_entry(pair_with(tmp_path), {"old_run": None}, str(tmp_path / "new"), 1) is None


def test_a_query_that_never_committed_a_batch_drops_no_state(tmp_path):
    old = stateful_checkpoint(tmp_path / "old")
    for commit in (old / "commits").iterdir():
        commit.unlink()
    plan = {"old_run": {"checkpoint": str(old)}}
    assert state_entry(pair_with(tmp_path, "fresh"), plan, str(tmp_path / "new"), 3) is None
    check_state_policy(pair_with(tmp_path), "failover", old_run_at(old))  # nothing to check under carry

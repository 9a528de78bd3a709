"""``switching/state.py`` with a stand-in for the pair: ``check_state_policy`` reads only ``pair.name`` and
``pair.job.state``, ``state_entry`` only ``pair.job.state``, so each policy is tried on any checkpoint without
a whole pair config. Adds to ``test_state.py`` (which parses real pairs): every policy on a stateless, a whole
and a damaged checkpoint, the messages word for word, and the start map's watermark look-ups."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kafka_failover.core.exceptions import CheckpointError, FailoverError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.run_format.options import StatePolicy
from airflow_kafka_failover.run_format.state_carry import carry_checkpoint, inspect_state
from airflow_kafka_failover.switching.old_run import OldRun
from airflow_kafka_failover.switching.state import (
    StateRefused,
    carry_state,
    check_state_policy,
    resolved_starts,
    state_entry,
)
from tests.unit.run_format.test_state_carry_cases import (
    OWNER,
    STARTS,
    TARGETS,
    digest,
    end_offsets,
    put,
    spark_checkpoint,
    write_commit,
    write_offsets,
)

POLICIES = list(StatePolicy)


def pair(policy: StatePolicy, name: str = "orders") -> Any:
    """What the state policy reads of a pair: its name and ``job.state``."""
    return SimpleNamespace(name=name, job=SimpleNamespace(state=policy))


def old_run(checkpoint: Path | None, epoch: int | None = 3) -> OldRun:
    if checkpoint is None:
        return OldRun(None, None, named_by_record=False)
    handle = {
        "cluster": "A",
        "epoch": epoch,
        "run_dir": f"/runs/orders/A/epoch-{epoch}",
        "checkpoint": str(checkpoint),
    }
    return OldRun(handle, str(checkpoint), named_by_record=True)


def stateless_checkpoint(root: Path) -> Path:
    for batch in (0, 1):
        write_offsets(root, batch, end_offsets(batch))
        write_commit(root, batch)
    put(root, "metadata", '{"id":"q"}')
    return root


# ---------------------------------------------------------------------------------------------------------
# check_state_policy


@pytest.mark.parametrize("policy", POLICIES)
def test_a_stateless_run_passes_every_policy_and_says_nothing(tmp_path, caplog, policy):
    old = stateless_checkpoint(tmp_path / "old")
    with caplog.at_level(logging.INFO, logger="airflow_kafka_failover.switching.state"):
        assert check_state_policy(pair(policy), "failover", old_run(old)) is None
        assert check_state_policy(pair(policy), "failover", old_run(None)) is None
        assert check_state_policy(pair(policy), "failover", old_run(tmp_path / "never-written")) is None
    assert caplog.records == []


def test_refuse_stops_the_switch_naming_the_policy_the_state_and_the_way_out(tmp_path):
    old = spark_checkpoint(tmp_path / "old")
    before = digest(old)
    with pytest.raises(StateRefused) as refused:
        check_state_policy(pair(StatePolicy.REFUSE, "payments"), "failback", old_run(old))
    assert isinstance(refused.value, FailoverError)
    assert str(refused.value) == (
        f"the job of pair 'payments' holds the state of 2 stateful operators in {old}, and job.state is "
        "'refuse': the failback stops before the fence moves (nothing was changed). Set job.state: carry to "
        "take the state along, or fresh to start the new run without it"
    )
    assert digest(old) == before


def test_refuse_names_one_operator_in_the_singular_even_when_its_state_is_damaged(tmp_path):
    old = spark_checkpoint(tmp_path / "old", operators=1)
    (old / "commits" / "1").write_text("v9\n{}")  # not inspected: the policy refuses first
    with pytest.raises(
        StateRefused, match="holds the state of 1 stateful operator in .*job.state is 'refuse'"
    ):
        check_state_policy(pair(StatePolicy.REFUSE), "failover", old_run(old))


def test_fresh_lets_the_switch_go_on_even_over_a_damaged_state_and_warns(tmp_path, caplog):
    old = spark_checkpoint(tmp_path / "old")
    (old / "state" / "0" / "1" / "2.delta").unlink()  # fresh drops the state: it is not inspected
    with caplog.at_level(logging.INFO, logger="airflow_kafka_failover.switching.state"):
        assert check_state_policy(pair(StatePolicy.FRESH), "failover", old_run(old)) is None
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        f"the job holds the state of 2 stateful operators in {old}; job.state is 'fresh': the new run starts "
        "without it (recorded in the switch's history)"
    )


def test_carry_checks_a_whole_state_and_says_what_it_will_carry(tmp_path, caplog):
    old = spark_checkpoint(tmp_path / "old")
    before = digest(old)
    with caplog.at_level(logging.INFO, logger="airflow_kafka_failover.switching.state"):
        assert check_state_policy(pair(StatePolicy.CARRY), "failover", old_run(old)) is None
    assert [r.getMessage() for r in caplog.records] == [
        f"2 stateful operators (0, 1) at batch 1 of {old} is whole; the failover carries it to the new run"
    ]
    assert digest(old) == before


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda old: (old / "state/1/2/2.delta").unlink(), "state/1/2: no file of state version 2"),
        (lambda old: (old / "offsets/0").unlink(), "offsets/0: the offsets of batch 0 is missing"),
        (lambda old: (old / "commits/1").write_text("v2\n{}"), "commits/1:1: commit log version 'v2'"),
        (
            lambda old: [p.unlink() for p in (old / "state/0/2").iterdir() if p.is_file()],
            "state/0/2: the state of partition 2 is missing",
        ),
    ],
    ids=["store version", "offsets of b-1", "commit log", "partition"],
)
def test_carry_refuses_a_damaged_state_before_the_fence_moves(tmp_path, damage, named):
    old = spark_checkpoint(tmp_path / "old")
    damage(old)
    with pytest.raises(CheckpointError) as refused:
        check_state_policy(pair(StatePolicy.CARRY), "failback", old_run(old, epoch=7))
    message = str(refused.value)
    assert message.startswith(f"pair 'orders', failback from epoch 7: {old}/{named}")
    assert "job.state: fresh" in message
    assert message.endswith("(checked before the fence moved: nothing was changed)")
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_carry_refusing_a_run_known_by_its_checkpoint_only_names_no_epoch_none(tmp_path):
    old = spark_checkpoint(tmp_path / "old")
    (old / "state/1/2/2.delta").unlink()
    with pytest.raises(CheckpointError) as refused:
        check_state_policy(pair(StatePolicy.CARRY), "failover", OldRun(None, str(old), named_by_record=True))
    assert "no file of state version 2" in str(refused.value)
    assert "epoch None" not in str(refused.value) and f"from the checkpoint {old}" in str(refused.value)


def test_carry_of_a_run_that_never_committed_checks_nothing(tmp_path, caplog):
    old = spark_checkpoint(tmp_path / "old", committed=0, planned=1)
    with caplog.at_level(logging.INFO, logger="airflow_kafka_failover.switching.state"):
        assert check_state_policy(pair(StatePolicy.CARRY), "failover", old_run(old)) is None
    assert caplog.records == []


# ---------------------------------------------------------------------------------------------------------
# resolved_starts


class Hook:
    """A target cluster's hook: ``watermarks`` answers objects with ``.low`` and ``.high``."""

    def __init__(self, marks: dict[TopicPartition, tuple[int, int]]) -> None:
        self.marks = marks
        self.asked: list[list[TopicPartition]] = []

    def watermarks(self, partitions: list[TopicPartition]) -> dict[TopicPartition, Any]:
        self.asked.append(list(partitions))
        return {tp: SimpleNamespace(low=low, high=high) for tp, (low, high) in self.marks.items()}


def test_earliest_and_latest_become_the_target_s_watermarks_in_one_look_up():
    hook = Hook({TopicPartition("A.orders", p): (10 * p, 100 + p) for p in range(4)})
    starts = resolved_starts(hook, {"A.orders": {"0": -2, "1": -1, "2": 55, "3": 0}})
    assert starts == {
        TopicPartition("A.orders", 0): 0,
        TopicPartition("A.orders", 1): 101,
        TopicPartition("A.orders", 2): 55,
        TopicPartition("A.orders", 3): 0,
    }
    assert [sorted(asked) for asked in hook.asked] == [
        [TopicPartition("A.orders", 0), TopicPartition("A.orders", 1)]
    ]


def test_earliest_on_a_trimmed_partition_is_its_low_watermark():
    hook = Hook({TopicPartition("orders", 0): (5000, 9000), TopicPartition("refunds", 0): (7, 7)})
    starts = resolved_starts(hook, {"orders": {"0": -2}, "refunds": {"0": -1}})
    assert starts == {TopicPartition("orders", 0): 5000, TopicPartition("refunds", 0): 7}


def test_a_start_map_of_positions_asks_the_target_nothing():
    class Unreachable:
        def watermarks(self, partitions):
            raise AssertionError("asked the target for watermarks")

    starts = resolved_starts(Unreachable(), {"A.orders": {"1": 47, "0": 48}, "A.refunds": {}})
    assert starts == {TopicPartition("A.orders", 0): 48, TopicPartition("A.orders", 1): 47}
    assert resolved_starts(Unreachable(), {}) == {}


# ---------------------------------------------------------------------------------------------------------
# state_entry


def plan_from(old: Path | None) -> dict[str, Any]:
    return {"old_run": None if old is None else {"checkpoint": str(old), "cluster": "A", "epoch": 2}}


def test_a_carried_run_s_entry_says_what_was_carried(tmp_path):
    old, new = spark_checkpoint(tmp_path / "old"), tmp_path / "new"
    carried = carry_checkpoint(inspect_state(str(old)), str(new), OWNER, TARGETS, STARTS)
    for policy in POLICIES:  # what the checkpoint holds, whatever the policy says now
        entry = state_entry(pair(policy), plan_from(old), str(new), 4)
        assert entry == {
            "policy": "carry",
            "checkpoint": str(old),
            "batch_id": 1,
            "operators": ["0", "1"],
            "files": carried.files,
            "bytes": carried.bytes,
            "seconds": round(carried.seconds, 3),
        }


def test_fresh_over_a_stateful_run_records_the_state_dropped(tmp_path):
    old = spark_checkpoint(tmp_path / "old")
    entry = state_entry(pair(StatePolicy.FRESH), plan_from(old), str(tmp_path / "new"), 3)
    assert entry == {
        "policy": "fresh",
        "dropped_operators": ["0", "1"],
        "warning": "state of 2 operators dropped at epoch 3",
    }


def test_one_dropped_operator_is_named_in_the_singular(tmp_path):
    old = spark_checkpoint(tmp_path / "old", operators=1)
    entry = state_entry(pair(StatePolicy.FRESH), plan_from(old), str(tmp_path / "new"), 9)
    assert entry is not None and entry["warning"] == "state of 1 operator dropped at epoch 9"


def test_carry_that_found_the_run_s_own_batches_records_the_state_dropped_and_why(tmp_path):
    old, new = spark_checkpoint(tmp_path / "old"), tmp_path / "new"
    put(new, "_owner.json", '{"pair": "orders", "cluster": "B", "epoch": 4}')  # started without state
    entry = state_entry(pair(StatePolicy.CARRY), plan_from(old), str(new), 4)
    assert entry == {
        "policy": "carry",
        "dropped_operators": ["0", "1"],
        "warning": "state of 2 operators dropped at epoch 4 (the new run had committed batches of its own "
        "before the state could be carried)",
    }


@pytest.mark.parametrize("policy", POLICIES)
def test_no_state_no_entry(tmp_path, policy):
    stateless = stateless_checkpoint(tmp_path / "stateless")
    never_committed = spark_checkpoint(tmp_path / "never-committed", committed=0, planned=1)
    new = str(tmp_path / "new")
    for plan in (plan_from(stateless), plan_from(never_committed), plan_from(None), {}, {"old_run": {}}):
        assert state_entry(pair(policy), plan, new, 5) is None, plan


# ---------------------------------------------------------------------------------------------------------
# carry_state: the cases that end before any cluster or run folder is looked at


@pytest.mark.parametrize("policy", [StatePolicy.FRESH, StatePolicy.REFUSE])
def test_carry_state_does_nothing_under_another_policy(tmp_path, policy):
    old = spark_checkpoint(tmp_path / "old")
    assert carry_state(pair(policy), "B", 4, plan_from(old)) is None


def test_carry_state_does_nothing_for_a_stateless_run_or_none(tmp_path):
    old = stateless_checkpoint(tmp_path / "old")
    for plan in (plan_from(old), plan_from(None), {}):
        assert carry_state(pair(StatePolicy.CARRY), "B", 4, plan) is None

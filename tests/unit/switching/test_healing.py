"""Which switch a fence ahead of the record decided, and the fences that no single switch explains."""

from __future__ import annotations

import pytest

from airflow_kafka_failover.core.exceptions import FailoverError
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import parse_pair
from airflow_kafka_failover.run_format.fencing import FenceState
from airflow_kafka_failover.switching.healing import switch_kind

PAIR = parse_pair(
    "orders",
    {
        "clusters": {"A": {"connection": "unit_a"}, "B": {"connection": "unit_b"}},
        "primary": "A",
        "topics": ["orders"],
    },
)


def record(active: str, epoch: int) -> ActiveRecord:
    return ActiveRecord(pair="orders", active=active, epoch=epoch)


def test_a_fence_one_epoch_ahead_on_the_other_cluster_is_that_switch():
    assert switch_kind(PAIR, record("A", 2), FenceState("orders", 3, "B")) == "failover"
    assert switch_kind(PAIR, record("B", 3), FenceState("orders", 4, "A")) == "failback"


def test_a_fence_two_epochs_ahead_needs_a_person():
    with pytest.raises(FailoverError, match="epoch 5 but the record at 3: more than one switch apart"):
        switch_kind(PAIR, record("A", 3), FenceState("orders", 5, "B"))


@pytest.mark.parametrize("cluster", ["A", "C"])
def test_a_fence_naming_the_active_or_an_unknown_cluster_needs_a_person(cluster):
    with pytest.raises(FailoverError, match=f"names cluster '{cluster}' at epoch 3.*fix the fencing marker"):
        switch_kind(PAIR, record("A", 2), FenceState("orders", 3, cluster))

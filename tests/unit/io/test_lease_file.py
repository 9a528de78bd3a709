"""The switch lease file: taken, renewed while a step runs, read back, released by its epoch only."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.io.lease_file import (
    holding_lease,
    lease_path,
    read_lease,
    release_lease,
    write_lease,
)


def test_a_written_lease_is_read_back_and_expires(tmp_path):
    marker = str(tmp_path / "fence")
    lease = write_lease(marker, "orders", 4, "B", "failover", 30)
    assert lease_path(marker) == str(tmp_path / "fence" / "switch-lease.json")
    read = read_lease(marker, "orders")
    assert read == lease and read.valid_at(time.time()) and not read.valid_at(time.time() + 31)


def test_no_lease_and_an_unreadable_lease_protect_nothing(tmp_path):
    marker = str(tmp_path / "fence")
    assert read_lease(marker, "orders") is None
    (tmp_path / "fence").mkdir()
    Path(lease_path(marker)).write_text("{half")
    assert read_lease(marker, "orders") is None


def test_a_lease_of_another_pair_is_a_config_error(tmp_path):
    marker = str(tmp_path / "fence")
    write_lease(marker, "payments", 4, "B", "failover", 30)
    with pytest.raises(ConfigError, match="belongs to pair 'payments', not 'orders'.*own fencing folder"):
        read_lease(marker, "orders")


def test_release_removes_only_the_lease_of_its_epoch(tmp_path):
    marker = str(tmp_path / "fence")
    write_lease(marker, "orders", 4, "B", "failover", 30)
    release_lease(marker, "orders", 3)
    assert read_lease(marker, "orders") is not None
    release_lease(marker, "orders", 4)
    assert read_lease(marker, "orders") is None


@pytest.mark.slow
def test_holding_renews_while_the_block_runs_and_stops_after(tmp_path):
    marker = str(tmp_path / "fence")
    with holding_lease(marker, "orders", 4, "B", "keeper", 1.2) as first:
        time.sleep(1.0)
        renewed = read_lease(marker, "orders")
        assert renewed is not None and renewed.until > first.until
    after = json.loads(Path(lease_path(marker)).read_text())["until"]
    time.sleep(0.7)
    assert json.loads(Path(lease_path(marker)).read_text())["until"] == after  # nobody renews it any more

from __future__ import annotations

import pytest

from airflow_kafka_failover.translation.replication_lag import replication_lag


def test_lag_from_the_newest_offset_sync():
    assert replication_lag(source_high=100, source_low=0, sync=(50, 40), target_high=90) == 0
    assert replication_lag(source_high=100, source_low=0, sync=(50, 40), target_high=80) == 10
    assert replication_lag(source_high=7, source_low=7, sync=None, target_high=0) == 0  # nothing to copy
    assert replication_lag(source_high=8, source_low=7, sync=None, target_high=0) is None
    # A sync at or beyond the source's end describes another history of the topic: unknown.
    assert replication_lag(source_high=50, source_low=0, sync=(50, 40), target_high=41) is None


def test_swapped_watermarks_are_refused():
    with pytest.raises(ValueError, match="watermarks are swapped"):
        replication_lag(source_high=1, source_low=2, sync=None, target_high=0)

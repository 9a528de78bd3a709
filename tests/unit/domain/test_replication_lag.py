from __future__ import annotations

import pytest

from airflow_kafka_failover.domain.replication_lag import replication_lag


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


def test_records_not_replicated_counts_records_not_offsets():
    from airflow_kafka_failover.domain.replication_lag import records_not_replicated

    # Sync (76, 70): record 76 sits at 70. The job's position is 78 (77 is a commit marker): one record
    # after the sync? None: 77 is no record, so 0 records after it, and the replica is complete.
    assert replication_lag(source_high=78, source_low=0, sync=(76, 70), target_high=71) == 1  # offsets: a gap
    assert records_not_replicated(0, (76, 70), 71) == 0  # records: none
    # Three records after the sync, two copied.
    assert records_not_replicated(3, (76, 70), 73) == 1
    assert records_not_replicated(3, (76, 70), 80) == 0
    with pytest.raises(ValueError, match="non-negative"):
        records_not_replicated(-1, (76, 70), 80)

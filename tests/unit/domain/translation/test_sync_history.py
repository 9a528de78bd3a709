"""Offset-sync histories rebuilt from the offset-syncs topic, and the latest checkpoints per partition."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_kafka_failover.core.exceptions import TranslationError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint, OffsetSync
from airflow_kafka_failover.domain.translation.sync_history import (
    OffsetSyncHistory,
    latest_checkpoints,
    sync_histories_by_partition,
)
from tests.property_examples import examples

PROPERTY = settings(max_examples=examples(150), deadline=None)


@PROPERTY
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=40))
def test_history_from_any_sync_sequence_is_strictly_increasing(syncs):
    history = OffsetSyncHistory.from_syncs(syncs)
    for i in range(1, len(history)):
        assert history.upstream[i] > history.upstream[i - 1]
        assert history.downstream[i] > history.downstream[i - 1]
    if syncs:
        # The newest sync always survives: it describes the logs as they are now.
        assert (history.upstream[-1], history.downstream[-1]) == syncs[-1]


def test_history_resets_when_a_side_goes_backwards():
    rewind = OffsetSyncHistory.from_syncs([(10, 10), (20, 20), (15, 30), (25, 40)])
    assert (rewind.upstream, rewind.downstream, rewind.resets) == ([15, 25], [30, 40], 1)
    truncated = OffsetSyncHistory.from_syncs([(10, 10), (20, 20), (30, 5)])
    assert (truncated.upstream, truncated.downstream, truncated.resets) == ([30], [5], 1)


def test_history_repeated_upstream_starts_a_new_copy():
    history = OffsetSyncHistory.from_syncs([(10, 10), (20, 20), (20, 20), (20, 35)])
    assert (history.upstream, history.downstream, history.resets) == ([20], [35], 1)
    assert [(c.upstream, c.downstream) for c in history.copies] == [([10, 20], [10, 20]), ([20], [35])]


def test_history_keeps_earlier_copies_until_the_downstream_log_is_truncated():
    history = OffsetSyncHistory.from_syncs([(0, 0), (50, 50), (0, 100), (50, 150), (10, 170)])
    assert [(c.upstream, c.downstream) for c in history.copies] == [
        ([0, 50], [0, 50]),
        ([0, 50], [100, 150]),
        ([10], [170]),
    ]
    assert history.resets == 2
    truncated = OffsetSyncHistory.from_syncs([(0, 0), (50, 50), (0, 100), (60, 20)])
    assert [(c.upstream, c.downstream) for c in truncated.copies] == [([60], [20])]
    with pytest.raises(TranslationError, match="lie below the newer ones"):
        OffsetSyncHistory([0], [5], earlier=[OffsetSyncHistory([0], [9])])


def test_history_rejects_negative_and_unsorted():
    with pytest.raises(TranslationError, match="negative"):
        OffsetSyncHistory.from_syncs([(-1, 0)])
    with pytest.raises(TranslationError, match="strictly increasing"):
        OffsetSyncHistory([1, 1], [1, 2])
    with pytest.raises(TranslationError, match="as many"):
        OffsetSyncHistory([1], [])


def test_sync_histories_by_partition_and_latest_checkpoints():
    syncs = [OffsetSync("orders", 0, 10, 9), OffsetSync("orders", 1, 5, 5), OffsetSync("orders", 0, 20, 19)]
    histories = sync_histories_by_partition(syncs)
    assert histories[TopicPartition("orders", 0)].upstream == [10, 20]
    assert histories[TopicPartition("orders", 1)].downstream == [5]
    checkpoints = [
        Checkpoint("job", "A.orders", 0, 10, 9),
        Checkpoint("other", "A.orders", 0, 99, 98),
        Checkpoint("job", "A.orders", 0, 20, 19),
    ]
    latest = latest_checkpoints(checkpoints, "job")
    assert latest == {TopicPartition("A.orders", 0): checkpoints[2]}

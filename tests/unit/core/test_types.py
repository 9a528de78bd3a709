from __future__ import annotations

import pytest

from airflow_kafka_failover.core.exceptions import TranslationError
from airflow_kafka_failover.core.types import TopicPartition, Watermarks, partition_key


def test_partition_key_is_topic_dash_partition():
    assert (
        partition_key(TopicPartition("A.orders-eu", 3))
        == "A.orders-eu-3"
        == str(TopicPartition("A.orders-eu", 3))
    )
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 1)])[
        0
    ] == TopicPartition("a", 1)


@pytest.mark.parametrize(("low", "high"), [(-1, 0), (5, 4)])
def test_watermarks_refuse_an_impossible_range(low, high):
    with pytest.raises(TranslationError, match=f"low={low} high={high}"):
        Watermarks(low, high)

"""KafkaClusterHook's timeouts: ``timeout_seconds`` for the hook and for each call."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook


def test_timeout_seconds_is_taken_and_checked():
    assert KafkaClusterHook("kafka_a", timeout_seconds=4.0).timeout_seconds == 4.0
    with pytest.raises(ConfigError, match="timeout_seconds must be greater than 0 seconds, got 0"):
        KafkaClusterHook("kafka_a", timeout_seconds=0)


def test_a_method_takes_its_own_timeout_seconds(monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_A",
        json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:9"}}),
    )
    hook = KafkaClusterHook("kafka_a", timeout_seconds=4.0)
    assert hook.producer(timeout_seconds=2.5) is not None


def test_a_request_without_an_answer_names_the_request_and_the_cluster(monkeypatch):
    """concurrent.futures' TimeoutError has no text: a plan's warning said only "TimeoutError: "."""
    from concurrent.futures import Future

    from airflow_kafka_failover.core.types import TopicPartition

    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_A",
        json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:9"}}),
    )

    class Silent:
        def list_offsets(self, request, request_timeout):
            return {ktp: Future() for ktp in request}  # never answered

    hook = KafkaClusterHook("kafka_a", timeout_seconds=0.2)
    with pytest.raises(TimeoutError) as raised:
        hook.offsets_at([TopicPartition("mm2-offset-syncs.A.internal", 0)], True, 0.2, Silent())
    assert str(raised.value) == (
        "ListOffsets of mm2-offset-syncs.A.internal[0] on 127.0.0.1:9 (connection 'kafka_a') got no answer "
        "within 0.2 s"
    )

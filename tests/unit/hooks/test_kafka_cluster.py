"""KafkaClusterHook's argument names: ``timeout_seconds``, with the old ``timeout`` still accepted."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook


def test_the_old_timeout_name_still_works_and_warns_with_the_new_name():
    with pytest.warns(DeprecationWarning, match=r"pass timeout_seconds=\.\.\. instead"):
        hook = KafkaClusterHook("kafka_a", timeout=3.5)
    assert hook.timeout_seconds == 3.5


def test_timeout_seconds_is_taken_without_a_warning_and_checked(recwarn):
    assert KafkaClusterHook("kafka_a", timeout_seconds=4.0).timeout_seconds == 4.0
    assert not [
        w for w in recwarn if issubclass(w.category, DeprecationWarning) and "timeout" in str(w.message)
    ]
    with pytest.raises(ConfigError, match="timeout_seconds must be greater than 0 seconds, got 0"):
        KafkaClusterHook("kafka_a", timeout_seconds=0)


def test_a_method_takes_timeout_seconds_and_its_old_timeout_name_warns(monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_A",
        json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:9"}}),
    )
    hook = KafkaClusterHook("kafka_a", timeout_seconds=4.0)
    assert hook.producer(timeout_seconds=2.5) is not None
    with pytest.warns(
        DeprecationWarning, match=r"KafkaClusterHook\.producer\(timeout=\.\.\.\) is deprecated"
    ):
        hook.producer(timeout=2.5)


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

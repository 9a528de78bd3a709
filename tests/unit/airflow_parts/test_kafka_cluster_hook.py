"""KafkaClusterHook's argument names: ``timeout_seconds``, with the old ``timeout`` still accepted."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_failover.exceptions import ConfigError
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

"""KafkaClusterHook: its timeouts (the hook's and each call's) and the connections it cannot use."""

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


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (json.dumps({"conn_type": "kafka", "extra": '{"bootstrap.servers": "h:9092",'}), "not valid JSON"),
        (json.dumps({"conn_type": "kafka", "extra": '["h:9092"]'}), r"must be a JSON object.*\['h:9092'\]"),
        ("kafka://h:9092?__extra__=%7Bbroken", r"set in AIRFLOW_CONN_KAFKA_A, but Airflow could not read it"),
    ],
)
def test_a_connection_airflow_found_but_could_not_read_is_not_called_missing(monkeypatch, value, message):
    """Airflow 3.1 refuses an extra that is not a JSON object while reading the connection, and its Task SDK
    then says the connection is not defined: the error names the variable's fault instead."""
    from airflow_kafka_failover.version_compat import AirflowNotFoundException

    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_A", value)

    def unreadable(cls, conn_id):
        raise AirflowNotFoundException(f"The conn_id `{conn_id}` isn't defined")

    monkeypatch.setattr(KafkaClusterHook, "get_connection", classmethod(unreadable))
    with pytest.raises(ConfigError, match=message) as refused:
        _ = KafkaClusterHook("kafka_a").client_config
    assert "does not exist" not in str(refused.value)


def test_a_connection_in_no_variable_is_said_not_to_exist(monkeypatch):
    from airflow_kafka_failover.version_compat import AirflowNotFoundException

    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_A", raising=False)

    def missing(cls, conn_id):
        raise AirflowNotFoundException(f"The conn_id `{conn_id}` isn't defined")

    monkeypatch.setattr(KafkaClusterHook, "get_connection", classmethod(missing))
    with pytest.raises(ConfigError, match=r"'kafka_a' does not exist: create a connection of type 'kafka'"):
        _ = KafkaClusterHook("kafka_a").client_config

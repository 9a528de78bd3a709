"""librdkafka's lines through a connection's ClientLog: each change once, at warning, repeats counted."""

from __future__ import annotations

import logging

import pytest

from airflow_kafka_failover.hooks import client_log
from airflow_kafka_failover.hooks.client_log import ClientLog

REFUSED = (
    "%s [%s] %s",
    "FAIL",
    "rdkafka#producer-%d",
    "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused "
    "(after %dms in state CONNECT)",
)


def refused(client: ClientLog, attempt: int) -> None:
    fmt, fac, name, message = REFUSED
    client.log(3, fmt, fac, name % attempt, message % attempt)


@pytest.fixture
def lines(caplog, monkeypatch):
    monkeypatch.setattr(ClientLog, "_states", {})
    caplog.set_level(logging.WARNING, logger="airflow_kafka_failover.librdkafka")
    return lambda: [(record.levelname, record.getMessage()) for record in caplog.records]


def test_a_refused_connection_is_written_once_and_its_repeats_counted_when_the_cluster_answers(lines):
    client = ClientLog("kafka_a")
    for attempt in range(200):
        refused(client, attempt)
    assert len(lines()) == 1
    level, text = lines()[0]
    assert level == "WARNING" and "connection 'kafka_a'" in text and "Connection refused" in text
    client.answered()
    assert lines()[-1] == (
        "WARNING",
        "connection 'kafka_a', librdkafka: the message before repeated 199 more times; the cluster answers "
        "again",
    )
    refused(client, 1)  # down again: a new change, written again
    assert len(lines()) == 3


def test_another_message_or_another_connection_is_written_with_the_count_of_the_last(lines):
    a, b = ClientLog("kafka_a"), ClientLog("kafka_b")
    refused(a, 1)
    refused(a, 2)
    refused(b, 1)
    a.log(3, "%s [%s] %s", "FAIL", "rdkafka#producer-9", "SSL handshake failed")
    assert [text.split(", librdkafka: ") for _level, text in lines()] == [
        ["connection 'kafka_a'", "FAIL [rdkafka#producer-1] " + REFUSED[3] % 1],
        ["connection 'kafka_b'", "FAIL [rdkafka#producer-1] " + REFUSED[3] % 1],
        ["connection 'kafka_a'", "the message before repeated 1 more times"],
        ["connection 'kafka_a'", "FAIL [rdkafka#producer-9] SSL handshake failed"],
    ]


def test_a_message_that_lasts_is_counted_again_every_few_minutes(lines, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(client_log.time, "monotonic", lambda: now[0])
    client = ClientLog("kafka_a")
    for attempt in range(10):
        refused(client, attempt)
        now[0] += 40
    assert [text.split("librdkafka: ")[1] for _level, text in lines()][1:] == [
        "the last message repeated 8 more times in 320 s"
    ]

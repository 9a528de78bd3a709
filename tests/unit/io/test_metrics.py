"""The provider's metrics reach a StatsD server through Airflow's own Stats, as a task process sends them.

A child process initialises Airflow's Stats the way the task runner does, from ``[metrics]`` settings
pointing at a UDP socket of this test, and sends the metrics of a switch and of both sensors' decisions.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

SEND = textwrap.dedent(
    """
    try:
        from airflow.sdk.observability import stats
        from airflow.sdk.observability.metrics import stats_utils
    except ImportError:  # Airflow before 3.3: Stats sets itself up from [metrics] on first use
        pass
    else:
        stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)

    from airflow_kafka_failover.io import metrics

    metrics.switch_committed("orders", "failover", True, 100.0, 12, 340, now=103.5)
    metrics.switch_committed("orders", "failback", False, None, 0, None, now=200.0)
    metrics.down_detected("kafka_a", "A", 50.0, 54.25)
    metrics.down_detected("kafka_a", "A", None, 60.0)
    metrics.recovered("kafka_a", "A")
    print("sent")
    """
)


def _received() -> list[str]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(30)
        env = {
            **os.environ,
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(server.getsockname()[1]),
            "AIRFLOW__METRICS__STATSD_DATADOG_ENABLED": "False",
        }
        sent = subprocess.run(
            [sys.executable, "-c", SEND], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert sent.returncode == 0 and "sent" in sent.stdout, sent.stderr[-3000:]
        server.settimeout(2)
        packets = []
        try:
            while True:
                packets.extend(server.recv(65536).decode().splitlines())
        except TimeoutError:
            pass
    return packets


@pytest.mark.slow
def test_a_switch_and_the_sensor_decisions_send_their_metrics_to_statsd():
    ours = [packet for packet in _received() if ".kafka_failover." in packet]
    assert ours == [  # [metrics] statsd_prefix "airflow"; plain StatsD carries no tags
        "airflow.kafka_failover.switch:1|c",
        "airflow.kafka_failover.switch_duration:3500.000000|ms",
        "airflow.kafka_failover.gap_records:12|g",
        "airflow.kafka_failover.max_duplicates:340|g",
        "airflow.kafka_failover.switch:1|c",
        "airflow.kafka_failover.gap_records:0|g",
        "airflow.kafka_failover.down_detection:4250.000000|ms",
        "airflow.kafka_failover.recovered:1|c",
    ], ours


def test_sending_never_fails_the_caller(monkeypatch):
    from types import SimpleNamespace

    from airflow_kafka_failover.io import metrics

    def broken(*args, **kwargs):
        raise OSError("statsd host unreachable")

    warnings = []
    monkeypatch.setattr(metrics, "Stats", SimpleNamespace(incr=broken, gauge=broken, timing=broken))
    monkeypatch.setattr(metrics.log, "warning", lambda message, *args: warnings.append(message % args))
    metrics.recovered("kafka_a", "A")
    assert warnings == ["could not send metric kafka_failover.recovered: statsd host unreachable"]


@pytest.mark.parametrize("seconds", [-5.0, 0.0])
def test_a_clock_step_backwards_is_sent_as_zero(monkeypatch, seconds):
    from airflow_kafka_failover.io import metrics

    sent = []
    monkeypatch.setattr(metrics, "_send", lambda kind, name, value, tags: sent.append((name, value, tags)))
    metrics.down_detected("kafka_a", "A", 100.0, 100.0 + seconds)
    assert sent[0][0] == "down_detection" and sent[0][1].total_seconds() == 0.0
    assert sent[0][2] == {"connection": "kafka_a", "cluster": "A"}


def _commit(monkeypatch, already_committed: bool) -> list[tuple]:
    from airflow_kafka_failover.domain.active_record import ActiveRecord
    from airflow_kafka_failover.domain.config import parse_pair
    from airflow_kafka_failover.io import metrics
    from airflow_kafka_failover.switching import steps

    pair = parse_pair(
        "orders",
        {"clusters": {"A": {"connection": "a"}, "B": {"connection": "b"}}, "primary": "A", "topics": ["o"]},
    )
    sent: list[tuple] = []
    monkeypatch.setattr(metrics, "_send", lambda *metric: sent.append(metric))
    monkeypatch.setattr(
        steps,
        "commit_record",
        lambda pair, epoch, new, check=None: (
            ActiveRecord.initial("orders", "A") if already_committed else new
        ),
    )
    plan = {"summary": {"max_duplicates": 7}, "gap_records": 3, "source_watermarks": {"o-0": 10}}
    steps.commit(
        pair,
        steps.FAILOVER,
        ActiveRecord.initial("orders", "A"),
        {"cluster": "B", "epoch": 1, "checkpoint": "/ckpt", "run_dir": "/no/run"},
        plan,
        steps.SwitchParams(force=True, reason="maintenance"),
        "manual",
        fenced_at=time.time() - 2,
    )
    return sent


def test_a_committed_switch_sends_its_metrics_and_a_retried_commit_does_not(monkeypatch):
    sent = _commit(monkeypatch, already_committed=False)
    tags = {"pair": "orders", "kind": "failover", "forced": "true"}
    assert [(kind, name, tags_sent) for kind, name, _value, tags_sent in sent] == [
        ("incr", "switch", tags),
        ("timing", "switch_duration", tags),
        ("gauge", "gap_records", tags),
        ("gauge", "max_duplicates", tags),
    ]
    assert 2 <= sent[1][2].total_seconds() < 60 and (sent[2][2], sent[3][2]) == (3, 7)
    assert _commit(monkeypatch, already_committed=True) == []

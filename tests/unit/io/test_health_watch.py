"""The recovery watch reports a failed lag measurement by the exception's type, even when it has no text."""

from __future__ import annotations

import time

from airflow_kafka_failover.domain.health.evidence import ProbeResult
from airflow_kafka_failover.domain.health.verdict import HealthThresholds
from airflow_kafka_failover.io.health_watch import RecoveryWatch


def test_a_measurement_failing_without_text_names_the_exception_type(monkeypatch):
    watch = RecoveryWatch(
        cluster="A",
        kafka_config_id="kafka_a",
        topics=[],
        thresholds=HealthThresholds(),
        active_kafka_config_id="kafka_b",
        replicated_topics={"orders": "B.orders"},
        offset_syncs_topic="mm2-offset-syncs.A.internal",
    )
    answered = ProbeResult(cluster="A", at=time.time(), reachable=True, latency_s=0.01, broker_count=1)
    monkeypatch.setattr(watch, "probe", lambda at=None: answered)

    def times_out():
        raise TimeoutError()

    monkeypatch.setattr(watch, "_measure", times_out)
    watch.observe()
    assert watch.measure_problem == "could not measure replication lag: TimeoutError"
    decision = watch.decide()
    assert not decision.is_recovered
    assert (
        "replication lag: could not measure replication lag: TimeoutError (measured again at the next probe)"
        in decision.reason
    )
    assert "offset sync" not in decision.reason  # the unknown-lag explanation does not apply here


def test_only_renamed_replicas_count_as_mirrormaker_copies():
    def watch(replicated):
        return RecoveryWatch(
            cluster="A",
            kafka_config_id="kafka_a",
            topics=[],
            thresholds=HealthThresholds(),
            active_kafka_config_id="kafka_b",
            replicated_topics=replicated,
            offset_syncs_topic="mm2-offset-syncs.A.internal",
        )

    assert watch({"orders": "B.orders", "refunds": "B.refunds"}).mirror_copies() == {"B.orders", "B.refunds"}
    assert watch({"orders": "orders"}).mirror_copies() == set()  # identity: A's own topic too

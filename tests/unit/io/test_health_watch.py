"""The recovery watch reports a failed lag measurement by the exception's type, even when it has no text; the
watch's cadence returns its decision without waiting for observations still in flight."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from airflow_kafka_failover.domain.health.evidence import ProbeResult
from airflow_kafka_failover.domain.health.verdict import HealthThresholds
from airflow_kafka_failover.io.health_watch import RecoveryWatch, watch_until


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


class _FirstProbeHangs:
    """A watch whose first observation hangs until released; the second one decides."""

    def __init__(self) -> None:
        self.cluster = "A"
        self.thresholds = SimpleNamespace(probe_interval_seconds=0.05)
        self.release, self.first_ended = threading.Event(), threading.Event()
        self.observed = 0

    def observe(self, tick: float) -> None:
        self.observed += 1
        if self.observed == 1:
            self.release.wait(timeout=30)
            self.first_ended.set()

    def decide(self) -> str:
        return "down" if self.observed >= 2 else "undecided"

    def conclusive(self, decision: str) -> bool:
        return decision == "down"


def test_the_decision_does_not_wait_for_an_observation_still_in_flight():
    """A probe of a dead cluster waiting out its timeout must not hold up the verdict (poke mode, and
    ``dag.test()``, run the cadence with ``asyncio.run``, which would wait for the loop's shared threads)."""
    watch = _FirstProbeHangs()
    try:
        assert watch_until(watch, time.time() + 20) == "down"
        assert not watch.first_ended.is_set()
    finally:
        watch.release.set()
    assert watch.first_ended.wait(timeout=5)

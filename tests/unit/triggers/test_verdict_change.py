"""ClusterVerdictTrigger without a cluster: serialization, events on verdict changes only, the error path."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from airflow.triggers.base import BaseEventTrigger
from akf_devtools.sandbox.loopback import free_ports

from airflow_kafka_failover.domain.health.verdict import HealthThresholds
from airflow_kafka_failover.triggers import verdict_change
from airflow_kafka_failover.triggers.verdict_change import ClusterVerdictTrigger

DOWN_WATCH_KWARGS = {
    "cluster": "A",
    "kafka_config_id": "dead_kafka",
    "topics": ["orders"],
    "canary_topic": None,
    "peer_kafka_config_id": None,
    "heartbeats_topic": None,
    "require_corroboration": False,
}
QUICK = {
    "probe_interval_seconds": 0.5,
    "probe_timeout_seconds": 0.5,
    "min_down_seconds": 1.0,
    "heartbeat_stale_seconds": 2.0,
    "stability_window_seconds": 2.0,
}


def _trigger(**overrides: Any) -> ClusterVerdictTrigger:
    kwargs: dict[str, Any] = {"kind": "down", "watch_kwargs": DOWN_WATCH_KWARGS, "thresholds": QUICK}
    kwargs.update(overrides)
    return ClusterVerdictTrigger(**kwargs)


async def _events(
    trigger: ClusterVerdictTrigger,
    count: int,
    within: float,
    until: Callable[[], bool] | None = None,
) -> list[dict[str, Any]]:
    """The first ``count`` payloads the trigger yields, or those it yielded once ``until()`` held.

    ``until`` ends the wait on what the watch has seen, not on the clock: a loaded machine observes more
    slowly, and a test that counted on a number of observations within a second failed in CI.
    ``within`` only bounds a test that went wrong.
    """
    got: list[dict[str, Any]] = []

    async def collect() -> None:
        async for event in trigger.run():
            got.append(event.payload)
            if len(got) == count:
                return

    task = asyncio.ensure_future(collect())
    deadline = asyncio.get_running_loop().time() + within
    while not task.done() and asyncio.get_running_loop().time() < deadline:
        if until is not None and until():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return got


@dataclass
class _Decision:
    reason: str
    is_down: bool

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        return {"reason": self.reason, "is_down": self.is_down}


@dataclass
class _ScriptedWatch:
    """A watch whose verdicts follow a script, one per observation; the last one holds from then on."""

    script: list[bool]
    cluster: str = "A"
    thresholds: HealthThresholds = field(
        default_factory=lambda: HealthThresholds.from_dict({"probe_interval_seconds": 0.01})
    )
    seen: int = 0

    def observe(self, at: float | None = None) -> None:
        self.seen += 1

    def decide(self, now: float | None = None) -> _Decision:
        down = self.script[min(self.seen, len(self.script)) - 1] if self.seen else False
        return _Decision(f"observation {self.seen}: {'down' if down else 'up'}", down)

    def conclusive(self, decision: _Decision) -> bool:
        return decision.is_down

    def state(self) -> dict[str, Any]:
        return {"history": [], "observations": self.seen}


def test_serialize_round_trips_and_keeps_the_event_trigger_hash():
    trigger = _trigger(error_backoff_seconds=5.0)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_kafka_failover.triggers.verdict_change.ClusterVerdictTrigger"
    json.dumps(kwargs)  # only JSON types cross the triggerer boundary
    again = ClusterVerdictTrigger(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    assert isinstance(trigger, BaseEventTrigger)
    # The triggerer tells event triggers apart by this hash: every parse of the DAG must give the same one.
    assert BaseEventTrigger.hash(classpath, kwargs) == BaseEventTrigger.hash(
        *_trigger(error_backoff_seconds=5.0).serialize()
    )


@pytest.mark.parametrize(
    ("kind", "backoff", "message"),
    [("up", 60.0, "unknown watch kind 'up'"), ("down", 0, "error_backoff_seconds must be > 0, got 0")],
)
def test_bad_arguments_are_refused_by_name(kind, backoff, message):
    with pytest.raises(ValueError, match=message):
        _trigger(kind=kind, error_backoff_seconds=backoff)


@pytest.mark.slow
def test_yields_when_the_verdict_becomes_down_and_not_again_until_it_changed(monkeypatch):
    # up, up, DOWN, down, down, up, up, DOWN, then down for good: two changes to down, two events.
    watch = _ScriptedWatch([False, False, True, True, True, False, False, True])
    monkeypatch.setattr(verdict_change, "build_watch", lambda *args: watch)
    events = asyncio.run(_events(_trigger(), count=3, within=30, until=lambda: watch.seen > 20))
    assert [event["status"] for event in events] == ["success", "success"]
    assert [event["message"] for event in events] == ["observation 3: down", "observation 8: down"]
    assert all(event["kind"] == "down" and event["decision"]["is_down"] for event in events)
    assert watch.seen > 20  # it kept watching after the second event without yielding a third


@dataclass
class _Probe:
    failed: bool


@dataclass
class _RecoveryScript(_ScriptedWatch):
    """Each step: (recovered, newest probe failed); a lag flap is not recovered without a failed probe."""

    steps: list[tuple[bool, bool]] = field(default_factory=list)
    history: list[_Probe] = field(default_factory=list)

    def observe(self, at: float | None = None) -> None:
        super().observe(at)
        self.history.append(_Probe(self.steps[min(self.seen, len(self.steps)) - 1][1]))

    def decide(self, now: float | None = None) -> _Decision:
        recovered = self.steps[min(self.seen, len(self.steps)) - 1][0] if self.seen else False
        return _Decision(
            f"observation {self.seen}: {'recovered' if recovered else 'not recovered'}", recovered
        )


@pytest.mark.slow
def test_a_recovered_verdict_wakes_again_only_after_the_cluster_failed_again(monkeypatch):
    ok, lagging, failed = (True, False), (False, False), (False, True)
    # recovered; two lag flaps (no failed probe: no new event); a failure; recovered again: the 2nd event.
    steps = [ok, lagging, ok, lagging, ok, failed, lagging, ok]
    watch = _RecoveryScript(script=[], steps=steps)
    monkeypatch.setattr(verdict_change, "build_watch", lambda *args: watch)
    events = asyncio.run(
        _events(_trigger(kind="recovered"), count=3, within=30, until=lambda: watch.seen > 2 * len(steps))
    )
    assert [event["message"] for event in events] == ["observation 1: recovered", "observation 8: recovered"]
    assert all(event["kind"] == "recovered" for event in events)


@pytest.mark.slow
def test_a_verdict_that_holds_from_the_start_wakes_once(monkeypatch):
    watch = _ScriptedWatch([True])
    monkeypatch.setattr(verdict_change, "build_watch", lambda *args: watch)
    events = asyncio.run(_events(_trigger(), count=2, within=30, until=lambda: watch.seen > 20))
    assert len(events) == 1 and events[0]["message"] == "observation 1: down"


def test_a_failing_watch_yields_one_error_per_distinct_message_then_starts_again(monkeypatch):
    attempts: list[int] = []

    def build(*args: Any) -> _ScriptedWatch:
        attempts.append(1)
        if len(attempts) <= 3:
            raise RuntimeError("connection 'dead_kafka' is not defined")
        return _ScriptedWatch([False, True])

    monkeypatch.setattr(verdict_change, "build_watch", build)
    events = asyncio.run(_events(_trigger(error_backoff_seconds=0.05), count=2, within=30))
    assert events[0] == {
        "status": "error",
        "kind": "down",
        "message": "RuntimeError: connection 'dead_kafka' is not defined",
    }
    assert events[1]["status"] == "success" and events[1]["message"] == "observation 2: down"
    assert len(attempts) == 4  # three failures, one error event, then a watch that worked


@pytest.mark.slow
def test_an_unreachable_cluster_yields_a_real_down_event_with_its_evidence(monkeypatch):
    port = free_ports(1)[0]
    monkeypatch.setenv(
        "AIRFLOW_CONN_DEAD_KAFKA",
        json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": f"127.0.0.1:{port}"}}),
    )
    [event] = asyncio.run(_events(_trigger(), count=1, within=30))
    assert event["status"] == "success" and event["decision"]["is_down"] is True
    history = event["state"]["history"]
    assert len(history) >= 3 and not any(probe["reachable"] for probe in history)
    assert event["observed_at"] > history[-1]["at"] - 1

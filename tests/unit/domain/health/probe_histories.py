"""Probe histories, thresholds and heartbeat trails shared by the health tests.

Generated (hypothesis strategies) or built by hand, with plain restatements of the rules that the
properties in test_verdict.py and test_decisions.py compare the implementation with.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from airflow_kafka_failover.domain.health.evidence import ProbeResult
from airflow_kafka_failover.domain.health.heartbeats import HeartbeatMeasure, HeartbeatTrail
from airflow_kafka_failover.domain.health.verdict import SPAN_TOLERANCE_S, HealthThresholds

BASE = 1_700_000_000.0
DEFAULTS = HealthThresholds()
# Slower probing (a 5 s probe timeout, heartbeats stale after 10 s): scenarios written for these timings.
SLOW_PROBES = HealthThresholds(probe_timeout_seconds=5.0, heartbeat_stale_seconds=10.0)


def probe(at: float, outcome: str = "ok", cluster: str = "A") -> ProbeResult:
    """Build a probe at ``BASE + at``: ``ok``, ``fail`` (no answer), ``degraded`` (a partition without a
    leader: the metadata says the job cannot read it) or ``unreadable`` (a leader that did not answer)."""
    if outcome == "fail":
        return ProbeResult(
            cluster=cluster,
            at=BASE + at,
            reachable=False,
            latency_s=None,
            broker_count=0,
            error="Local: Broker transport failure",
        )
    if outcome == "degraded":
        return ProbeResult(
            cluster=cluster,
            at=BASE + at,
            reachable=True,
            latency_s=0.02,
            broker_count=3,
            leaderless_partitions=("orders-0",),
        )
    if outcome == "unreadable":
        return ProbeResult(
            cluster=cluster,
            at=BASE + at,
            reachable=True,
            latency_s=0.02,
            broker_count=3,
            unreadable_partitions=("orders-1 (leader 2: no answer within 2 s)",),
        )
    return ProbeResult(cluster=cluster, at=BASE + at, reachable=True, latency_s=0.01, broker_count=3)


def every(start: float, stop: float, outcome: str = "ok", step: float = 2.0) -> list[ProbeResult]:
    """Probes from ``start`` (inclusive) to ``stop`` (exclusive) every ``step`` seconds."""
    return [probe(start + i * step, outcome) for i in range(math.ceil((stop - start) / step))]


OUTCOMES = st.sampled_from(["ok", "fail", "degraded", "unreadable"])


@st.composite
def histories(
    draw: st.DrawFn, max_dt: float = 12.0, min_size: int = 1, max_size: int = 40
) -> tuple[list[ProbeResult], float]:
    """A probe history as (time step, outcome) pairs, and a ``now`` at or after its newest probe."""
    steps = draw(st.lists(st.tuples(st.floats(0.0, max_dt), OUTCOMES), min_size=min_size, max_size=max_size))
    history, at = [], 0.0
    for dt, outcome in steps:
        at += dt
        history.append(probe(at, outcome))
    now = history[-1].at + draw(st.floats(0.0, 12.0))
    return history, now


@st.composite
def thresholds(draw: st.DrawFn) -> HealthThresholds:
    """Valid thresholds, with the defaults weighted in."""
    if draw(st.booleans()):
        return DEFAULTS
    interval = draw(st.floats(0.5, 5.0))
    timeout = draw(st.floats(0.5, 8.0))
    gap = 2 * interval + timeout
    return HealthThresholds(
        failure_threshold=draw(st.integers(1, 6)),
        min_down_seconds=draw(st.floats(0.5, 30.0)),
        probe_interval_seconds=interval,
        stability_window_seconds=gap + draw(st.floats(0.0, 40.0)),
        max_replication_lag=draw(st.integers(0, 5)),
        probe_timeout_seconds=timeout,
        heartbeat_stale_seconds=gap + draw(st.floats(0.0, 10.0)),
        leader_failover_seconds=draw(st.floats(0.0, 30.0)),
    ).validate()


# ---------------------------------------------------------------------------------------------------
# Plain restatements of the rules


def trailing(
    history: Sequence[ProbeResult], belongs: str | Callable[[ProbeResult], bool], max_gap: float
) -> list[ProbeResult]:
    """The newest probes that all have ``belongs`` true, with no gap over ``max_gap`` between them."""
    ordered = sorted(history, key=lambda p: p.at)
    test = belongs if callable(belongs) else (lambda p: getattr(p, belongs))
    run: list[ProbeResult] = []
    for p in reversed(ordered):
        if not test(p) or (run and run[0].at - p.at > max_gap):
            break
        run.insert(0, p)
    return run


def in_trouble(p: ProbeResult) -> bool:
    """Failed, or answered without serving some partitions: anything but OK."""
    return not p.ok


def cannot_serve(p: ProbeResult) -> bool:
    """Failed, or the metadata says some partitions cannot be served (no leader)."""
    return p.failed or bool(p.leaderless_partitions or p.under_min_isr_partitions)


def naive_trailing_failures(history: Sequence[ProbeResult]) -> list[ProbeResult]:
    """Trailing probes in trouble ignoring probing gaps: the most generous count possible."""
    return trailing(history, in_trouble, math.inf)


def newest(history: Sequence[ProbeResult]) -> ProbeResult:
    return max(history, key=lambda p: p.at)


def probes_say_down(history: Sequence[ProbeResult], t: HealthThresholds, now: float) -> bool:
    """Down: enough failed or unservable probes over ``min_down_seconds``, or enough probes in any
    trouble (reads that failed included) over ``min_down_seconds + leader_failover_seconds``."""
    if now - newest(history).at > t.max_probe_gap:
        return False

    def long_enough(run: list[ProbeResult], seconds: float) -> bool:
        return (
            len(run) >= t.failure_threshold
            and bool(run)
            and newest(history).at - run[0].at >= seconds - SPAN_TOLERANCE_S
        )

    return long_enough(trailing(history, cannot_serve, t.max_probe_gap), t.min_down_seconds) or long_enough(
        trailing(history, in_trouble, t.max_probe_gap), t.min_down_seconds + t.leader_failover_seconds
    )


def stable_for_window(history: Sequence[ProbeResult], t: HealthThresholds, now: float) -> bool:
    run = trailing(history, "ok", t.max_probe_gap)
    return (
        bool(run)
        and now - newest(history).at <= t.max_probe_gap
        and now - run[0].at >= t.stability_window_seconds
    )


def stopped_heartbeats(now: float, last_heartbeat_at: float = -100.0) -> HeartbeatTrail:
    """Heartbeats looked at every 2 s until ``now``, the newest one written at ``last_heartbeat_at``."""
    looks = [(BASE + now - 2 * i, int((BASE + last_heartbeat_at) * 1000)) for i in range(30)]
    return HeartbeatTrail.from_pairs(looks)


def advancing_heartbeats(now: float, start: float = 0.0) -> HeartbeatTrail:
    """Heartbeats looked at every second up to ``now``, each look seeing one written a second before."""
    looks = [(BASE + at, int((BASE + at - 1) * 1000)) for at in _frange(start, now)]
    return HeartbeatTrail.from_pairs(looks)


def _frange(start: float, stop: float, step: float = 1.0) -> list[float]:
    return [start + i * step for i in range(int((stop - start) / step) + 1)]


@st.composite
def advancing_trails(draw: st.DrawFn, now: float, t: HealthThresholds) -> HeartbeatTrail:
    """Heartbeat trails that show life now: a fresh timestamp, or an increase seen within the stale time."""
    measure = draw(st.sampled_from(list(HeartbeatMeasure)))
    # A hair inside each limit: `now - (now - x)` can exceed x by a rounding error.
    newest_look = now - draw(st.floats(0.0, t.max_probe_gap * 0.999))
    if measure is HeartbeatMeasure.TIMESTAMP_MS and draw(st.booleans()):
        written = now - draw(st.floats(0.0, t.heartbeat_stale_seconds * 0.999))
        return HeartbeatTrail.from_pairs([(newest_look, int(math.ceil(written * 1000)))], measure)
    increased_at = min(newest_look, now - draw(st.floats(0.0, t.heartbeat_stale_seconds * 0.999)))
    earlier = increased_at - draw(st.floats(0.1, 30.0))
    looks = [(earlier, 1000), (increased_at, 1001), (newest_look, 1001)]
    return HeartbeatTrail.from_pairs(looks, measure)

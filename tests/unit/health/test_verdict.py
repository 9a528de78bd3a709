"""Health verdicts and sensor decisions, checked over generated probe histories.

The properties compare the implementation with a plain restatement of each rule written here, so a
change of rule shows up as a failing property rather than as a silently different sensor.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_kafka_failover.exceptions import ConfigError, DataLossError
from airflow_kafka_failover.health.evidence import ProbeResult
from airflow_kafka_failover.health.verdict import (
    DownDecision,
    HealthState,
    HealthThresholds,
    HeartbeatMeasure,
    HeartbeatState,
    HeartbeatTrail,
    RecoveryDecision,
    decide_down,
    decide_recovered,
    find_data_loss,
    judge,
    recent_history,
    replication_lag,
)

BASE = 1_700_000_000.0
DEFAULTS = HealthThresholds()


def probe(at: float, outcome: str = "ok", cluster: str = "A") -> ProbeResult:
    """Build a probe of one of the three outcomes at ``BASE + at``."""
    if outcome == "fail":
        return ProbeResult(cluster, BASE + at, False, None, 0, error="Local: Broker transport failure")
    if outcome == "degraded":
        return ProbeResult(cluster, BASE + at, True, 0.02, 3, leaderless_partitions=("orders-0",))
    return ProbeResult(cluster, BASE + at, True, 0.01, 3)


def every(start: float, stop: float, outcome: str = "ok", step: float = 2.0) -> list[ProbeResult]:
    """Probes from ``start`` (inclusive) to ``stop`` (exclusive) every ``step`` seconds."""
    return [probe(start + i * step, outcome) for i in range(math.ceil((stop - start) / step))]


OUTCOMES = st.sampled_from(["ok", "fail", "degraded"])


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
        probe_interval=interval,
        stability_window=gap + draw(st.floats(0.0, 40.0)),
        max_replication_lag=draw(st.integers(0, 5)),
        probe_timeout=timeout,
        heartbeat_stale_seconds=gap + draw(st.floats(0.0, 10.0)),
    ).validate()


# ---------------------------------------------------------------------------------------------------
# Plain restatements of the rules


def trailing(history: Sequence[ProbeResult], belongs: str, max_gap: float) -> list[ProbeResult]:
    """The newest probes that all have ``belongs`` true, with no gap over ``max_gap`` between them."""
    ordered = sorted(history, key=lambda p: p.at)
    run: list[ProbeResult] = []
    for p in reversed(ordered):
        if not getattr(p, belongs) or (run and run[0].at - p.at > max_gap):
            break
        run.insert(0, p)
    return run


def naive_trailing_failures(history: Sequence[ProbeResult]) -> list[ProbeResult]:
    """Trailing failed probes ignoring probing gaps: the most generous count possible."""
    return trailing(history, "failed", math.inf)


def newest(history: Sequence[ProbeResult]) -> ProbeResult:
    return max(history, key=lambda p: p.at)


def probes_say_down(history: Sequence[ProbeResult], t: HealthThresholds, now: float) -> bool:
    run = trailing(history, "failed", t.max_probe_gap)
    return (
        now - newest(history).at <= t.max_probe_gap
        and len(run) >= t.failure_threshold
        and newest(history).at - run[0].at >= t.min_down_seconds
    )


def stable_for_window(history: Sequence[ProbeResult], t: HealthThresholds, now: float) -> bool:
    run = trailing(history, "ok", t.max_probe_gap)
    return bool(run) and now - newest(history).at <= t.max_probe_gap and now - run[0].at >= t.stability_window


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


# ---------------------------------------------------------------------------------------------------
# judge: down only on enough failures over enough time


@given(histories(), thresholds())
def test_down_exactly_when_enough_recent_failures_span_enough_time(
    case: tuple[list[ProbeResult], float], t: HealthThresholds
) -> None:
    history, now = case
    verdict = judge(history, t, now)
    assert (verdict.state is HealthState.DOWN) == probes_say_down(history, t, now)


@given(histories(), thresholds())
def test_never_down_with_too_few_failures_or_too_short_a_span(
    case: tuple[list[ProbeResult], float], t: HealthThresholds
) -> None:
    history, now = case
    verdict = judge(history, t, now)
    naive = naive_trailing_failures(history)
    if len(naive) < t.failure_threshold or not naive or newest(history).at - naive[0].at < t.min_down_seconds:
        assert verdict.state is not HealthState.DOWN
    if verdict.state is HealthState.DOWN:
        assert verdict.consecutive_failures >= t.failure_threshold
        assert verdict.failing_since is not None
        assert newest(history).at - verdict.failing_since >= t.min_down_seconds


@given(histories(), thresholds(), st.sampled_from(["ok", "degraded"]), st.floats(0.0, 3.0))
def test_a_single_answer_resets_the_failure_run(
    case: tuple[list[ProbeResult], float], t: HealthThresholds, outcome: str, dt: float
) -> None:
    history, _ = case
    answered = probe(newest(history).at - BASE + dt, outcome)
    verdict = judge([*history, answered], t, answered.at)
    assert verdict.state is not HealthState.DOWN
    assert verdict.consecutive_failures == 0 and verdict.failing_since is None
    decision = decide_down(
        [*history, answered], stopped_heartbeats(answered.at - BASE), t, answered.at, False
    )
    assert not decision.is_down


@given(
    before=st.integers(0, 20),
    blip=st.integers(1, 2),
    after=st.integers(0, 20),
    jitter=st.floats(0.0, 1.99),
)
def test_a_two_second_blip_is_never_down_with_defaults(
    before: int, blip: int, after: int, jitter: float
) -> None:
    outcomes = ["ok"] * before + ["fail"] * blip + ["ok"] * after
    history = [probe(2.0 * i, outcome) for i, outcome in enumerate(outcomes)]
    for end in range(1, len(history) + 1):
        prefix = history[:end]
        now = prefix[-1].at + jitter
        assert judge(prefix, DEFAULTS, now).state is not HealthState.DOWN
        # Even with heartbeats stopped and no corroboration required: a blip is not an outage.
        assert not decide_down(prefix, stopped_heartbeats(now - BASE), DEFAULTS, now, False).is_down


def test_defaults_call_down_on_the_fourth_failure_at_two_second_interval() -> None:
    history = every(0, 10) + every(10, 18, "fail")  # failures at 10, 12, 14, 16
    assert judge(history[:-1], DEFAULTS, BASE + 14.5).state is HealthState.DEGRADED  # 3 over 4 s
    verdict = judge(history, DEFAULTS, BASE + 16.5)
    assert verdict.state is HealthState.DOWN
    assert verdict.consecutive_failures == 4 and verdict.failing_since == BASE + 10
    assert "the last 4 probes failed" in verdict.reason and "22:13:30.0 UTC" in verdict.reason


def test_a_gap_in_probing_restarts_the_failure_run() -> None:
    history = [probe(0, "fail"), probe(2, "fail"), probe(20, "fail"), probe(22, "fail")]
    verdict = judge(history, DEFAULTS, BASE + 22)
    assert verdict.state is HealthState.DEGRADED
    assert verdict.consecutive_failures == 2
    assert "18.0 s gap in probing" in verdict.reason


def test_old_evidence_supports_neither_healthy_nor_down() -> None:
    assert judge([], DEFAULTS, BASE).state is HealthState.DEGRADED
    failing = every(0, 20, "fail")
    assert judge(failing, DEFAULTS, BASE + 18).state is HealthState.DOWN
    stale = judge(failing, DEFAULTS, BASE + 18 + DEFAULTS.max_probe_gap + 0.1)
    assert stale.state is HealthState.DEGRADED and "no recent evidence" in stale.reason


def test_degraded_probe_explains_which_partitions() -> None:
    verdict = judge([probe(0, "degraded")], DEFAULTS, BASE)
    assert verdict.state is HealthState.DEGRADED
    assert "1 partition(s) without a leader (orders-0)" in verdict.reason


def test_a_history_of_two_clusters_is_refused() -> None:
    with pytest.raises(ValueError, match=r"\['A', 'B'\]"):
        judge([probe(0), probe(2, cluster="B")], DEFAULTS, BASE + 2)


# ---------------------------------------------------------------------------------------------------
# Heartbeat trails


def test_heartbeat_trail_states() -> None:
    t, now = DEFAULTS, BASE + 100
    assert HeartbeatTrail().assess(t, now).state is HeartbeatState.UNKNOWN
    unreachable = HeartbeatTrail(unavailable_reason="cluster B is unreachable too").assess(t, now)
    assert (
        unreachable.state is HeartbeatState.UNKNOWN and "cluster B is unreachable too" in unreachable.reason
    )
    old_look = HeartbeatTrail.from_pairs([(now - 30, int(now * 1000))]).assess(t, now)
    assert old_look.state is HeartbeatState.UNKNOWN and "30.0 s old" in old_look.reason
    fresh = HeartbeatTrail.from_pairs([(now, int((now - 3) * 1000))]).assess(t, now)
    assert fresh.state is HeartbeatState.ADVANCING
    old = HeartbeatTrail.from_pairs([(now, int((now - 11) * 1000))]).assess(t, now)
    assert old.state is HeartbeatState.STOPPED


def test_heartbeat_offsets_need_watching_for_the_stale_time() -> None:
    t, now = DEFAULTS, BASE + 100
    short = HeartbeatTrail.from_pairs([(now - 4, 50), (now - 2, 50), (now, 50)], "offset").assess(t, now)
    assert short.state is HeartbeatState.UNKNOWN and short.pending and "only 4.0 s" in short.reason
    looks = [(now - 2 * i, 50) for i in range(6)]
    assert HeartbeatTrail.from_pairs(looks, "offset").assess(t, now).state is HeartbeatState.STOPPED
    rising = [(now - 2 * i, 50 - i) for i in range(6)]
    assert HeartbeatTrail.from_pairs(rising, "offset").assess(t, now).state is HeartbeatState.ADVANCING
    # A lower offset (a recreated topic) is not progress.
    falling = [(now - 2 * i, 50 + i) for i in range(6)]
    assert HeartbeatTrail.from_pairs(falling, "offset").assess(t, now).state is HeartbeatState.STOPPED


def test_an_increase_long_ago_does_not_keep_heartbeats_advancing() -> None:
    # In-flight heartbeats arrive after the cluster died; one arrival must not block failover forever.
    t, now = DEFAULTS, BASE + 100
    looks = [(now - 40, 10), (now - 38, 11)] + [(now - 2 * i, 11) for i in range(19)]
    assert HeartbeatTrail.from_pairs(looks, "offset").assess(t, now).state is HeartbeatState.STOPPED


# ---------------------------------------------------------------------------------------------------
# decide_down: corroboration and network splits


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


@settings(max_examples=200)
@given(st.data(), histories(), thresholds(), st.booleans())
def test_heartbeats_advancing_is_never_down(
    data: st.DataObject, case: tuple[list[ProbeResult], float], t: HealthThresholds, require: bool
) -> None:
    history, now = case
    trail = data.draw(advancing_trails(now, t))
    assert trail.assess(t, now).state is HeartbeatState.ADVANCING
    decision = decide_down(history, trail, t, now, require_corroboration=require)
    assert not decision.is_down
    if decision.split_suspected:
        assert "NETWORK SPLIT SUSPECTED" in decision.reason


def test_a_long_split_is_flagged_with_a_warning() -> None:
    history = every(0, 30) + every(30, 60, "fail")
    now = BASE + 58
    decision = decide_down(history, advancing_heartbeats(now - BASE), DEFAULTS, now)
    assert not decision.is_down and decision.split_suspected
    assert decision.heartbeats is HeartbeatState.ADVANCING
    assert "NETWORK SPLIT SUSPECTED" in decision.reason and "check the network" in decision.reason


@settings(max_examples=60)
@given(
    died_at=st.floats(30.0, 32.0),
    replication_delay=st.floats(0.0, 3.0),
    first_probe_after=st.floats(0.0, 2.0),
    measure=st.sampled_from(list(HeartbeatMeasure)),
)
def test_a_dead_cluster_is_declared_down_without_a_split_alarm(
    died_at: float, replication_delay: float, first_probe_after: float, measure: HeartbeatMeasure
) -> None:
    """Cluster A dies; its last heartbeats reach B late. No false split alarm on the way to "down"."""
    heartbeats_written = _frange(0.0, died_at)
    probes = every(0, died_at) + every(died_at + first_probe_after, 80, "fail")
    down_at = None
    for now in _frange(died_at, 80, 0.5):
        looks = []
        for look_at in _frange(4.0, now, 2.0):
            arrived = [w for w in heartbeats_written if w + replication_delay <= look_at]
            value = (
                int((BASE + arrived[-1]) * 1000) if measure is HeartbeatMeasure.TIMESTAMP_MS else len(arrived)
            )
            looks.append((BASE + look_at, value))
        trail = HeartbeatTrail.from_pairs(looks, measure)
        decision = decide_down([p for p in probes if p.at <= BASE + now], trail, DEFAULTS, BASE + now)
        assert not decision.split_suspected, decision.reason
        if decision.is_down and down_at is None:
            down_at = now
    assert down_at is not None
    # Down once heartbeats are stale (plus a look and the offset watch when there is no timestamp).
    assert (
        down_at - died_at <= DEFAULTS.heartbeat_stale_seconds + replication_delay + 2 * DEFAULTS.max_probe_gap
    )


def test_stopped_heartbeats_corroborate_down() -> None:
    history = every(0, 30) + every(30, 50, "fail")
    decision = decide_down(history, stopped_heartbeats(48, last_heartbeat_at=29), DEFAULTS, BASE + 48)
    assert decision.is_down and not decision.split_suspected
    assert (
        decision.heartbeats is HeartbeatState.STOPPED and "Corroborated by MirrorMaker 2" in decision.reason
    )


def test_fresh_heartbeats_early_in_the_failure_mean_wait_not_split() -> None:
    history = every(0, 30) + every(30, 38, "fail")  # down by probes at 36
    decision = decide_down(history, stopped_heartbeats(36, last_heartbeat_at=29.5), DEFAULTS, BASE + 36)
    assert not decision.is_down and not decision.split_suspected
    assert decision.reason.startswith("not down yet")


def test_heartbeats_watched_too_briefly_mean_wait_whatever_the_policy() -> None:
    # The watch began (say, after a triggerer restart) when the offset had already stopped at 30.
    history = every(0, 30) + every(30, 38, "fail")  # down by probes at 36
    looks = [(BASE + at, 30) for at in _frange(32, 36, 2.0)]
    for require in (True, False):
        trail = HeartbeatTrail.from_pairs(looks, "offset")
        decision = decide_down(history, trail, DEFAULTS, BASE + 36, require)
        assert not decision.is_down and not decision.split_suspected
        assert decision.reason.startswith("not down yet") and "not for long enough" in decision.reason
    later = every(0, 30) + every(30, 44, "fail")
    looks = [(BASE + at, 30) for at in _frange(32, 42, 2.0)]
    assert decide_down(later, HeartbeatTrail.from_pairs(looks, "offset"), DEFAULTS, BASE + 42).is_down


@pytest.mark.parametrize(
    ("trail", "why"),
    [
        (None, "no MirrorMaker 2 heartbeats"),
        (HeartbeatTrail(unavailable_reason="cluster B is unreachable"), "cluster B is unreachable"),
    ],
)
def test_missing_corroboration_follows_the_callers_policy(trail: HeartbeatTrail | None, why: str) -> None:
    history = every(0, 20, "fail")
    strict = decide_down(history, trail, DEFAULTS, BASE + 18, require_corroboration=True)
    assert not strict.is_down and not strict.split_suspected
    assert "corroboration is unavailable" in strict.reason and why in strict.reason
    assert "require_corroboration=True" in strict.reason
    lenient = decide_down(history, trail, DEFAULTS, BASE + 18, require_corroboration=False)
    assert lenient.is_down and "corroboration is unavailable" in lenient.reason and why in lenient.reason
    assert lenient.heartbeats is HeartbeatState.UNKNOWN


# ---------------------------------------------------------------------------------------------------
# decide_recovered: stability, lag, data loss


@given(histories(max_dt=6.0), thresholds())
def test_recovered_exactly_when_the_whole_window_is_covered_by_ok_probes(
    case: tuple[list[ProbeResult], float], t: HealthThresholds
) -> None:
    history, now = case
    decision = decide_recovered(history, t, now, {"orders-0": 0}, {})
    assert decision.is_recovered == stable_for_window(history, t, now)
    if decision.is_recovered:
        window = [p for p in history if now - p.at <= t.stability_window]
        assert all(p.ok for p in window)
        assert any(p.ok and now - p.at >= t.stability_window for p in history)
        ordered = sorted(p.at for p in history if now - p.at <= t.stability_window + t.max_probe_gap)
        assert all(b - a <= t.max_probe_gap for a, b in zip(ordered, ordered[1:], strict=False))
    else:
        assert any(item.startswith("stability") for item in decision.waiting_on)


def test_a_probing_gap_inside_the_window_is_not_evidence_of_health() -> None:
    # Decision: 2 x probe_interval + probe_timeout (9 s by default) is the longest gap still counted
    # as continuous observation; a longer one restarts the stability window.
    just_fits = every(0, 41) + every(49, 62)  # ... 38, 40, then 49, 51 ...: a 9 s gap
    assert decide_recovered(just_fits, DEFAULTS, BASE + 61, {"orders-0": 0}, {}).is_recovered
    too_long = every(0, 41) + every(50, 62)  # ... 38, 40, then 50, 52 ...: a 10 s gap
    decision = decide_recovered(too_long, DEFAULTS, BASE + 60, {"orders-0": 0}, {})
    assert not decision.is_recovered
    assert decision.waiting_on[0].startswith("stability: OK without interruption for 10.0 s")
    assert "10.0 s gap in probing" in decision.reason


def test_one_failed_or_degraded_probe_inside_the_window_restarts_it() -> None:
    for outcome in ("fail", "degraded"):
        history = every(0, 62)
        history[20] = probe(40, outcome)
        decision = decide_recovered(history, DEFAULTS, BASE + 60, {"orders-0": 0}, {})
        assert not decision.is_recovered and decision.waiting_on[0].startswith("stability")
        later = every(62, 74) + history
        assert decide_recovered(later, DEFAULTS, BASE + 72, {"orders-0": 0}, {}).is_recovered


def test_recovered_waits_on_lag_and_names_each_partition() -> None:
    history = every(0, 40)
    lags = {"A.orders-0": 0, "A.orders-1": 7, "A.orders-2": None}
    decision = decide_recovered(history, DEFAULTS, BASE + 38, lags, {})
    assert not decision.is_recovered
    assert decision.waiting_on == [
        "replication lag A.orders-1: 7 records behind (at most 0 allowed)",
        "replication lag A.orders-2: unknown"
        " (no usable MirrorMaker 2 offset sync while the source has records)",
    ]
    assert decide_recovered(
        history, HealthThresholds(max_replication_lag=7), BASE + 38, lags, {}
    ).waiting_on == [decision.waiting_on[1]]
    assert not decide_recovered(history, DEFAULTS, BASE + 38, {}, {}).is_recovered
    assert decide_recovered(history, DEFAULTS, BASE + 38, {"A.orders-0": 0}, {}).is_recovered


def test_data_loss_refuses_failback_even_when_healthy_and_caught_up() -> None:
    loss = find_data_loss({"orders-0": 100, "orders-1": 50, "orders-2": 9}, {"orders-0": 88, "orders-1": 50})
    assert loss == {"orders-0": 12, "orders-2": 9}
    decision = decide_recovered(every(0, 40), DEFAULTS, BASE + 38, {"orders-0": 0}, loss)
    assert not decision.is_recovered and decision.data_loss == loss
    assert "DATA LOSS on cluster A, failback refused" in decision.reason
    assert "orders-0 lost 12 record(s), orders-2 lost 9 record(s); 21 in total" in decision.reason
    error = decision.data_loss_error()
    assert isinstance(error, DataLossError) and "failback refused" in str(error)
    assert decide_recovered(every(0, 40), DEFAULTS, BASE + 38, {"orders-0": 0}, {}).data_loss_error() is None


offsets = st.integers(0, 10**12)


@given(st.dictionaries(st.text(max_size=8), offsets), st.dictionaries(st.text(max_size=8), offsets))
def test_find_data_loss_counts_exactly_what_went_backwards(
    recorded: dict[str, int], current: dict[str, int]
) -> None:
    loss = find_data_loss(recorded, current)
    for key, high in recorded.items():
        now_high = current.get(key, 0)
        assert loss.get(key, 0) == max(0, high - now_high)
    assert all(lost > 0 for lost in loss.values())
    assert find_data_loss(recorded, {key: high + 1 for key, high in recorded.items()}) == {}


def test_lag_formula_examples() -> None:
    # sync: upstream 50 <-> downstream 40; 50 records since on the target -> upstream end 100.
    assert replication_lag(source_high=100, source_low=0, sync=(50, 40), target_high=90) == 0
    assert replication_lag(source_high=100, source_low=0, sync=(50, 40), target_high=80) == 10
    assert (
        replication_lag(source_high=100, source_low=0, sync=(50, 40), target_high=95) == 0
    )  # never negative
    assert replication_lag(source_high=7, source_low=7, sync=None, target_high=0) == 0  # nothing to copy
    assert replication_lag(source_high=8, source_low=7, sync=None, target_high=0) is None
    assert (
        replication_lag(source_high=50, source_low=0, sync=(50, 40), target_high=41) is None
    )  # sync past end
    with pytest.raises(ValueError, match="swapped"):
        replication_lag(source_high=1, source_low=2, sync=None, target_high=0)


@given(
    gaps=st.lists(st.integers(1, 5), min_size=1, max_size=60),
    data=st.data(),
)
def test_lag_estimate_never_claims_more_progress_than_made(gaps: list[int], data: st.DataObject) -> None:
    """A source log with offset gaps, MM2 having copied a prefix of it: the lag never under-estimates."""
    source_offsets = []
    offset = data.draw(st.integers(0, 100))
    for gap in gaps:
        source_offsets.append(offset)
        offset += gap
    source_high = offset + data.draw(st.integers(0, 3))  # trailing transaction markers
    copied = data.draw(st.integers(1, len(source_offsets)))
    synced = data.draw(st.integers(0, copied - 1))
    downstream_base = data.draw(st.integers(0, 1000))
    sync = (source_offsets[synced], downstream_base + synced)
    target_high = downstream_base + copied
    true_upstream_end = source_offsets[copied - 1] + 1
    lag = replication_lag(source_high, source_offsets[0], sync, target_high)
    assert lag is not None and lag >= max(0, source_high - true_upstream_end)
    assert lag == max(0, source_high - (sync[0] + target_high - sync[1]))
    # More copied never means more lag.
    more = replication_lag(source_high, source_offsets[0], sync, target_high + 1)
    assert more is not None and more <= lag


# ---------------------------------------------------------------------------------------------------
# Payloads and bounded history


@given(st.data(), histories(), thresholds(), st.booleans())
def test_decisions_survive_a_json_trip(
    data: st.DataObject, case: tuple[list[ProbeResult], float], t: HealthThresholds, require: bool
) -> None:
    history, now = case
    trail = data.draw(st.none() | advancing_trails(now, t) | st.just(stopped_heartbeats(now - BASE)))
    down = decide_down(history, trail, t, now, require)
    assert DownDecision.from_dict(json.loads(json.dumps(down.to_dict()))) == down
    loss = data.draw(st.dictionaries(st.sampled_from(["orders-0", "orders-1"]), st.integers(0, 5)))
    lags = data.draw(
        st.dictionaries(st.sampled_from(["orders-0", "orders-1"]), st.none() | st.integers(0, 5))
    )
    recovered = decide_recovered(history, t, now, lags, loss)
    assert RecoveryDecision.from_dict(json.loads(json.dumps(recovered.to_dict()))) == recovered


@settings(max_examples=150)
@given(st.data(), histories(max_dt=4.0, min_size=40, max_size=120), thresholds(), st.booleans())
def test_recent_history_changes_no_decision(
    data: st.DataObject, case: tuple[list[ProbeResult], float], t: HealthThresholds, require: bool
) -> None:
    history, now = case
    trail = data.draw(st.none() | advancing_trails(now, t) | st.just(stopped_heartbeats(now - BASE)))
    kept = recent_history(history, t, now)
    assert judge(kept, t, now).state is judge(history, t, now).state
    full, trimmed = decide_down(history, trail, t, now, require), decide_down(kept, trail, t, now, require)
    assert (trimmed.is_down, trimmed.split_suspected) == (full.is_down, full.split_suspected)
    lags = {"orders-0": 0}
    assert (
        decide_recovered(kept, t, now, lags, {}).is_recovered
        == decide_recovered(history, t, now, lags, {}).is_recovered
    )


# ---------------------------------------------------------------------------------------------------
# Thresholds


FIELDS_THAT_MUST_BE_POSITIVE = [
    "failure_threshold",
    "min_down_seconds",
    "probe_interval",
    "stability_window",
    "probe_timeout",
    "heartbeat_stale_seconds",
]


@pytest.mark.parametrize("name", FIELDS_THAT_MUST_BE_POSITIVE)
@pytest.mark.parametrize("bad", [0, -1, -0.5, float("nan"), float("inf"), True, "3"])
def test_validation_names_the_field_and_the_value(name: str, bad: object) -> None:
    with pytest.raises(ConfigError) as caught:
        HealthThresholds(**{name: bad}).validate()  # type: ignore[arg-type]
    message = str(caught.value)
    assert name in message and repr(bad) in message


def test_max_replication_lag_may_be_zero_but_not_negative_and_thresholds_are_whole() -> None:
    assert HealthThresholds(max_replication_lag=0).validate().max_replication_lag == 0
    with pytest.raises(ConfigError, match=r"max_replication_lag .* got -1"):
        HealthThresholds(max_replication_lag=-1).validate()
    with pytest.raises(ConfigError, match=r"failure_threshold must be an integer >= 1, got 2\.5"):
        HealthThresholds(failure_threshold=2.5).validate()  # type: ignore[arg-type]


def test_cross_field_constraints_are_named() -> None:
    with pytest.raises(ConfigError, match=r"stability_window=8\.0 .* 9\.0"):
        HealthThresholds(stability_window=8.0).validate()
    with pytest.raises(ConfigError, match=r"heartbeat_stale_seconds=10\.0 .* 14\.0"):
        HealthThresholds(probe_timeout=10.0).validate()
    assert HealthThresholds(probe_timeout=10.0, heartbeat_stale_seconds=14.0).validate().max_probe_gap == 14.0


def test_from_dict_rejects_unknown_keys_by_name_and_keeps_defaults() -> None:
    assert HealthThresholds.from_dict({}) == DEFAULTS
    assert HealthThresholds.from_dict({"failure_threshold": 5}).failure_threshold == 5
    with pytest.raises(ConfigError, match="failure_treshold"):
        HealthThresholds.from_dict({"failure_treshold": 5})
    with pytest.raises(ConfigError, match="min_down_seconds"):
        HealthThresholds.from_dict({"min_down_seconds": -6})
    with pytest.raises(ConfigError, match="mapping"):
        HealthThresholds.from_dict([("failure_threshold", 3)])  # type: ignore[arg-type]

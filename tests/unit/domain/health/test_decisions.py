"""The down and recovered decisions, checked over generated probe histories and heartbeat trails.

The properties compare the implementation with a plain restatement of each rule (in probe_histories.py),
so a change of rule shows up as a failing property rather than as a silently different sensor.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_kafka_failover.core.exceptions import DataLossError
from airflow_kafka_failover.domain.health.data_loss import find_data_loss
from airflow_kafka_failover.domain.health.down_decision import DownDecision, decide_down
from airflow_kafka_failover.domain.health.evidence import ProbeResult
from airflow_kafka_failover.domain.health.heartbeats import (
    HeartbeatMeasure,
    HeartbeatState,
    HeartbeatTrail,
)
from airflow_kafka_failover.domain.health.recovery_decision import RecoveryDecision, decide_recovered
from airflow_kafka_failover.domain.health.verdict import HealthThresholds
from airflow_kafka_failover.domain.replication_lag import lag_by_timestamps, replication_lag
from tests.property_examples import examples
from tests.unit.domain.health.probe_histories import (
    BASE,
    DEFAULTS,
    SLOW_PROBES,
    _frange,
    advancing_heartbeats,
    advancing_trails,
    every,
    histories,
    probe,
    stable_for_window,
    stopped_heartbeats,
    thresholds,
)

# ---------------------------------------------------------------------------------------------------
# decide_down: corroboration and network splits


@settings(max_examples=examples(200))
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


@settings(max_examples=examples(60))
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
    decision = decide_down(history, stopped_heartbeats(36, last_heartbeat_at=29.5), SLOW_PROBES, BASE + 36)
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
        window = [p for p in history if now - p.at <= t.stability_window_seconds]
        assert all(p.ok for p in window)
        assert any(p.ok and now - p.at >= t.stability_window_seconds for p in history)
        ordered = sorted(p.at for p in history if now - p.at <= t.stability_window_seconds + t.max_probe_gap)
        assert all(b - a <= t.max_probe_gap for a, b in zip(ordered, ordered[1:], strict=False))
    else:
        assert any(item.startswith("stability") for item in decision.waiting_on)


def test_a_probing_gap_inside_the_window_is_not_evidence_of_health() -> None:
    # Decision: 2 x probe_interval_seconds + probe_timeout_seconds (9 s with a 5 s timeout) is the longest gap
    # still counted as continuous observation; a longer one restarts the stability window.
    just_fits = every(0, 41) + every(49, 62)  # ... 38, 40, then 49, 51 ...: a 9 s gap
    assert decide_recovered(just_fits, SLOW_PROBES, BASE + 61, {"orders-0": 0}, {}).is_recovered
    too_long = every(0, 41) + every(50, 62)  # ... 38, 40, then 50, 52 ...: a 10 s gap
    decision = decide_recovered(too_long, SLOW_PROBES, BASE + 60, {"orders-0": 0}, {})
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
    assert decision.waiting_on[0] == "replication lag A.orders-1: 7 records behind (at most 0 allowed)"
    assert decision.waiting_on[1].startswith(
        "replication lag A.orders-2: unknown (no usable MirrorMaker 2 offset sync "
        "while the source has records"
    )
    assert "MM2 is restarted" in decision.waiting_on[1] and len(decision.waiting_on) == 2
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
    assert "its own topics: orders-0 lost 12 record(s), orders-2 lost 9 record(s) (21 in total)" in (
        decision.reason
    )
    error = decision.data_loss_error()
    assert isinstance(error, DataLossError) and "failback refused" in str(error)
    assert decide_recovered(every(0, 40), DEFAULTS, BASE + 38, {"orders-0": 0}, {}).data_loss_error() is None


def test_data_loss_names_the_clusters_own_topics_before_mirrormaker_copies() -> None:
    copies = {f"B.events-{p}": 5 for p in range(30)}
    loss = {**copies, "orders-0": 12}
    decision = decide_recovered(
        every(0, 40), DEFAULTS, BASE + 38, {"orders-0": 0}, loss, mirrored_topics={"B.events"}
    )
    own, _, mirrored = decision.reason.partition("; MirrorMaker 2's copies")
    assert "its own topics: orders-0 lost 12 record(s) (12 in total)" in own
    assert "B.events" not in own
    assert "which it refills when it replicates: B.events-0 lost 5 record(s)" in mirrored
    assert "(150 in total)" in mirrored and "orders-0" not in mirrored


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
# Payloads


@given(st.data(), histories(), thresholds(), st.booleans())
def test_decisions_survive_a_json_trip(
    data: st.DataObject, case: tuple[list[ProbeResult], float], t: HealthThresholds, require: bool
) -> None:
    history, now = case
    trail = data.draw(st.none() | advancing_trails(now, t) | st.just(stopped_heartbeats(now - BASE)))
    down = decide_down(history, trail, t, now, require)
    assert DownDecision.model_validate(json.loads(json.dumps(down.model_dump(mode="json")))) == down
    loss = data.draw(st.dictionaries(st.sampled_from(["orders-0", "orders-1"]), st.integers(0, 5)))
    lags = data.draw(
        st.dictionaries(st.sampled_from(["orders-0", "orders-1"]), st.none() | st.integers(0, 5))
    )
    recovered = decide_recovered(history, t, now, lags, loss)
    assert (
        RecoveryDecision.model_validate(json.loads(json.dumps(recovered.model_dump(mode="json"))))
        == recovered
    )


@pytest.mark.parametrize(
    ("source", "replica", "lag"),
    [
        (1000, 1000, 0),
        (1000, 1500, 0),
        (1500, 1000, None),
        (None, 1000, None),
        (1000, None, None),
    ],
)
def test_lag_by_timestamps_is_zero_only_when_the_replica_holds_the_newest_record(source, replica, lag):
    assert lag_by_timestamps(source, replica) == lag


def test_decision_payloads_keep_their_json_shape() -> None:
    down = decide_down(every(0, 10, "fail"), stopped_heartbeats(10), DEFAULTS, BASE + 10)
    payload = down.model_dump(mode="json")
    assert list(payload) == ["kind", "is_down", "split_suspected", "reason", "verdict", "heartbeats"]
    assert (payload["kind"], payload["is_down"], payload["heartbeats"]) == ("down", True, "stopped")
    assert payload["verdict"]["state"] == "down" and payload["verdict"]["failing_since"] == BASE
    recovered = decide_recovered([], DEFAULTS, BASE, {"orders-0": None}, {"orders-1": 2})
    assert list(recovered.model_dump(mode="json")) == [
        "kind",
        "is_recovered",
        "reason",
        "waiting_on",
        "data_loss",
        "verdict",
    ]
    assert recovered.model_dump(mode="json")["data_loss"] == {"orders-1": 2}

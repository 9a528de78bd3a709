"""Health verdicts and thresholds, checked over generated probe histories.

The properties compare the implementation with a plain restatement of each rule (in probe_histories.py),
so a change of rule shows up as a failing property rather than as a silently different sensor.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.domain.health.down_decision import decide_down
from airflow_kafka_failover.domain.health.evidence import ProbeResult
from airflow_kafka_failover.domain.health.recovery_decision import decide_recovered
from airflow_kafka_failover.domain.health.verdict import (
    SPAN_TOLERANCE_S,
    HealthState,
    HealthThresholds,
    judge,
    recent_history,
)
from tests.property_examples import examples
from tests.unit.domain.health.probe_histories import (
    BASE,
    DEFAULTS,
    advancing_trails,
    every,
    histories,
    naive_trailing_failures,
    newest,
    probe,
    probes_say_down,
    stopped_heartbeats,
    thresholds,
)

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
    if (
        len(naive) < t.failure_threshold
        or not naive
        or newest(history).at - naive[0].at < t.min_down_seconds - SPAN_TOLERANCE_S
    ):
        assert verdict.state is not HealthState.DOWN
    if verdict.state is HealthState.DOWN:
        assert verdict.consecutive_failures >= t.failure_threshold
        assert verdict.failing_since is not None
        assert newest(history).at - verdict.failing_since >= t.min_down_seconds - SPAN_TOLERANCE_S


@given(histories(), thresholds(), st.floats(0.0, 3.0))
def test_a_single_ok_probe_resets_the_failure_run(
    case: tuple[list[ProbeResult], float], t: HealthThresholds, dt: float
) -> None:
    history, _ = case
    answered = probe(newest(history).at - BASE + dt, "ok")
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


def test_partitions_without_a_leader_count_like_failed_probes() -> None:
    history = every(0, 10) + every(10, 18, "degraded")  # leaderless at 10, 12, 14, 16
    assert judge(history[:-1], DEFAULTS, BASE + 14.5).state is HealthState.DEGRADED
    verdict = judge(history, DEFAULTS, BASE + 16.5)
    assert verdict.state is HealthState.DOWN and verdict.failing_since == BASE + 10
    assert "cluster A cannot serve the job by its probes" in verdict.reason
    assert "without a leader (orders-0)" in verdict.reason


def test_a_lost_broker_whose_leaders_move_within_the_failover_time_is_not_down() -> None:
    # Kafka fences a lost broker after broker.session.timeout.ms (9 s) and moves its leaders: until then
    # the metadata names it and reads of its partitions fail. 10 s of that is not down with the defaults.
    history = every(0, 10) + every(10, 20, "unreadable") + every(20, 40)
    for end in range(1, len(history) + 1):
        now = history[end - 1].at + 0.5
        assert judge(history[:end], DEFAULTS, now).state is not HealthState.DOWN
    waiting = judge(history[:10], DEFAULTS, history[9].at)
    assert "Kafka may still be moving leaders" in waiting.reason and "orders-1 (leader 2" in waiting.reason


def test_leaders_that_stay_silent_past_the_failover_time_are_down() -> None:
    # A lost quorum cannot move leaders: the metadata names a dead broker for as long as it lasts.
    history = every(0, 10) + every(10, 40, "unreadable")  # from 10 s on
    needed = DEFAULTS.min_down_seconds + DEFAULTS.leader_failover_seconds  # 21 s: the probe at 32 s
    assert judge([p for p in history if p.at < BASE + 10 + needed], DEFAULTS, BASE + 30).state is (
        HealthState.DEGRADED
    )
    verdict = judge([p for p in history if p.at <= BASE + 32], DEFAULTS, BASE + 32)
    assert verdict.state is HealthState.DOWN and "(minimum 21 s)" in verdict.reason


def test_reads_failing_then_leaders_gone_is_down_on_the_metadata_clock() -> None:
    # Two brokers of three lost with a live quorum: reads fail until the controller fences them, then the
    # metadata says the partitions are under min ISR (where checked): down 6 s after that, not 21 s.
    under = ProbeResult.model_validate(
        {**probe(0, "ok").model_dump(), "under_min_isr_partitions": ["orders-0"]}
    )
    history = every(0, 10, "unreadable") + [
        under.model_copy(update={"at": BASE + at}) for at in range(10, 18, 2)
    ]
    verdict = judge(history, DEFAULTS, BASE + 16)
    assert verdict.state is HealthState.DOWN and verdict.failing_since == BASE + 10


def test_a_history_of_two_clusters_is_refused() -> None:
    with pytest.raises(ValueError, match=r"\['A', 'B'\]"):
        judge([probe(0), probe(2, cluster="B")], DEFAULTS, BASE + 2)


# ---------------------------------------------------------------------------------------------------
# Bounded history


@settings(max_examples=examples(150))
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
    "probe_interval_seconds",
    "stability_window_seconds",
    "probe_timeout_seconds",
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
    with pytest.raises(ConfigError, match=r"stability_window_seconds=5\.0 .* 6\.0"):
        HealthThresholds(stability_window_seconds=5.0).validate()
    with pytest.raises(ConfigError, match=r"heartbeat_stale_seconds=6\.0 .* 14\.0"):
        HealthThresholds(probe_timeout_seconds=10.0).validate()
    assert (
        HealthThresholds(probe_timeout_seconds=10.0, heartbeat_stale_seconds=14.0).validate().max_probe_gap
        == 14.0
    )


def test_from_dict_rejects_unknown_keys_by_name_and_keeps_defaults() -> None:
    assert HealthThresholds.from_dict({}) == DEFAULTS
    assert HealthThresholds.from_dict({"failure_threshold": 5}).failure_threshold == 5
    with pytest.raises(ConfigError, match="failure_treshold"):
        HealthThresholds.from_dict({"failure_treshold": 5})
    with pytest.raises(ConfigError, match="min_down_seconds"):
        HealthThresholds.from_dict({"min_down_seconds": -6})
    with pytest.raises(ConfigError, match="mapping"):
        HealthThresholds.from_dict([("failure_threshold", 3)])  # type: ignore[arg-type]

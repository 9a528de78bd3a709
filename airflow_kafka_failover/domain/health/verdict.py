"""Pure judgement of one cluster's probe history: the health thresholds and the verdict.

Nothing here does I/O or reads a clock: callers pass the evidence and ``now`` (unix seconds), so every
rule can be tested exhaustively.

- :class:`HealthThresholds` says how much evidence the health sensors need before they act.
- :func:`judge` turns a probe history into a :class:`Verdict` (healthy, degraded or down).
- :func:`recent_history` bounds a history without changing any decision.

The sensor decisions built on the verdict are in :mod:`airflow_kafka_failover.domain.health.down_decision` and
:mod:`airflow_kafka_failover.domain.health.recovery_decision`; the MirrorMaker 2 heartbeat corroboration in
:mod:`airflow_kafka_failover.domain.health.heartbeats`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.schema import Schema, problem_of
from airflow_kafka_failover.domain.health.evidence import (
    ProbeResult,
    format_clock,
    in_time_order,
    list_partitions,
)

SPAN_TOLERANCE_S = 0.001
"""A failed run spans ``min_down_seconds`` when it is short by at most this much: probe start times sit on a
fixed cadence, and floating-point noise must not cost a whole probe interval."""


def _require_int(name: str, value: Any, *, minimum: int) -> None:
    # bool is an int subclass; `failure_threshold: true` in YAML is a typo, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"health threshold {name} must be an integer >= {minimum}, got {value!r}")


def _require_positive_seconds(name: str, value: Any) -> None:
    # NaN compares false with everything and would silently disable a rule, so finiteness matters.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(f"health threshold {name} must be a positive number of seconds, got {value!r}")


def _whole(minimum: int) -> Callable[[Any, ValidationInfo], Any]:
    def check(value: Any, info: ValidationInfo) -> Any:
        _require_int(str(info.field_name), value, minimum=minimum)
        return value

    return check


def _positive_seconds(value: Any, info: ValidationInfo) -> Any:
    _require_positive_seconds(str(info.field_name), value)
    return float(value)


def _require_seconds_or_zero(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"health threshold {name} must be a number of seconds >= 0, got {value!r}")


def _seconds_or_zero(value: Any, info: ValidationInfo) -> Any:
    _require_seconds_or_zero(str(info.field_name), value)
    return float(value)


_Whole = Annotated[int, Field(ge=1), BeforeValidator(_whole(1))]
_WholeOrZero = Annotated[int, Field(ge=0), BeforeValidator(_whole(0))]
_PositiveSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False), BeforeValidator(_positive_seconds)]
_SecondsOrZero = Annotated[float, Field(ge=0, allow_inf_nan=False), BeforeValidator(_seconds_or_zero)]


class HealthThresholds(Schema):
    """How much evidence the health sensors need before they act (the ``health`` section of a pair).

    Constraints between fields (checked when built, and again by :meth:`validate`):

    - ``stability_window_seconds >= max_probe_gap``: a window shorter than the largest tolerated gap between
      probes could be "covered" by two probes on its edges and would prove nothing about stability.
    - ``heartbeat_stale_seconds >= max_probe_gap``: heartbeats are observed once per probe; a staleness
      limit shorter than the gap between two looks would call live heartbeats stopped merely because
      nobody looked, which would turn a network split into a false "down".

    Both imply ``probe_timeout_seconds`` is below ``stability_window_seconds`` and
    ``heartbeat_stale_seconds``.
    ``min_down_seconds`` and ``failure_threshold`` are independent: whichever needs longer wins.
    A bad value raises :class:`ConfigError` naming the threshold and the value.

    :param failure_threshold: consecutive failed probes needed for "down".
    :param min_down_seconds: the failed run must span at least this long, first to newest failure.
    :param probe_interval_seconds: seconds between the starts of two probes when all goes well.
    :param stability_window_seconds: seconds of uninterrupted healthy probes needed for "recovered".
    :param max_replication_lag: records a replicated partition may still lag for "recovered".
    :param probe_timeout_seconds: seconds a probe may wait for the cluster before counting as failed. A
        healthy cluster answers a metadata request in milliseconds; 2 s tolerates a long GC pause, and a
        single slow answer never decides anything because "down" needs several failures in a row. The
        timeout bounds how fast a hung (not crashed) cluster is detected: about min_down_seconds + timeout.
    :param heartbeat_stale_seconds: a replicated MM2 heartbeat older than this no longer proves the
        watched cluster alive. MM2 writes one per second (``emit.heartbeats.interval.seconds``); 6 s
        leaves room for replication latency, clock skew between MM2 workers and Airflow, and one
        missed look (it must be at least ``max_probe_gap``). It bounds crash detection from below.
    :param leader_failover_seconds: how long Kafka may take to give the partitions of a lost broker new
        leaders: until its ``broker.session.timeout.ms`` (9 s by default) runs out, the metadata still names
        the dead broker, whose partitions no client can read. Probes that could not read some configured
        partitions (a leader that does not answer, a failed canary) count toward "down" only once they
        span ``min_down_seconds`` plus this; partitions the metadata reports without a leader (or under
        ``min.insync.replicas``, where checked) count like failed probes at once.
    """

    failure_threshold: _Whole = Field(3, description='Consecutive failed probes needed for "down".')
    min_down_seconds: _PositiveSeconds = Field(
        6.0, description="The failed run must span at least this long, first to newest failure (seconds)."
    )
    probe_interval_seconds: _PositiveSeconds = Field(
        2.0, description="Seconds between the starts of two probes when all goes well."
    )
    stability_window_seconds: _PositiveSeconds = Field(
        30.0,
        description='Seconds of uninterrupted healthy probes needed for "recovered"; at least '
        "2 x probe_interval_seconds + probe_timeout_seconds.",
    )
    max_replication_lag: _WholeOrZero = Field(
        0, description='Records a replicated partition may still lag for "recovered".'
    )
    probe_timeout_seconds: _PositiveSeconds = Field(
        2.0, description="Seconds a probe may wait for the cluster before it counts as failed."
    )
    heartbeat_stale_seconds: _PositiveSeconds = Field(
        6.0,
        description="A replicated MirrorMaker 2 heartbeat older than this no longer proves the watched "
        "cluster alive (seconds); at least 2 x probe_interval_seconds + probe_timeout_seconds.",
    )
    leader_failover_seconds: _SecondsOrZero = Field(
        15.0,
        description="How long Kafka may take to give a lost broker's partitions new leaders (its "
        "`broker.session.timeout.ms`, 9 s by default, plus an election); probes that could not read some "
        'partitions (a leader that does not answer, a failed canary) count toward "down" only once they '
        "span `min_down_seconds` plus this (seconds).",
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            cause = (exc.errors(include_url=False)[0].get("ctx") or {}).get("error")
            if isinstance(cause, ConfigError):
                raise cause from None
            where, problem = problem_of(exc)
            raise ConfigError(f"health thresholds: {where}: {problem}") from None

    @model_validator(mode="after")
    def _gaps_are_covered(self) -> HealthThresholds:
        return self._check_gaps()

    def _check_gaps(self) -> HealthThresholds:
        gap = self.max_probe_gap
        for name in ("stability_window_seconds", "heartbeat_stale_seconds"):
            if getattr(self, name) < gap:
                raise ConfigError(
                    f"health threshold {name}={getattr(self, name)!r} is shorter than the largest "
                    f"tolerated gap between probes, 2 x probe_interval_seconds + probe_timeout_seconds = "
                    f"{gap!r} s; "
                    f"raise {name} to at least {gap!r} or lower probe_interval_seconds/probe_timeout_seconds"
                )
        return self

    @property
    def max_probe_gap(self) -> float:
        """The largest gap between two probes that still counts as continuous observation.

        A probe starts every ``probe_interval_seconds`` and may take ``probe_timeout_seconds``; one late or
        lost poke (scheduler or triggerer jitter) is tolerated. A longer gap is not evidence of anything: it
        restarts both a run of failures and a stability window.
        """
        return 2 * self.probe_interval_seconds + self.probe_timeout_seconds

    @property
    def history_horizon(self) -> float:
        """Seconds of probe history that :func:`recent_history` keeps so that no decision changes."""
        longest = max(
            self.stability_window_seconds,
            self.min_down_seconds + self.leader_failover_seconds,
            2 * self.heartbeat_stale_seconds,
        )
        return longest + 2 * self.max_probe_gap

    def validate(self) -> HealthThresholds:  # type: ignore[override]
        """Check every field and the constraints between them; return self for chaining.

        Built thresholds are already valid; this re-checks after ``model_construct``.

        :raises ConfigError: naming the field and the bad value.
        """
        _require_int("failure_threshold", self.failure_threshold, minimum=1)
        _require_int("max_replication_lag", self.max_replication_lag, minimum=0)
        for name in (
            "min_down_seconds",
            "probe_interval_seconds",
            "stability_window_seconds",
            "probe_timeout_seconds",
            "heartbeat_stale_seconds",
        ):
            _require_positive_seconds(name, getattr(self, name))
        _require_seconds_or_zero("leader_failover_seconds", self.leader_failover_seconds)
        return self._check_gaps()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Build validated thresholds from a config mapping; absent keys keep their defaults.

        :param data: e.g. the ``health`` section of the pair config.
        :raises ConfigError: for unknown keys (named) or bad values.
        """
        if isinstance(data, cls):
            return data
        if isinstance(data, HealthThresholds):  # thresholds into a model that has more (the pair's health)
            data = data.model_dump()
        if not isinstance(data, Mapping):
            raise ConfigError(f"health thresholds must be a mapping, got {type(data).__name__}: {data!r}")
        known = cls.known_keys()
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise ConfigError(f"unknown health threshold key(s) {unknown}; known keys are {known}")
        return cls(**data)


class HealthState(StrEnum):
    """What the probes say about a cluster.

    ``degraded`` also covers "not enough evidence": it is neither healthy nor down, so neither
    sensor acts on it.
    """

    HEALTHY = "healthy"
    DEGRADED = "degraded"
    DOWN = "down"


class Verdict(BaseModel):
    """The judgement of one probe history; part of the sensors' trigger-event and XCom payloads.

    :param state: healthy, degraded or down.
    :param reason: why, in words for the operator reading the task log.
    :param consecutive_failures: failed probes in the trailing run (0 if the newest probe answered).
    :param failing_since: ``at`` of the first failed probe of that run, or None.
    :param healthy_since: ``at`` of the first OK probe of the trailing run of OK probes, or None.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    state: HealthState
    reason: str
    consecutive_failures: int = 0
    failing_since: float | None = None
    healthy_since: float | None = None


@dataclass(frozen=True)
class _TrailingRun:
    """The newest probes that all share a property, with no probing gap between them."""

    probes: tuple[ProbeResult, ...]
    # The probing gap that cut the run short when looking back, if that is what ended it.
    cut_by_gap: float | None


def _trailing_run(
    probes: Sequence[ProbeResult], belongs: Callable[[ProbeResult], bool], max_gap: float
) -> _TrailingRun:
    run: list[ProbeResult] = []
    for probe in reversed(probes):
        if not belongs(probe):
            break
        if run and run[-1].at - probe.at > max_gap:
            return _TrailingRun(tuple(reversed(run)), run[-1].at - probe.at)
        run.append(probe)
    return _TrailingRun(tuple(reversed(run)), None)


def _degraded_details(probe: ProbeResult) -> str:
    details: list[str] = []
    if probe.leaderless_partitions:
        details.append(
            f"{len(probe.leaderless_partitions)} partition(s) without a leader "
            f"({list_partitions(probe.leaderless_partitions)})"
        )
    if probe.unreadable_partitions:
        details.append(
            f"{len(probe.unreadable_partitions)} partition(s) whose leader does not answer "
            f"({list_partitions(probe.unreadable_partitions)})"
        )
    if probe.under_min_isr_partitions:
        details.append(
            f"{len(probe.under_min_isr_partitions)} partition(s) under min ISR "
            f"({list_partitions(probe.under_min_isr_partitions)})"
        )
    if probe.canary_ok is False:
        details.append("the canary round trip failed")
    return "; ".join(details)


def _spans(run: _TrailingRun, thresholds: HealthThresholds, extra_seconds: float = 0.0) -> bool:
    """Whether a run of failures is long enough for "down": enough probes over enough time."""
    if not run.probes:
        return False
    span = run.probes[-1].at - run.probes[0].at
    needed = thresholds.min_down_seconds + extra_seconds
    return len(run.probes) >= thresholds.failure_threshold and span >= needed - SPAN_TOLERANCE_S


def _trouble(probe: ProbeResult) -> str:
    """What the probe found wrong, in words: the error of a failed probe, or the partitions in trouble."""
    if probe.failed:
        return f"newest error: {probe.error or 'no error text'}"
    return f"newest probe: {_degraded_details(probe)}"


def _judge_failing(probes: Sequence[ProbeResult], thresholds: HealthThresholds, gap: float) -> Verdict:
    """Judge a newest probe that failed, or found configured partitions the job cannot read.

    Two runs are measured back from the newest probe. The *hard* run holds failed probes and probes whose
    metadata says partitions are down (no leader, under ``min.insync.replicas`` where checked): it is down
    by ``failure_threshold`` and ``min_down_seconds``, as failed probes always were. The *failing* run also
    holds probes whose reads failed (a leader that does not answer, a failed canary): that happens for
    seconds whenever Kafka moves the leaders of a lost broker, so such a run is down only once it also
    outlasted ``leader_failover_seconds``.
    """
    hard = _trailing_run(probes, lambda probe: probe.failed or probe.partitions_down, gap)
    failing = _trailing_run(probes, lambda probe: probe.failed or probe.degraded, gap)
    if _spans(hard, thresholds):
        return _down(hard, probes[-1], thresholds.min_down_seconds, thresholds)
    grace = thresholds.min_down_seconds + thresholds.leader_failover_seconds
    if _spans(failing, thresholds, thresholds.leader_failover_seconds):
        return _down(failing, probes[-1], grace, thresholds)
    newest, first = probes[-1], failing.probes[0]
    needs = (
        f"down needs {thresholds.failure_threshold} failed probes over at least "
        f"{thresholds.min_down_seconds:g} s"
    )
    if hard.probes != failing.probes:
        needs += (
            f", or {grace:g} s (min_down_seconds + leader_failover_seconds) of probes that only could not "
            "read, while Kafka may still be moving leaders"
        )
    state = "is failing" if newest.failed else "answers but cannot serve some partitions"
    return Verdict(
        state=HealthState.DEGRADED,
        reason=f"cluster {newest.cluster} {state}, not down yet: {len(failing.probes)} consecutive "
        f"probe(s) in trouble over {newest.at - first.at:.1f} s since {format_clock(first.at)} "
        f"UTC{_restarted(failing)}; {needs}; {_trouble(newest)}",
        consecutive_failures=len(failing.probes),
        failing_since=first.at,
    )


def _down(run: _TrailingRun, newest: ProbeResult, minimum: float, thresholds: HealthThresholds) -> Verdict:
    first, count = run.probes[0], len(run.probes)
    partial = any(not probe.failed for probe in run.probes)
    what = "probes failed or found partitions the job cannot read" if partial else "probes failed"
    verb = "is down" if newest.failed else "cannot serve the job"
    return Verdict(
        state=HealthState.DOWN,
        reason=f"cluster {newest.cluster} {verb} by its probes: the last {count} {what} "
        f"(threshold {thresholds.failure_threshold}) over {newest.at - first.at:.1f} s (minimum "
        f"{minimum:g} s), first failure at {format_clock(first.at)} UTC{_restarted(run)}; {_trouble(newest)}",
        consecutive_failures=count,
        failing_since=first.at,
    )


def _restarted(run: _TrailingRun) -> str:
    if run.cut_by_gap is None:
        return ""
    return f" (counting restarted after a {run.cut_by_gap:.1f} s gap in probing, which is no evidence)"


def _judge_healthy(oks: _TrailingRun, now: float) -> Verdict:
    newest = oks.probes[-1]
    since = oks.probes[0].at
    latency = "" if newest.latency_s is None else f", {newest.latency_s * 1000:.1f} ms"
    after_gap = "" if oks.cut_by_gap is None else f"; before that, a {oks.cut_by_gap:.1f} s gap in probing"
    return Verdict(
        state=HealthState.HEALTHY,
        reason=f"cluster {newest.cluster} is healthy: newest probe OK "
        f"({newest.broker_count} broker(s){latency}), OK without interruption since "
        f"{format_clock(since)} UTC ({now - since:.1f} s){after_gap}",
        healthy_since=since,
    )


def judge(history: Iterable[ProbeResult], thresholds: HealthThresholds, now: float) -> Verdict:
    """Judge one cluster from its probe history.

    Down only when the trailing run of failed probes has at least ``failure_threshold`` probes and
    spans at least ``min_down_seconds`` from its first to its newest failure. Probes whose metadata says
    configured partitions cannot be served (no leader; under ``min.insync.replicas`` where checked) count
    like failed ones: the job cannot read. Probes that only could not read (a leader that does not answer,
    a failed canary) count too, but such a run must also outlast ``leader_failover_seconds``, the time
    Kafka itself may take to move the leaders of a lost broker (see :func:`_judge_failing`). An OK probe
    ends a run, and so does a gap in probing longer than ``max_probe_gap``. Healthy when the newest probe
    is OK. A newest probe older than ``max_probe_gap`` gives degraded: old evidence supports neither
    healthy nor down.

    :param history: probes of one cluster, in any order.
    :param thresholds: validated thresholds.
    :param now: unix seconds.
    """
    thresholds.validate()
    probes = in_time_order(history)
    if not probes:
        return Verdict(
            state=HealthState.DEGRADED,
            reason="no probe results yet; without evidence the cluster is neither healthy nor down",
        )
    newest = probes[-1]
    gap = thresholds.max_probe_gap
    failures = _trailing_run(probes, lambda probe: probe.failed or probe.degraded, gap)
    oks = _trailing_run(probes, lambda probe: probe.ok, gap)
    healthy_since = oks.probes[0].at if oks.probes else None
    if now - newest.at > gap:
        return Verdict(
            state=HealthState.DEGRADED,
            reason=f"no recent evidence for cluster {newest.cluster}: the newest probe ({newest.outcome}, at "
            f"{format_clock(newest.at)} UTC) is {now - newest.at:.1f} s old, more than the {gap:g} s allowed "
            f"between probes (2 x probe_interval_seconds + probe_timeout_seconds); neither healthy nor down "
            "can be claimed",
            consecutive_failures=len(failures.probes),
            failing_since=failures.probes[0].at if failures.probes else None,
            healthy_since=healthy_since,
        )
    if newest.failed or newest.degraded:
        return _judge_failing(probes, thresholds, gap)
    return _judge_healthy(oks, now)


def recent_history(
    history: Iterable[ProbeResult], thresholds: HealthThresholds, now: float
) -> tuple[ProbeResult, ...]:
    """Drop probes too old to change any decision, so a long-running trigger's history stays bounded.

    Keeps every probe from the last :attr:`HealthThresholds.history_horizon` seconds and, in any case,
    the newest ``failure_threshold`` probes. :func:`judge`'s state, :func:`decide_down` and
    :func:`decide_recovered` give the same answers on the result (``failing_since`` and
    ``healthy_since`` may move later, never past what the rules need).

    :param history: probes of one cluster, in any order.
    :param thresholds: validated thresholds.
    :param now: unix seconds.
    """
    probes = in_time_order(history)
    cutoff = now - thresholds.history_horizon
    keep_from = max(0, len(probes) - thresholds.failure_threshold)
    return tuple(probe for index, probe in enumerate(probes) if probe.at >= cutoff or index >= keep_from)

"""Pure judgement of cluster health: from probe histories and heartbeat observations to sensor decisions.

Nothing here does I/O or reads a clock: callers pass the evidence and ``now`` (unix seconds), so every
rule can be tested exhaustively. Three decisions are made:

- :func:`judge` turns a probe history into a :class:`Verdict` (healthy, degraded or down).
- :func:`decide_down` adds corroboration from MirrorMaker 2 heartbeats, which tells a dead cluster
  from a network split between Airflow and a live one.
- :func:`decide_recovered` requires stable health, caught-up replication and no lost data before a
  failback.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from airflow_kafka_failover.exceptions import ConfigError, DataLossError
from airflow_kafka_failover.health.evidence import ProbeResult, format_clock

# Reasons list at most this many partitions; the full list stays in waiting_on / data_loss.
_PARTITIONS_IN_REASON = 5


@dataclass(frozen=True)
class HealthThresholds:
    """How much evidence the health sensors need before they act.

    Constraints between fields (checked by :meth:`validate`):

    - ``stability_window >= max_probe_gap``: a window shorter than the largest tolerated gap between
      probes could be "covered" by two probes on its edges and would prove nothing about stability.
    - ``heartbeat_stale_seconds >= max_probe_gap``: heartbeats are observed once per probe; a staleness
      limit shorter than the gap between two looks would call live heartbeats stopped merely because
      nobody looked, which would turn a network split into a false "down".

    Both imply ``probe_timeout`` is below ``stability_window`` and ``heartbeat_stale_seconds``.
    ``min_down_seconds`` and ``failure_threshold`` are independent: whichever needs longer wins.

    :param failure_threshold: consecutive failed probes needed for "down".
    :param min_down_seconds: the failed run must span at least this long, first to newest failure.
    :param probe_interval: seconds between the starts of two probes when all goes well.
    :param stability_window: seconds of uninterrupted healthy probes needed for "recovered".
    :param max_replication_lag: records a replicated partition may still lag for "recovered".
    :param probe_timeout: seconds a probe may wait for the cluster before counting as failed.
    :param heartbeat_stale_seconds: a replicated MM2 heartbeat older than this no longer proves the
        watched cluster alive. MM2 writes one per second (``emit.heartbeats.interval.seconds``); 10 s
        leaves room for replication latency, clock skew between MM2 workers and Airflow, and one
        missed look (it must be at least ``max_probe_gap``).
    """

    failure_threshold: int = 3
    min_down_seconds: float = 6.0
    probe_interval: float = 2.0
    stability_window: float = 30.0
    max_replication_lag: int = 0
    probe_timeout: float = 5.0
    heartbeat_stale_seconds: float = 10.0

    @property
    def max_probe_gap(self) -> float:
        """The largest gap between two probes that still counts as continuous observation.

        A probe starts every ``probe_interval`` and may take ``probe_timeout``; one late or lost poke
        (scheduler or triggerer jitter) is tolerated. A longer gap is not evidence of anything: it
        restarts both a run of failures and a stability window.
        """
        return 2 * self.probe_interval + self.probe_timeout

    @property
    def history_horizon(self) -> float:
        """Seconds of probe history that :func:`recent_history` keeps so that no decision changes."""
        longest = max(self.stability_window, self.min_down_seconds, 2 * self.heartbeat_stale_seconds)
        return longest + 2 * self.max_probe_gap

    def validate(self) -> HealthThresholds:
        """Check every field and the constraints between them; return self for chaining.

        :raises ConfigError: naming the field and the bad value.
        """
        _require_int("failure_threshold", self.failure_threshold, minimum=1)
        _require_int("max_replication_lag", self.max_replication_lag, minimum=0)
        for name in (
            "min_down_seconds",
            "probe_interval",
            "stability_window",
            "probe_timeout",
            "heartbeat_stale_seconds",
        ):
            _require_positive_seconds(name, getattr(self, name))
        gap = self.max_probe_gap
        for name in ("stability_window", "heartbeat_stale_seconds"):
            if getattr(self, name) < gap:
                raise ConfigError(
                    f"health threshold {name}={getattr(self, name)!r} is shorter than the largest "
                    f"tolerated gap between probes, 2 x probe_interval + probe_timeout = {gap!r} s; "
                    f"raise {name} to at least {gap!r} or lower probe_interval/probe_timeout"
                )
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HealthThresholds:
        """Build validated thresholds from a config mapping; absent keys keep their defaults.

        :param data: e.g. the ``health`` section of the pair config.
        :raises ConfigError: for unknown keys (named) or bad values.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"health thresholds must be a mapping, got {type(data).__name__}: {data!r}")
        known = [f.name for f in fields(cls)]
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise ConfigError(f"unknown health threshold key(s) {unknown}; known keys are {known}")
        return cls(**data).validate()


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


class HealthState(StrEnum):
    """What the probes say about a cluster.

    ``degraded`` also covers "not enough evidence": it is neither healthy nor down, so neither
    sensor acts on it.
    """

    HEALTHY = "healthy"
    DEGRADED = "degraded"
    DOWN = "down"


@dataclass(frozen=True)
class Verdict:
    """The judgement of one probe history.

    :param state: healthy, degraded or down.
    :param reason: why, in words for the operator reading the task log.
    :param consecutive_failures: failed probes in the trailing run (0 if the newest probe answered).
    :param failing_since: ``at`` of the first failed probe of that run, or None.
    :param healthy_since: ``at`` of the first OK probe of the trailing run of OK probes, or None.
    """

    state: HealthState
    reason: str
    consecutive_failures: int = 0
    failing_since: float | None = None
    healthy_since: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the verdict as JSON types only."""
        return {
            "state": self.state.value,
            "reason": self.reason,
            "consecutive_failures": self.consecutive_failures,
            "failing_since": self.failing_since,
            "healthy_since": self.healthy_since,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        """Rebuild a verdict from :meth:`to_dict` output.

        :param data: the mapping.
        """
        return cls(
            state=HealthState(data["state"]),
            reason=data["reason"],
            consecutive_failures=data["consecutive_failures"],
            failing_since=data["failing_since"],
            healthy_since=data["healthy_since"],
        )


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


def _in_time_order(history: Iterable[ProbeResult]) -> list[ProbeResult]:
    probes = sorted(history, key=lambda probe: probe.at)
    clusters = {probe.cluster for probe in probes}
    if len(clusters) > 1:
        raise ValueError(f"probe history mixes clusters {sorted(clusters)}; judge one cluster at a time")
    return probes


def _list_partitions(partitions: Sequence[str]) -> str:
    shown = ", ".join(partitions[:_PARTITIONS_IN_REASON])
    more = len(partitions) - _PARTITIONS_IN_REASON
    return f"{shown} and {more} more" if more > 0 else shown


def _degraded_details(probe: ProbeResult) -> str:
    details: list[str] = []
    if probe.leaderless_partitions:
        details.append(
            f"{len(probe.leaderless_partitions)} partition(s) without a leader "
            f"({_list_partitions(probe.leaderless_partitions)})"
        )
    if probe.under_min_isr_partitions:
        details.append(
            f"{len(probe.under_min_isr_partitions)} partition(s) under min ISR "
            f"({_list_partitions(probe.under_min_isr_partitions)})"
        )
    if probe.canary_ok is False:
        details.append("the canary round trip failed")
    return "; ".join(details)


def _judge_failing(
    failures: _TrailingRun, probes: Sequence[ProbeResult], thresholds: HealthThresholds
) -> Verdict:
    newest = probes[-1]
    cluster = newest.cluster
    first = failures.probes[0]
    count = len(failures.probes)
    span = newest.at - first.at
    error = newest.error or "no error text"
    restarted = (
        f" (counting restarted after a {failures.cut_by_gap:.1f} s gap in probing, which is no evidence)"
        if failures.cut_by_gap is not None
        else ""
    )
    if count >= thresholds.failure_threshold and span >= thresholds.min_down_seconds:
        return Verdict(
            HealthState.DOWN,
            f"cluster {cluster} is down by its probes: the last {count} probes failed "
            f"(threshold {thresholds.failure_threshold}) over {span:.1f} s (minimum "
            f"{thresholds.min_down_seconds:g} s), first failure at {format_clock(first.at)} UTC{restarted}; "
            f"newest error: {error}",
            consecutive_failures=count,
            failing_since=first.at,
        )
    return Verdict(
        HealthState.DEGRADED,
        f"cluster {cluster} is failing but not down yet: {count} consecutive failed probe(s) over "
        f"{span:.1f} s since {format_clock(first.at)} UTC{restarted}; down needs "
        f"{thresholds.failure_threshold} failures over at least {thresholds.min_down_seconds:g} s; "
        f"newest error: {error}",
        consecutive_failures=count,
        failing_since=first.at,
    )


def _judge_healthy(oks: _TrailingRun, now: float) -> Verdict:
    newest = oks.probes[-1]
    since = oks.probes[0].at
    latency = "" if newest.latency_s is None else f", {newest.latency_s * 1000:.1f} ms"
    after_gap = "" if oks.cut_by_gap is None else f"; before that, a {oks.cut_by_gap:.1f} s gap in probing"
    return Verdict(
        HealthState.HEALTHY,
        f"cluster {newest.cluster} is healthy: newest probe OK ({newest.broker_count} broker(s){latency}), "
        f"OK without interruption since {format_clock(since)} UTC ({now - since:.1f} s){after_gap}",
        healthy_since=since,
    )


def judge(history: Iterable[ProbeResult], thresholds: HealthThresholds, now: float) -> Verdict:
    """Judge one cluster from its probe history.

    Down only when the trailing run of failed probes has at least ``failure_threshold`` probes and
    spans at least ``min_down_seconds`` from its first to its newest failure. Any probe that got an
    answer (OK or degraded) ends a run of failures, and so does a gap in probing longer than
    ``max_probe_gap``. Healthy when the newest probe is OK. A newest probe older than
    ``max_probe_gap`` gives degraded: old evidence supports neither healthy nor down.

    :param history: probes of one cluster, in any order.
    :param thresholds: validated thresholds.
    :param now: unix seconds.
    """
    thresholds.validate()
    probes = _in_time_order(history)
    if not probes:
        return Verdict(
            HealthState.DEGRADED,
            "no probe results yet; without evidence the cluster is neither healthy nor down",
        )
    newest = probes[-1]
    gap = thresholds.max_probe_gap
    failures = _trailing_run(probes, lambda probe: probe.failed, gap)
    oks = _trailing_run(probes, lambda probe: probe.ok, gap)
    healthy_since = oks.probes[0].at if oks.probes else None
    if now - newest.at > gap:
        return Verdict(
            HealthState.DEGRADED,
            f"no recent evidence for cluster {newest.cluster}: the newest probe ({newest.outcome}, at "
            f"{format_clock(newest.at)} UTC) is {now - newest.at:.1f} s old, more than the {gap:g} s allowed "
            f"between probes (2 x probe_interval + probe_timeout); neither healthy nor down can be claimed",
            consecutive_failures=len(failures.probes),
            failing_since=failures.probes[0].at if failures.probes else None,
            healthy_since=healthy_since,
        )
    if newest.failed:
        return _judge_failing(failures, probes, thresholds)
    if newest.degraded:
        return Verdict(
            HealthState.DEGRADED,
            f"cluster {newest.cluster} answers but is degraded: {_degraded_details(newest)}",
        )
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
    probes = _in_time_order(history)
    cutoff = now - thresholds.history_horizon
    keep_from = max(0, len(probes) - thresholds.failure_threshold)
    return tuple(probe for index, probe in enumerate(probes) if probe.at >= cutoff or index >= keep_from)


# ---------------------------------------------------------------------------------------------------
# Corroboration from MirrorMaker 2 heartbeats


class HeartbeatState(StrEnum):
    """Whether the watched cluster's replicated heartbeats still arrive on the other cluster."""

    ADVANCING = "advancing"
    STOPPED = "stopped"
    UNKNOWN = "unknown"


class HeartbeatMeasure(StrEnum):
    """What an observation's ``newest`` number is."""

    TIMESTAMP_MS = "timestamp_ms"
    OFFSET = "offset"


@dataclass(frozen=True)
class HeartbeatObservation:
    """One look at ``<watched>.heartbeats`` on the other cluster.

    :param observed_at: unix seconds (Airflow's clock) when the caller looked.
    :param newest: the newest heartbeat seen: its record timestamp in ms, or its offset (or the
        partition's high watermark), as the trail's measure says.
    """

    observed_at: float
    newest: int


@dataclass(frozen=True)
class HeartbeatAssessment:
    """What a heartbeat trail shows at one moment.

    :param state: advancing, stopped or unknown.
    :param reason: why, for the operator.
    :param last_increase_at: when a higher heartbeat was last first seen (Airflow's clock), or None.
    :param newest_timestamp: the newest heartbeat's record timestamp in unix seconds (MM2's clock),
        when the trail measures timestamps.
    :param pending: unknown only for now: the looks are recent but have not yet watched an unmoving
        offset for the stale time; the answer comes within ``heartbeat_stale_seconds``.
    """

    state: HeartbeatState
    reason: str
    last_increase_at: float | None = None
    newest_timestamp: float | None = None
    pending: bool = False


@dataclass(frozen=True)
class HeartbeatTrail:
    """The caller's observations of the watched cluster's MM2 heartbeats replicated to the other cluster.

    Rule, with ``stale`` = ``heartbeat_stale_seconds``:

    - advancing: the newest heartbeat's record timestamp is at most ``stale`` old, or a higher
      heartbeat was first seen within the last ``stale`` seconds. (An increase seen long ago, even
      during the failing run, does not count: heartbeats in flight when the cluster died arrive
      after its death, and must not block the failover forever.)
    - stopped: neither, while the newest look is recent (within ``max_probe_gap``) and either the
      timestamp shows the age or the value was watched unchanged for at least ``stale`` seconds.
    - unknown: no looks, or looks too old; or, marked ``pending``, offsets watched unchanged for too
      short a time (that settles by itself within ``stale`` seconds).

    Offsets need no clock agreement; timestamps decide faster but trust MM2's clock within ``stale``.

    :param observations: the looks, in any order.
    :param measure: whether ``newest`` is a record timestamp in ms or an offset.
    :param unavailable_reason: why the caller could not look (e.g. the other cluster is unreachable),
        reported when the state is unknown.
    """

    observations: tuple[HeartbeatObservation, ...] = ()
    measure: HeartbeatMeasure = HeartbeatMeasure.TIMESTAMP_MS
    unavailable_reason: str | None = None

    @classmethod
    def from_pairs(
        cls,
        pairs: Iterable[tuple[float, int]],
        measure: HeartbeatMeasure | str = HeartbeatMeasure.TIMESTAMP_MS,
        unavailable_reason: str | None = None,
    ) -> HeartbeatTrail:
        """Build a trail from ``(observed_at, newest)`` pairs.

        :param pairs: the looks.
        :param measure: ``"timestamp_ms"`` or ``"offset"``.
        :param unavailable_reason: why looking failed, if it did.
        """
        observations = tuple(HeartbeatObservation(float(at), int(newest)) for at, newest in pairs)
        return cls(observations, HeartbeatMeasure(measure), unavailable_reason)

    def assess(self, thresholds: HealthThresholds, now: float) -> HeartbeatAssessment:
        """Decide whether the heartbeats are advancing, stopped or unknown at ``now``.

        :param thresholds: gives ``heartbeat_stale_seconds`` and ``max_probe_gap``.
        :param now: unix seconds.
        """
        looks = sorted(self.observations, key=lambda look: look.observed_at)
        if not looks:
            why = f": {self.unavailable_reason}" if self.unavailable_reason else ""
            return HeartbeatAssessment(
                HeartbeatState.UNKNOWN, f"no observations of the replicated heartbeats{why}"
            )
        newest_look = looks[-1]
        if now - newest_look.observed_at > thresholds.max_probe_gap:
            why = f" ({self.unavailable_reason})" if self.unavailable_reason else ""
            return HeartbeatAssessment(
                HeartbeatState.UNKNOWN,
                f"the newest look at the replicated heartbeats is {now - newest_look.observed_at:.1f} s old, "
                f"more than {thresholds.max_probe_gap:g} s{why}",
            )
        last_increase_at, highest = _last_increase(looks)
        newest_timestamp = highest / 1000 if self.measure is HeartbeatMeasure.TIMESTAMP_MS else None
        return _classify(looks, last_increase_at, newest_timestamp, thresholds.heartbeat_stale_seconds, now)


def _last_increase(looks: Sequence[HeartbeatObservation]) -> tuple[float | None, int]:
    # A lower value than before (a reset or recreated topic) is not progress, so track the maximum.
    highest = looks[0].newest
    last_increase_at = None
    for look in looks[1:]:
        if look.newest > highest:
            highest = look.newest
            last_increase_at = look.observed_at
    return last_increase_at, highest


def _classify(
    looks: Sequence[HeartbeatObservation],
    last_increase_at: float | None,
    newest_timestamp: float | None,
    stale: float,
    now: float,
) -> HeartbeatAssessment:
    found: dict[str, Any] = {"last_increase_at": last_increase_at, "newest_timestamp": newest_timestamp}
    if newest_timestamp is not None and now - newest_timestamp <= stale:
        return HeartbeatAssessment(
            HeartbeatState.ADVANCING,
            f"the newest replicated heartbeat is {now - newest_timestamp:.1f} s old "
            f"(fresh up to {stale:g} s)",
            **found,
        )
    if last_increase_at is not None and now - last_increase_at <= stale:
        return HeartbeatAssessment(
            HeartbeatState.ADVANCING,
            f"a newer replicated heartbeat arrived {now - last_increase_at:.1f} s ago",
            **found,
        )
    unchanged_since = looks[0].observed_at if last_increase_at is None else last_increase_at
    watched = looks[-1].observed_at - unchanged_since
    if newest_timestamp is not None:
        return HeartbeatAssessment(
            HeartbeatState.STOPPED,
            f"the newest replicated heartbeat is {now - newest_timestamp:.1f} s old "
            f"(stale after {stale:g} s) "
            f"and no newer one arrived in the last {stale:g} s",
            **found,
        )
    if watched >= stale:
        return HeartbeatAssessment(
            HeartbeatState.STOPPED,
            f"the replicated heartbeat offset has not moved for {watched:.1f} s (stale after {stale:g} s)",
            **found,
        )
    return HeartbeatAssessment(
        HeartbeatState.UNKNOWN,
        f"the replicated heartbeat offset was watched unchanged for only {watched:.1f} s "
        f"of the {stale:g} s needed",
        pending=True,
        **found,
    )


# ---------------------------------------------------------------------------------------------------
# The down decision


@dataclass(frozen=True)
class DownDecision:
    """Whether the down sensor should succeed.

    :param is_down: the watched cluster is down; fail over.
    :param split_suspected: probes fail but the cluster is alive and replicating: a network split
        between Airflow and it. Never together with ``is_down``; log the reason as a warning.
    :param reason: the explanation for the operator.
    :param verdict: the probe verdict behind the decision.
    :param heartbeats: the heartbeat state consulted, or None when probes alone ruled out "down".
    """

    is_down: bool
    split_suspected: bool
    reason: str
    verdict: Verdict
    heartbeats: HeartbeatState | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the decision as JSON types only, e.g. for a TriggerEvent payload."""
        return {
            "kind": "down",
            "is_down": self.is_down,
            "split_suspected": self.split_suspected,
            "reason": self.reason,
            "verdict": self.verdict.to_dict(),
            "heartbeats": None if self.heartbeats is None else self.heartbeats.value,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DownDecision:
        """Rebuild a decision from :meth:`to_dict` output.

        :param data: the mapping.
        """
        heartbeats = data.get("heartbeats")
        return cls(
            is_down=data["is_down"],
            split_suspected=data["split_suspected"],
            reason=data["reason"],
            verdict=Verdict.from_dict(data["verdict"]),
            heartbeats=None if heartbeats is None else HeartbeatState(heartbeats),
        )


def _proves_life_after(assessment: HeartbeatAssessment, failing_since: float, stale: float) -> bool:
    # A heartbeat first seen, or stamped, more than `stale` after the first failed probe cannot be
    # one that was in flight when the cluster died (replication latency and clock skew stay within
    # `stale` by the threshold's definition), so the cluster was alive while Airflow could not reach it.
    cutoff = failing_since + stale
    seen_late = assessment.last_increase_at is not None and assessment.last_increase_at >= cutoff
    stamped_late = assessment.newest_timestamp is not None and assessment.newest_timestamp >= cutoff
    return seen_late or stamped_late


def _decide_on_advancing(
    verdict: Verdict, assessment: HeartbeatAssessment, thresholds: HealthThresholds, cluster: str
) -> DownDecision:
    assert verdict.failing_since is not None  # a down verdict always has a failing run
    if _proves_life_after(assessment, verdict.failing_since, thresholds.heartbeat_stale_seconds):
        return DownDecision(
            is_down=False,
            split_suspected=True,
            reason=(
                f"NETWORK SPLIT SUSPECTED, not failing over: Airflow has not reached cluster {cluster} since "
                f"{format_clock(verdict.failing_since)} UTC ({verdict.consecutive_failures} failed probes), "
                f"yet its heartbeats keep arriving on the other cluster ({assessment.reason}). Cluster "
                f"{cluster} is alive and MirrorMaker 2 still replicates from it; check the network between "
                f"Airflow and {cluster}."
            ),
            verdict=verdict,
            heartbeats=assessment.state,
        )
    return DownDecision(
        is_down=False,
        split_suspected=False,
        reason=(
            f"not down yet: probes say cluster {cluster} is down ({verdict.reason}), but its heartbeats "
            f"on the other cluster still look alive ({assessment.reason}). Heartbeats written just before "
            f"a failure look fresh for up to {thresholds.heartbeat_stale_seconds:g} s, so waiting until "
            f"they stop (down) or prove the cluster alive (network split)."
        ),
        verdict=verdict,
        heartbeats=assessment.state,
    )


def decide_down(
    history: Iterable[ProbeResult],
    heartbeats: HeartbeatTrail | None,
    thresholds: HealthThresholds,
    now: float,
    require_corroboration: bool = True,
) -> DownDecision:
    """Decide whether the watched cluster is down, corroborated by its replicated heartbeats.

    Down when the probes say down and the heartbeats stopped. Probes down but heartbeats advancing is
    never down: a network split when the heartbeats prove life after the failures began, otherwise a
    wait. Heartbeats watched too briefly (``pending``) mean a wait under any policy. Without heartbeat
    evidence the outcome follows ``require_corroboration``, and the reason says that corroboration was
    unavailable.

    :param history: probes of the watched cluster.
    :param heartbeats: its heartbeats as seen on the other cluster; None when the pair does not
        replicate with MirrorMaker 2 (pass ``require_corroboration=False`` then, or nothing is ever down).
    :param thresholds: validated thresholds.
    :param now: unix seconds.
    :param require_corroboration: refuse "down" when heartbeats cannot be checked.
    """
    probes = _in_time_order(history)
    verdict = judge(probes, thresholds, now)
    if verdict.state is not HealthState.DOWN:
        return DownDecision(False, False, f"not down: {verdict.reason}", verdict)
    cluster = probes[-1].cluster
    if heartbeats is None:
        assessment = HeartbeatAssessment(
            HeartbeatState.UNKNOWN,
            "the pair has no MirrorMaker 2 heartbeats to check (no heartbeat trail given)",
        )
    else:
        assessment = heartbeats.assess(thresholds, now)
    if assessment.state is HeartbeatState.STOPPED:
        reason = f"{verdict.reason}. Corroborated by MirrorMaker 2: {assessment.reason}"
        return DownDecision(True, False, reason, verdict, assessment.state)
    if assessment.state is HeartbeatState.ADVANCING:
        return _decide_on_advancing(verdict, assessment, thresholds, cluster)
    if assessment.pending:
        # Corroboration is on its way, not missing: waiting costs at most the stale time, under any policy.
        reason = (
            f"not down yet: probes say cluster {cluster} is down, and its heartbeats have stopped moving, "
            f"but not for long enough to tell ({assessment.reason}). {verdict.reason}"
        )
        return DownDecision(False, False, reason, verdict, assessment.state)
    if require_corroboration:
        reason = (
            f"not down: probes say cluster {cluster} is down, but corroboration is unavailable: "
            f"{assessment.reason}. Not declaring down because require_corroboration=True. {verdict.reason}"
        )
        return DownDecision(False, False, reason, verdict, assessment.state)
    reason = (
        f"{verdict.reason}. Declared down on probes alone (require_corroboration=False); corroboration is "
        f"unavailable: {assessment.reason}"
    )
    return DownDecision(True, False, reason, verdict, assessment.state)


# ---------------------------------------------------------------------------------------------------
# The recovered decision


def replication_lag(
    source_high: int, source_low: int, sync: tuple[int, int] | None, target_high: int
) -> int | None:
    """Estimate how many source offsets the replicated partition still lacks, from the newest MM2 offset sync.

    ``replicated_upstream_end = sync_upstream + (target_high - sync_downstream)``: records after the
    sync are assumed copied one-for-one. Where the source has gaps after the sync (transaction
    markers, compaction), fewer records than offsets were copied, so the estimate of progress is low
    and the lag high: it errs toward waiting. The same holds for a transaction marker at the very end
    of the source log, which keeps the lag at 1 until the next record (raise ``max_replication_lag``
    for transactional topics). Caveat: if MM2 itself writes transactionally (``exactly.once.support``),
    its markers on the target inflate ``target_high`` and the estimate may be low by one per MM2
    transaction since the sync.

    :param source_high: high watermark of the source partition on the active cluster.
    :param source_low: its low watermark.
    :param sync: the newest offset sync of the flow toward the recovered cluster, as
        ``(upstream_offset, downstream_offset)``, or None when there is none.
    :param target_high: high watermark of the replicated partition on the recovered cluster.
    :returns: the lag in offsets (0 when caught up), or None when unknown: no sync while the source
        holds records, or a sync beyond the source's end (it describes another history of the topic).
    """
    values = {"source_high": source_high, "source_low": source_low, "target_high": target_high}
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{name} must be a non-negative offset, got {value}")
    if source_high < source_low:
        raise ValueError(
            f"source_high {source_high} is below source_low {source_low}; watermarks are swapped"
        )
    if sync is None:
        return 0 if source_high == source_low else None
    upstream, downstream = sync
    if upstream < 0 or downstream < 0:
        raise ValueError(f"offset sync offsets must be non-negative, got {sync}")
    if upstream >= source_high:
        return None
    replicated_upstream_end = upstream + (target_high - downstream)
    return max(0, source_high - replicated_upstream_end)


def find_data_loss(recorded_high: Mapping[str, int], current_high: Mapping[str, int]) -> dict[str, int]:
    """Compare a cluster's high watermarks now with those recorded while it was last active.

    A high watermark never goes back on a healthy cluster; when it does, the offsets in between are
    gone. A partition recorded but absent now counts as fully lost (its recorded high watermark is
    the count; the records below its low watermark then were already gone, so this is an upper bound).
    New partitions are ignored.

    :param recorded_high: ``{partition key: high watermark}`` recorded while the cluster was active.
    :param current_high: the same keys' high watermarks now.
    :returns: ``{partition key: offsets lost}`` for every partition that lost something.
    """
    loss: dict[str, int] = {}
    for key, recorded in recorded_high.items():
        current = current_high.get(key, 0)
        if recorded < 0 or current < 0:
            raise ValueError(
                f"high watermarks must be non-negative, got {recorded} recorded and {current} now for {key}"
            )
        if current < recorded:
            loss[key] = recorded - current
    return loss


@dataclass(frozen=True)
class RecoveryDecision:
    """Whether the recovered sensor should succeed (and a failback may start).

    :param is_recovered: stable, caught up and nothing lost.
    :param reason: the explanation for the operator.
    :param waiting_on: the unmet conditions, one line each (``stability: ...``, ``replication lag ...``).
    :param data_loss: ``{partition key: offsets lost}``; non-empty means failback is refused: raise
        :meth:`data_loss_error`.
    :param verdict: the probe verdict behind the decision.
    """

    is_recovered: bool
    reason: str
    waiting_on: list[str] = field(default_factory=list)
    data_loss: dict[str, int] = field(default_factory=dict)
    verdict: Verdict | None = None

    def data_loss_error(self) -> DataLossError | None:
        """Return the error to raise when data was lost, or None."""
        return DataLossError(self.reason) if self.data_loss else None

    def to_dict(self) -> dict[str, Any]:
        """Return the decision as JSON types only, e.g. for a TriggerEvent payload."""
        return {
            "kind": "recovered",
            "is_recovered": self.is_recovered,
            "reason": self.reason,
            "waiting_on": list(self.waiting_on),
            "data_loss": dict(self.data_loss),
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecoveryDecision:
        """Rebuild a decision from :meth:`to_dict` output.

        :param data: the mapping.
        """
        verdict = data.get("verdict")
        return cls(
            is_recovered=data["is_recovered"],
            reason=data["reason"],
            waiting_on=list(data["waiting_on"]),
            data_loss={str(key): int(value) for key, value in data["data_loss"].items()},
            verdict=None if verdict is None else Verdict.from_dict(verdict),
        )


def _stability_wait(verdict: Verdict, thresholds: HealthThresholds, now: float) -> str | None:
    window = thresholds.stability_window
    if verdict.state is not HealthState.HEALTHY or verdict.healthy_since is None:
        return f"stability: not healthy now ({verdict.reason})"
    healthy_for = now - verdict.healthy_since
    if healthy_for < window:
        return (
            f"stability: OK without interruption for {healthy_for:.1f} s of the {window:g} s window; "
            f"a failed or degraded probe, or a gap in probing over {thresholds.max_probe_gap:g} s, "
            f"restarts it ({verdict.reason})"
        )
    return None


def _lag_waits(lags: Mapping[str, int | None], max_lag: int) -> list[str]:
    if not lags:
        return ["replication lag: no partition lags given, so catching up cannot be shown"]
    waits: list[str] = []
    for key in sorted(lags):
        lag = lags[key]
        if lag is None:
            waits.append(
                f"replication lag {key}: unknown "
                "(no usable MirrorMaker 2 offset sync while the source has records)"
            )
        elif lag < 0:
            raise ValueError(f"replication lag for {key} must be >= 0, got {lag}")
        elif lag > max_lag:
            waits.append(f"replication lag {key}: {lag} records behind (at most {max_lag} allowed)")
    return waits


def _data_loss_reason(cluster: str, loss: Mapping[str, int]) -> str:
    items = [f"{key} lost {loss[key]} record(s)" for key in sorted(loss)]
    return (
        f"DATA LOSS on cluster {cluster}, failback refused: it holds fewer records than when it was last "
        f"active ({_list_partitions(items)}; {sum(loss.values())} in total). Its high watermarks went "
        f"backwards (unclean leader election, a restored or recreated cluster, deleted topics). Keep the "
        f"job where it is and investigate; fail back only after the records are restored or a person "
        f"accepts the loss."
    )


def decide_recovered(
    history: Iterable[ProbeResult],
    thresholds: HealthThresholds,
    now: float,
    lags: Mapping[str, int | None],
    data_loss: Mapping[str, int],
) -> RecoveryDecision:
    """Decide whether a cluster has recovered enough to fail back to it.

    All three must hold: (1) the trailing run of OK probes started at least ``stability_window``
    ago with no failed or degraded probe and no probing gap over ``max_probe_gap`` in it, and the
    newest probe is recent; (2) every given partition's lag is known and at most
    ``max_replication_lag`` (an empty ``lags`` proves nothing and is not caught up); (3) no data lost.

    :param history: probes of the recovering cluster; keep at least ``history_horizon`` seconds.
    :param thresholds: validated thresholds.
    :param now: unix seconds.
    :param lags: ``{partition key: lag}`` from :func:`replication_lag` (None = unknown).
    :param data_loss: ``{partition key: offsets lost}`` from :func:`find_data_loss`.
    """
    probes = _in_time_order(history)
    cluster = probes[-1].cluster if probes else "(unprobed)"
    verdict = judge(probes, thresholds, now)
    waiting: list[str] = []
    stability = _stability_wait(verdict, thresholds, now)
    if stability is not None:
        waiting.append(stability)
    waiting.extend(_lag_waits(lags, thresholds.max_replication_lag))
    if any(lost < 0 for lost in data_loss.values()):
        raise ValueError(f"data_loss counts must be >= 0, got {dict(data_loss)}")
    loss = {str(key): int(lost) for key, lost in data_loss.items() if lost > 0}
    if loss:
        return RecoveryDecision(False, _data_loss_reason(cluster, loss), waiting, loss, verdict)
    if waiting:
        reason = f"cluster {cluster} has not recovered yet; waiting on: " + "; ".join(
            waiting[: _PARTITIONS_IN_REASON + 1]
        )
        if len(waiting) > _PARTITIONS_IN_REASON + 1:
            reason += f"; and {len(waiting) - _PARTITIONS_IN_REASON - 1} more"
        return RecoveryDecision(False, reason, waiting, {}, verdict)
    reason = (
        f"cluster {cluster} has recovered: {verdict.reason}; all {len(lags)} partition(s) within "
        f"{thresholds.max_replication_lag} record(s) of replication lag; no data lost"
    )
    return RecoveryDecision(True, reason, [], {}, verdict)

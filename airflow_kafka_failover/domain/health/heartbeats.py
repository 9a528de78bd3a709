"""Corroboration from MirrorMaker 2 heartbeats: do the watched cluster's replicated heartbeats still arrive?

Pure, like :mod:`airflow_kafka_failover.domain.health.verdict`: callers pass their looks at
``<watched>.heartbeats`` on the other cluster and ``now``. A :class:`HeartbeatTrail` of
:class:`HeartbeatObservation` looks is assessed into a :class:`HeartbeatAssessment` (a
:class:`HeartbeatState`: advancing, stopped or unknown), which tells a dead cluster from a network
split between Airflow and a live one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from airflow_kafka_failover.domain.health.verdict import HealthThresholds


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

"""The down sensor's decision: probes say down, and MirrorMaker 2 heartbeats corroborate it. Pure, no I/O.

:func:`decide_down` adds corroboration from MirrorMaker 2 heartbeats to the probe verdict, which tells a
dead cluster from a network split between Airflow and a live one (:class:`DownDecision`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from airflow_kafka_failover.domain.health.evidence import ProbeResult, format_clock, in_time_order
from airflow_kafka_failover.domain.health.heartbeats import (
    HeartbeatAssessment,
    HeartbeatState,
    HeartbeatTrail,
)
from airflow_kafka_failover.domain.health.verdict import HealthState, HealthThresholds, Verdict, judge


class DownDecision(BaseModel):
    """Whether the down sensor should succeed; the down sensor's trigger-event and XCom payload.

    :param kind: always ``down``; tells this payload from a :class:`RecoveryDecision`.
    :param is_down: the watched cluster is down; fail over.
    :param split_suspected: probes fail but the cluster is alive and replicating: a network split
        between Airflow and it. Never together with ``is_down``; log the reason as a warning.
    :param reason: the explanation for the operator.
    :param verdict: the probe verdict behind the decision.
    :param heartbeats: the heartbeat state consulted, or None when probes alone ruled out "down".
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["down"] = "down"
    is_down: bool
    split_suspected: bool
    reason: str
    verdict: Verdict
    heartbeats: HeartbeatState | None = None


def _proves_life_after(assessment: HeartbeatAssessment, failing_since: float, stale: float) -> bool:
    # A heartbeat first seen, or stamped, more than `stale` after the first failed probe cannot be
    # one that was in flight when the cluster died (replication latency and clock skew stay within
    # `stale` by the threshold's definition), so the cluster was alive while Airflow could not reach it.
    cutoff = failing_since + stale
    seen_late = assessment.last_increase_at is not None and assessment.last_increase_at >= cutoff
    stamped_late = assessment.newest_timestamp is not None and assessment.newest_timestamp >= cutoff
    return seen_late or stamped_late


def _decide_on_advancing(
    verdict: Verdict,
    assessment: HeartbeatAssessment,
    thresholds: HealthThresholds,
    cluster: str,
    answers: bool = False,
) -> DownDecision:
    assert verdict.failing_since is not None  # a down verdict always has a failing run
    proves_life = _proves_life_after(assessment, verdict.failing_since, thresholds.heartbeat_stale_seconds)
    if proves_life and answers:
        # Airflow reaches the cluster, so this is no split; but it still takes and copies MM2's heartbeats.
        return DownDecision(
            is_down=False,
            split_suspected=False,
            reason=(
                f"not down: probes say cluster {cluster} cannot serve the job ({verdict.reason}), yet it "
                f"answers and its heartbeats keep arriving on the other cluster ({assessment.reason}): "
                f"MirrorMaker 2 still writes to and copies from {cluster}, so it is not failed over on the "
                "trouble of some partitions; check those partitions' leaders and replicas."
            ),
            verdict=verdict,
            heartbeats=assessment.state,
        )
    if proves_life:
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
    probes = in_time_order(history)
    verdict = judge(probes, thresholds, now)
    if verdict.state is not HealthState.DOWN:
        return DownDecision(
            is_down=False, split_suspected=False, reason=f"not down: {verdict.reason}", verdict=verdict
        )
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
        return DownDecision(
            is_down=True, split_suspected=False, reason=reason, verdict=verdict, heartbeats=assessment.state
        )
    if assessment.state is HeartbeatState.ADVANCING:
        return _decide_on_advancing(verdict, assessment, thresholds, cluster, answers=not probes[-1].failed)
    if assessment.pending:
        # Corroboration is on its way, not missing: waiting costs at most the stale time, under any policy.
        reason = (
            f"not down yet: probes say cluster {cluster} is down, and its heartbeats have stopped moving, "
            f"but not for long enough to tell ({assessment.reason}). {verdict.reason}"
        )
        return DownDecision(
            is_down=False, split_suspected=False, reason=reason, verdict=verdict, heartbeats=assessment.state
        )
    if require_corroboration:
        reason = (
            f"not down: probes say cluster {cluster} is down, but corroboration is unavailable: "
            f"{assessment.reason}. Not declaring down because require_corroboration=True. {verdict.reason}"
        )
        return DownDecision(
            is_down=False, split_suspected=False, reason=reason, verdict=verdict, heartbeats=assessment.state
        )
    reason = (
        f"{verdict.reason}. Declared down on probes alone (require_corroboration=False); corroboration is "
        f"unavailable: {assessment.reason}"
    )
    return DownDecision(
        is_down=True, split_suspected=False, reason=reason, verdict=verdict, heartbeats=assessment.state
    )

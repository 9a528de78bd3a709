"""The health sensors' decisions, built on probe verdicts: pure, no I/O, no clock.

- :func:`decide_down` adds corroboration from MirrorMaker 2 heartbeats to the probe verdict, which
  tells a dead cluster from a network split between Airflow and a live one (:class:`DownDecision`).
- :func:`decide_recovered` requires stable health, caught-up replication and no lost data before a
  failback (:class:`RecoveryDecision`); :func:`replication_lag` and :func:`find_data_loss` measure
  the last two.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_kafka_failover.exceptions import DataLossError
from airflow_kafka_failover.health.evidence import ProbeResult, format_clock
from airflow_kafka_failover.health.heartbeats import HeartbeatAssessment, HeartbeatState, HeartbeatTrail
from airflow_kafka_failover.health.verdict import (
    _PARTITIONS_IN_REASON,
    HealthState,
    HealthThresholds,
    Verdict,
    _in_time_order,
    _list_partitions,
    judge,
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


def lag_by_timestamps(source_newest_ms: int | None, replica_newest_ms: int | None) -> int | None:
    """Replication lag when MirrorMaker 2 left no offset sync to measure it with: 0 or unknown.

    MM2 copies record timestamps, so a replica whose newest record is at least as new as the source's
    newest record holds everything up to the source's end (0). Otherwise, or when either side has no
    record, the lag is unknown (None) and the sensor keeps waiting. MM2 can go without emitting syncs for
    minutes after its target came back (its outstanding syncs to the dead target must time out first).

    :param source_newest_ms: timestamp of the newest record of the source partition.
    :param replica_newest_ms: timestamp of the newest record of its replica.
    """
    if source_newest_ms is None or replica_newest_ms is None:
        return None
    return 0 if replica_newest_ms >= source_newest_ms else None


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
                f"replication lag {key}: unknown (no usable MirrorMaker 2 offset sync while the source has "
                "records, and the replica lacks the source's newest record; if this lasts, check that MM2 "
                "replicates into the recovering cluster: a dedicated-mode flow whose target was down can "
                "stay stopped until MM2 is restarted)"
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

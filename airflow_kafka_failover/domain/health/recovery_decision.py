"""The recovered sensor's decision: stable health, caught-up replication and no lost data. Pure, no I/O.

:func:`decide_recovered` requires all three before a failback (:class:`RecoveryDecision`); the lag comes
from :mod:`airflow_kafka_failover.domain.health.lag_by_timestamps`, the loss from
:mod:`airflow_kafka_failover.domain.health.data_loss`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from airflow_kafka_failover.core.exceptions import DataLossError
from airflow_kafka_failover.domain.health.evidence import (
    PARTITIONS_IN_REASON,
    ProbeResult,
    in_time_order,
    list_partitions,
)
from airflow_kafka_failover.domain.health.verdict import HealthState, HealthThresholds, Verdict, judge


class RecoveryDecision(BaseModel):
    """Whether the recovered sensor should succeed (and a failback may start); its event and XCom payload.

    :param kind: always ``recovered``; tells this payload from a :class:`DownDecision`.
    :param is_recovered: stable, caught up and nothing lost.
    :param reason: the explanation for the operator.
    :param waiting_on: the unmet conditions, one line each (``stability: ...``, ``replication lag ...``).
    :param data_loss: ``{partition key: offsets lost}``; non-empty means failback is refused: raise
        :meth:`data_loss_error`.
    :param verdict: the probe verdict behind the decision.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["recovered"] = "recovered"
    is_recovered: bool
    reason: str
    waiting_on: list[str] = Field(default_factory=list)
    data_loss: dict[str, int] = Field(default_factory=dict)
    verdict: Verdict | None = None

    def data_loss_error(self) -> DataLossError | None:
        """Return the error to raise when data was lost, or None."""
        return DataLossError(self.reason) if self.data_loss else None


def _stability_wait(verdict: Verdict, thresholds: HealthThresholds, now: float) -> str | None:
    window = thresholds.stability_window_seconds
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


def _lag_waits(lags: Mapping[str, int | None], max_lag: int, measure_problem: str | None) -> list[str]:
    if not lags and measure_problem:
        return [f"replication lag: {measure_problem} (measured again at the next probe)"]
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


def _data_loss_reason(cluster: str, loss: Mapping[str, int], mirrored_topics: Collection[str]) -> str:
    def topic(key: str) -> str:
        return key.rsplit("-", 1)[0]

    own = sorted(key for key in loss if topic(key) not in mirrored_topics)
    copies = sorted(key for key in loss if topic(key) in mirrored_topics)
    parts = []
    for keys, what in (
        (own, "its own topics"),
        (copies, "MirrorMaker 2's copies of the other cluster's topics, which it refills when it replicates"),
    ):
        if keys:
            items = [f"{key} lost {loss[key]} record(s)" for key in keys]
            parts.append(f"{what}: {list_partitions(items)} ({sum(loss[key] for key in keys)} in total)")
    return (
        f"DATA LOSS on cluster {cluster}, failback refused: it holds fewer records than when it was last "
        f"active; {'; '.join(parts)}. Its high watermarks went backwards (unclean leader election, a "
        f"restored or recreated cluster, deleted topics). Keep the job where it is and investigate; fail "
        f"back only after the records are restored or a person accepts the loss."
    )


def decide_recovered(
    history: Iterable[ProbeResult],
    thresholds: HealthThresholds,
    now: float,
    lags: Mapping[str, int | None],
    data_loss: Mapping[str, int],
    measure_problem: str | None = None,
    mirrored_topics: Collection[str] = (),
) -> RecoveryDecision:
    """Decide whether a cluster has recovered enough to fail back to it.

    All three must hold: (1) the trailing run of OK probes started at least ``stability_window_seconds``
    ago with no failed or degraded probe and no probing gap over ``max_probe_gap`` in it, and the
    newest probe is recent; (2) every given partition's lag is known and at most
    ``max_replication_lag`` (an empty ``lags`` proves nothing and is not caught up); (3) no data lost.

    :param history: probes of the recovering cluster; keep at least ``history_horizon`` seconds.
    :param thresholds: validated thresholds.
    :param now: unix seconds.
    :param lags: ``{partition key: lag}`` from
        :func:`~airflow_kafka_failover.domain.health.lag_by_timestamps.replication_lag` (None = unknown).
    :param data_loss: ``{partition key: offsets lost}`` from
        :func:`~airflow_kafka_failover.domain.health.data_loss.find_data_loss`.
    :param measure_problem: why the lags could not be measured this time (e.g. the replica did not answer);
        with no ``lags`` it is the reason given, instead of a lag said to be unknown.
    :param mirrored_topics: topics of the recovering cluster that MirrorMaker 2 fills from the other
        cluster; a data-loss reason names the cluster's own topics first and these apart.
    """
    probes = in_time_order(history)
    cluster = probes[-1].cluster if probes else "(unprobed)"
    verdict = judge(probes, thresholds, now)
    waiting: list[str] = []
    stability = _stability_wait(verdict, thresholds, now)
    if stability is not None:
        waiting.append(stability)
    waiting.extend(_lag_waits(lags, thresholds.max_replication_lag, measure_problem))
    if any(lost < 0 for lost in data_loss.values()):
        raise ValueError(f"data_loss counts must be >= 0, got {dict(data_loss)}")
    loss = {str(key): int(lost) for key, lost in data_loss.items() if lost > 0}
    if loss:
        return RecoveryDecision(
            is_recovered=False,
            reason=_data_loss_reason(cluster, loss, mirrored_topics),
            waiting_on=waiting,
            data_loss=loss,
            verdict=verdict,
        )
    if waiting:
        reason = f"cluster {cluster} has not recovered yet; waiting on: " + "; ".join(
            waiting[: PARTITIONS_IN_REASON + 1]
        )
        if len(waiting) > PARTITIONS_IN_REASON + 1:
            reason += f"; and {len(waiting) - PARTITIONS_IN_REASON - 1} more"
        return RecoveryDecision(is_recovered=False, reason=reason, waiting_on=waiting, verdict=verdict)
    reason = (
        f"cluster {cluster} has recovered: {verdict.reason}; all {len(lags)} partition(s) within "
        f"{thresholds.max_replication_lag} record(s) of replication lag; no data lost"
    )
    return RecoveryDecision(is_recovered=True, reason=reason, verdict=verdict)

"""Every pair of a config in one table, the ones in trouble first (``kafka-failover status`` over a fleet).

Pure. A pair's trouble is the most serious of what its status holds: ``act`` (``problems``: it needs a person,
as the exit code 4), ``unread`` (something could not be read, as the exit code 5), ``warning``, or ``ok``.
Within one kind, the pair further behind comes first: the larger lag on the active cluster, then the older
last batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

from airflow_kafka_failover.domain.status.model import PairStatus, _View


class Trouble(IntEnum):
    """How much a pair needs attention; lower is more urgent (the table's order)."""

    ACT = 0
    UNREAD = 1
    WARNING = 2
    OK = 3

    @property
    def label(self) -> str:
        return {0: "ACTION NEEDED", 1: "could not read", 2: "warning", 3: "ok"}[self.value]


def trouble_of(status: PairStatus) -> Trouble:
    """The most serious kind of trouble in ``status``."""
    if status.problems:
        return Trouble.ACT
    if status.unread:
        return Trouble.UNREAD
    return Trouble.WARNING if status.warnings else Trouble.OK


class FleetRow(_View):
    """One pair in the fleet's table.

    :param pair: its name.
    :param active: the active cluster (None: the record could not be read).
    :param epoch: the record's epoch.
    :param job: the job's state (``running``, ``failed``, ...).
    :param last_batch_age_seconds: how long ago the job's last batch was committed (None: none or unread).
    :param lag: the job's lag on the active cluster, summed over partitions (None: unknown).
    :param replication_lag: MirrorMaker 2's lag toward the standby, summed (None: unknown or not shown).
    :param heartbeat_age_seconds: age of the newest replicated heartbeat on the standby (None: unread).
    :param trouble: ``ACTION NEEDED``, ``could not read``, ``warning`` or ``ok``.
    :param first: the first problem, unread part or warning, in words ("" when ok).
    """

    pair: str
    active: str | None
    epoch: int | None
    job: str
    last_batch_age_seconds: float | None
    lag: int | None
    replication_lag: int | None
    heartbeat_age_seconds: float | None
    trouble: str
    first: str = ""


def _replication_lag(status: PairStatus) -> int | None:
    lags = list(status.replication.lags.values()) if status.replication else []
    return None if not lags or any(lag is None for lag in lags) else sum(lag or 0 for lag in lags)


def _first(status: PairStatus) -> str:
    items = [problem.what for problem in status.problems] + status.unread + status.warnings
    return items[0] if items else ""


def fleet_rows(statuses: Sequence[PairStatus]) -> list[FleetRow]:
    """The rows of the fleet's table, in trouble order (see the module).

    :param statuses: the status of every pair shown.
    """

    def order(status: PairStatus) -> tuple[int, int, float, str]:
        age = status.job.last_batch_age_seconds
        return (trouble_of(status), -(status.total_lag or 0), -(age if age is not None else 0.0), status.pair)

    return [
        FleetRow(
            pair=status.pair,
            active=status.active,
            epoch=status.epoch,
            job=str(status.job.state),
            last_batch_age_seconds=status.job.last_batch_age_seconds,
            lag=status.total_lag,
            replication_lag=_replication_lag(status),
            heartbeat_age_seconds=status.replication.heartbeat_age_seconds if status.replication else None,
            trouble=trouble_of(status).label,
            first=_first(status),
        )
        for status in sorted(statuses, key=order)
    ]


def fleet_counts(statuses: Sequence[PairStatus]) -> dict[str, int]:
    """How many pairs have each kind of trouble, by label, most serious first."""
    troubles = [trouble_of(status) for status in statuses]
    return {kind.label: troubles.count(kind) for kind in Trouble}

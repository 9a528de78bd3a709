"""What the keeper makes of one look at a pair's job: pure, no I/O.

A *look* gathers what the keeper's trigger read (the fence, the switch lease, the job's process and status,
its committed progress, the end of the active cluster, the warm standby's slot); :func:`assess` turns it into
*findings*. Three findings call for action on a worker (a dead job is restarted in place; a switch that fenced
and then stopped working is finished; a missing warm standby driver is started); two are alerts (a stalled
job, a lagging job); the rest only explain why the keeper waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from airflow_kafka_failover.domain.switch_lease import SwitchLease

MIN_STALL_SECONDS = 60.0
"""A job is never called stalled before this long without a batch, whatever its trigger interval."""

ENDED_STATES = ("stopped", "fenced", "failed", "refused", "killed")
"""Job states (``status.json``) of a run that ended."""


class Finding(StrEnum):
    """One thing a look found."""

    DEAD = "dead"
    """The job of the current epoch is not running and nobody asked it to stop: restart it in place."""
    FENCE_AHEAD = "fence_ahead"
    """The fence is past the watched epoch and no switch holds the lease: a switch committed (watch the new
    job) or was interrupted (finish it)."""
    SWITCHING = "switching"
    """The fence is past the watched epoch and a switch holds the lease: wait for it."""
    HELD = "held"
    """The job stopped on a stop request at the current epoch: a person (or a tool) stopped it; not
    restarted until the start DAG runs it again."""
    UNKNOWN = "unknown"
    """Whether the job runs cannot be told (its cluster manager does not answer): wait, never start a
    second job of the same epoch."""
    STALLED = "stalled"
    """The job runs but committed no batch for the stall time while the active cluster has records it has
    not read."""
    LAGGING = "lagging"
    """The job is more records behind the end of the active cluster than allowed."""
    NO_STANDBY = "no_standby"
    """The pair wants a warm standby driver (``switch.standby: warm``) and none holds its slot: start one."""


ACTIONS = (Finding.DEAD, Finding.FENCE_AHEAD, Finding.NO_STANDBY)
ALERTS = (Finding.STALLED, Finding.LAGGING)


@dataclass(frozen=True)
class KeeperLimits:
    """The keeper's thresholds, from the pair's ``keeper`` and ``job`` settings.

    :param stall_seconds: time without a committed batch after which a running job with unread records is
        stalled.
    :param max_lag_records: total records behind the end above which the job is lagging (None: never).
    :param first_batch_seconds: time a job started or restarted has for its first batch before it is stalled
        (the job's ``first_batch_timeout_seconds``; never less than ``stall_seconds``): a start on a loaded
        machine or a busy cluster manager is not a stall.
    """

    stall_seconds: float
    max_lag_records: int | None = None
    first_batch_seconds: float = 0.0

    @classmethod
    def of(
        cls,
        stall_trigger_intervals: int,
        trigger_interval_seconds: float,
        max_lag_records: int | None,
        first_batch_seconds: float = 0.0,
    ) -> KeeperLimits:
        stall = max(MIN_STALL_SECONDS, stall_trigger_intervals * trigger_interval_seconds)
        return cls(stall, max_lag_records, max(stall, first_batch_seconds))

    def quiet_limit(self, look: JobLook) -> float:
        """The silence after which ``look``'s job is stalled: the first-batch time until it committed a batch
        since its start, the stall time after."""
        if look.batch_since_start:
            return self.stall_seconds
        return max(self.stall_seconds, self.first_batch_seconds)


@dataclass(frozen=True)
class JobLook:
    """One look at the job of ``epoch``.

    :param at: unix seconds of the look.
    :param epoch: the epoch of the job the keeper watches (the record's).
    :param fence_epoch: the fencing marker's epoch (None: no marker yet).
    :param lease: the switch lease, if any.
    :param alive: the job runs (True), does not (False), or cannot be told (None).
    :param state: the job's last ``status.json`` state.
    :param stop_requested: a stop request is in the job's run folder.
    :param started_at: unix seconds the job was submitted.
    :param committed_at: unix seconds of its last committed batch (None before the first).
    :param behind: records behind the end of the active cluster per partition (None: not measured).
    :param standby_ready: a warm standby driver holds the pair's slot on the other cluster (None: the pair
        wants none).
    """

    at: float
    epoch: int
    fence_epoch: int | None
    lease: SwitchLease | None = None
    alive: bool | None = True
    state: str | None = None
    stop_requested: bool = False
    started_at: float | None = None
    committed_at: float | None = None
    behind: dict[str, int] | None = field(default=None)
    standby_ready: bool | None = None

    @property
    def lag(self) -> int | None:
        """Records behind the end, summed over the partitions (None: not measured)."""
        return None if self.behind is None else sum(max(0, n) for n in self.behind.values())

    @property
    def seconds_since_batch(self) -> float | None:
        """Seconds since the last committed batch or the job's start, whichever is later (None: unknown).

        A job restarted in place has had only the time since its start to commit: the batches in its
        checkpoint are its previous process's.
        """
        known = [moment for moment in (self.committed_at, self.started_at) if moment is not None]
        return None if not known else max(0.0, self.at - max(known))

    @property
    def batch_since_start(self) -> bool:
        """The job committed a batch since it was (re)started (a start time unknown counts as yes)."""
        if self.committed_at is None:
            return False
        return self.started_at is None or self.committed_at >= self.started_at


def assess(look: JobLook, limits: KeeperLimits) -> list[Finding]:
    """The findings of one look (in the order they matter: an action, or the reason to wait, comes first)."""
    if look.fence_epoch is not None and look.fence_epoch > look.epoch:
        lease = look.lease
        if lease is not None and lease.epoch == look.fence_epoch and lease.valid_at(look.at):
            return [Finding.SWITCHING]
        return [Finding.FENCE_AHEAD]
    if look.alive is None:
        return [Finding.UNKNOWN]
    if look.alive is False:
        if look.stop_requested and look.state in ("stopped", "killed"):
            return [Finding.HELD]
        return [Finding.DEAD]
    findings = []
    lag, quiet = look.lag, look.seconds_since_batch
    if quiet is not None and quiet > limits.quiet_limit(look) and lag:
        findings.append(Finding.STALLED)
    if limits.max_lag_records is not None and lag is not None and lag > limits.max_lag_records:
        findings.append(Finding.LAGGING)
    if look.standby_ready is False:
        findings.append(Finding.NO_STANDBY)
    return findings


def describe(look: JobLook, finding: Finding, limits: KeeperLimits) -> str:
    """A sentence for the log and the failed task."""
    lag, quiet = look.lag, look.seconds_since_batch
    quiet_text = "never" if quiet is None else f"{quiet:.0f} s ago"
    texts = {
        Finding.DEAD: f"the job of epoch {look.epoch} is not running (last state {look.state!r}) and no stop "
        "was requested",
        Finding.FENCE_AHEAD: f"the fence is at epoch {look.fence_epoch}, past the job's epoch {look.epoch}, "
        "and no switch holds the lease"
        + (f" ({look.lease.describe(look.at)})" if look.lease is not None else ""),
        Finding.SWITCHING: f"a switch to epoch {look.fence_epoch} is at work"
        + (f" ({look.lease.describe(look.at)})" if look.lease is not None else ""),
        Finding.HELD: f"the job of epoch {look.epoch} stopped on a stop request (state {look.state!r}); it "
        "is not restarted until the start DAG runs it",
        Finding.UNKNOWN: f"whether the job of epoch {look.epoch} runs cannot be told",
        Finding.STALLED: f"the job of epoch {look.epoch} runs but "
        + (
            f"committed its last batch {quiet_text} (stall time {limits.stall_seconds:.0f} s)"
            if look.batch_since_start
            else f"committed no batch in the {quiet_text.removesuffix(' ago')} since its start (first-batch "
            f"time {limits.quiet_limit(look):.0f} s)"
        )
        + f" while {lag} records wait on the active cluster",
        Finding.LAGGING: f"the job of epoch {look.epoch} is {lag} records behind the end of the active "
        f"cluster (max_lag_records {limits.max_lag_records})",
        Finding.NO_STANDBY: f"no warm standby driver waits for the switch after epoch {look.epoch} "
        "(switch.standby: warm)",
    }
    return texts[finding]

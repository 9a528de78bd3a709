"""The operator's view of a pair, typed: what the readers gathered, and what ``status``/``history`` show.

Pure data. The readers (:mod:`airflow_kafka_failover.io.status_readers`) fill a :class:`PairReadings`, each
part with the error that kept it from being read; ``domain/status/assembly.py`` turns it into a
:class:`PairStatus`; ``domain/status/text.py`` prints it. A pair's status has:

- ``problems``: the pair needs a person (an interrupted switch, a fence that disagrees with the record,
  no running job);
- ``unread``: what could not be read (a cluster that does not answer, a damaged file), with why;
- ``warnings``: worth a look (stale MirrorMaker 2 heartbeats, unknown lag).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from airflow_kafka_failover.domain.active_record import ActiveRecord, SwitchEntry
from airflow_kafka_failover.domain.switch_lease import SwitchLease
from airflow_kafka_failover.run_format.fencing import FenceState
from airflow_kafka_failover.run_format.progress import JobProgress


class JobState(StrEnum):
    """What the record's job is doing: the job's own ``status.json`` state, corrected by its liveness."""

    RUNNING = "running"
    STARTING = "starting"
    STOPPED = "stopped"
    FENCED = "fenced"
    FAILED = "failed"
    REFUSED = "refused"
    KILLED = "killed"
    """Ended by force (a stop that timed out); written by the provider on main since c145bd1."""
    NONE = "none"
    """The record names no job (the pair was never started)."""
    UNKNOWN = "unknown"


NOT_RUNNING = (
    JobState.STOPPED,
    JobState.FENCED,
    JobState.FAILED,
    JobState.REFUSED,
    JobState.KILLED,
    JobState.NONE,
)


class FenceAgreement(StrEnum):
    """How the fencing marker compares with the active record."""

    SETTLED = "settled"
    """Same epoch and cluster."""
    NOT_FENCED_YET = "not fenced yet"
    """No marker at epoch 0: the pair never switched."""
    SWITCHING = "switch in progress"
    """The marker is at a later epoch and a switch holds its lease: it is at work."""
    AHEAD = "fence ahead of record"
    """The marker is at a later epoch and no switch holds the lease: the switch was interrupted."""
    BEHIND = "fence behind record"
    MISSING = "fence missing"
    OTHER_CLUSTER = "fence names another cluster"
    UNKNOWN = "unknown"


# ---- readings: what the readers gathered ---------------------------------------------------------------


@dataclass(frozen=True)
class ReplicationReading:
    """What the readers saw of MirrorMaker 2's replication from the active cluster toward the standby.

    :param source: the active cluster.
    :param target: the standby.
    :param lags: ``topic-partition`` of the active cluster -> offsets not replicated yet (None: unknown).
    :param lag_error: why the lag could not be measured.
    :param heartbeats_topic: the replicated heartbeats topic on the standby (``<active alias>.heartbeats``).
    :param heartbeat_newest_ms: timestamp of its newest record, None when empty or unread.
    :param heartbeat_error: why it could not be read.
    :param standby_error: why the standby did not answer (then nothing else was read from it).
    :param heartbeat_stale_seconds: the pair's ``health.heartbeat_stale_seconds``.
    """

    source: str
    target: str
    lags: Mapping[str, int | None] = field(default_factory=dict)
    lag_error: str | None = None
    heartbeats_topic: str | None = None
    heartbeat_newest_ms: int | None = None
    heartbeat_error: str | None = None
    standby_error: str | None = None
    heartbeat_stale_seconds: float = 0.0


@dataclass(frozen=True)
class PairReadings:
    """Everything read about one pair, each part with the error that kept it from being read.

    :param pair: the pair's name.
    :param primary: its primary cluster.
    :param now: unix seconds of the reading.
    :param record: the active record (the initial one when none is stored); None when unreadable.
    :param record_stored: whether a record was stored (False: the initial record stands in).
    :param record_error: why the record could not be read.
    :param fence_path: the fencing marker's file.
    :param fence: the marker's state, None when there is none (or it could not be read).
    :param fence_error: why the marker could not be read.
    :param lease: the switch lease beside the marker, if any.
    :param job_status: the job's ``status.json`` (``{}`` when it wrote none).
    :param job_alive: whether its process runs (None: cannot be told, e.g. cluster deploy mode).
    :param job_where: where it runs, e.g. ``pid 123`` or a driver id.
    :param job_error: why the job handle could not be read.
    :param progress: the job's committed progress, None when unread.
    :param progress_error: why the checkpoint could not be read.
    :param active_ends: ``topic-partition`` -> end offset (high watermark) on the active cluster.
    :param active_error: why the active cluster could not be read.
    :param active_missing_topics: topics the job reads that the active cluster does not have.
    :param replication: MirrorMaker 2's replication toward the standby; None when the pair has no such flow.
    :param replication_note: why replication is not shown (no flow, an offset-preserving replicator).
    :param standby: the warm standby driver's slot (``switch.standby: warm``), None when the pair wants none.
    """

    pair: str
    primary: str
    now: float
    record: ActiveRecord | None = None
    record_stored: bool = True
    record_error: str | None = None
    fence_path: str = ""
    fence: FenceState | None = None
    fence_error: str | None = None
    lease: SwitchLease | None = None
    job_status: Mapping[str, Any] = field(default_factory=dict)
    job_alive: bool | None = None
    job_where: str | None = None
    job_error: str | None = None
    progress: JobProgress | None = None
    progress_error: str | None = None
    active_ends: Mapping[str, int] | None = None
    active_error: str | None = None
    active_missing_topics: tuple[str, ...] = ()
    replication: ReplicationReading | None = None
    replication_note: str | None = None
    standby: StandbyView | None = None


# ---- the view ----------------------------------------------------------------------------------------


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class StandbyView(_View):
    """The pair's warm standby driver (``switch.standby: warm``).

    :param cluster: the cluster it waits for (the one the job does not read).
    :param slot: its slot folder.
    :param ready: a driver holds the slot.
    :param state: the driver's last state (``waiting``, ``taken``, ``refused``, ``stopped``; None: none yet).
    :param pid: the pid in its state file.
    """

    cluster: str
    slot: str
    ready: bool
    state: str | None = None
    pid: int | None = None


class FenceView(_View):
    """The fencing marker. :param epoch: its epoch. :param cluster: its cluster. :param written_at: when."""

    epoch: int
    cluster: str
    written_at: str = ""


class JobView(_View):
    """The record's job.

    :param state: see :class:`JobState`.
    :param detail: why the state is what it is, in words.
    :param cluster: the cluster it reads.
    :param epoch: its epoch.
    :param deploy_mode: ``local``, ``client`` or ``cluster``.
    :param where: e.g. ``pid 1234``, or the driver or application id.
    :param alive: whether its process runs (None: cannot be told from here).
    :param status_updated_at: when the job last wrote its status.
    :param last_batch_id: its last committed batch.
    :param last_batch_at: when that batch was committed (ISO 8601, UTC).
    :param last_batch_age_seconds: how long ago.
    :param records: records written by its committed batches.
    :param state_operators: its stateful operators (None: a stateless query, or not recorded).
    :param state_rows: the rows their state holds after its last recorded batch.
    """

    state: JobState
    detail: str = ""
    cluster: str | None = None
    epoch: int | None = None
    deploy_mode: str | None = None
    where: str | None = None
    alive: bool | None = None
    status_updated_at: str | None = None
    last_batch_id: int | None = None
    last_batch_at: str | None = None
    last_batch_age_seconds: float | None = None
    records: int | None = None
    state_operators: int | None = None
    state_rows: int | None = None


class PartitionLag(_View):
    """The job's lag on one partition of the active cluster.

    :param partition: ``topic-partition``.
    :param end_offset: the partition's end offset (high watermark), None when unread.
    :param committed: the job's committed position (next offset to read), None before its first batch.
    :param lag: ``end_offset - committed``, None when either is unknown.
    """

    partition: str
    end_offset: int | None
    committed: int | None
    lag: int | None


class ReplicationView(_View):
    """MirrorMaker 2's replication from the active cluster toward the standby.

    :param source: the active cluster.
    :param target: the standby.
    :param lags: ``topic-partition`` -> offsets of the active cluster not on the standby yet (None: unknown).
    :param heartbeats_topic: the replicated heartbeats topic on the standby.
    :param heartbeat_age_seconds: age of its newest record (None: unread or empty).
    """

    source: str
    target: str
    lags: dict[str, int | None] = Field(default_factory=dict)
    heartbeats_topic: str | None = None
    heartbeat_age_seconds: float | None = None


class SwitchRow(_View):
    """One switch of the history, as ``history`` and ``status`` show it.

    :param at: when it was committed.
    :param kind: failover or failback.
    :param from_cluster: the cluster the job left (``from`` in JSON).
    :param to: the cluster it moved to.
    :param epoch: the epoch it reached.
    :param forced: whether it skipped the verdict.
    :param reason: why.
    :param triggered_by: the DAG run.
    :param gap_records: offsets missing on the target when it switched.
    :param max_duplicates: the plan's bound on records read twice (None: unbounded or not recorded).
    :param state: what the switch did with a stateful query's state: ``carried 2 operators``, or the warning
        ``state of 2 operators dropped at epoch 3``; None for a stateless query (or a switch recorded before
        the state was recorded).
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True, serialize_by_alias=True)

    at: str
    kind: str
    from_cluster: str = Field(alias="from")
    to: str
    epoch: int
    forced: bool
    reason: str
    triggered_by: str
    gap_records: int
    max_duplicates: int | None
    state: str | None = None

    @classmethod
    def of(cls, entry: SwitchEntry) -> SwitchRow:
        """The row of a history entry.

        :param entry: the entry.
        """
        bound = entry.plan.get("max_duplicates")
        return cls.model_validate(
            {
                "at": entry.at,
                "kind": str(entry.kind),
                "from": entry.from_,
                "to": entry.to,
                "epoch": entry.epoch,
                "forced": entry.forced,
                "reason": entry.reason,
                "triggered_by": entry.triggered_by,
                "gap_records": entry.gap_records,
                "max_duplicates": bound if isinstance(bound, int) and not isinstance(bound, bool) else None,
                "state": _state_words(entry),
            }
        )


def _state_words(entry: SwitchEntry) -> str | None:
    """The history entry's ``state`` in a few words (see :class:`SwitchRow`)."""
    state = (entry.model_extra or {}).get("state")
    if not isinstance(state, dict):
        return None
    if isinstance(state.get("warning"), str):
        return str(state["warning"])
    operators = state.get("operators")
    if state.get("policy") == "carry" and isinstance(operators, list):
        plural = "s" if len(operators) != 1 else ""
        return f"carried {len(operators)} operator{plural} from batch {state.get('batch_id')}"
    return None


class Problem(_View):
    """Something a person must act on. :param what: what is wrong. :param action: what to do."""

    what: str
    action: str


class PairStatus(_View):
    """The status of one pair.

    :param pair: its name.
    :param active: the active cluster (None when the record could not be read).
    :param epoch: the record's epoch.
    :param record_stored: False when no record is stored (the pair's initial state is shown).
    :param record_updated_at: when the record was last written.
    :param fence_path: the fencing marker's file.
    :param fence: the fencing marker, None when there is none or it could not be read.
    :param fence_agreement: how marker and record compare.
    :param job: the record's job.
    :param active_lag: the job's lag per partition of the active cluster.
    :param replication: MirrorMaker 2 toward the standby, None when not shown.
    :param standby: the warm standby driver, None when the pair wants none.
    :param recent_switches: the last switches, oldest first.
    :param switches_total: switches in the history.
    :param problems: what needs a person.
    :param unread: what could not be read, with why.
    :param warnings: worth a look; no effect on the exit code.
    """

    pair: str
    active: str | None
    epoch: int | None
    record_stored: bool
    record_updated_at: str | None = None
    fence_path: str = ""
    fence: FenceView | None = None
    fence_agreement: FenceAgreement
    job: JobView
    active_lag: list[PartitionLag] = Field(default_factory=list)
    replication: ReplicationView | None = None
    standby: StandbyView | None = None
    recent_switches: list[SwitchRow] = Field(default_factory=list)
    switches_total: int = 0
    problems: list[Problem] = Field(default_factory=list)
    unread: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def total_lag(self) -> int | None:
        """The job's lag summed over partitions; None when any partition's lag is unknown."""
        lags = [row.lag for row in self.active_lag]
        return None if not lags or any(lag is None for lag in lags) else sum(lag or 0 for lag in lags)


# ---- history ------------------------------------------------------------------------------------------


class PairHistory(_View):
    """The switch history of one pair (``kafka-failover history``).

    :param pair: its name.
    :param active: the active cluster.
    :param epoch: the record's epoch.
    :param record_stored: False when no record is stored yet (no switch happened).
    :param switches_total: switches in the history.
    :param switches: the last ``limit`` of them, oldest first.
    """

    pair: str
    active: str
    epoch: int
    record_stored: bool
    switches_total: int
    switches: list[SwitchRow]

    @classmethod
    def of(cls, record: ActiveRecord, stored: bool, limit: int | None = None) -> PairHistory:
        """The history view of a record.

        :param record: the active record.
        :param stored: whether it was stored (False: the initial record).
        :param limit: show only the last ``limit`` switches; None shows all.
        """
        entries = record.history if limit is None else record.history[-limit:] if limit > 0 else ()
        return cls(
            pair=record.pair,
            active=record.active,
            epoch=record.epoch,
            record_stored=stored,
            switches_total=len(record.history),
            switches=[SwitchRow.of(entry) for entry in entries],
        )

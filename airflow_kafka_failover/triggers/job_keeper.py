"""JobKeeperTrigger: looks at a pair's job from the triggerer every few seconds, and wakes the keeper task
when something must be done on a worker.

Each look reads the fencing marker and the switch lease, the job's process (or its YARN application, or its
Kubernetes driver pod through the Kubernetes API) and ``status.json``, its committed
progress and the end offsets of the active cluster (one client, kept for the trigger's life), and sends the
job's lag and the age of its last batch as metrics. The trigger yields one event and ends when a look finds
an action (``ACTIONS`` of ``domain/keeper_findings.py``), a new alert, an alert that cleared, or when the
keeper run's window ends; waiting (a switch at work, a job a person stopped, a cluster manager that
does not answer) is only logged, once per change. Nothing live crosses ``serialize()``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import asdict
from datetime import datetime
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import ClusterManagers
from airflow_kafka_failover.core.exceptions import CheckpointError
from airflow_kafka_failover.core.types import TopicPartition, partition_key
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import PairConfig
from airflow_kafka_failover.domain.health.evidence import describe_exception
from airflow_kafka_failover.domain.keeper_findings import (
    ACTIONS,
    ALERTS,
    Finding,
    JobLook,
    KeeperLimits,
    assess,
    describe,
)
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.hooks.storage import use_storage
from airflow_kafka_failover.io import metrics
from airflow_kafka_failover.io.lease_file import read_lease
from airflow_kafka_failover.run_format.fencing import FencingMarker
from airflow_kafka_failover.run_format.layout import stop_requested
from airflow_kafka_failover.run_format.options import DeployMode
from airflow_kafka_failover.run_format.progress import read_last_commit
from airflow_kafka_failover.run_format.standby import StandbySlot

WARN_EVERY_S = 300.0
"""How often the same kind of trouble (a job whose state cannot be told, a checkpoint that cannot be read, a
lag that cannot be measured) is logged again; each kind has its own timer."""
READ_TIMEOUT_S = 5.0
"""How long one read of the active cluster's offsets may take."""
LIVENESS_POLL_S = 1.0
"""How often, between two looks, the keeper checks that the job's process still runs (local and client
mode: one read of ``/proc``)."""
PARTITIONS_EVERY_S = 60.0
"""How often the active cluster's partition counts are read again (new partitions)."""


class JobKeeperTrigger(BaseTrigger):
    """Watch the job of one epoch until an action, an alert (new or cleared), or the end of the window.

    :param pair: the pair's name.
    :param job: the job's handle (the active record's ``job``).
    :param fencing_marker: the pair's fencing folder.
    :param kafka_config_id: the active cluster's connection (for its end offsets).
    :param topics: the topics the job reads on the active cluster.
    :param interval: seconds between looks.
    :param storage: ``{"connections": ..., "timeout_seconds": ...}`` of the pair's remote stores (its
        ``job.storage_connections`` and ``job.storage_timeout_seconds``).
    :param limits: :class:`KeeperLimits` as a mapping.
    :param deadline: unix seconds when the window ends.
    :param not_before: unix seconds before which a dead job is not reported (restart backoff).
    :param alerted: findings already alerted on (not raised again until they clear).
    :param state: the keeper run's own state (its window, its restarts), handed back in every event: an
        event is all a resumed task is sure to get (``dag.test()`` drops the deferral's kwargs).
    :param standby_slot: the folder of the pair's warm standby slot on the other cluster (None: the pair
        wants no warm standby).
    :param standby_not_before: unix seconds before which a missing warm standby is not reported (after a
        start that failed).
    """

    def __init__(
        self,
        pair: str,
        job: dict[str, Any],
        fencing_marker: str,
        kafka_config_id: str,
        topics: list[str],
        interval: float,
        limits: dict[str, Any],
        deadline: float,
        not_before: float = 0.0,
        alerted: list[str] | None = None,
        state: dict[str, Any] | None = None,
        storage: dict[str, Any] | None = None,
        standby_slot: str | None = None,
        standby_not_before: float = 0.0,
    ) -> None:
        super().__init__()
        self.pair, self.job, self.fencing_marker = pair, job, fencing_marker
        self.standby_slot, self.standby_not_before = standby_slot, standby_not_before
        self.storage = dict(storage or {})
        self.kafka_config_id, self.topics = kafka_config_id, list(topics)
        self.interval, self.limits, self.deadline = interval, limits, deadline
        self.not_before, self.alerted = not_before, list(alerted or [])
        self.state = dict(state or {})

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "pair": self.pair,
                "job": self.job,
                "fencing_marker": self.fencing_marker,
                "kafka_config_id": self.kafka_config_id,
                "topics": self.topics,
                "interval": self.interval,
                "limits": self.limits,
                "deadline": self.deadline,
                "not_before": self.not_before,
                "alerted": self.alerted,
                "state": self.state,
                "storage": self.storage,
                "standby_slot": self.standby_slot,
                "standby_not_before": self.standby_not_before,
            },
        )

    @classmethod
    def for_record(
        cls,
        pair: PairConfig,
        record: ActiveRecord,
        state: dict[str, Any],
        not_before: float = 0.0,
        alerted: list[str] | None = None,
        standby_slot: str | None = None,
    ) -> JobKeeperTrigger:
        """The trigger that keeps the job ``record`` names, with the pair's keeper settings.

        :param pair: the pair.
        :param record: its active record (with a job).
        :param state: the keeper run's state; its ``deadline`` ends the window.
        :param not_before: unix seconds before which a dead job is not reported.
        :param alerted: findings already alerted on.
        :param standby_slot: the pair's warm standby slot on the other cluster (None: none wanted); a start
            that failed is not tried again before ``state["standby_not_before"]``.
        """
        if record.job is None:
            raise ValueError(f"the record of pair {pair.name!r} names no job to keep")
        limits = KeeperLimits.of(
            pair.keeper.stall_trigger_intervals,
            pair.job.trigger_interval_seconds,
            pair.keeper.max_lag_records,
            pair.job.first_batch_timeout_seconds,
        )
        return cls(
            pair=pair.name,
            job=record.job,
            fencing_marker=str(pair.job.fencing_marker),
            kafka_config_id=pair.cluster(record.active).connection,
            topics=list(pair.topics_on(record.active)),
            interval=pair.keeper.interval_seconds,
            limits=asdict(limits),
            deadline=state["deadline"],
            not_before=not_before,
            alerted=alerted,
            standby_slot=standby_slot,
            standby_not_before=float(state.get("standby_not_before") or 0.0),
            state=state,
            storage={
                "connections": dict(pair.job.storage_connections),
                "timeout_seconds": pair.job.storage_timeout_seconds,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:

        try:
            self._use_storage()
            looker = JobLooker(
                self.pair, self.job, self.fencing_marker, self.kafka_config_id, self.topics, self.standby_slot
            )
            look_once = sync_to_async(looker.look, thread_sensitive=False)
            event = None
            while event is None:
                look = await look_once()
                event = self._event(look, looker)
                if event is None:
                    await self._until_next_look(looker, was_alive=look.alive)
        except Exception as exc:  # the keeper task fails with this message in its own log
            self.log.exception("the keeper of pair %s failed", self.pair)
            event = {"status": "error", "message": describe_exception(exc)}
        yield TriggerEvent({**event, "state": self.state})

    def _use_storage(self) -> None:
        """Register the pair's remote stores in the triggerer (each opens on first use, in a worker
        thread)."""

        handle = self.job
        use_storage(
            (self.fencing_marker, handle.get("run_dir", ""), handle.get("checkpoint", "")),
            self.storage.get("connections") or {},
            float(self.storage.get("timeout_seconds") or 10.0),
        )

    async def _until_next_look(self, looker: JobLooker, was_alive: bool | None) -> None:
        """Wait ``interval`` seconds, but end the wait as soon as a job that ran is seen gone.

        A full look reads files and asks the active cluster for its end offsets; whether the job's process
        runs is one read of ``/proc``, so it is checked every ``LIVENESS_POLL_S`` in between: a killed
        driver is noticed within about a second, not a whole interval.
        """

        deadline = time.monotonic() + self.interval
        alive = sync_to_async(looker.process_alive, thread_sensitive=False)
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(LIVENESS_POLL_S, left))
            if was_alive and await alive() is False:
                return

    def _event(self, look: JobLook, looker: JobLooker) -> dict[str, Any] | None:
        """The event this look calls for, or None to look again."""

        limits = KeeperLimits(**self.limits)
        findings = assess(look, limits)
        metrics.job_looked(
            self.pair, str(self.job.get("cluster")), look.lag, look.seconds_since_batch, look.standby_ready
        )
        looker.log_change(self.log, findings, look, limits)
        base = {"look": _look_payload(look), "findings": [f.value for f in findings], "alerted": self.alerted}
        action = next((f for f in findings if f in ACTIONS), None)
        if action is Finding.DEAD and look.at < self.not_before:
            action = None  # backing off before the next restart; logged by log_change
        if action is Finding.NO_STANDBY and look.at < self.standby_not_before:
            action = None  # the last start of a warm standby failed; backing off
        if action is not None:
            return {
                **base,
                "status": "act",
                "finding": action.value,
                "message": describe(look, action, limits),
            }
        new = [f for f in findings if f in ALERTS and f.value not in self.alerted]
        if new:
            text = "; ".join(describe(look, f, limits) for f in new)
            return {**base, "status": "alert", "finding": new[0].value, "message": text}
        if look.alive is True and not (look.fence_epoch or 0) > look.epoch:
            cleared = [name for name in self.alerted if name not in {f.value for f in findings}]
            if cleared:
                return {**base, "status": "cleared", "cleared": cleared, "message": f"cleared: {cleared}"}
        if look.at >= self.deadline:
            return {**base, "status": "window_end", "message": "the keeper's window ended"}
        return None


class KeeperPauseTrigger(BaseTrigger):
    """Wake the keeper task at ``until`` (unix seconds), handing back its state: a keeper with no job to
    watch yet, or one that waits before trying again.

    :param until: when to wake.
    :param state: the keeper run's state (see :class:`JobKeeperTrigger`).
    :param reason: why it waits, for the log.
    """

    def __init__(self, until: float, state: dict[str, Any], reason: str = "") -> None:
        super().__init__()
        self.until, self.state, self.reason = until, dict(state), reason

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"until": self.until, "state": self.state, "reason": self.reason},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        await asyncio.sleep(max(0.0, self.until - time.time()))
        yield TriggerEvent({"status": "wake", "message": self.reason, "state": self.state})


def _look_payload(look: JobLook) -> dict[str, Any]:
    return {
        "at": look.at,
        "epoch": look.epoch,
        "fence_epoch": look.fence_epoch,
        "alive": look.alive,
        "state": look.state,
        "committed_at": look.committed_at,
        "lag": look.lag,
        "standby_ready": look.standby_ready,
    }


def _unix(iso: str) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except (TypeError, ValueError):
        return None


class JobLooker:
    """Takes looks at one job (blocking I/O; run it in a worker thread). Keeps the Kafka client between looks.

    :param pair: the pair's name.
    :param job: the job's handle.
    :param fencing_marker: the pair's fencing marker path.
    :param kafka_config_id: the active cluster's connection.
    :param topics: the topics the job reads there.
    :param standby_slot: the pair's warm standby slot (None: none wanted).
    """

    def __init__(
        self,
        pair: str,
        job: dict[str, Any],
        fencing_marker: str,
        kafka_config_id: str,
        topics: list[str],
        standby_slot: str | None = None,
    ) -> None:
        self.standby_slot = standby_slot

        self.pair, self.handle = pair, JobHandle.from_dict(job)
        self.tracker = ClusterManagers()  # one Kubernetes client for the trigger's life
        self.fencing_marker, self.kafka_config_id, self.topics = fencing_marker, kafka_config_id, topics
        self._hook: Any = None
        self._admin: Any = None
        self._partitions: list[Any] = []
        self._starts: dict[Any, int] = {}
        self._partitions_at = 0.0
        self._warned_at: dict[str, float] = {}  # kind of trouble -> when it was last warned about
        self._last_logged: tuple[str, ...] | None = None  # nothing logged yet

    def look(self) -> JobLook:

        fence = FencingMarker(self.fencing_marker, self.pair).read()
        lease = read_lease(self.fencing_marker, self.pair)
        handle = self.handle
        committed, progress_at = self._progress()
        return JobLook(
            at=time.time(),
            epoch=handle.epoch,
            fence_epoch=None if fence is None else fence.epoch,
            lease=lease,
            alive=self._alive(),
            state=handle.status().get("state"),
            stop_requested=stop_requested(handle.run_dir),
            started_at=_unix(handle.submitted_at),
            committed_at=progress_at,
            behind=self._behind(committed),
            standby_ready=None if self.standby_slot is None else StandbySlot(self.standby_slot).held(),
        )

    def process_alive(self) -> bool | None:
        """The cheap check between looks: the job's process (None in cluster mode: only a look asks)."""

        if self.handle.deploy_mode == DeployMode.CLUSTER:
            return None
        return self.handle.process.is_running()

    def _alive(self) -> bool | None:
        """Whether the job runs; None when its cluster manager cannot tell (never taken as dead): it does
        not answer, does not know the application or pod, or the handle does not fit it."""

        try:
            return self.tracker.alive(self.handle)
        except Exception as exc:  # an unreachable cluster manager: wait, never start a second job
            self._warn(
                "state", f"cannot tell whether {self.handle.describe()} runs: {describe_exception(exc)}"
            )
            return None

    def _progress(self) -> tuple[dict[Any, int], float | None]:

        try:
            progress = read_last_commit(self.handle.checkpoint)
        except CheckpointError as exc:  # the restart or the plan reports it; the keeper only waits
            self._warn("checkpoint", f"cannot read the job's checkpoint: {exc}")
            return {}, None
        return progress.offsets, progress.committed_at

    def _behind(self, committed: dict[Any, int]) -> dict[str, int] | None:

        try:
            if self._hook is None:
                self._hook = KafkaClusterHook(self.kafka_config_id, timeout_seconds=READ_TIMEOUT_S)
                self._admin = self._hook.admin(READ_TIMEOUT_S)
            hook, admin = self._hook, self._admin
            if not self._partitions or time.monotonic() - self._partitions_at > PARTITIONS_EVERY_S:
                counts = hook.partition_counts(self.topics)
                self._partitions = [TopicPartition(t, p) for t, n in counts.items() for p in range(n)]
                self._starts = hook.offsets_at(self._partitions, False, READ_TIMEOUT_S, admin)
                self._partitions_at = time.monotonic()
            ends = hook.offsets_at(self._partitions, True, READ_TIMEOUT_S, admin)
        except Exception as exc:  # a cluster that does not answer: the lag is unknown, not zero
            self._hook = self._admin = None  # a new client next time: this one may be stuck
            self._partitions = []
            self._warn(
                "lag", f"cannot measure the job's lag on {self.kafka_config_id}: {describe_exception(exc)}"
            )
            return None
        return {
            partition_key(tp): end - committed.get(tp, self._starts.get(tp, 0)) for tp, end in ends.items()
        }

    def _warn(self, kind: str, text: str) -> None:
        """Log ``text`` unless trouble of the same ``kind`` was logged less than ``WARN_EVERY_S`` ago.

        :param kind: ``state``, ``checkpoint`` or ``lag``.
        :param text: what cannot be done, and why.
        """

        now = time.monotonic()
        last = self._warned_at.get(kind)
        if last is None or now - last > WARN_EVERY_S:
            self._warned_at[kind] = now
            logging.getLogger(__name__).warning("keeper of pair %s: %s", self.pair, text)

    def log_change(self, log: Any, findings: list[Finding], look: JobLook, limits: KeeperLimits) -> None:
        """Log the findings when they differ from the last look's (a quiet log while nothing changes)."""
        key = tuple(f.value for f in findings)
        if key == self._last_logged:
            return
        self._last_logged = key
        if not findings:
            log.info(
                "keeper of pair %s: the job of epoch %s runs (last batch %s, lag %s)",
                self.pair,
                look.epoch,
                "none yet" if look.committed_at is None else f"{look.seconds_since_batch:.0f} s ago",
                "unknown" if look.lag is None else f"{look.lag} records",
            )
        for finding in findings:
            log.info("keeper of pair %s: %s", self.pair, describe(look, finding, limits))

"""The keeper: one deferrable task per pair that keeps the job of the current epoch running.

It spends its time deferred in the triggerer (:class:`~airflow_kafka_failover.triggers.job_keeper.
JobKeeperTrigger` looks at the job every ``keeper.interval_seconds``) and comes back to a worker only to act:

- **a dead job** is restarted in place: same cluster, epoch and checkpoint, through the switch's own submit
  step (which adopts a run that is already there). Restarts back off (``restart_backoff_seconds``, doubling);
  after ``max_restarts`` restarts without a committed batch the task fails with the job's log tail, and the
  keeper leaves that job alone until it runs again (the start DAG) or the record moves on.
- **an interrupted switch** (the fence is one epoch past the record and no switch has held the lease for
  ``switch_lease_seconds``) is finished: the old job is stopped, the plan made from its checkpoint, the job
  submitted at the fence's epoch on the fence's cluster, and the record committed after its first batch,
  exactly as the switch DAG would have. ``docs/concepts.md`` argues why forward is the only safe direction.
- **a stall or a lag above ``max_lag_records``** fails the task (the alert) once; the alert is kept in the
  Variable ``kafka_failover.<pair>.keeper`` so the next run does not raise it again until it cleared.

It never acts against a switch: every action re-reads the record and the fence on the worker first, a
restart only happens while the fence is at the record's epoch, and the record's compare-and-set decides.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseOperator

from airflow_kafka_failover import version_compat
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import PairConfig

log = logging.getLogger(__name__)

IDLE_RECHECK_S = 30.0
"""How often a keeper without a job to watch (the pair never started) reads the record again."""
HEAL_BACKOFF_MAX_S = 600.0
"""The longest wait between two attempts to finish an interrupted switch."""


def keeper_variable(pair: str) -> str:
    """The Variable that holds the keeper's memory of a pair (alerts raised, a job given up on)."""
    return f"kafka_failover.{pair}.keeper"


@dataclass
class KeeperMemory:
    """What one keeper run leaves to the next.

    :param alerted: findings alerted on that have not cleared.
    :param gave_up: the run of the job the keeper stopped restarting (``job``, ``epoch``, ``at``,
        ``reason``).
    :param heal_failed: the last failed attempt to finish an interrupted switch (``epoch``, ``attempts``,
        ``at``).
    """

    alerted: list[str] = field(default_factory=list)
    gave_up: dict[str, Any] | None = None
    heal_failed: dict[str, Any] | None = None

    @classmethod
    def load(cls, pair: str) -> KeeperMemory:
        raw = version_compat.Variable.get(keeper_variable(pair), default=None)
        try:
            data = json.loads(raw) if isinstance(raw, str) else (raw or {})
            return cls(list(data.get("alerted", [])), data.get("gave_up"), data.get("heal_failed"))
        except (ValueError, AttributeError, TypeError) as exc:
            log.warning(
                "Variable %s is not valid (%s); starting with an empty memory", keeper_variable(pair), exc
            )
            return cls()

    def save(self, pair: str) -> None:
        version_compat.Variable.set(keeper_variable(pair), json.dumps(asdict(self)))


def _log_redelivery(handle: Any) -> None:
    """Log the records the dead run wrote in a batch it never committed: the restart writes them again."""
    from airflow_kafka_failover.jobs.sink import uncommitted_output_records

    try:
        again = uncommitted_output_records(handle.checkpoint, handle.sink_root, handle.epoch)
    except Exception as exc:  # the count is information; the restart stands
        log.info("could not count the records the dead run left uncommitted: %s", exc)
        return
    if again:
        log.warning(
            "the dead run wrote %s records in a batch it never committed; the restarted run will write them "
            "again (duplicates under epoch=%s of the sink, removed by deduplication on the record id)",
            again,
            handle.epoch,
        )


def _positive_seconds(value: Any) -> float | None:
    """``value`` as seconds when it is a finite number > 0, else None."""
    if isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if 0 < seconds < float("inf") else None


def _same_run(job: dict[str, Any] | None, other: dict[str, Any] | None) -> bool:
    from airflow_kafka_failover.io.record_store import same_run

    return same_run(job, other)


class KeepStreamingJobOperator(BaseOperator):
    """Keep the job of a pair's current epoch running; see the module's docstring.

    :param config_path: the pair config file.
    :param pair_name: the pair.
    """

    ui_color = "#e3f1ff"

    def __init__(self, *, config_path: str, pair_name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config_path, self.pair_name = config_path, pair_name

    # ---- entry points ----------------------------------------------------------------------------------

    def execute(self, context: Any) -> Any:
        pair = self._pair()
        given = (context.get("params") or {}).get("window_seconds")
        window = pair.keeper.window_seconds if given in (None, "") else _positive_seconds(given)
        if window is None:
            from airflow_kafka_failover.version_compat import AirflowFailException

            raise AirflowFailException(
                f"param window_seconds must be a number of seconds > 0, got {given!r}; leave it empty for "
                f"the pair's keeper.window_seconds ({pair.keeper.window_seconds:.0f} s)"
            )
        self.log.info(
            "keeping the job of pair %s for %.0f s (a look every %.0f s)",
            pair.name,
            window,
            pair.keeper.interval_seconds,
        )
        return self._watch(pair, {"deadline": time.time() + window, "restarts": 0, "restarted_at": None})

    def resume(self, context: Any, event: dict[str, Any] | None = None, **_: Any) -> Any:
        """Where the trigger's event lands: act, alert, clear an alert, wake, or end the window."""
        from airflow_kafka_failover.version_compat import AirflowException, AirflowFailException

        pair = self._pair()
        event = event or {}
        state = event.get("state") or {}
        if "deadline" not in state:
            raise AirflowFailException(
                f"the keeper of pair {pair.name!r} resumed without its state: {event!r}"
            )
        status = event.get("status")
        if status == "error":
            raise AirflowException(
                f"the keeper of pair {pair.name!r} failed while watching: {event.get('message')}"
            )
        if status == "window_end" or time.time() >= state["deadline"]:
            self.log.info("the keeper's window ended; the next keeper run takes over")
            return {"pair": pair.name, "restarts": state.get("restarts", 0)}
        if status == "wake":
            self.log.info("keeper of pair %s: %s", pair.name, event.get("message") or "looking again")
            return self._watch(pair, state)
        if status == "cleared":
            memory = KeeperMemory.load(pair.name)
            memory.alerted = [name for name in memory.alerted if name not in event.get("cleared", [])]
            memory.save(pair.name)
            self.log.info("keeper of pair %s: %s", pair.name, event.get("message"))
            return self._watch(pair, state)
        if status == "alert":
            self._alert(pair, event)
        if status == "act" and event.get("finding") == "dead":
            return self._restart(pair, state, event)
        if status == "act" and event.get("finding") == "fence_ahead":
            return self._fence_ahead(pair, state)
        if status == "act" and event.get("finding") == "no_standby":
            return self._start_standby(pair, state)
        raise AirflowFailException(
            f"the keeper of pair {pair.name!r} got an event it does not know: {event!r}"
        )

    # ---- watching ---------------------------------------------------------------------------------------

    def _pair(self) -> PairConfig:
        from airflow_kafka_failover.core.exceptions import ConfigError
        from airflow_kafka_failover.domain.config import load_pair
        from airflow_kafka_failover.version_compat import AirflowFailException

        try:
            return load_pair(self.config_path, self.pair_name)
        except ConfigError as exc:
            raise AirflowFailException(f"the keeper of pair {self.pair_name!r} cannot start: {exc}") from exc

    def _watch(self, pair: PairConfig, state: dict[str, Any], not_before: float = 0.0) -> Any:
        """Defer until the trigger finds something for the record's current job."""
        from airflow_kafka_failover.io.record_store import load_record

        record = load_record(pair)
        if self._fence_is_ahead(pair, record):
            return self._fence_ahead(pair, state)
        memory = KeeperMemory.load(pair.name)
        if record.job is None:
            self.log.info(
                "pair %s has no job in its record yet (run the start DAG); looking again in %.0f s",
                pair.name,
                IDLE_RECHECK_S,
            )
            return self._sleep(state, IDLE_RECHECK_S)
        if memory.gave_up and _same_run(memory.gave_up.get("job"), record.job):
            from airflow_kafka_failover.cluster_managers.handle import JobHandle
            from airflow_kafka_failover.cluster_managers.registry import job_alive

            if job_alive(JobHandle.from_dict(record.job)):
                self.log.info("the job given up on runs again; the keeper restarts it again when it dies")
                memory.gave_up = None
                memory.save(pair.name)
            else:
                self.log.warning(
                    "the keeper gave up restarting this job at %s (%s); it is left alone until it runs again "
                    "(run the start DAG once the cause is fixed) or a switch moves the pair",
                    memory.gave_up.get("at"),
                    memory.gave_up.get("reason"),
                )
                not_before = state["deadline"]
        return self._defer_keeper(pair, record, state, memory, not_before)

    def _defer_keeper(
        self,
        pair: PairConfig,
        record: ActiveRecord,
        state: dict[str, Any],
        memory: KeeperMemory,
        not_before: float,
    ) -> Any:
        from airflow_kafka_failover.io.standby_slot import standby_slot, wants_standby
        from airflow_kafka_failover.triggers.job_keeper import JobKeeperTrigger

        slot = str(standby_slot(pair, pair.other(record.active)).folder) if wants_standby(pair) else None
        trigger = JobKeeperTrigger.for_record(pair, record, state, not_before, memory.alerted, slot)
        self.defer(trigger=trigger, method_name="resume")

    def _start_standby(self, pair: PairConfig, state: dict[str, Any]) -> Any:
        """Start the pair's warm standby driver on the cluster the job does not read; after a failure (that
        cluster does not answer, the job's options cannot make a run) try again in ``IDLE_RECHECK_S``."""
        from airflow_kafka_failover.core.exceptions import CheckpointError, ConfigError, FailoverError
        from airflow_kafka_failover.io import metrics
        from airflow_kafka_failover.io.record_store import load_record
        from airflow_kafka_failover.io.standby_slot import standby_slot
        from airflow_kafka_failover.switching.standby import start_standby

        record = load_record(pair)
        other = pair.other(record.active)
        idle = standby_slot(pair, record.active)
        if idle.held():  # started for a switch to the active cluster that submitted without it: no use now
            self.log.info("keeper of pair %s: stopping the idle warm driver in %s", pair.name, idle.folder)
            idle.request_stop()
        problem = self._active_cluster_problem(pair, other)
        if problem is None:
            try:
                pid = start_standby(pair, other, record.epoch)
            except (FailoverError, ConfigError, CheckpointError) as exc:
                problem = str(exc)
            else:
                if pid is None:
                    self.log.info(
                        "keeper of pair %s: a warm standby driver for %s is there already (still starting, "
                        "or waiting); looking again in %.0f s",
                        pair.name,
                        other,
                        IDLE_RECHECK_S,
                    )
                else:
                    metrics.standby_started(pair.name, other)
                    self.log.info(
                        "keeper of pair %s: started a warm standby driver for %s (pid %s); the next switch "
                        "to %s hands it the new run",
                        pair.name,
                        other,
                        pid,
                        other,
                    )
                # Not asked again for a while: a warm driver that dies at once (a job that does not know
                # --standby) is started at most once per IDLE_RECHECK_S.
                return self._watch(pair, {**state, "standby_not_before": time.time() + IDLE_RECHECK_S})
        self.log.warning(
            "keeper of pair %s: cannot start a warm standby driver for %s now (%s); trying again in %.0f s",
            pair.name,
            other,
            problem,
            IDLE_RECHECK_S,
        )
        return self._watch(pair, {**state, "standby_not_before": time.time() + IDLE_RECHECK_S})

    def _sleep(self, state: dict[str, Any], seconds: float, reason: str = "looking again") -> Any:
        from airflow_kafka_failover.triggers.job_keeper import KeeperPauseTrigger

        until = min(time.time() + seconds, state["deadline"])
        self.defer(trigger=KeeperPauseTrigger(until, state, reason), method_name="resume")

    def _fence_is_ahead(self, pair: PairConfig, record: ActiveRecord) -> bool:
        from airflow_kafka_failover.io.record_store import fencing_marker

        fence = fencing_marker(pair).read()
        return fence is not None and fence.epoch > record.epoch

    # ---- alerts -----------------------------------------------------------------------------------------

    def _alert(self, pair: PairConfig, event: dict[str, Any]) -> None:
        from airflow_kafka_failover.io import metrics
        from airflow_kafka_failover.version_compat import AirflowFailException

        memory = KeeperMemory.load(pair.name)
        finding = str(event.get("finding"))
        memory.alerted = sorted(set(memory.alerted) | {finding})
        memory.save(pair.name)
        metrics.keeper_alerted(pair.name, finding)
        raise AirflowFailException(
            f"keeper alert for pair {pair.name!r}: {event.get('message')}. The job keeps running; look at "
            "its log and the active cluster (kafka-failover status). The alert is not raised again until it "
            "clears; the next keeper run keeps watching."
        )

    # ---- restart in place -------------------------------------------------------------------------------

    def _restart(self, pair: PairConfig, state: dict[str, Any], event: dict[str, Any]) -> Any:
        from airflow_kafka_failover.cluster_managers.handle import JobHandle
        from airflow_kafka_failover.cluster_managers.registry import job_alive
        from airflow_kafka_failover.io.record_store import fencing_marker, load_record

        record = load_record(pair)
        fence = fencing_marker(pair).read()
        look = event.get("look") or {}
        if record.job is None or record.epoch != look.get("epoch") or (fence and fence.epoch != record.epoch):
            self.log.info("the record or the fence moved since the job was seen dead; looking again")
            return self._watch(pair, state)
        handle = JobHandle.from_dict(record.job)
        try:
            alive = job_alive(handle)
        except Exception as exc:  # a cluster manager that does not answer: never a second job of this epoch
            self.log.warning(
                "cannot tell whether %s runs (%s): not restarting it; looking again in %.0f s",
                handle.describe(),
                exc,
                IDLE_RECHECK_S,
            )
            return self._watch(pair, state, not_before=time.time() + IDLE_RECHECK_S)
        if alive:
            self.log.info("%s runs again (restarted by someone else); watching it", handle.describe())
            return self._watch(pair, state)
        restarted_at, committed_at = state.get("restarted_at"), look.get("committed_at")
        restarts = state.get("restarts", 0)
        if restarted_at and committed_at and committed_at > restarted_at:
            restarts = 0  # the last restart reached a committed batch: this is a new failure
        if restarts >= pair.keeper.max_restarts:
            return self._give_up(pair, record, handle, restarts)
        unreachable = self._active_cluster_problem(pair, record.active)
        if unreachable:
            self.log.warning(
                "%s is not running, but the active cluster %s does not answer (%s): no restart can succeed, "
                "and whether the cluster is down is the failover DAG's decision; looking again in %.0f s",
                handle.describe(),
                record.active,
                unreachable,
                IDLE_RECHECK_S,
            )
            return self._watch(pair, state, not_before=time.time() + IDLE_RECHECK_S)
        return self._restart_now(pair, record, handle, {**state, "restarts": restarts})

    @staticmethod
    def _active_cluster_problem(pair: PairConfig, cluster: str) -> str | None:
        """Why ``cluster`` cannot be used for a restart now (None: it answers)."""
        from airflow_kafka_failover.domain.health.evidence import describe_exception
        from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook

        timeout = max(pair.health.probe_timeout_seconds, 2.0)
        try:
            KafkaClusterHook(pair.cluster(cluster).connection, timeout_seconds=timeout).describe_cluster(
                timeout_seconds=timeout
            )
        except Exception as exc:  # a dead or unreachable cluster: reported, not raised
            return describe_exception(exc)
        return None

    def _restart_now(self, pair: PairConfig, record: ActiveRecord, handle: Any, state: dict[str, Any]) -> Any:
        from airflow_kafka_failover.cluster_managers.registry import job_log_tail
        from airflow_kafka_failover.core.exceptions import CheckpointError, ConfigError, FailoverError
        from airflow_kafka_failover.io import metrics
        from airflow_kafka_failover.io.record_store import commit_record
        from airflow_kafka_failover.run_format.fencing import FencedError
        from airflow_kafka_failover.switching import steps

        restarts = state["restarts"] + 1
        self.log.warning(
            "the job of pair %s on %s at epoch %s died (last state %r): restarting it in place, restart %s "
            "of at most %s; its log ended with:\n%s",
            pair.name,
            record.active,
            record.epoch,
            handle.status().get("state"),
            restarts,
            pair.keeper.max_restarts,
            job_log_tail(handle, 20),
        )
        backoff = pair.keeper.restart_backoff_seconds * 2 ** (restarts - 1)
        state = {**state, "restarts": restarts, "restarted_at": time.time()}
        _log_redelivery(handle)  # before the restart: its first batch commits what the dead run left
        try:
            started = steps.submit(pair, record.active, record.epoch, pair.translation.initial_position)
        except (FailoverError, ConfigError, CheckpointError) as exc:
            metrics.keeper_restarted(pair.name, record.active, started=False)
            self.log.warning("restart %s failed: %s", restarts, exc)
            if restarts >= pair.keeper.max_restarts:
                return self._give_up(pair, record, handle, restarts, str(exc))
            self.log.info("next restart in %.0f s at the earliest", backoff)
            return self._watch(pair, state, not_before=time.time() + backoff)
        metrics.keeper_restarted(pair.name, record.active, started=True)
        try:
            commit_record(pair, record.epoch, record.with_job(started, started["checkpoint"]))
        except FencedError as exc:
            self.log.warning(
                "a switch moved the pair while the job restarted (%s); its fence stops that job", exc
            )
        self.log.info("restarted %s", handle.describe())
        return self._watch(pair, state, not_before=time.time() + backoff)

    def _give_up(
        self, pair: PairConfig, record: ActiveRecord, handle: Any, restarts: int, reason: str = ""
    ) -> Any:
        from airflow_kafka_failover.cluster_managers.registry import job_log_tail
        from airflow_kafka_failover.io import metrics
        from airflow_kafka_failover.version_compat import AirflowFailException

        memory = KeeperMemory.load(pair.name)
        why = reason or f"it died again after {restarts} restarts without committing a batch"
        memory.gave_up = {
            "job": record.job,
            "epoch": record.epoch,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "reason": why.splitlines()[0][:300],
        }
        memory.save(pair.name)
        metrics.keeper_alerted(pair.name, "gave_up")
        raise AirflowFailException(
            f"the keeper of pair {pair.name!r} gives up on {handle.describe()}: {why}. It is not restarted "
            "again until it runs (fix the cause, then run the start DAG) or a switch moves the pair.\n"
            f"--- log tail ---\n{job_log_tail(handle, 40)}"
        )

    # ---- interrupted switches ---------------------------------------------------------------------------

    def _fence_ahead(self, pair: PairConfig, state: dict[str, Any]) -> Any:
        from airflow_kafka_failover.io.lease_file import read_lease
        from airflow_kafka_failover.io.record_store import fencing_marker, load_record

        record = load_record(pair)
        fence = fencing_marker(pair).read()
        if fence is None or fence.epoch <= record.epoch:
            self.log.info("the record is at the fence's epoch %s: watching the job it names", record.epoch)
            return self._watch(pair, state)
        lease = read_lease(pair.job.fencing_marker, pair.name)
        if lease is not None and lease.epoch == fence.epoch and lease.valid_at(time.time()):
            self.log.info("%s: waiting for it", lease.describe(time.time()))
            return self._defer_keeper_or_sleep(pair, record, state)
        memory = KeeperMemory.load(pair.name)
        failed = memory.heal_failed or {}
        if failed.get("epoch") == fence.epoch:
            wait = min(
                HEAL_BACKOFF_MAX_S, pair.keeper.restart_backoff_seconds * 2 ** int(failed.get("attempts", 1))
            )
            next_try = float(failed.get("at", 0)) + wait
            if time.time() < next_try:
                self.log.info(
                    "the last attempt to finish the switch failed; trying again in %.0f s",
                    next_try - time.time(),
                )
                return self._sleep(state, next_try - time.time())
        return self._finish_switch(pair, record, fence, memory, state)

    def _defer_keeper_or_sleep(self, pair: PairConfig, record: ActiveRecord, state: dict[str, Any]) -> Any:
        if record.job is None:
            return self._sleep(state, pair.keeper.interval_seconds)
        return self._defer_keeper(pair, record, state, KeeperMemory.load(pair.name), state["deadline"])

    def _finish_switch(
        self, pair: PairConfig, record: ActiveRecord, fence: Any, memory: KeeperMemory, state: dict[str, Any]
    ) -> Any:
        from airflow_kafka_failover.switching import healing

        try:
            healing.finish_interrupted_switch(pair, record, fence)
        except Exception:
            failed = memory.heal_failed or {}
            attempts = int(failed.get("attempts", 0)) + 1 if failed.get("epoch") == fence.epoch else 1
            memory.heal_failed = {"epoch": fence.epoch, "attempts": attempts, "at": time.time()}
            memory.save(pair.name)
            raise
        if memory.heal_failed:
            memory.heal_failed = None
            memory.save(pair.name)
        return self._watch(pair, {**state, "restarts": 0, "restarted_at": None})


__all__ = ["KeepStreamingJobOperator", "KeeperMemory", "keeper_variable"]

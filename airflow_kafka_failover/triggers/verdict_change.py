"""ClusterVerdictTrigger: the event trigger that wakes a switch DAG when the primary's verdict changes.

Event-driven scheduling (``switch.wake: event``): the trigger is an ``AssetWatcher``'s, so the triggerer
runs it for as long as the DAG is active, with the kwargs stored when the DAG was parsed. It drives the
same watch and the same loop as the sensors (``build_watch`` and ``observe_until``) and yields an event
each time the verdict *becomes* down (failover) or recovered (failback): once the verdict holds it waits
until it changed back (down: the cluster answers; recovered: the cluster fails a probe) before watching
for the next change, so a cluster that stays down wakes the failover DAG once, not on every probe.

The triggerer identifies an event trigger by the hash of its classpath and kwargs: the kwargs hold
configuration only (no deadline, no probe history), so every parse of the DAG maps to the same trigger.
A restarted triggerer starts the trigger afresh from those kwargs; if the verdict still holds then, the
DAG is woken once more and its ``gate`` (the active record) decides whether there is anything to do.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_kafka_failover.domain.health.evidence import describe_exception
from airflow_kafka_failover.triggers.cluster_health import (
    WatchKind,
    build_watch,
    decision_event,
    watch_kind,
)


class ClusterVerdictTrigger(BaseEventTrigger):
    """Watch a cluster without end; yield an event each time its verdict becomes ``kind``.

    Events: ``{"status": "success", "kind": ..., "decision": ..., "state": {"history": [...]},
    "message": ..., "observed_at": <unix seconds>}`` when the verdict becomes ``kind``; ``{"status":
    "error", "kind": ..., "message": "<ExceptionType>: <text>"}`` when the watch itself fails (once per
    distinct message, so that a wrong connection fails one DAG run rather than one per retry), after which
    it starts again in ``error_backoff_seconds``.

    :param kind: ``down`` (wakes the failover DAG) or ``recovered`` (wakes the failback DAG).
    :param watch_kwargs: arguments of the watch (see ``DownWatch`` and ``RecoveryWatch``).
    :param thresholds: health thresholds as a mapping.
    :param error_backoff_seconds: wait after a failed watch before starting a new one.
    """

    def __init__(
        self,
        kind: WatchKind | str,
        watch_kwargs: dict[str, Any],
        thresholds: dict[str, Any],
        error_backoff_seconds: float = 60.0,
    ) -> None:
        super().__init__()
        self.kind = watch_kind(kind)
        if not error_backoff_seconds > 0:
            raise ValueError(
                f"error_backoff_seconds must be > 0, got {error_backoff_seconds!r}: give the seconds to wait "
                "after a failed watch before starting a new one"
            )
        self.watch_kwargs = watch_kwargs
        self.thresholds = thresholds
        self.error_backoff_seconds = error_backoff_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "kind": self.kind.value,
                "watch_kwargs": self.watch_kwargs,
                "thresholds": self.thresholds,
                "error_backoff_seconds": self.error_backoff_seconds,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        last_error: str | None = None
        while True:
            try:
                async for payload in self.verdict_changes():
                    last_error = None
                    yield TriggerEvent(payload)
            except Exception as exc:  # the watch failed: say so once, then start again
                message = describe_exception(exc)
                self.log.exception(
                    "The %s watch failed; starting again in %.0f s",
                    self.kind.value,
                    self.error_backoff_seconds,
                )
                if message != last_error:
                    last_error = message
                    yield TriggerEvent({"status": "error", "kind": self.kind.value, "message": message})
            await asyncio.sleep(self.error_backoff_seconds)

    def rearms(self, watch, decision) -> bool:
        """Say whether the verdict changed back, so that the next time it becomes ``kind`` is an event.

        Down changes back when the watch no longer says down (the cluster answered). Recovered changes back
        only when the cluster fails a probe again: a replication lag that rises above the threshold for a
        moment (a busy pair with ``max_replication_lag: 0``) would otherwise wake the failback DAG again
        and again while nothing happened to the cluster (39 wake-ups in 11 minutes, measured).

        :param watch: the watch, after its latest observation.
        :param decision: its latest decision.
        """
        if self.kind is WatchKind.DOWN:
            return not watch.conclusive(decision)
        return bool(watch.history) and watch.history[-1].failed

    async def verdict_changes(self) -> AsyncIterator[dict[str, Any]]:
        """Yield one payload each time the verdict becomes ``kind``; runs until cancelled or it fails."""
        from asgiref.sync import sync_to_async

        from airflow_kafka_failover.io.health_watch import observe_until

        # The watch and its clients are built here, never in __init__: nothing live crosses serialize().
        watch = await sync_to_async(build_watch, thread_sensitive=False)(
            self.kind, self.watch_kwargs, self.thresholds, {}
        )
        while True:
            decision = await observe_until(watch, None)
            self.log.info("%s watch of %s: %s", self.kind.value, watch.cluster, decision.reason)
            yield {**decision_event(self.kind, watch, decision), "observed_at": time.time()}
            decision = await observe_until(watch, None, until=lambda d: self.rearms(watch, d))
            self.log.info(
                "%s watch of %s: no longer %s (%s); watching for the next change",
                self.kind.value,
                watch.cluster,
                self.kind.value,
                decision.reason,
            )

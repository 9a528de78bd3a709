"""ClusterHealthTrigger: probes a Kafka cluster in the triggerer until it is down, or recovered.

The trigger holds no client across ``serialize()``: it builds its watch (and its hooks) inside ``run()``.
Blocking confluent-kafka calls run in worker threads through ``sync_to_async``, so the triggerer's event
loop never blocks. The probe history travels in the serialized kwargs, so a trigger that is started
again (a triggerer restart) continues from what the sensor already saw.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from enum import StrEnum
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_kafka_failover.domain.health.evidence import ProbeResult, describe_exception
from airflow_kafka_failover.domain.health.verdict import HealthThresholds


class WatchKind(StrEnum):
    """What a health sensor or trigger waits for: the watched cluster is down, or it has recovered."""

    DOWN = "down"
    RECOVERED = "recovered"


def watch_kind(kind: WatchKind | str) -> WatchKind:
    """Return ``kind`` as a :class:`WatchKind`, refusing anything else by name.

    :param kind: ``down`` or ``recovered``.
    :raises ValueError: naming the bad kind and the choices.
    """
    try:
        return WatchKind(kind)
    except ValueError:
        choices = ", ".join(repr(str(choice)) for choice in WatchKind)
        raise ValueError(f"unknown watch kind {kind!r}: use one of {choices}") from None


def build_watch(
    kind: WatchKind | str, watch_kwargs: dict[str, Any], thresholds: dict[str, Any], state: dict[str, Any]
):
    """Build the watch a sensor or trigger drives, from plain (serializable) arguments.

    :param kind: ``down`` or ``recovered``.
    :param watch_kwargs: the watch's own arguments (connection ids, topics, ...).
    :param thresholds: health thresholds as a mapping.
    :param state: ``{"history": [...], "heartbeat_looks": [...]}`` carried over from earlier probing.
    """
    from airflow_kafka_failover.io.health_watch import DownWatch, RecoveryWatch

    kind = watch_kind(kind)
    history = [ProbeResult.model_validate(probe) for probe in state.get("history", [])]
    limits = HealthThresholds.from_dict(thresholds)
    if kind is WatchKind.DOWN:
        looks = [(float(at), int(newest)) for at, newest in state.get("heartbeat_looks", [])]
        return DownWatch(thresholds=limits, history=history, heartbeat_looks=looks, **watch_kwargs)
    return RecoveryWatch(thresholds=limits, history=history, **watch_kwargs)


def decision_event(kind: WatchKind | str, watch, decision, *, timed_out: bool = False) -> dict[str, Any]:
    """Turn a watch's decision into the one event payload a sensor resumes with.

    :param kind: ``down`` or ``recovered``.
    :param watch: the watch that decided.
    :param decision: its decision.
    :param timed_out: the deadline passed: an inconclusive decision becomes a ``timeout`` event.
    """
    kind = watch_kind(kind)
    payload = {
        "kind": kind.value,
        "decision": decision.model_dump(mode="json"),
        "state": watch.state(),
        "message": decision.reason,
    }
    if kind is WatchKind.RECOVERED and getattr(decision, "data_loss", None):
        payload.update(status="error", message=str(decision.data_loss_error()))
    elif watch.conclusive(decision):
        payload["status"] = "success"
    elif timed_out:
        payload.update(status="timeout", message=f"gave up waiting: {decision.reason}")
    else:
        payload["status"] = "waiting"
    return payload


class ClusterHealthTrigger(BaseTrigger):
    """Probe a cluster on a fixed cadence until a down or recovered decision, or a deadline.

    Yields exactly one event: ``{"status": "success" | "error" | "timeout", "message": ..., "decision":
    ..., "state": {"history": [...]}}``. An exception while watching becomes the event
    ``{"status": "error", "message": "<ExceptionType>: <text>"}``, so the sensor fails with that message
    in the task log instead of the trigger dying with it in the triggerer's log only.

    :param kind: ``down`` or ``recovered``.
    :param watch_kwargs: arguments of the watch (see ``DownWatch`` and ``RecoveryWatch``).
    :param thresholds: health thresholds as a mapping.
    :param deadline: unix seconds after which a ``timeout`` event is yielded; None waits forever.
    :param state: probe history (and heartbeat looks) gathered before deferring.
    """

    def __init__(
        self,
        kind: WatchKind | str,
        watch_kwargs: dict[str, Any],
        thresholds: dict[str, Any],
        deadline: float | None = None,
        state: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.kind = watch_kind(kind)
        self.watch_kwargs = watch_kwargs
        self.thresholds = thresholds
        self.deadline = deadline
        self.state = state or {}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "kind": self.kind.value,
                "watch_kwargs": self.watch_kwargs,
                "thresholds": self.thresholds,
                "deadline": self.deadline,
                "state": self.state,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            payload = await self._watch_until_decided()
        except Exception as exc:  # the sensor must fail with this message in its task log
            self.log.exception("The %s watch failed", self.kind.value)
            payload = {"status": "error", "message": describe_exception(exc)}
        yield TriggerEvent(payload)

    async def _watch_until_decided(self) -> dict[str, Any]:
        from asgiref.sync import sync_to_async

        from airflow_kafka_failover.io.health_watch import observe_until

        # The watch and its clients are built here, never in __init__: nothing live crosses serialize().
        watch = await sync_to_async(build_watch, thread_sensitive=False)(
            self.kind, self.watch_kwargs, self.thresholds, self.state
        )

        def log_decision(decision) -> None:
            self.log.info("%s watch of %s: %s", self.kind.value, watch.cluster, decision.reason)

        decision = await observe_until(watch, self.deadline, log_decision)
        return decision_event(self.kind, watch, decision, timed_out=not watch.conclusive(decision))

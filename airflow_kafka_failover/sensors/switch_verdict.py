"""The verdict sensors of the switch DAGs: the primary is down (failover) or recovered (failback).

They are the health sensors of :mod:`~airflow_kafka_failover.sensors.cluster_health` with what a switch run
adds: ``force`` and ``dry_run`` skip the wait, a run woken by the verdict event (``switch.wake: event``)
confirms the trigger's verdict with one probe, and the recovered sensor reads the primary's recorded
watermarks from the active record when it starts.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseSensorOperator

from airflow_kafka_failover.sensors.cluster_health import KafkaClusterDownSensor, KafkaClusterRecoveredSensor


def verdict_event(context: Any, asset_name: str | None) -> dict[str, Any] | None:
    """The newest payload of ``ClusterVerdictTrigger`` among the events that triggered this run, if any.

    :param context: the task's context; a manual or ``@continuous`` run has no triggering events.
    :param asset_name: the verdict asset's name; None: the DAG is not woken by events.
    """
    if not asset_name:
        return None
    events = context.get("triggering_asset_events") or {}
    for asset in events:
        if getattr(asset, "name", None) != asset_name:
            continue
        payloads = [(event.extra or {}).get("payload") for event in events[asset]]
        found = [payload for payload in payloads if isinstance(payload, dict)]
        if found:
            return found[-1]
    return None


class SwitchVerdictSensor(BaseSensorOperator):
    """Sensor mix-in: with ``force`` or ``dry_run`` set, do not wait for the verdict; when the run was woken
    by the verdict event, confirm the trigger's verdict with one probe instead of watching again.

    :param verdict_asset_name: the verdict asset whose events wake the DAG (``switch.wake: event``).
    """

    def __init__(self, *, verdict_asset_name: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.verdict_asset_name = verdict_asset_name

    def execute(self, context: Any) -> Any:
        params = context.get("params") or {}
        if params.get("force") or params.get("dry_run"):
            self.log.info(
                "not waiting for the %s verdict (force=%s, dry_run=%s)",
                getattr(self, "kind", "health"),
                params.get("force"),
                params.get("dry_run"),
            )
            return None
        woken_by = verdict_event(context, self.verdict_asset_name)
        if woken_by is not None and woken_by.get("status") == "error":
            raise RuntimeError(
                f"the {woken_by.get('kind')} watch in the triggerer failed: {woken_by.get('message')}; fix "
                "the cause (the triggerer's log has the traceback), the watch starts again on its own"
            )
        return super().execute(context)

    def woken_verdict(self, context: Any) -> dict[str, Any] | None:
        woken_by = verdict_event(context, self.verdict_asset_name)
        if woken_by is None or woken_by.get("status") != "success":
            return None
        self.log.info(
            "woken by the %s verdict of the triggerer's watch (%s): confirming it with one more probe",
            woken_by.get("kind"),
            woken_by.get("message"),
        )
        return woken_by


class PairDownSensor(SwitchVerdictSensor, KafkaClusterDownSensor):
    """The primary's down sensor of a failover DAG."""


class PairRecoveredSensor(SwitchVerdictSensor, KafkaClusterRecoveredSensor):
    """The primary's recovered sensor of a failback DAG; the recorded watermarks come from the record as it
    is when the sensor starts."""

    def __init__(self, *, watched_cluster: str, config_path: str, pair_name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.watched_cluster, self.config_path, self.pair_name = watched_cluster, config_path, pair_name

    def execute(self, context: Any) -> Any:
        from airflow_kafka_failover.domain.config import load_pair
        from airflow_kafka_failover.io.record_store import load_record

        # Read now, not from the gate: a switch committed while the gate's run waited raises them.
        record = load_record(load_pair(self.config_path, self.pair_name))
        self.recorded_high_watermarks = dict(record.watermarks.get(self.watched_cluster, {}))
        self.log.info(
            "data-loss check against %s partitions recorded while %s was active",
            len(self.recorded_high_watermarks),
            self.watched_cluster,
        )
        return super().execute(context)

"""Sensors that start a switch: a cluster is down (fail over), or recovered and caught up (fail back)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator

from airflow_kafka_failover.core.exceptions import ConfigError, DataLossError
from airflow_kafka_failover.triggers.cluster_health import (
    ClusterHealthTrigger,
    WatchKind,
    build_watch,
    decision_event,
)
from airflow_kafka_failover.version_compat import conf

if TYPE_CHECKING:
    from airflow_kafka_failover.io.health_watch import ClusterWatch


class _ClusterHealthSensor(BaseSensorOperator):
    """Shared mechanics: validate before waiting, check once, then defer, poke or reschedule.

    Subclasses say which watch they drive (``kind``) and with which arguments (``watch_kwargs``).
    """

    kind: WatchKind
    template_fields: Sequence[str] = ("kafka_config_id", "topics")
    ui_color = "#f3e5ab"

    def __init__(
        self,
        *,
        kafka_config_id: str,
        cluster_alias: str,
        topics: Sequence[str] = (),
        thresholds: Mapping[str, Any] | None = None,
        canary_topic: str | None = None,
        count_under_min_isr: bool = False,
        missing_topics_are_evidence: bool = False,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poke_interval: timedelta | float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.kafka_config_id = kafka_config_id
        self.cluster_alias = cluster_alias
        self.topics = topics
        self.thresholds = dict(thresholds or {})
        self.canary_topic = canary_topic
        self.count_under_min_isr = count_under_min_isr
        self.missing_topics_are_evidence = missing_topics_are_evidence
        self.deferrable = deferrable
        self._watch: ClusterWatch | None = None

    # ---- what subclasses provide -------------------------------------------------------------------

    def watch_kwargs(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster_alias,
            "kafka_config_id": self.kafka_config_id,
            "topics": list(self.topics),
            "canary_topic": self.canary_topic,
            "count_under_min_isr": self.count_under_min_isr,
        }

    def observation_window(self) -> float:
        """Seconds of probing one poke needs to be able to reach a decision on its own."""
        raise NotImplementedError

    def woken_verdict(self, context) -> dict[str, Any] | None:
        """The verdict event of ``ClusterVerdictTrigger`` that woke this run; None when none did.

        :param context: the task's context.
        """
        return None

    def _confirm(self, woken: dict[str, Any], watch) -> dict[str, Any] | None:
        """The trigger's verdict, confirmed by the probe just taken; None when that probe contradicts it.

        The trigger's evidence ends when it decided; the run it woke starts seconds later, and that gap in
        probing would restart the counting of a fresh verdict. One probe that agrees is enough to act on a
        verdict the same watch reached moments ago; a primary that answers again (down) or fails again
        (recovered) makes the sensor watch anew.
        """
        newest = watch.history[-1] if watch.history else None
        agrees = newest is not None and (not newest.ok if self.kind is WatchKind.DOWN else newest.ok)
        if not agrees:
            self.log.info("the probe just taken contradicts the woken %s verdict: watching anew", self.kind)
            return None
        return {
            **woken,
            "state": watch.state(),
            "message": f"{woken.get('message')} (confirmed by a new probe)",
        }

    # ---- mechanics ---------------------------------------------------------------------------------

    def _build(self, state: dict[str, Any] | None = None):
        # The thresholds are the model's (HealthThresholds.from_dict): it refuses a name it does not know.
        watch = build_watch(self.kind, self.watch_kwargs(), self.thresholds, state or {})
        self._validate_inputs(watch)
        return watch

    def _validate_inputs(self, watch) -> None:
        """Fail before any waiting on a bad connection, or on topics the reachable cluster lacks."""
        hooks = [
            watch.hook,
            *(h for h in (getattr(watch, "peer", None), getattr(watch, "active", None)) if h),
        ]
        for hook in hooks:
            _ = hook.client_config  # raises ConfigError naming the connection
        if not watch.topics:
            return
        try:
            metadata = watch.hook.describe_cluster(
                watch.topics, timeout_seconds=watch.thresholds.probe_timeout_seconds
            )
        except ConfigError:
            raise
        except Exception:  # unreachable now: nothing to validate against; probing decides
            self.log.info(
                "Cluster %s is not reachable now; topic names are checked once it answers", watch.cluster
            )
            return
        if metadata.missing_topics and self.missing_topics_are_evidence:
            self.log.warning(
                "topics %s are missing on cluster %s: the job cannot read them, which the probes count",
                ", ".join(metadata.missing_topics),
                watch.cluster,
            )
        elif metadata.missing_topics:
            raise ConfigError(
                f"topics {', '.join(metadata.missing_topics)} do not exist on cluster {watch.cluster} "
                f"(connection {self.kafka_config_id!r}); fix the sensor's topics"
            )

    def execute(self, context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        woken = self.woken_verdict(context)
        watch = self._build(dict(woken.get("state") or {}) if woken else None)
        watch.observe()  # check once: no trigger round trip when the answer is already known
        event = decision_event(self.kind, watch, watch.decide())
        if event["status"] == "waiting" and woken is not None:
            event = self._confirm(woken, watch) or event
        if event["status"] != "waiting":
            return self.execute_complete(context, event)
        timeout_seconds = self._timeout_seconds()
        deadline = time.time() + timeout_seconds if timeout_seconds else None
        self.log.info("Deferring: %s", event["message"])
        self.defer(
            trigger=ClusterHealthTrigger(
                kind=self.kind,
                watch_kwargs=self.watch_kwargs(),
                thresholds=self.thresholds,
                deadline=deadline,
                state=watch.state(),
            ),
            method_name="execute_complete",
        )

    def _timeout_seconds(self) -> float | None:
        timeout = self.timeout
        if isinstance(timeout, timedelta):
            return timeout.total_seconds()
        return float(timeout) if timeout else None

    def poke(self, context) -> bool:
        if self._watch is None:
            self._watch = self._build()
        from airflow_kafka_failover.io.health_watch import watch_until

        decision = watch_until(self._watch, time.time() + self.observation_window())
        event = decision_event(self.kind, self._watch, decision)
        if event["status"] == "waiting":
            self.log.info("Not yet: %s", event["message"])
            self._log_evidence(event)
            return False
        self._finish(context, event)
        return True

    def execute_complete(self, context, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after the trigger (or the check before deferring): succeed, or raise with its message."""
        from airflow_kafka_failover.version_compat import AirflowSensorTimeout, AirflowSkipException

        status = event.get("status")
        if status == "timeout":
            self._log_evidence(event)
            if self.soft_fail:
                raise AirflowSkipException(f"{self.kind} sensor timed out (soft_fail): {event['message']}")
            raise AirflowSensorTimeout(f"{self.kind} sensor timed out: {event['message']}")
        return self._finish(context, event)

    def _finish(self, context, event: dict[str, Any]) -> dict[str, Any]:
        self._log_evidence(event)
        if event.get("status") == "error":
            if "decision" in event:  # the one error a watch decides: the recovering cluster lost data
                raise DataLossError(event["message"])
            raise RuntimeError(f"the {self.kind} health watch failed: {event.get('message')}")
        if event.get("status") != "success":
            raise RuntimeError(f"unexpected event from the health trigger: {event!r}")
        self.log.info("Decision: %s", event["message"])
        self._send_metrics(event["decision"])
        evidence = {"decision": event["decision"], "history": event["state"].get("history", [])}
        context["ti"].xcom_push(key="health_evidence", value=evidence)
        return event["decision"]

    def _send_metrics(self, decision: dict[str, Any]) -> None:
        from airflow_kafka_failover.io import metrics

        if self.kind is WatchKind.DOWN:
            failing_since = (decision.get("verdict") or {}).get("failing_since")
            metrics.down_detected(self.kafka_config_id, self.cluster_alias, failing_since, time.time())
        else:
            metrics.recovered(self.kafka_config_id, self.cluster_alias)

    def _log_evidence(self, event: dict[str, Any]) -> None:
        from airflow_kafka_failover.domain.health.evidence import (
            ProbeResult,
            format_partition_evidence,
            format_probe_table,
        )

        history = [ProbeResult.model_validate(p) for p in event.get("state", {}).get("history", [])]
        if history:
            self.log.info("Probes of cluster %s:\n%s", self.cluster_alias, format_probe_table(history[-15:]))
            # The partitions behind the verdict: the newest probe's, and the newest that found trouble.
            shown = {history[-1].at}
            partitions = format_partition_evidence(history[-1])
            troubled = next((probe for probe in reversed(history) if probe.degraded), None)
            if troubled is not None and troubled.at not in shown:
                partitions = "\n".join(filter(None, [partitions, format_partition_evidence(troubled)]))
            if partitions:
                self.log.info("%s", partitions)


class KafkaClusterDownSensor(_ClusterHealthSensor):
    """Succeed when the watched Kafka cluster is down, corroborated by its MirrorMaker 2 heartbeats.

    Down means ``failure_threshold`` consecutive failed probes spanning ``min_down_seconds``, and, when
    ``peer_kafka_config_id`` is set, the watched cluster's heartbeats replicated to the peer have stopped.
    Probes failing while heartbeats keep arriving mean a network split between Airflow and the cluster:
    the sensor keeps waiting and logs a warning saying so.

    :param kafka_config_id: ``kafka`` connection of the watched cluster.
    :param cluster_alias: its MirrorMaker 2 alias (e.g. ``A``).
    :param topics: topics on the watched cluster whose partitions must have a leader that answers; none: a
        probe is a metadata request.
    :param peer_kafka_config_id: ``kafka`` connection of the other cluster, where the watched cluster's
        heartbeats are replicated; None when the pair has no MirrorMaker 2.
    :param heartbeats_topic: replicated heartbeats topic on the peer (default ``<cluster_alias>.heartbeats``).
    :param require_corroboration: never decide "down" without heartbeat evidence (default: True when a
        peer is given).
    :param thresholds: health thresholds (``failure_threshold`` 3, ``min_down_seconds`` 6,
        ``probe_interval_seconds`` 2, ``probe_timeout_seconds`` 2, ``heartbeat_stale_seconds`` 6, ...).
    :param canary_topic: optional topic for a produce/read-back round trip in each probe.
    :param count_under_min_isr: partitions of ``topics`` with fewer in-sync replicas than their
        ``min.insync.replicas`` count toward "down" like partitions without a leader.
    :param missing_topics_are_evidence: a topic of ``topics`` missing on the reachable cluster is evidence
        (the job cannot read it) instead of a configuration error (the pair's DAGs, whose topics are the
        pair's own).
    :param deferrable: wait in the triggerer (default: the ``operators.default_deferrable`` setting).
    """

    kind = WatchKind.DOWN
    template_fields: Sequence[str] = ("kafka_config_id", "peer_kafka_config_id", "topics")

    def __init__(
        self,
        *,
        peer_kafka_config_id: str | None = None,
        heartbeats_topic: str | None = None,
        require_corroboration: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.peer_kafka_config_id = peer_kafka_config_id
        self.heartbeats_topic = heartbeats_topic
        self.require_corroboration = require_corroboration

    def watch_kwargs(self) -> dict[str, Any]:
        corroborate = self.require_corroboration
        if corroborate is None:
            corroborate = self.peer_kafka_config_id is not None
        if corroborate and not self.peer_kafka_config_id:
            raise ConfigError(
                "require_corroboration=True needs peer_kafka_config_id (the cluster that receives "
                f"{self.cluster_alias}'s MirrorMaker 2 heartbeats); set it, or set "
                "require_corroboration=False"
            )
        heartbeats = self.heartbeats_topic or (
            f"{self.cluster_alias}.heartbeats" if self.peer_kafka_config_id else None
        )
        return {
            **super().watch_kwargs(),
            "peer_kafka_config_id": self.peer_kafka_config_id,
            "heartbeats_topic": heartbeats,
            "require_corroboration": corroborate,
        }

    def observation_window(self) -> float:
        from airflow_kafka_failover.domain.health.verdict import HealthThresholds

        limits = HealthThresholds.from_dict(self.thresholds)
        return limits.min_down_seconds + limits.heartbeat_stale_seconds + limits.max_probe_gap

    def _log_evidence(self, event: dict[str, Any]) -> None:
        super()._log_evidence(event)
        if event.get("decision", {}).get("split_suspected"):
            self.log.warning("Network split suspected, not failing over: %s", event["decision"]["reason"])


class KafkaClusterRecoveredSensor(_ClusterHealthSensor):
    """Succeed when a recovered cluster is stable, caught up with the active one, and lost no data.

    :param kafka_config_id: ``kafka`` connection of the recovering cluster.
    :param cluster_alias: its MirrorMaker 2 alias (e.g. ``A``).
    :param active_kafka_config_id: ``kafka`` connection of the cluster that is active now.
    :param active_alias: the active cluster's MirrorMaker 2 alias (e.g. ``B``).
    :param replicated_topics: topics on the active cluster that must be replicated to the recovering one.
    :param replication_policy: ``default`` (``orders`` on B is ``B.orders`` on A) or ``identity``.
    :param separator: the replication policy's separator.
    :param offset_syncs_location: MM2 ``offset-syncs.topic.location`` of the flow active -> recovering.
    :param recorded_high_watermarks: ``"topic-partition"`` -> high watermark the recovering cluster had
        while it was last active; a lower one now is data loss, and the sensor fails.
    :param topics: topics on the recovering cluster whose partitions must have a leader that answers.
    :param thresholds: health thresholds (``stability_window_seconds`` 30, ``max_replication_lag`` 0, ...).
    """

    kind = WatchKind.RECOVERED
    template_fields: Sequence[str] = (
        "kafka_config_id",
        "active_kafka_config_id",
        "topics",
        "replicated_topics",
        "recorded_high_watermarks",
    )

    def __init__(
        self,
        *,
        active_kafka_config_id: str,
        active_alias: str,
        replicated_topics: Sequence[str] = (),
        replication_policy: str = "default",
        separator: str = ".",
        offset_syncs_location: str = "target",
        recorded_high_watermarks: Mapping[str, int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.active_kafka_config_id = active_kafka_config_id
        self.active_alias = active_alias
        self.replicated_topics = replicated_topics
        self.replication_policy = replication_policy
        self.separator = separator
        self.offset_syncs_location = offset_syncs_location
        self.recorded_high_watermarks = recorded_high_watermarks or {}

    def watch_kwargs(self) -> dict[str, Any]:
        from airflow_kafka_failover.domain.translation.replication_policy import (
            for_name,
            offset_syncs_cluster,
            offset_syncs_topic,
        )

        policy = for_name(self.replication_policy, self.separator)
        bad = {
            k: v for k, v in dict(self.recorded_high_watermarks).items() if not isinstance(v, int) or v < 0
        }
        if bad:
            raise ConfigError(
                f"recorded_high_watermarks must map 'topic-partition' to integers >= 0; bad: {bad}"
            )
        location = self.offset_syncs_location
        return {
            **super().watch_kwargs(),
            "active_kafka_config_id": self.active_kafka_config_id,
            "replicated_topics": {
                t: policy.remote_topic(self.active_alias, t) for t in self.replicated_topics
            },
            "offset_syncs_topic": offset_syncs_topic(
                self.active_alias, self.cluster_alias, location, self.separator
            ),
            "offset_syncs_on_watched": offset_syncs_cluster(self.active_alias, self.cluster_alias, location)
            == self.cluster_alias,
            "recorded_high_watermarks": dict(self.recorded_high_watermarks),
        }

    def observation_window(self) -> float:
        from airflow_kafka_failover.domain.health.verdict import HealthThresholds

        limits = HealthThresholds.from_dict(self.thresholds)
        return limits.stability_window_seconds + 2 * limits.max_probe_gap

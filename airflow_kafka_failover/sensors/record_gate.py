"""The first task of a switch DAG: is this switch the one to make, according to the active record?"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue


class ActiveRecordGate(BaseSensorOperator):
    """Validate the config, the connections and the Params; pass the record on when the switch applies.

    A manual run that does not apply (failover with the standby already active) is skipped with the reason;
    a scheduled run waits (reschedule mode frees the worker between checks) until it applies or times out.
    Bad config, connections or Params, and a store of the pair's state that cannot be read, fail the run
    before anything is touched. A scheduled run that waited out its ``timeout`` is skipped, not failed (this
    sensor does that itself: Airflow's ``soft_fail`` would skip the failures as well).

    :param config_path: the pair config file.
    :param pair_name: the pair.
    :param kind: ``failover`` or ``failback``.
    """

    ui_color = "#fff3d6"

    def __init__(self, *, config_path: str, pair_name: str, kind: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config_path, self.pair_name, self.kind = config_path, pair_name, kind

    def execute(self, context: Any) -> Any:
        from airflow_kafka_failover.version_compat import AirflowSensorTimeout, AirflowSkipException

        try:
            return super().execute(context)
        except AirflowSensorTimeout as exc:
            raise AirflowSkipException(f"the {self.kind} did not apply within the watch: {exc}") from None

    def poke(self, context: Any) -> PokeReturnValue | bool:
        from airflow_kafka_failover.core.exceptions import ConfigError
        from airflow_kafka_failover.core.storage.store import StoreUnavailable
        from airflow_kafka_failover.domain.config import load_pair
        from airflow_kafka_failover.domain.switch_gate import NotApplicable, SwitchParams, gate
        from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
        from airflow_kafka_failover.io.record_store import describe, load_record
        from airflow_kafka_failover.version_compat import AirflowFailException, AirflowSkipException

        try:
            params = SwitchParams.from_params(context.get("params"))
            pair = load_pair(self.config_path, self.pair_name)
            for cluster in pair.clusters.values():
                _ = KafkaClusterHook(cluster.connection).client_config  # names a missing or wrong connection
            record = load_record(pair)
        except ConfigError as exc:
            raise AirflowFailException(f"{self.kind} of pair {self.pair_name!r} refused: {exc}") from exc
        except StoreUnavailable as exc:
            raise AirflowFailException(
                f"{self.kind} of pair {self.pair_name!r} cannot read the pair's state: {exc}"
            ) from exc
        try:
            gate(pair, self.kind, record)
        except NotApplicable as exc:
            if getattr(context.get("dag_run"), "run_type", "") == "manual":
                raise AirflowSkipException(str(exc)) from None
            self.log.info("waiting: %s", exc)
            return False
        self.log.info("%s applies: record %s; params %s", self.kind, describe(record), params)
        return PokeReturnValue(is_done=True, xcom_value=record.to_dict())

"""A sensor that waits for the streaming job to make progress, and fails as soon as the job is dead."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import ClusterManagers
from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.run_format.progress import read_progress
from airflow_kafka_failover.run_format.source_offsets import kafka_offsets_from_json

SILENT_BATCHES = 3
"""Committed batches without a single progress entry after which a job is taken to break the contract
(the lines follow each commit within moments; a few batches leave room for a slow listener)."""


class StreamingJobProgressSensor(BaseSensorOperator):
    """Succeed once the job has committed a batch past ``position``, or processed ``min_records`` records.

    With neither given, the first committed batch is enough. The sensor fails at once (no retry helps) with
    the job's status and log tail when the job is no longer running.

    :param handle: the submit operator's handle (templated; a mapping or its JSON).
    :param position: ``{topic: {"partition": offset}}`` the committed position must reach (templated).
    :param min_records: records the committed batches must hold in total.
    """

    template_fields: Sequence[str] = ("handle", "position", "min_records")
    ui_color = "#e8fbe9"

    def __init__(
        self,
        *,
        handle: Any,
        position: Mapping[str, Any] | str | None = None,
        min_records: int | str | None = None,
        poke_interval: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.handle = handle
        self.position = position
        self.min_records = min_records

    def _inputs(self) -> tuple[JobHandle, dict, int | None]:
        handle = json.loads(self.handle) if isinstance(self.handle, str) else self.handle
        handle = JobHandle.from_dict(handle)
        position = json.loads(self.position) if isinstance(self.position, str) else (self.position or {})
        wanted = kafka_offsets_from_json(position, "position", ConfigError) if position else {}
        minimum = None
        if self.min_records not in (None, ""):
            try:
                minimum = int(self.min_records)
            except (TypeError, ValueError):
                raise ConfigError(f"min_records must be an integer, got {self.min_records!r}") from None
        return handle, wanted, minimum

    def poke(self, context: Any) -> bool:
        from airflow_kafka_failover.version_compat import AirflowFailException

        try:
            handle, wanted, minimum = self._inputs()
        except (ConfigError, json.JSONDecodeError) as exc:
            raise AirflowFailException(f"bad input to the progress sensor: {exc}") from exc
        progress = read_progress(handle.checkpoint)
        behind = progress.reached(wanted)
        enough = (minimum is None or progress.records >= minimum) and progress.batch_id is not None
        if not behind and enough:
            self.log.info(
                "%s committed batch %s with %s records in total",
                handle.describe(),
                progress.batch_id,
                progress.records,
            )
            return True
        if progress.batch_id is not None and progress.batch_id >= SILENT_BATCHES and not progress.written_any:
            raise AirflowFailException(
                f"{handle.describe()} committed batches 0 to {progress.batch_id} in its checkpoint but "
                f"wrote no progress entry to {handle.checkpoint}/progress/: the job does not follow "
                "the job contract (the job-side API writes them: docs/jobs.md)"
            )
        status, tracker = handle.status(), ClusterManagers()
        if tracker.alive_or_unknown(handle) is False or status.get("state") in (
            "failed",
            "refused",
            "fenced",
            "stopped",
        ):
            raise AirflowFailException(
                f"{handle.describe()} is not running (state {status.get('state')!r}: "
                f"{status.get('reason', 'the process is gone')}) at batch {progress.batch_id} with "
                f"{progress.records} records\n--- log tail ---\n{tracker.log_tail(handle)}"
            )
        self.log.info(
            "waiting: batch %s, %s records%s%s",
            progress.batch_id,
            progress.records,
            f" (< {minimum})" if minimum is not None and progress.records < minimum else "",
            f"; behind: {', '.join(behind[:5])}" if behind else "",
        )
        return False


class SwitchProgressSensor(StreamingJobProgressSensor):
    """The switch's wait for the new job's first batch; each poke renews the switch lease."""

    def __init__(self, *, config_path: str, pair_name: str, kind: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config_path, self.pair_name, self.kind = config_path, pair_name, kind

    def poke(self, context: Any) -> bool:
        from airflow_kafka_failover.domain.config import load_pair
        from airflow_kafka_failover.domain.switch_gate import direction
        from airflow_kafka_failover.io.lease_file import write_lease

        pair = load_pair(self.config_path, self.pair_name)
        epoch = (context["ti"].xcom_pull(task_ids="fence_and_stop") or {}).get("epoch")
        if isinstance(epoch, int):
            target = direction(pair, self.kind)[1]
            write_lease(
                pair.job.fencing_marker, pair.name, epoch, target, self.kind, pair.keeper.switch_lease_seconds
            )
        return super().poke(context)

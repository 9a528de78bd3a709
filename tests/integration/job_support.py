"""Running the real streaming job in tests: a spark connection, file roots, and operator shortcuts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from akf_devtools.demo.story import LOCAL_SPARK_CONF
from akf_devtools.sandbox.airflow_env import register_spark_connection

from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.operators.streaming_job import SubmitStreamingJobOperator

__all__ = [
    "CRASH_AFTER_SINK",
    "TEST_SPARK_CONF",
    "JobWorld",
    "crash_after_sink",
    "fence_text",
    "progress_records",
    "register_spark_connection",
]

TEST_SPARK_CONF = LOCAL_SPARK_CONF  # small and quiet: two local cores, no UI, a modest driver

CRASH_AFTER_SINK = Path(__file__).parent / "jobs" / "crash_after_sink.py"
"""The tests' job whose sink ends the process right after writing one batch (see its docstring)."""


def crash_after_sink(batch: int, job: str | Path | None = None) -> dict[str, str]:
    """The environment that makes :data:`CRASH_AFTER_SINK` end after writing ``batch``.

    :param batch: the batch after whose output the process ends, before Spark commits it.
    :param job: the job file it runs (the packaged job when None).
    """
    from tests.integration.jobs.crash_after_sink import BATCH_VARIABLE, JOB_VARIABLE

    return {BATCH_VARIABLE: str(batch), **({JOB_VARIABLE: str(job)} if job is not None else {})}


def progress_records(checkpoint: str) -> list[dict[str, Any]]:
    """A run's progress entries (``<checkpoint>/progress/<batch>``), in batch order."""
    import json

    folder = Path(checkpoint) / "progress"
    names = sorted((p.name for p in folder.iterdir() if p.name.isdigit()), key=int) if folder.is_dir() else []
    return [json.loads((folder / name).read_text()) for name in names]


def fence_text(location: str | Path, pair: str) -> str | None:
    """Every epoch marker of a fencing folder, name and JSON text (None before the first): equal texts mean
    that nothing advanced the fence."""
    from airflow_kafka_failover.core.storage.store import read_text
    from airflow_kafka_failover.run_format.fencing import FencingMarker

    marker = FencingMarker(str(location), pair)
    epochs = marker.epochs()
    return "\n".join(f"{epoch}: {read_text(marker.marker(epoch))}" for epoch in epochs) if epochs else None


@dataclass
class JobWorld:
    """File roots of one test pair, and the connections its jobs use."""

    root: Path
    pair: str
    kafka_conns: dict[str, str]
    spark_conn: str
    group: str = ""
    submitted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def sink(self) -> Path:
        return self.root / "sink"

    @property
    def fence(self) -> Path:
        return self.root / "fence"

    def fence_text(self) -> str | None:
        """The fencing folder's markers as text (None before the first)."""
        return fence_text(self.fence, self.pair)

    def submit_operator(
        self, cluster: str, epoch: int, topics: list[str], starting_offsets: Any, **overrides: Any
    ) -> SubmitStreamingJobOperator:
        options = dict(
            task_id=f"submit_{cluster}_{epoch}",
            pair=self.pair,
            cluster=cluster,
            epoch=epoch,
            kafka_conn_id=self.kafka_conns[cluster],
            topics=topics,
            starting_offsets=starting_offsets,
            sink_root=str(self.sink),
            checkpoint_root=str(self.root / "checkpoints"),
            run_root=str(self.root / "runs"),
            fencing_marker=str(self.fence),
            bookkeeping_group=self.group or f"bk-{self.pair}",
            trigger_interval_seconds=1.0,
            spark_conn_id=self.spark_conn,
            conf=TEST_SPARK_CONF,
            startup_timeout_seconds=240,
        )
        options.update(overrides)
        return SubmitStreamingJobOperator(**options)

    def submit(
        self, cluster: str, epoch: int, topics: list[str], starting_offsets: Any, **overrides: Any
    ) -> dict[str, Any]:
        handle = self.submit_operator(cluster, epoch, topics, starting_offsets, **overrides).execute({})
        self.submitted.append(handle)
        return handle

    def stop_all(self) -> None:
        hook = StreamingJobHook(self.spark_conn)
        for handle in self.submitted:
            hook.stop(handle, timeout=20)

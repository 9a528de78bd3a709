"""Running the real streaming job in tests: a spark connection, file roots, and operator shortcuts."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.operators.streaming_job import SubmitStreamingJobOperator

# Small and quiet: two local cores, no UI, few shuffle partitions, a modest driver.
TEST_SPARK_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                   "spark.driver.memory": "768m"}


def register_spark_connection(conn_id: str, master: str, deploy_mode: str | None = None) -> str:
    """Expose a ``spark`` connection through AIRFLOW_CONN_* (``local[2]`` or ``spark://host:port``)."""
    extra = {"deploy-mode": deploy_mode} if deploy_mode else {}
    if master.startswith("spark://"):
        host, port = master[len("spark://"):].rsplit(":", 1)
        conn = {"conn_type": "spark", "host": f"spark://{host}", "port": int(port), "extra": extra}
    else:
        conn = {"conn_type": "spark", "host": master, "extra": extra}
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
    return conn_id


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
        return self.root / "fence.json"

    def submit_operator(self, cluster: str, epoch: int, topics: list[str], starting_offsets: Any,
                        **overrides: Any) -> SubmitStreamingJobOperator:
        options = dict(
            task_id=f"submit_{cluster}_{epoch}", pair=self.pair, cluster=cluster, epoch=epoch,
            kafka_conn_id=self.kafka_conns[cluster], topics=topics, starting_offsets=starting_offsets,
            sink_root=str(self.sink), checkpoint_root=str(self.root / "checkpoints"),
            run_root=str(self.root / "runs"), fencing_marker=str(self.fence),
            bookkeeping_group=self.group or f"bk-{self.pair}", trigger_interval_s=1.0,
            spark_conn_id=self.spark_conn, conf=TEST_SPARK_CONF, startup_timeout=240,
        )
        options.update(overrides)
        return SubmitStreamingJobOperator(**options)

    def submit(self, cluster: str, epoch: int, topics: list[str], starting_offsets: Any,
               **overrides: Any) -> dict[str, Any]:
        handle = self.submit_operator(cluster, epoch, topics, starting_offsets, **overrides).execute({})
        self.submitted.append(handle)
        return handle

    def stop_all(self) -> None:
        hook = StreamingJobHook(self.spark_conn)
        for handle in self.submitted:
            hook.stop(handle, timeout=20)

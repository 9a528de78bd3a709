"""The end-to-end story of one pair: real sandbox, real spark-submit, the real DAGs under dag.test()."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from airflow_kafka_failover.jobs.handle import JobHandle
from airflow_kafka_failover.jobs.layout import PROCESS_NAME
from airflow_kafka_failover.jobs.sink import read_sink
from airflow_kafka_failover.process_group import ManagedProcess
from airflow_kafka_failover.sandbox.kafka_io import create_topic
from airflow_kafka_failover.sandbox.producer import SteadyProducer
from tests.integration.conftest import register_connections
from tests.integration.job_support import TEST_SPARK_CONF, register_spark_connection
from tests.integration.waiting import wait_for

# Quick verdicts for tests: down after 3 failed probes 1 s apart (>= 3 s), recovered after 6 stable seconds.
TEST_HEALTH = {"failure_threshold": 3, "min_down_seconds": 3, "probe_interval": 1, "probe_timeout": 1,
               "heartbeat_stale_seconds": 4, "stability_window": 6}


@dataclass
class RunningDag:
    """A ``dag.test()`` subprocess whose output goes to ``log_path``."""

    kind: str
    process: subprocess.Popen
    log_path: Path
    dag_file: Path
    handle: Any

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_text(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.kind} run never logged {text!r} (see {self.log_path})")
            time.sleep(0.5)

    def wait(self, timeout: float = 420) -> tuple[str, str]:
        """Wait for the run; return its final state and its output without librdkafka's connect errors."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        finally:
            self.handle.close()
            self.dag_file.unlink(missing_ok=True)
        output = self.output()
        states = [line.split()[-1] for line in output.splitlines() if line.startswith("DAG_RUN_STATE")]
        state = states[-1] if states else f"no state (exit {self.process.returncode})"
        print(f"{self.kind} run: {state}; log {self.log_path}")
        return state, "\n".join(line for line in output.splitlines() if "|FAIL|rdkafka" not in line)


@dataclass
class Story:
    sandbox: Any
    airflow_home: Path
    root: Path
    pair: str
    topic: str
    producer: SteadyProducer | None = None
    active_for_producer: str = "A"
    figures: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    runs: int = 0

    @property
    def config_path(self) -> Path:
        return self.root / "pairs.yaml"

    def write_config(self, **switch: Any) -> None:
        conns = register_connections(self.sandbox, f"e2e_{self.pair}")
        register_spark_connection("spark_e2e", "local[2]")
        config = {"pairs": {self.pair: {
            "clusters": {"A": {"connection": conns["A"]}, "B": {"connection": conns["B"]}},
            "primary": "A", "topics": [self.topic], "bookkeeping_group": f"bk-{self.pair}",
            "health": TEST_HEALTH,
            "job": {"spark_connection": "spark_e2e", "sink_root": str(self.root / "sink"),
                    "checkpoint_root": str(self.root / "checkpoints"), "run_root": str(self.root / "runs"),
                    "fencing_marker": str(self.root / "fence.json"), "trigger_interval_seconds": 1,
                    "spark_conf": TEST_SPARK_CONF, "startup_timeout_seconds": 240, "stop_timeout_seconds": 30},
            "switch": {"watch_timeout_seconds": 240, "gap_wait_seconds": 60, **switch},
        }}}
        self.config_path.write_text(yaml.safe_dump(config))

    def create_topics(self, partitions: int = 2) -> None:
        for cluster in ("A", "B"):
            create_topic(self.sandbox.bootstrap(cluster), self.topic, partitions)

    def start_producer(self, rate: float = 40.0) -> None:
        bootstraps = {name: self.sandbox.bootstrap(name) for name in ("A", "B")}
        self.producer = SteadyProducer(bootstraps, self.topic, lambda: self.active_for_producer, rate=rate).start()

    def start_run(self, kind: str, **conf: Any) -> RunningDag:
        """Start ``dag.test()`` of one of the pair's DAGs in a subprocess, output to a log file."""
        self.runs += 1
        dags = self.airflow_home / "dags"
        dag_id = f"kafka_failover_{self.pair}_{kind}"
        path = dags / f"{dag_id}.py"
        path.write_text(
            "from airflow_kafka_failover.workflows.factory import build_dags\n"
            f"dag = build_dags({str(self.config_path)!r})[{dag_id!r}]\n"
            "if __name__ == '__main__':\n"
            f"    run = dag.test(run_conf={conf or None!r})\n"
            "    print('DAG_RUN_STATE', run.state)\n"
        )
        env = {**os.environ, "AIRFLOW_HOME": str(self.airflow_home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
               "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AKF_PAIRS_CONFIG": str(self.config_path)}
        env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
        log_path = self.root / f"run-{self.runs}-{kind}.log"
        handle = open(log_path, "w")
        process = subprocess.Popen([sys.executable, str(path)], env=env, stdout=handle, stderr=subprocess.STDOUT)
        return RunningDag(kind, process, log_path, path, handle)

    def run(self, kind: str, timeout: float = 420, **conf: Any) -> tuple[str, str]:
        return self.start_run(kind, **conf).wait(timeout)

    def record(self) -> dict[str, Any]:
        env = {**os.environ, "AIRFLOW_HOME": str(self.airflow_home)}
        env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
        airflow = Path(sys.executable).with_name("airflow")
        result = subprocess.run([str(airflow), "variables", "get", f"kafka_failover.{self.pair}.active_record"],
                                env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            return {}
        return json.loads(result.stdout.strip().splitlines()[-1])

    def fence(self) -> str:
        path = self.root / "fence.json"
        return path.read_text() if path.exists() else ""

    def job(self) -> JobHandle:
        return JobHandle.from_dict(self.record()["job"])

    def first_batch_time(self, cluster: str, epoch: int) -> float:
        """Epoch seconds of the first batch the run of (cluster, epoch) committed."""
        progress = self.root / "checkpoints" / self.pair / cluster / f"epoch-{epoch}" / "progress.jsonl"
        return json.loads(progress.read_text().splitlines()[0])["written_at"]

    def check_no_loss(self, timeout: float = 120) -> dict[str, int]:
        """Wait until every id acknowledged so far is in the sink; return the counts."""
        assert self.producer is not None
        acked = self.producer.acked_ids
        wait_for(lambda: acked <= read_sink(self.root / "sink").record_ids, timeout,
                 f"all {len(acked)} acknowledged ids in the sink", interval=2.0)
        contents = read_sink(self.root / "sink")
        counts = {"produced": len(acked), "lost": len(acked - contents.record_ids), "rows": contents.rows,
                  "duplicates": contents.duplicates, "without_id": contents.without_id}
        return counts

    def stop_job(self) -> None:
        from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook

        record = self.record()
        if record.get("job"):
            StreamingJobHook("spark_e2e").stop(record["job"], timeout=20)
        for run_dir in (self.root / "runs").glob("*/*/epoch-*"):  # any run the record no longer names
            ManagedProcess(PROCESS_NAME, run_dir).stop(timeout=10)


def timed(story: Story, label: str, fault_at: float, cluster: str, epoch: int, output: str) -> dict[str, Any]:
    """Detection time (fault to the verdict sensor's success) and RTO (fault to the new run's first batch)."""
    rto = story.first_batch_time(cluster, epoch) - fault_at
    figure: dict[str, Any] = {"switch": label, "rto_s": round(rto, 1)}
    for line in output.splitlines():
        if "[DAG TEST] end task task_id=wait_for_" in line:
            at = datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()
            figure["detection_s"] = round(at - fault_at, 1)
    story.figures.append(figure)
    print(f"{label}: {figure}")
    return figure

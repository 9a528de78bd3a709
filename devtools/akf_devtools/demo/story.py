"""One pair on the sandbox, driven through its real DAGs: the demo's engine, shared with the end-to-end tests.

Each DAG run is ``dag.test()`` of the pair's DAG in its own Python process, with its output in a log file,
exactly as ``airflow dags test`` would run it. The story only injects faults, writes records and reads
results (the active record, the job's progress files and the sink); every decision is the DAGs' own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.jobs.sink import SinkContents, SinkReader
from airflow_kafka_failover.run_format.layout import PROCESS_NAME
from akf_devtools.sandbox.airflow_env import (
    airflow_env,
    read_variable,
    register_kafka_connections,
    register_spark_connection,
)
from akf_devtools.sandbox.class_sharing import driver_java_options
from akf_devtools.sandbox.dag_test import main_block
from akf_devtools.sandbox.forked_runs import FORKED_ENV, ForkedRun, forker_for
from akf_devtools.sandbox.kafka_io import create_topic
from akf_devtools.sandbox.local_fs import local_fs_conf
from akf_devtools.sandbox.loopback import wait_until
from akf_devtools.sandbox.producer import SteadyProducer

# Quick verdicts on loopback: down after 3 failed probes 1 s apart (>= 3 s), recovered after 6 stable
# seconds. Production defaults are slower on purpose (examples/pairs.yaml).
QUICK_HEALTH = {
    "failure_threshold": 3,
    "min_down_seconds": 3,
    "probe_interval_seconds": 1,
    "probe_timeout_seconds": 1,
    "heartbeat_stale_seconds": 4,
    "stability_window_seconds": 6,
}

# Small and quiet local Spark: two cores, no UI, few shuffle partitions, a modest driver.
LOCAL_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "768m",
    # Delta rebuilds a table's snapshot from its log in 50 tasks by default, sized for big tables; the test
    # tables are small, and one task does it in a fraction of the time (jobs that write Delta only).
    "spark.databricks.delta.snapshotPartitions": "1",
    # The test jobs' batches hold tens of records, so Spark's generated code costs more than it saves: each
    # query writes its Java source, strips it with regular expressions, looks it up by its whole text and
    # compiles it with Janino when a batch's literals make it new. Interpreted expressions, as Spark's own
    # test suites run them: the Delta MERGE example's driver took about a fifth less CPU per batch
    # (benchmarks/bench_job_steady.py --application; the packaged job's unchanged). Not a setting for
    # deployments (factoryMode is an internal one of Spark's).
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    # Hadoop's local file system without a chmod or readlink process per file (akf_devtools.sandbox.local_fs).
    **local_fs_conf(),
    # A serial collector and the quick (C1) compiler, and Spark's classes from the class-sharing archive
    # once `make test` built it (akf_devtools.sandbox.class_sharing).
    "spark.driver.extraJavaOptions": driver_java_options(),
}

# The line a verdict sensor logs when it defers to the triggerer: the DAG is watching.
WATCHING = "Pausing task as DEFERRED"
FIRST_TASK = "[DAG TEST] starting task_id="
"""The line a ``dag.test()`` run logs when it starts a task: it has written its DAG and assets by then."""

WATCHING_WITHIN_S = 300
"""How long a run may take to reach ``WATCHING``: its first task starts Airflow's in-process execution API
(11-44 s per run while the whole test suite loaded the 2-core machine, before the runs built only the Task
SDK's API version: `akf_devtools.sandbox.dag_test`) before the sensor probes and defers."""


@dataclass
class RunningDag:
    """A ``dag.test()`` process of one DAG run, whose output goes to ``log_path``."""

    kind: str
    process: subprocess.Popen | ForkedRun
    log_path: Path
    dag_file: Path
    log_handle: Any
    started_at: float = field(default_factory=time.time)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_text(self, text: str, timeout: float) -> None:
        """Wait until the run logs ``text``; raise if it ends or ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the {self.kind} run never logged {text!r} (see {self.log_path})")
            time.sleep(0.5)

    def wait(self, timeout: float = 420) -> tuple[str, str]:
        """Wait for the run; return its final state and its output without librdkafka's connect errors."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        finally:
            self.log_handle.close()
            self.dag_file.unlink(missing_ok=True)
        output = self.output()
        states = [line.split()[-1] for line in output.splitlines() if line.startswith("DAG_RUN_STATE")]
        state = states[-1] if states else f"no state (exit {self.process.returncode})"
        return state, "\n".join(line for line in output.splitlines() if "|FAIL|rdkafka" not in line)

    def kill(self) -> None:
        """End the run now (Ctrl-C of the demo)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log_handle.close()
        self.dag_file.unlink(missing_ok=True)


@dataclass
class Story:
    """A pair ``pair`` of the sandbox's clusters A (primary) and B, with its files under ``root``."""

    sandbox: Any
    airflow_home: Path
    root: Path
    pair: str
    topic: str
    producer: SteadyProducer | None = None
    active_for_producer: str = "A"
    spark_conn: str = "spark_e2e"
    job_options: dict[str, Any] = field(default_factory=dict)
    """Job options over the story's own (``application`` for a user's job)."""
    sink_reader: Callable[[Any], SinkContents] = field(default_factory=SinkReader)
    """Reads the sink root back (the packaged job's Parquet sink by default, each complete batch read once
    over the story; a ``Path`` when the state is local, the location's text when it is on a store)."""
    state_root: str | None = None
    """Where the pair's state lives (sink, checkpoints, runs, fencing folder): ``root`` by default, or a
    store URI (``hdfs://...``, ``s3a://...``) whose connections ``storage_connections`` names."""
    storage_connections: dict[str, str] = field(default_factory=dict)
    local_root: Path | None = None
    """The job's local root (its log and process): ``root/runs`` by default."""
    run_env: dict[str, str] = field(default_factory=dict)
    """Environment of every DAG run (and of the jobs it submits) on top of the Airflow home's."""
    run_cwd: Path | None = None
    """Working directory of every DAG run process (the story's own by default)."""
    fork_runs: bool = field(default_factory=lambda: os.environ.get(FORKED_ENV) == "1")
    """Fork each DAG run from a warm process (``akf_devtools.sandbox.forked_runs``; the tests do) instead of
    starting an interpreter for it."""
    figures: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    runs: int = 0
    seen_progress: dict[tuple[str, int, int], dict[str, Any]] = field(default_factory=dict)
    """Every progress entry read so far: the job keeps only its newest, so a story that reads often sees
    them all."""

    def __post_init__(self) -> None:
        # The pair config names no jars: its jobs take the provider's job_jars option, filled here.
        from akf_devtools.sandbox.jars import use_job_jars

        use_job_jars()

    @property
    def config_path(self) -> Path:
        return self.root / "pairs.yaml"

    def state(self, name: str) -> str:
        """The location of one of the pair's state roots (``sink``, ``checkpoints``, ``runs``, ``fence``)."""
        from airflow_kafka_failover.core.storage import locations

        return locations.join(self.state_root, name) if self.state_root else str(self.root / name)

    @property
    def remote(self) -> bool:
        from airflow_kafka_failover.core.storage.locations import is_remote

        return bool(self.state_root) and is_remote(str(self.state_root))

    def use_storage(self) -> None:
        """Register the pair's stores in this process (the story reads the state back)."""
        from airflow_kafka_failover.hooks.storage import use_storage

        use_storage(
            [self.state(n) for n in ("sink", "checkpoints", "runs", "fence")], self.storage_connections, 10
        )

    def write_config(
        self, health: dict[str, Any] | None = None, keeper: dict[str, Any] | None = None, **switch: Any
    ) -> None:
        """Register the connections and write the pair's YAML (``switch`` overrides the switch settings,
        ``keeper`` the keeper's)."""
        conns = register_kafka_connections(self.sandbox, f"e2e_{self.pair}")
        register_spark_connection(self.spark_conn, "local[2]")
        config = {
            "pairs": {
                self.pair: {
                    "clusters": {"A": {"connection": conns["A"]}, "B": {"connection": conns["B"]}},
                    "primary": "A",
                    "topics": [self.topic],
                    "bookkeeping_group": f"bk-{self.pair}",
                    "health": health or QUICK_HEALTH,
                    "job": {
                        "spark_connection": self.spark_conn,
                        "sink_root": self.state("sink"),
                        "checkpoint_root": self.state("checkpoints"),
                        "run_root": self.state("runs"),
                        "fencing_marker": self.state("fence"),
                        "local_root": str(self.local_root or self.root / "runs"),
                        "storage_connections": self.storage_connections,
                        "trigger_interval_seconds": TRIGGER_INTERVAL_S,
                        # Spark's scratch folders under the pair's: a killed driver leaves its own behind.
                        "spark_conf": {**LOCAL_SPARK_CONF, "spark.local.dir": str(self.root / "spark-local")},
                        "startup_timeout_seconds": 240,
                        "stop_timeout_seconds": 30,
                        **self.job_options,
                    },
                    "switch": {"watch_timeout_seconds": 240, "gap_wait_seconds": 60, **switch},
                    "keeper": keeper or {},
                }
            }
        }
        self.root.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(config))

    def create_topics(self, partitions: int = 2) -> None:
        for cluster in ("A", "B"):
            create_topic(self.sandbox.client_config(cluster), self.topic, partitions)

    def start_producer(self, rate: float = 40.0, partitions: int = 2) -> None:
        bootstraps = {name: self.sandbox.bootstrap(name) for name in ("A", "B")}
        self.producer = SteadyProducer(
            bootstraps,
            self.topic,
            lambda: self.active_for_producer,
            rate=rate,
            partitions=partitions,
            security=self.sandbox.security_config(),
        ).start()

    def start_run(self, kind: str, env: dict[str, str] | None = None, **conf: Any) -> RunningDag:
        """Start ``dag.test()`` of the pair's ``kind`` DAG (start, failover, failback) in a subprocess,
        forked from a warm process when ``fork_runs``.

        :param env: extra environment of the run (and of the jobs it submits).
        :param conf: the run's Params (``force``, ``dry_run``, ``reason``).
        """
        self.runs += 1
        dag_id = f"kafka_failover_{self.pair}_{kind}"
        path = self.airflow_home / "dags" / f"{dag_id}.py"
        path.write_text(
            "from airflow_kafka_failover.workflows.factory import build_dags\n"
            f"dag = build_dags({str(self.config_path)!r})[{dag_id!r}]\n" + main_block(conf or None)
        )
        env = airflow_env(
            self.airflow_home, AKF_PAIRS_CONFIG=str(self.config_path), **{**self.run_env, **(env or {})}
        )
        log_path = self.root / f"run-{self.runs}-{kind}.log"
        log_handle = open(log_path, "w")  # closed by RunningDag.wait/kill
        if self.fork_runs:
            forked = forker_for(env).fork(path, env, self.run_cwd, log_path)
            return RunningDag(kind, forked, log_path, path, log_handle)
        process = subprocess.Popen(
            [sys.executable, str(path)],
            env=env,
            stdout=log_handle,
            stderr=subprocess.STDOUT,
            cwd=self.run_cwd,
        )
        return RunningDag(kind, process, log_path, path, log_handle)

    def run(
        self, kind: str, timeout: float = 420, env: dict[str, str] | None = None, **conf: Any
    ) -> tuple[str, str]:
        return self.start_run(kind, env, **conf).wait(timeout)

    def record(self) -> dict[str, Any]:
        """The pair's active record as the DAGs left it ({} before the first run)."""
        return read_variable(self.airflow_home, f"kafka_failover.{self.pair}.active_record") or {}

    def fence(self) -> str:
        """The newest epoch marker of the pair's fencing folder as its JSON text ("" before the first)."""
        from airflow_kafka_failover.core.storage.store import read_text
        from airflow_kafka_failover.run_format.fencing import FencingMarker

        marker = FencingMarker(self.state("fence"), self.pair)
        epochs = marker.epochs()
        return read_text(marker.marker(epochs[-1])) if epochs else ""

    def job(self) -> JobHandle:
        return JobHandle.from_dict(self.record()["job"])

    def _progress_folders(self) -> list[tuple[str, int, str]]:
        """``(cluster, epoch, progress folder)`` of every run of the pair's checkpoints."""
        from airflow_kafka_failover.core.storage import locations
        from airflow_kafka_failover.core.storage.store import open_store

        base = locations.join(self.state("checkpoints"), self.pair)
        store = open_store(base)
        folders = []
        for cluster in store.names(base):
            for run in store.names(locations.join(base, cluster)):
                if run.startswith("epoch-") and run[6:].isdigit():
                    folders.append((cluster, int(run[6:]), locations.join(base, cluster, run, "progress")))
        return folders

    def progress_lines(self) -> list[dict[str, Any]]:
        """Every progress entry of every run seen so far, with ``cluster`` and ``epoch`` added, in (cluster,
        epoch, batch) order. The job keeps its newest 100 and its first: records it removed before this was
        called are missing (the live view and the tests call it every few seconds)."""
        from airflow_kafka_failover.core.storage import locations
        from airflow_kafka_failover.core.storage.store import open_store, read_json

        for cluster, epoch, folder in self._progress_folders():
            for name in open_store(folder).names(folder):
                key = (cluster, epoch, int(name)) if name.isdigit() else None
                if key is None or key in self.seen_progress:
                    continue
                try:
                    record = read_json(locations.join(folder, name))
                except (OSError, ValueError):
                    continue  # removed or replaced while read
                self.seen_progress[key] = {**record, "cluster": cluster, "epoch": epoch}
        return [self.seen_progress[key] for key in sorted(self.seen_progress)]

    def start_warm_standby(self, cluster: str, epoch: int, wait: bool = True, timeout: float = 180) -> Any:
        """Start the pair's warm standby driver for ``cluster`` as the keeper would (its config must say
        ``switch.standby: warm``); with ``wait``, until it waits for a handoff. Return its slot."""
        from airflow_kafka_failover.domain.config import load_pair
        from airflow_kafka_failover.io.standby_slot import standby_slot
        from airflow_kafka_failover.switching.standby import start_standby

        pair = load_pair(self.config_path, self.pair)
        start_standby(pair, cluster, epoch)
        slot = standby_slot(pair, cluster)
        deadline = time.monotonic() + timeout
        while wait and not slot.waiting():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the warm standby driver in {slot.folder} did not wait within {timeout:.0f} s; its log: "
                    f"{slot.folder / 'logs' / 'standby.log'}"
                )
            time.sleep(0.5)
        return slot

    def first_batch_time(self, cluster: str, epoch: int, timeout: float = 60.0) -> float:
        """Epoch seconds of the first batch the run of (cluster, epoch) committed.

        The job's listener writes a batch's progress entry after Spark's commit, beside the next batch, so a
        switch that saw the commit can end before the entry is there (seen on a loaded machine after a
        failover through the warm standby): wait for it up to ``timeout`` seconds.
        """
        from airflow_kafka_failover.core.storage import locations
        from airflow_kafka_failover.core.storage.store import open_store, read_json

        folder = locations.join(self.state("checkpoints"), self.pair, cluster, f"epoch-{epoch}", "progress")

        def first_entry() -> dict[str, Any] | None:
            numbers = sorted(int(name) for name in open_store(folder).names(folder) if name.isdigit())
            for number in numbers:
                entry = read_json(locations.join(folder, str(number)))
                if not entry.get("carried"):  # a carried checkpoint's first entry is the old run's batch
                    return entry
            return None

        if not wait_until(first_entry, timeout):
            raise AssertionError(f"no progress entry in {folder} {timeout:.0f} s after the switch ended")
        entry = first_entry()
        assert entry is not None
        return float(entry["written_at"])

    def caught_up_time(self, cluster: str, epoch: int, within_s: float) -> float | None:
        """Epoch seconds of the first batch of the run of (cluster, epoch) that was caught up (see
        :func:`caught_up_at`)."""
        from airflow_kafka_failover.core.storage import locations

        return caught_up_at(
            locations.join(self.state("checkpoints"), self.pair, cluster, f"epoch-{epoch}", "progress"),
            within_s,
        )

    def sink_counts(self, acked: set[str] | None = None) -> dict[str, int]:
        """Acknowledged records (``acked``, default all so far) against the deduplicated sink."""
        assert self.producer is not None
        acked = self.producer.acked_ids if acked is None else acked
        contents = self.read_sink()
        return {
            "produced": len(acked),
            "lost": len(acked - contents.record_ids),
            "rows": contents.rows,
            "unique": len(contents.record_ids),
            "duplicates": contents.duplicates,
            "without_id": contents.without_id,
        }

    def read_sink(self) -> SinkContents:
        """The pair's sink as it is now, deduplicated by record id."""
        return self.sink_reader(self.state("sink") if self.remote else self.root / "sink")

    def wait_for_sink(self, timeout: float) -> dict[str, int]:
        """Wait until every acknowledged id is in the sink (or ``timeout`` passes); return the counts."""
        assert self.producer is not None
        acked = self.producer.acked_ids
        deadline = time.monotonic() + timeout
        counts = self.sink_counts(acked)
        while counts["lost"] and time.monotonic() < deadline:
            time.sleep(2.0)
            counts = self.sink_counts(acked)
        return counts

    def stop_job(self) -> None:
        """Stop the job the record names and any run it no longer names."""
        from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook

        record = self.record()
        if record.get("job"):
            StreamingJobHook(self.spark_conn, storage_connections=self.storage_connections).stop(
                record["job"], timeout=20
            )
        for local_dir in (self.local_root or self.root / "runs").glob("*/*/epoch-*"):
            ManagedProcess(PROCESS_NAME, local_dir).stop(timeout=10)
        stop_warm_standbys(self.local_root or self.root / "runs")


def stop_warm_standbys(local_root: Path) -> None:
    """Stop every warm standby driver in a slot under ``local_root`` (``<pair>/<cluster>/standby``)."""
    from airflow_kafka_failover.cluster_managers.standby_handover import STANDBY_PROCESS

    for slot in local_root.glob("*/*/standby"):
        ManagedProcess(STANDBY_PROCESS, slot).stop(timeout=10)


def verdict_time(output: str) -> float | None:
    """Epoch seconds at which the run's verdict sensor (``wait_for_*``) succeeded, from its log."""
    for line in output.splitlines():
        if "[DAG TEST] end task task_id=wait_for_" in line:
            return datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()
    return None


def caught_up_at(progress: str, within_s: float) -> float | None:
    """Epoch seconds of the first batch in the ``progress`` folder of a run that committed records at most
    ``within_s`` seconds old: its newest record's timestamp (over all partitions) against the time of its
    progress entry. None while no batch has (among the entries the job keeps)."""
    from airflow_kafka_failover.core.storage import locations
    from airflow_kafka_failover.core.storage.store import open_store, read_json

    for batch in sorted(int(name) for name in open_store(progress).names(progress) if name.isdigit()):
        entry = read_json(locations.join(progress, str(batch)))
        marks = entry.get("max_timestamp_ms", {}).values()
        newest_ms = max((ts for partitions in marks for ts in partitions.values()), default=None)
        written_at = float(entry["written_at"])
        if newest_ms is not None and written_at - newest_ms / 1000 <= within_s:
            return written_at
    return None


TRIGGER_INTERVAL_S = 1
"""The trigger interval of the story's job, in seconds."""

SWITCH_STEPS = ("check_target", "fence_and_stop", "plan", "submit", "wait_first_batch", "commit")
"""The tasks of a switch after its verdict, in order: the RTO's breakdown."""


def _log_time(line: str) -> float:
    return datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()


def step_seconds(output: str) -> dict[str, float]:
    """Seconds each task of a ``dag.test()`` run took, from its ``[DAG TEST]`` start and end lines (a task
    deferred and resumed counts from its first start to its end)."""
    started: dict[str, float] = {}
    took: dict[str, float] = {}
    for line in output.splitlines():
        for marker, is_end in (
            ("[DAG TEST] starting task_id=", False),
            ("[DAG TEST] end task task_id=", True),
        ):
            if marker in line:
                try:
                    _log_time(line)
                except ValueError:  # a line that does not start with its time (output mixed in): not ours
                    continue
                task = line.split(marker, 1)[1].split()[0]
                if is_end and task in started:
                    took[task] = round(_log_time(line) - started[task], 1)
                elif not is_end:
                    started.setdefault(task, _log_time(line))
    return took


def switch_figures(
    story: Story, label: str, fault_at: float, cluster: str, epoch: int, output: str
) -> dict[str, Any]:
    """Detection time (fault to verdict), RTO (fault to the new run's first committed batch), and the
    seconds of each step after the verdict (``steps``; ``wait_first_batch`` ends up to one poke, 2 s,
    after the batch)."""
    first_batch = story.first_batch_time(cluster, epoch)
    figure: dict[str, Any] = {"switch": label, "rto_s": round(first_batch - fault_at, 1)}
    verdict = verdict_time(output)
    if verdict is not None:
        figure["detection_s"] = round(verdict - fault_at, 1)
    took = step_seconds(output)
    figure["steps"] = {step: took[step] for step in SWITCH_STEPS if step in took}
    story.figures.append(figure)
    return figure

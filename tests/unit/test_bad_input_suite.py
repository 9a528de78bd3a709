"""The bad-input suite: every bad input ends in a clear error that names the value and says what to do, and
leaves the active record, the fencing marker, the running job and all data unchanged.

Each case is (name, the bad input, the call that consumes it, the fragments its message must hold). The
consumers are the ones production uses: the switch DAGs' ``gate`` task, the ``plan`` and ``submit`` steps,
and the ``kafka-failover`` command (a subprocess). The narrower tests of each check live next to their
module (tests/unit/<package>/test_<module>.py, as the package is laid out);
this suite is the one place that checks the whole promise for every case.

The world every case runs in: pair ``orders`` with A active at epoch 2; its active record in the Variable
``kafka_failover.orders.active_record`` of a migrated SQLite metadata DB; the fencing marker at epoch 2 for
A; and a running job with a committed checkpoint. The running job is a stand-in for the Spark job, so the
suite stays fast: a Python sleep loop started as the submit hook starts the job (a ``ManagedProcess`` named
``job`` in the run folder that ``run_format/layout.py`` gives (orders, A, 2)), its handle in the record; it
writes down every signal it receives. The variants with a real Spark job and real Kafka are in
tests/integration/test_streaming_job_bad_input.py.

No Kafka is needed: every consumer fails before the network, except where a cluster's answer is part of the
case (a start map checked against the real partitions, MirrorMaker 2's internal topics). There the hook's
network calls are stubbed (``StubbedCluster``) while the connection handling stays real.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.core.exceptions import FailoverError
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import PairConfig, load_pair
from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint, OffsetSync
from airflow_kafka_failover.domain.translation.replication_policy import (
    checkpoints_topic,
    offset_syncs_topic,
)
from airflow_kafka_failover.io.record_store import variable_key
from airflow_kafka_failover.run_format.fencing import FencingMarker
from airflow_kafka_failover.run_format.layout import OWNER_FILE, PROCESS_NAME, RunLayout, stop_requested
from airflow_kafka_failover.switching.job_request import JobRequest

PAIR, EPOCH = "orders", 2
CONN_A, CONN_B = "bad_suite_a", "bad_suite_b"
GROUP = "airflow-kafka-failover.orders"
SECRET = "s3cr3t-pw"
SYNCS_ON_B = offset_syncs_topic("A", "B", "target")  # the forward flow's offset syncs, kept on B
CHECKPOINTS_ON_B = checkpoints_topic("A")  # MM2's checkpoints of A's groups, on B
METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{}}'
VALID_PARAMS = {"force": False, "dry_run": False, "reason": ""}
KAFKA_FAILOVER = Path(sys.executable).with_name("kafka-failover")

# Its world migrates a metadata DB with the Airflow CLI and runs a stand-in job; the CLI cases start
# `kafka-failover`: about 15 s on two cores, so `make test` runs it and `make test-fast` does not.
pytestmark = pytest.mark.slow

CONNECTIONS = {
    CONN_A: {"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:1"}},
    CONN_B: {"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:2"}},
    "bad_suite_postgres": {"conn_type": "postgres", "host": "db.example", "port": 5432},
    "bad_suite_badjson": {"conn_type": "kafka", "extra": '{"bootstrap.servers": "127.0.0.1:2",'},
    "bad_suite_list": {"conn_type": "kafka", "extra": '["127.0.0.1:2"]'},
    "bad_suite_nobootstrap": {"conn_type": "kafka", "extra": {"client.id": "failover"}},
    "bad_suite_numeric": {"conn_type": "kafka", "extra": {"bootstrap.servers": 9092}},
    "bad_suite_ssl": {
        "conn_type": "kafka",
        "extra": {
            "bootstrap.servers": "127.0.0.1:2",
            "security.protocol": "SSL",
            "ssl.crl.location": "/etc/kafka/crl.pem",
        },
    },
    "bad_suite_tls_key": {
        "conn_type": "kafka",
        "extra": {
            "bootstrap.servers": "127.0.0.1:2",
            "security.protocol": "SSL",
            "ssl.certificate.location": "/nonexistent/akf/client.pem",
            "ssl.key.location": "/nonexistent/akf/client.pem",
        },
    },
    "bad_suite_gssapi": {
        "conn_type": "kafka",
        "extra": {
            "bootstrap.servers": "127.0.0.1:2",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "GSSAPI",
            "sasl.username": "svc",
            "sasl.password": SECRET,
        },
    },
}

STAND_IN_JOB = """
import signal, sys, time
def note(signum, frame):
    with open(sys.argv[1], "a") as log:
        log.write(f"{signum}\\n")
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGCONT):
    signal.signal(signum, note)
print("stand-in job running", flush=True)
while True:
    time.sleep(0.5)
"""


# ---- the world: record, marker, running job -------------------------------------------------------------


@dataclass
class World:
    """Everything a case may touch, and what it must leave alone."""

    root: Path
    home: Path
    config: Path
    pair: PairConfig
    record: ActiveRecord
    handle: JobHandle
    pid: int

    @property
    def inputs(self) -> Path:
        return self.root / "inputs"

    @property
    def database(self) -> Path:
        return self.home / "airflow.db"

    @property
    def signals(self) -> Path:
        return Path(self.handle.run_dir) / "signals.txt"


def pair_dict(root: Path) -> dict[str, Any]:
    job = root / "job"
    return {
        "clusters": {"A": {"connection": CONN_A}, "B": {"connection": CONN_B}},
        "primary": "A",
        "topics": ["orders"],
        "bookkeeping_group": GROUP,
        "job": {
            "spark_connection": "bad_suite_spark",
            "sink_root": str(job / "sink"),
            "checkpoint_root": str(job / "checkpoints"),
            "run_root": str(job / "runs"),
            "fencing_marker": str(job / "fence" / "orders"),
        },
    }


def write_checkpoint(
    root: Path,
    *sources: str,
    batch: int = 0,
    version: str = "v1",
    commit: bool = True,
    progress: list[dict] | None = None,
) -> Path:
    """Lay out a Spark checkpoint: ``offsets/<batch>`` with one line per source, its commit, and the job's
    progress records (``progress/<batch_id>``)."""
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "offsets" / str(batch)).write_text("\n".join([version, METADATA, *sources]))
    if commit:
        (root / "commits").mkdir(exist_ok=True)
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    for record in progress or []:
        (root / "progress").mkdir(exist_ok=True)
        (root / "progress" / str(record["batch_id"])).write_text(json.dumps(record))
    return root


def migrated_home(home: Path) -> Path:
    """A fresh Airflow home with a migrated SQLite metadata DB (``airflow db migrate``, about 4 s)."""
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    result = subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), "db", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return home


@contextlib.contextmanager
def metadata_db(database: Path) -> Iterator[None]:
    """Point this process's Airflow ORM at ``database`` and read Variables from it, as the API server does."""
    from airflow import settings

    previous = settings.SQL_ALCHEMY_CONN
    settings.SQL_ALCHEMY_CONN = f"sqlite:///{database}"
    settings.reconfigure_orm()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("_AIRFLOW_PROCESS_CONTEXT", "server")  # Variable.get reads the metadata DB
            yield
    finally:
        settings.SQL_ALCHEMY_CONN = previous
        settings.reconfigure_orm()


def start_stand_in_job(layout: RunLayout, signals: Path) -> JobHandle:
    """Start the sleep loop the way the submit hook starts spark-submit; return the job's handle."""
    from airflow_kafka_failover.core.process_group import ManagedProcess

    write_checkpoint(
        Path(layout.checkpoint),
        '{"orders":{"0":10,"1":7}}',
        progress=[
            {
                "epoch": EPOCH,
                "batch_id": 0,
                "end_offsets": {"orders": {"0": 10, "1": 7}},
                "max_timestamp_ms": {"orders": {"0": 1700000000000}},
            }
        ],
    )
    (Path(layout.checkpoint) / OWNER_FILE).write_text(
        json.dumps({"pair": PAIR, "cluster": "A", "epoch": EPOCH})
    )
    process = ManagedProcess(PROCESS_NAME, Path(layout.run_dir))
    process.start([sys.executable, "-c", STAND_IN_JOB, str(signals)])
    # Its first line in its log before anything is compared: a case must not see the log it writes change.
    log = process.log_file
    deadline = time.monotonic() + 60
    while "stand-in job running" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, f"the stand-in job wrote nothing to {log} in 60 s"
        time.sleep(0.05)
    (Path(layout.run_dir) / "status.json").write_text(json.dumps({"state": "running"}))
    return JobHandle(
        pair=PAIR,
        cluster="A",
        epoch=EPOCH,
        deploy_mode="local",
        master="local[2]",
        run_dir=str(layout.run_dir),
        checkpoint=str(layout.checkpoint),
        sink_root=str(layout.checkpoint_root).replace("checkpoints", "sink"),
        spark_conn_id="bad_suite_spark",
        submitted_at="2024-01-01T00:00:00+00:00",
    )


def store_record(record: ActiveRecord) -> None:
    from airflow.models import Variable

    Variable.set(variable_key(PAIR), json.dumps(record.to_dict()))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("bad-input")
    home = migrated_home(root / "airflow")
    (root / "inputs").mkdir()
    config = root / "pairs.yaml"
    config.write_text(yaml.safe_dump({"pairs": {PAIR: pair_dict(root)}}))
    with pytest.MonkeyPatch.context() as patch, metadata_db(home / "airflow.db"):
        for conn_id, conn in CONNECTIONS.items():
            patch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
        pair = load_pair(config, PAIR)
        layout = RunLayout(PAIR, "A", EPOCH, pair.job.checkpoint_root, pair.job.run_root)
        Path(pair.job.sink_root).mkdir(parents=True)
        handle = start_stand_in_job(layout, Path(layout.run_dir) / "signals.txt")
        try:
            record = ActiveRecord(
                pair=PAIR,
                active="A",
                epoch=EPOCH,
                job=handle.to_dict(),
                checkpoint=handle.checkpoint,
                watermarks={"A": {"orders-0": 10, "orders-1": 7}},
                updated_at="2024-01-01T00:00:00+00:00",
            )
            store_record(record)
            FencingMarker(pair.job.fencing_marker, PAIR).advance(None, EPOCH, "A")
            yield World(root, home, config, pair, record, handle, handle.process.pid())
        finally:
            handle.process.kill()


# ---- what must not change -------------------------------------------------------------------------------


def file_tree(root: Path) -> dict[str, str]:
    """Every file and folder under ``root``: its path and the hash of its bytes (its mode for folders)."""
    tree = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        tree[key] = (
            hashlib.sha256(path.read_bytes()).hexdigest()
            if path.is_file()
            else f"dir {path.stat().st_mode:o}"
        )
    return tree


def untouched_state(world: World) -> dict[str, Any]:
    """What every case must leave as it was: the Variables (raw, encrypted bytes), the files, the job."""
    with contextlib.closing(sqlite3.connect(world.database)) as db:
        variables = db.execute(
            "SELECT key, val, is_encrypted, description FROM variable ORDER BY key"
        ).fetchall()
    return {
        "variables": variables,
        "files": file_tree(world.root / "job"),
        "job_pid": world.handle.process.pid(),
    }


def assert_untouched(world: World, before: dict[str, Any]) -> None:
    after = untouched_state(world)
    assert after["variables"] == before["variables"], "the active record Variable changed"
    assert [row[0] for row in after["variables"]] == [variable_key(PAIR)]
    fence = os.path.relpath(world.pair.job.fencing_marker, world.root / "job")
    assert {k: v for k, v in after["files"].items() if k.startswith(fence)} == {
        k: v for k, v in before["files"].items() if k.startswith(fence)
    }, "the fencing folder changed"
    assert not stop_requested(world.handle.run_dir), "the running job was asked to stop"
    assert not world.signals.exists(), f"the running job got signals {world.signals.read_text().split()}"
    assert after["job_pid"] == world.pid and job_alive(world.handle), "the running job is gone"
    assert after["files"] == before["files"], (
        "files of the job (checkpoint, run folder, sink, marker) changed"
    )


# ---- stubbed cluster answers ----------------------------------------------------------------------------


@dataclass
class StubbedCluster:
    """What each connection's cluster answers: its topics (partition counts), its internal topics' records."""

    topics: dict[str, dict[str, int]] = field(
        default_factory=lambda: {CONN_A: {"orders": 2, "B.orders": 2}, CONN_B: {"orders": 2, "A.orders": 2}}
    )
    records: dict[str, dict[str, list[tuple[bytes, bytes]]]] = field(
        default_factory=lambda: {
            CONN_B: {
                SYNCS_ON_B: [OffsetSync("orders", 0, 8, 8).encode(), OffsetSync("orders", 1, 5, 5).encode()],
                CHECKPOINTS_ON_B: [
                    Checkpoint(GROUP, "A.orders", 0, 10, 10).encode(),
                    Checkpoint(GROUP, "A.orders", 1, 7, 7).encode(),
                ],
            }
        }
    )

    def hook_class(self) -> type:
        from airflow_kafka_failover.core.types import Watermarks
        from airflow_kafka_failover.hooks.kafka_cluster import (
            ClusterMetadata,
            CompactedRecord,
            KafkaClusterHook,
            PartitionInfo,
        )

        cluster = self

        class StubbedClusterHook(KafkaClusterHook):
            """The real hook (connection checks included) with the network calls answered by the stub."""

            def describe_cluster(self, topics=(), timeout_seconds=None):
                known = {
                    **cluster.topics[self.kafka_config_id],
                    **{t: 1 for t in cluster.records.get(self.kafka_config_id, {})},
                }
                wanted = list(dict.fromkeys(topics))
                partitions = tuple(
                    PartitionInfo(t, p, 1, (1,), (1,)) for t in wanted if t in known for p in range(known[t])
                )
                return ClusterMetadata("stub", (1,), partitions, tuple(t for t in wanted if t not in known))

            def watermarks(self, partitions, timeout_seconds=None):
                return {tp: Watermarks(0, 100) for tp in partitions}

            def offsets_for_times(self, timestamps_ms, timeout_seconds=None):
                return {tp: None for tp in timestamps_ms}

            def read_topic_to_end(self, topic, timeout_seconds=None):
                self.partition_counts([topic])
                for offset, (key, value) in enumerate(cluster.records[self.kafka_config_id][topic]):
                    yield CompactedRecord(0, offset, key, value, 1700000000000)

        return StubbedClusterHook


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> StubbedCluster:
    import importlib
    import pkgutil
    import sys

    import airflow_kafka_failover
    from airflow_kafka_failover.hooks import kafka_cluster

    for info in pkgutil.walk_packages(airflow_kafka_failover.__path__, "airflow_kafka_failover."):
        importlib.import_module(info.name)  # every module that binds the hook, patched below
    stub = StubbedCluster()
    real, fake = kafka_cluster.KafkaClusterHook, stub.hook_class()
    for name, module in list(sys.modules.items()):
        if name.startswith("airflow_kafka_failover") and getattr(module, "KafkaClusterHook", None) is real:
            monkeypatch.setattr(module, "KafkaClusterHook", fake)
    return stub


# ---- the consumers --------------------------------------------------------------------------------------


def config_variant(world: World, name: str, edit: Callable[[dict[str, Any]], Any] | str) -> Path:
    """Write a variant of the pair config: ``edit`` changes the pair's mapping or is the file's whole text."""
    path = world.inputs / f"{name}.yaml"
    if isinstance(edit, str):
        path.write_text(edit)
        return path
    pair = pair_dict(world.root)
    edit(pair)
    path.write_text(yaml.safe_dump({"pairs": {PAIR: pair}}))
    return path


def with_connection(cluster: str, conn_id: str) -> Callable[[dict[str, Any]], None]:
    def edit(pair: dict[str, Any]) -> None:
        pair["clusters"][cluster]["connection"] = conn_id

    return edit


def gate_refuses(world: World, config: Path | None = None, params: dict[str, Any] | None = None) -> str:
    """Run the failover DAG's gate task (config, connections, Params, record) and return its failure."""
    from airflow_kafka_failover.sensors.record_gate import ActiveRecordGate
    from airflow_kafka_failover.version_compat import AirflowFailException

    gate = ActiveRecordGate(
        task_id="gate", config_path=str(config or world.config), pair_name=PAIR, kind="failover"
    )
    with pytest.raises(AirflowFailException) as failure:
        gate.poke({"params": {**VALID_PARAMS, **(params or {})}})
    return str(failure.value)


def plan_refuses(world: World, checkpoint: Path | None = None) -> str:
    """Run the failover's plan step on the record the gate passed on (its checkpoint replaced when given)."""
    from airflow_kafka_failover.switching import steps

    record = replace(world.record, checkpoint=str(checkpoint)) if checkpoint else world.record
    with pytest.raises(FailoverError) as failure:
        steps.make_plan(world.pair, steps.FAILOVER, record, dry_run=False)
    return str(failure.value)


def submit_refuses(world: World, starting_offsets: Any, config: Path | None = None) -> str:
    """Run the failover's submit step: the job on B at the next epoch with these start offsets."""
    from airflow_kafka_failover.switching import steps

    pair = load_pair(config, PAIR) if config else world.pair
    with pytest.raises(FailoverError) as failure:
        steps.submit(pair, "B", EPOCH + 1, starting_offsets)
    return str(failure.value)


def cli_refuses(world: World, *args: str, exit_code: int = 1) -> str:
    """Run ``kafka-failover`` with the world's Airflow home; return its stderr."""
    env = {**os.environ, "AIRFLOW_HOME": str(world.home)}
    for name in ("AIRFLOW__CORE__UNIT_TEST_MODE", "_AIRFLOW_PROCESS_CONTEXT"):
        env.pop(name, None)
    result = subprocess.run(
        [str(KAFKA_FAILOVER), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == exit_code, f"exit {result.returncode}: {result.stderr[-3000:]}"
    assert result.stdout.strip() == "", f"printed a plan: {result.stdout[:500]}"
    return result.stderr


def plan_args(world: World, *args: str, config: Path | None = None) -> list[str]:
    options = {"--config": str(config or world.config), "--pair": PAIR, "--from": "A", "--to": "B"}
    given = dict(zip(args[::2], args[1::2], strict=True))
    return ["plan", *[item for option in {**options, **given}.items() for item in option]]


def damaged_checkpoint(world: World, name: str, *sources: str, **kwargs: Any) -> Path:
    return write_checkpoint(world.inputs / name, *sources, **kwargs)


GOOD_CHECKPOINT = Checkpoint(GROUP, "A.orders", 1, 7, 7).encode()
GOOD_SYNC = OffsetSync("orders", 1, 5, 5).encode()
FULL_MAP = {"orders": {"0": 1, "1": 1}, "A.orders": {"0": 9, "1": 6}}


# ---- the cases ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One bad input: how it is consumed, and what its message must say (the value, and what to do)."""

    category: str
    name: str
    consume: Callable[[World, StubbedCluster], str]
    expected: tuple[str, ...]
    absent: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.category}: {self.name}"


def _no_primary(pair: dict[str, Any]) -> None:
    del pair["primary"]


CASES = [
    # Config files
    Case(
        "config",
        "unknown connection id",
        lambda w, c: cli_refuses(
            w,
            *plan_args(
                w,
                "--position",
                '{"orders": {"0": 1}}',
                config=config_variant(w, "unknown-conn", with_connection("B", "bad_suite_nowhere")),
            ),
        ),
        ("connection 'bad_suite_nowhere' does not exist", "create a connection of type 'kafka'"),
    ),
    Case(
        "config",
        "pair without primary",
        lambda w, c: gate_refuses(w, config_variant(w, "no-primary", _no_primary)),
        (
            "pair 'orders': primary: is required",
            "name the cluster the job normally runs on, one of ['A', 'B']",
        ),
    ),
    Case(
        "config",
        "same cluster twice",
        lambda w, c: gate_refuses(w, config_variant(w, "same-twice", with_connection("B", CONN_A))),
        (f"both clusters use connection '{CONN_A}'", "the same cluster twice cannot fail over to itself"),
    ),
    Case(
        "config",
        "unknown replication policy",
        lambda w, c: gate_refuses(
            w, config_variant(w, "policy", lambda p: p.update(replication={"policy": "mirror-all"}))
        ),
        ("replication.policy: 'mirror-all' is not one of ['default', 'identity']",),
    ),
    Case(
        "config",
        "storage path of an unsupported scheme",
        lambda w, c: gate_refuses(
            w, config_variant(w, "s3-scheme", lambda p: p["job"].update(checkpoint_root="s3://bucket/ckpt"))
        ),
        (
            "job.checkpoint_root",
            "'s3://bucket/ckpt' uses the unsupported scheme s3://",
            "write s3a://bucket/ckpt",
        ),
    ),
    Case(
        "config",
        "storage URI without a bucket",
        lambda w, c: gate_refuses(
            w, config_variant(w, "no-bucket", lambda p: p["job"].update(fencing_marker="s3a:///fence"))
        ),
        ("job.fencing_marker", "'s3a:///fence' names no bucket", "write s3a://<bucket>/<path>"),
    ),
    Case(
        "config",
        "storage connection of an unknown scheme",
        lambda w, c: gate_refuses(
            w, config_variant(w, "ftp-conn", lambda p: p["job"].update(storage_connections={"ftp": "x"}))
        ),
        ("job.storage_connections", "names unknown schemes ['ftp']", "'hdfs', 's3a'"),
    ),
    Case(
        "config",
        "bad YAML syntax",
        lambda w, c: gate_refuses(
            w, config_variant(w, "syntax", "pairs:\n  orders:\n    topics: [orders\n    primary: A\n")
        ),
        ("syntax.yaml is not valid YAML", "line", "fix the YAML"),
    ),
    Case(
        "config",
        "threshold of the wrong type",
        lambda w, c: gate_refuses(
            w, config_variant(w, "threshold", lambda p: p.update(health={"failure_threshold": "three"}))
        ),
        ("health: health threshold failure_threshold must be an integer >= 1, got 'three'",),
    ),
    Case(
        "config",
        "job seconds of the wrong type",
        lambda w, c: gate_refuses(
            w, config_variant(w, "seconds", lambda p: p["job"].update(stop_timeout_seconds="soon"))
        ),
        ("job.stop_timeout_seconds: must be a number >= 0.1, got 'soon'",),
    ),
    Case(
        "config",
        "keeper interval of zero",
        lambda w, c: gate_refuses(
            w, config_variant(w, "keeper-zero", lambda p: p.update(keeper={"interval_seconds": 0}))
        ),
        ("keeper.interval_seconds: must be a number >= 0.1, got 0",),
    ),
    Case(
        "config",
        "negative keeper restarts",
        lambda w, c: gate_refuses(
            w, config_variant(w, "keeper-negative", lambda p: p.update(keeper={"max_restarts": -1}))
        ),
        ("keeper.max_restarts:", "-1"),
    ),
    Case(
        "config",
        "unknown key",
        lambda w, c: gate_refuses(
            w, config_variant(w, "typo", lambda p: p.update(health={"failure_treshold": 3}))
        ),
        ("unknown health threshold key(s) ['failure_treshold']", "known keys are [", "'failure_threshold'"),
    ),
    Case(
        "config",
        "file that does not exist",
        lambda w, c: gate_refuses(w, w.inputs / "nowhere.yaml"),
        ("cannot read the pair config", "nowhere.yaml", "check the path"),
    ),
    # Connections
    Case(
        "connection",
        "missing",
        lambda w, c: gate_refuses(
            w, config_variant(w, "conn-missing", with_connection("B", "bad_suite_missing"))
        ),
        ("connection 'bad_suite_missing' does not exist", "create a connection of type 'kafka'"),
    ),
    Case(
        "connection",
        "wrong conn_type",
        lambda w, c: gate_refuses(
            w, config_variant(w, "conn-type", with_connection("B", "bad_suite_postgres"))
        ),
        (
            "failover of pair 'orders' refused: Airflow connection 'bad_suite_postgres' is of type "
            "'postgres', "
            "not 'kafka'",
            "point the task at a connection",
        ),
    ),
    Case(
        "connection",
        "extra that is not JSON",
        lambda w, c: gate_refuses(
            w, config_variant(w, "conn-json", with_connection("B", "bad_suite_badjson"))
        ),
        ("connection 'bad_suite_badjson'", "extra is not valid JSON", '{"bootstrap.servers": "host:9092"}'),
    ),
    Case(
        "connection",
        "extra that is a list",
        lambda w, c: gate_refuses(w, config_variant(w, "conn-list", with_connection("B", "bad_suite_list"))),
        ("connection 'bad_suite_list'", "must be a JSON object", "['127.0.0.1:2']"),
    ),
    Case(
        "connection",
        "extra without bootstrap.servers",
        lambda w, c: gate_refuses(
            w, config_variant(w, "conn-nobootstrap", with_connection("B", "bad_suite_nobootstrap"))
        ),
        (
            "connection 'bad_suite_nobootstrap' has no 'bootstrap.servers'",
            "set it to the cluster's bootstrap",
        ),
    ),
    Case(
        "connection",
        "bootstrap.servers that is not text",
        lambda w, c: gate_refuses(
            w, config_variant(w, "conn-numeric", with_connection("B", "bad_suite_numeric"))
        ),
        ("connection 'bad_suite_numeric'", "bootstrap.servers", "9092", "host:9092"),
    ),
    Case(
        "connection",
        "security option without a Java equivalent",
        lambda w, c: submit_refuses(
            w, FULL_MAP, config_variant(w, "conn-ssl", with_connection("B", "bad_suite_ssl"))
        ),
        (
            "connection 'bad_suite_ssl'",
            "['ssl.crl.location']",
            "give the Java equivalents in the job's kafka_options",
        ),
    ),
    Case(
        "connection",
        "client certificate file missing",
        lambda w, c: submit_refuses(
            w, FULL_MAP, config_variant(w, "conn-tls", with_connection("B", "bad_suite_tls_key"))
        ),
        (
            "connection 'bad_suite_tls_key'",
            "ssl.certificate.location /nonexistent/akf/client.pem does not exist",
            "point ssl.certificate.location at the right file",
        ),
    ),
    Case(
        "connection",
        "SASL login with an unmappable mechanism",
        lambda w, c: submit_refuses(
            w, FULL_MAP, config_variant(w, "conn-gssapi", with_connection("B", "bad_suite_gssapi"))
        ),
        (
            "connection 'bad_suite_gssapi'",
            "got mechanism 'GSSAPI'",
            "give 'sasl.jaas.config' in the job's kafka_options",
        ),
        absent=(SECRET,),
    ),
    # DAG Params
    Case(
        "params",
        "force given as text",
        lambda w, c: gate_refuses(w, params={"force": "yes"}),
        ("param 'force' must be true or false, got 'yes'",),
    ),
    Case(
        "params",
        "dry_run given as the text 'false'",
        lambda w, c: gate_refuses(w, params={"dry_run": "false"}),
        ("param 'dry_run' must be true or false, got 'false'",),
    ),
    Case(
        "params",
        "reason that is not text",
        lambda w, c: gate_refuses(w, params={"reason": 5}),
        ("param 'reason' must be text, got 5",),
    ),
    # CLI arguments
    Case(
        "cli",
        "--to names a cluster the pair lacks",
        lambda w, c: cli_refuses(w, *plan_args(w, "--to", "C", "--position", '{"orders": {"0": 1}}')),
        ("pair 'orders' has no cluster 'C'; its clusters are ['A', 'B']",),
    ),
    Case(
        "cli",
        "--from and --to the same",
        lambda w, c: cli_refuses(w, *plan_args(w, "--to", "A", "--position", '{"orders": {"0": 1}}')),
        ("--from and --to are both 'A'", "name the two different clusters"),
    ),
    Case(
        "cli",
        "no position source",
        lambda w, c: cli_refuses(w, *plan_args(w), exit_code=2),
        ("one of the arguments --checkpoint --position --group is required",),
    ),
    Case(
        "cli",
        "--pair the file lacks",
        lambda w, c: cli_refuses(
            w, *plan_args(w, "--pair", "payments", "--position", '{"orders": {"0": 1}}')
        ),
        ("has no pair 'payments'; it has ['orders']",),
    ),
    Case(
        "cli",
        "--position that is not JSON",
        lambda w, c: cli_refuses(w, *plan_args(w, "--position", "{orders: 12")),
        (
            "explicit stream position is not valid JSON",
            "'{orders: 12'",
            'expected e.g. {"orders": {"0": 12}}',
        ),
    ),
    Case(
        "cli",
        "the sandbox command, which is a development tool (akf-dev), not the provider's",
        lambda w, c: cli_refuses(w, "sandbox", "up", exit_code=2),
        ("invalid choice: 'sandbox'",),
    ),
    # Checkpoint directories
    Case(
        "checkpoint",
        "missing",
        lambda w, c: plan_refuses(w, w.inputs / "no-such-checkpoint"),
        ("no-such-checkpoint: checkpoint directory does not exist", "check the path"),
    ),
    Case(
        "checkpoint",
        "empty",
        lambda w, c: plan_refuses(w, _empty_dir(w.inputs / "empty")),
        ("empty/offsets: no offsets directory", "Spark streaming checkpoint", "check the path"),
    ),
    Case(
        "checkpoint",
        "offsets file truncated mid-line",
        lambda w, c: plan_refuses(w, damaged_checkpoint(w, "torn", '{"orders":{"0":10,"1":')),
        ("torn/offsets/0:3: corrupt source offset JSON", "restore the checkpoint"),
    ),
    Case(
        "checkpoint",
        "offsets file truncated to nothing",
        lambda w, c: plan_refuses(w, _empty_offsets(damaged_checkpoint(w, "zero", '{"orders":{"0":10}}'))),
        ("zero/offsets/0:1: empty offsets file", "restore the checkpoint"),
    ),
    Case(
        "checkpoint",
        "offsets of other topics",
        lambda w, c: plan_refuses(w, damaged_checkpoint(w, "other-topics", '{"payments":{"0":10}}')),
        (
            "the position holds topics ['payments']",
            "does not read on cluster A",
            "Plan from this pair's own checkpoint",
        ),
    ),
    Case(
        "checkpoint",
        "unknown format version",
        lambda w, c: plan_refuses(w, damaged_checkpoint(w, "v2", '{"orders":{"0":10,"1":7}}', version="v2")),
        ("unsupported offset log version 'v2'", "only 'v1' is supported", "restore the checkpoint"),
    ),
    Case(
        "checkpoint",
        "progress record of another checkpoint",
        lambda w, c: plan_refuses(
            w,
            damaged_checkpoint(
                w,
                "foreign-progress",
                '{"orders":{"0":10,"1":7}}',
                progress=[
                    {"batch_id": 0, "end_offsets": {"orders": {"0": 99, "1": 7}}, "max_timestamp_ms": {}}
                ],
            ),
        ),
        (
            "progress/0: progress entry of batch 0 has end offsets that differ",
            "restore the checkpoint",
        ),
    ),
    # Start maps
    Case(
        "start map",
        "malformed JSON",
        lambda w, c: submit_refuses(w, '{"orders": {"0": 12'),
        (
            "starting offsets are not valid JSON",
            '\'{"orders": {"0": 12\'',
            "give 'earliest', 'latest' or a map",
        ),
    ),
    Case(
        "start map",
        "'earlist', a typo of earliest",
        lambda w, c: submit_refuses(w, "earlist"),
        ("starting offsets are not valid JSON", "'earlist'", "give 'earliest', 'latest' or a map"),
    ),
    Case(
        "start map",
        "negative offset",
        lambda w, c: submit_refuses(w, {**FULL_MAP, "orders": {"0": -5, "1": 0}}),
        ("starting offset of orders-0 is -5", "expected an integer >= 0, or -2 (earliest) / -1 (latest)"),
    ),
    Case(
        "start map",
        "partition the topic lacks",
        lambda w, c: submit_refuses(w, {**FULL_MAP, "orders": {"0": 1, "1": 1, "7": 1}}),
        ("names partitions the cluster does not have: ['orders-7']", "re-plan"),
    ),
    Case(
        "start map",
        "topic the job does not read",
        lambda w, c: submit_refuses(w, {**FULL_MAP, "payments": {"0": 1}}),
        ("topics not subscribed: ['payments']", "re-plan"),
    ),
    Case(
        "start map",
        "partitions missing",
        lambda w, c: submit_refuses(w, {"orders": {"0": 1, "1": 1}}),
        ("misses partitions ['A.orders-0', 'A.orders-1']", "re-plan, or add them"),
    ),
    # MirrorMaker 2 records that do not decode
    Case(
        "mm2 record",
        "checkpoint key truncated",
        lambda w, c: _plan_with_record(w, c, CHECKPOINTS_ON_B, GOOD_CHECKPOINT[0][:-2], GOOD_CHECKPOINT[1]),
        (
            "malformed Checkpoint key",
            "field 'partition' needs 4 bytes",
            "truncated record",
            f"offset 2 of {CHECKPOINTS_ON_B}-0 on B",
            "Only MirrorMaker 2 should write to",
        ),
    ),
    Case(
        "mm2 record",
        "checkpoint value truncated",
        lambda w, c: _plan_with_record(w, c, CHECKPOINTS_ON_B, GOOD_CHECKPOINT[0], GOOD_CHECKPOINT[1][:12]),
        (
            "malformed Checkpoint value",
            "field 'offset' needs 8 bytes",
            f"{CHECKPOINTS_ON_B}-0",
            "Only MirrorMaker 2 should write to",
        ),
    ),
    Case(
        "mm2 record",
        "checkpoint value of an unknown version",
        lambda w, c: _plan_with_record(
            w, c, CHECKPOINTS_ON_B, GOOD_CHECKPOINT[0], b"\x00\x01" + GOOD_CHECKPOINT[1][2:]
        ),
        ("field 'version' is 1, only version 0 is known", "upgrade this provider", f"{CHECKPOINTS_ON_B}-0"),
    ),
    Case(
        "mm2 record",
        "offset sync of another layout version",
        lambda w, c: _plan_with_record(w, c, SYNCS_ON_B, GOOD_SYNC[0], b"\x00\x01" + GOOD_SYNC[1]),
        (
            "malformed OffsetSync value: 2 trailing bytes",
            f"offset 2 of {SYNCS_ON_B}-0 on B",
            "upgrade this provider",
        ),
    ),
]


def _empty_dir(path: Path) -> Path:
    path.mkdir(exist_ok=True)
    return path


def _empty_offsets(checkpoint: Path) -> Path:
    (checkpoint / "offsets" / "0").write_bytes(b"")
    return checkpoint


def _plan_with_record(world: World, cluster: StubbedCluster, topic: str, key: bytes, value: bytes) -> str:
    """Plan with one more record, after the good ones, in one of B's MirrorMaker 2 topics."""
    cluster.records[CONN_B][topic].append((key, value))
    return plan_refuses(world)


# ---- the tests ------------------------------------------------------------------------------------------


def test_the_suite_covers_every_category_with_enough_cases():
    categories = {case.category for case in CASES}
    assert categories == {"config", "connection", "params", "cli", "checkpoint", "start map", "mm2 record"}
    assert len(CASES) >= 25
    assert len({str(case) for case in CASES}) == len(CASES)


def test_the_world_is_valid_so_each_case_fails_only_on_its_bad_input(world, cluster):
    """Control: with good input the gate passes the record on, the plan step plans and the submit step's
    checks accept the start map; nothing changes."""
    from airflow_kafka_failover.sensors.record_gate import ActiveRecordGate
    from airflow_kafka_failover.switching import steps

    before = untouched_state(world)
    gate = ActiveRecordGate(task_id="gate", config_path=str(world.config), pair_name=PAIR, kind="failover")
    passed = gate.poke({"params": VALID_PARAMS})
    assert passed.is_done and passed.xcom_value == world.record.to_dict()
    planned = steps.make_plan(world.pair, steps.FAILOVER, world.record, dry_run=True)
    assert json.loads(planned["starting_offsets"])["A.orders"] == {"0": 10, "1": 7}
    checked = JobRequest.for_pair(
        world.pair, "B", EPOCH + 1, FULL_MAP
    ).settings()  # checks only, starts nothing
    assert checked.starting_offsets == FULL_MAP and checked.bootstrap_servers == "127.0.0.1:2"
    assert_untouched(world, before)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_bad_input_is_refused_by_name_and_changes_nothing(world, cluster, case):
    before = untouched_state(world)
    started = time.monotonic()
    message = case.consume(world, cluster)
    assert time.monotonic() - started < 30, "a bad input must fail fast"
    missing = [fragment for fragment in case.expected if fragment not in message]
    assert not missing, f"{case}: message lacks {missing}:\n{message}"
    assert "Traceback" not in message, f"{case}: raw traceback:\n{message}"
    assert not [secret for secret in case.absent if secret in message], f"{case}: message leaks a secret"
    assert_untouched(world, before)

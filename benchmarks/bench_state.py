"""State carry benchmark: what carrying a stateful query's state to the new run adds to a switch, for state of
about 10 MB, 100 MB and 1 GB on disk, with the checkpoints on local disk and on HDFS.

For each size the benchmark makes a real checkpoint: one Kafka cluster on loopback (the sandbox's cluster A
alone; no MirrorMaker 2), a topic of ``--partitions`` partitions holding N records with unique ids, and a
local Spark query (``state_carry_query.py``: ``dropDuplicatesWithinWatermark`` on the id, then a count per
hour of event time; ``spark.sql.shuffle.partitions`` ``--shuffle-partitions``, Spark's default state store
unless ``--provider rocksdb``) that reads them in ``--batches`` batches (100: the versions Spark keeps,
``minBatchesToRetain``) and stops. Its state store maintenance runs every ``--maintenance-interval`` (2 s), so
that each store holds a snapshot every 10 versions or so, as a query that ran for a while has them. N is
chosen for the state folder to reach the size: from ``--bytes-per-record`` at first, then from what the sizes
before measured; the folder's actual size is reported (``state_bytes_<size>``: its files without Spark's
``.crc`` checksums).

Then the switch's state steps are timed, ``--repeats`` times on local disk and ``--hdfs-repeats`` times on
HDFS, each into a new, empty checkpoint: what ``switching/state.py`` does under ``job.state: carry``, in
order: before the fence moves (``check``), ``state_operators`` and ``inspect_state`` of the old checkpoint;
in the submit step (``submit``), ``state_operators`` again, the new checkpoint's owner file looked for
(``carried_from`` and an existence check), ``inspect_state`` at the plan's batch, and ``carry_checkpoint``
(the offsets rewritten onto the replica topic ``A.<topic>``). ``carry_added_s_<size>_<from>_to_<to>`` is
the median of the sum (the seconds the carry adds to the switch's RTO before the new run starts), with
``_min`` and ``_max``; the details, files and bytes written are under ``carry_<size>_<from>_to_<to>``.
Stores:

- ``local_to_local``: both checkpoints on local disk (``/tmp``; the files just written are in the page cache,
  as the old run's are when a switch stops it);
- ``hdfs_to_hdfs``: both on HDFS (the minicluster on loopback, reached through a ``webhdfs`` connection
  as the Airflow side does: ``benchmarks/state_store.py``), as a deployment whose ``checkpoint_root`` is on
  HDFS has them. The old checkpoint is the local one uploaded as it is (without the ``.crc`` checksums, which
  HDFS does not have); the upload is not timed.

One more carry of each kind runs with its store calls timed (``profile_<size>_<from>_to_<to>``): the seconds
spent listing, reading and writing (local: of which ``fsync``), summed over the copy's threads, and on HDFS
every WebHDFS request by NameNode/DataNode and operation. Unless ``--skip-resume``, the query then runs on a
carried checkpoint (``resume_<size>``): on ``A.<topic>``, which holds ``--resume-records`` ids the old run
had counted and as many new ones; its first batch must follow the carried one and the counts must grow by
the new ids only (the deduplication's state came along). Its first batch's seconds beside the first batch of
the same query on an empty checkpoint say what loading the carried state costs the new run.

    .venv/bin/python benchmarks/bench_state.py [--sizes 10mb,100mb,1gb] [--quick] [--repeats 5]
        [--hdfs-repeats 3] [--batches 100] [--skip-hdfs] [--skip-resume] [--provider hdfs|rocksdb]
        [--driver-memory 4g] [--keep]

Progress goes to stderr; the last line on stdout is JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akf_devtools.sandbox.broker import new_cluster_id  # noqa: E402
from akf_devtools.sandbox.cluster import KafkaCluster  # noqa: E402
from akf_devtools.sandbox.jars import kafka_classpath, spark_kafka_jars  # noqa: E402
from akf_devtools.sandbox.kafka_io import create_topic, end_offsets  # noqa: E402
from akf_devtools.sandbox.local_fs import local_fs_conf  # noqa: E402
from akf_devtools.sandbox.loopback import free_ports  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

from airflow_kafka_failover.cluster_managers.local import job_environment  # noqa: E402
from airflow_kafka_failover.core.process_group import ManagedProcess  # noqa: E402
from airflow_kafka_failover.core.storage import locations  # noqa: E402
from airflow_kafka_failover.core.storage.fsspec_store import FsspecStore, WebHdfsStore  # noqa: E402
from airflow_kafka_failover.core.storage.store import LocalStore, open_store  # noqa: E402
from airflow_kafka_failover.core.types import TopicPartition  # noqa: E402
from airflow_kafka_failover.hooks.streaming_job import LOG4J_CONFIG  # noqa: E402
from airflow_kafka_failover.run_format.layout import OWNER_FILE  # noqa: E402
from airflow_kafka_failover.run_format.state_carry import (  # noqa: E402
    COPY_THREADS,
    carried_from,
    carry_checkpoint,
    inspect_state,
    state_operators,
)
from benchmarks.json_output import json_line_output  # noqa: E402
from benchmarks.state_store import StateStore  # noqa: E402

QUERY = Path(__file__).with_name("state_carry_query.py")
SIZES = "10mb,100mb,1gb"
QUICK_SIZE = "5mb"
MB = 1_000_000
PROVIDERS = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
ID_BYTES = 24
"""The record id: 48 hex digits of a hash of its number (unique, and as incompressible as real ids)."""
OWNER = {"pair": "bench-state", "cluster": "B", "epoch": 1, "bootstrap_servers": "127.0.0.1:9"}
STORES = {
    "local_to_local": "both checkpoints on local disk (/tmp), the old one in the page cache",
    "hdfs_to_hdfs": "both on HDFS (minicluster on loopback) through the Airflow side's webhdfs connection; "
    "the old one is the local checkpoint uploaded as it is",
}
COPY_THREADS_NOTE = (
    f"summed over the copy's threads ({COPY_THREADS} at a time), so a share above the wall time is overlap"
)


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)(mb|gb)", text.strip().lower())
    if match is None:
        raise argparse.ArgumentTypeError(f"a size is a number and mb or gb (10mb, 1gb), not {text!r}")
    return int(match.group(1)) * (MB if match.group(2) == "mb" else 1000 * MB)


def record_id(number: int) -> str:
    return hashlib.blake2b(number.to_bytes(8, "little"), digest_size=ID_BYTES).hexdigest()


def stats(values: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(values), 3),
        "min_s": round(min(values), 3),
        "max_s": round(max(values), 3),
    }


# ---- Kafka -----------------------------------------------------------------------------------------------


def start_kafka(run_dir: Path) -> KafkaCluster:
    """Cluster A of the sandbox alone: one combined KRaft node on free loopback ports."""
    kafka_classpath()
    run_dir.mkdir(parents=True, exist_ok=True)
    cluster = KafkaCluster.plan(
        "A", run_dir, 1, iter(free_ports(KafkaCluster.ports_needed(1))), new_cluster_id()
    )
    cluster.start(cluster.nodes, 150.0)
    return cluster


def produce(bootstrap: str, topic: str, numbers: Iterator[int], partitions: int) -> int:
    """Produce ``{"id": record_id(n), "ts": now}`` for each number, round-robin; return how many."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": "none",
        }
    )
    count = 0
    for number in numbers:
        value = b'{"id":"%s","ts":%d}' % (record_id(number).encode(), int(time.time() * 1000))
        while True:
            try:
                producer.produce(topic, value=value, partition=count % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
        if count % 50_000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise RuntimeError(f"could not deliver every record to {topic} within 300 s")
    return count


def load_topic(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    create_topic(bootstrap, topic, partitions)
    started = time.monotonic()
    produce(bootstrap, topic, iter(range(records)), partitions)
    loaded = sum((end_offsets(bootstrap, topic) or {}).values())
    if loaded != records:
        raise RuntimeError(f"{topic} holds {loaded} records after loading, expected {records}")
    return time.monotonic() - started


# ---- the Spark query -------------------------------------------------------------------------------------


class Queries:
    """Runs ``state_carry_query.py`` under spark-submit, one at a time; stops a running one on clean-up."""

    def __init__(self, root: Path, bootstrap: str, args: argparse.Namespace) -> None:
        self.root, self.bootstrap, self.args = root, bootstrap, args
        self.running: ManagedProcess | None = None
        self.jars = ",".join(str(jar) for jar in spark_kafka_jars())
        self.conf = {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
            "spark.sql.streaming.stateStore.providerClass": PROVIDERS[args.provider],
            "spark.sql.streaming.numRecentProgressUpdates": "100000",
            "spark.sql.streaming.stateStore.maintenanceInterval": args.maintenance_interval,
            "spark.local.dir": str(root / "spark-local"),
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}",
            **local_fs_conf(),
        }

    def run(
        self, name: str, topic: str, checkpoint: Path, max_offsets: int, starting: str = "earliest"
    ) -> dict:
        """Run the query until it read what ``topic`` holds; return its summary and its window counts."""
        folder = self.root / "queries" / name
        folder.mkdir(parents=True)
        output = folder / "counts.jsonl"
        command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]"]
        for key, value in self.conf.items():
            command += ["--conf", f"{key}={value}"]
        command += ["--jars", self.jars, "--driver-memory", self.args.driver_memory, str(QUERY)]
        command += ["--bootstrap", self.bootstrap, "--topic", topic, "--checkpoint", str(checkpoint)]
        command += ["--output", str(output), "--starting", starting, "--max-offsets", str(max_offsets)]
        process = ManagedProcess(f"query-{name}", folder)
        self.running = process
        process.start(command, env=job_environment(None))
        deadline = time.monotonic() + self.args.query_timeout
        while process.is_running() and time.monotonic() < deadline:
            time.sleep(0.5)
        if process.is_running():
            process.stop(timeout=30)
            raise RuntimeError(f"query {name} still ran after {self.args.query_timeout:.0f} s")
        self.running = None
        done = Path(f"{output}.done")
        if not done.is_file():
            raise RuntimeError(
                f"query {name} ended without its summary; log {process.log_file}:\n{process.log_tail(40)}"
            )
        summary = json.loads(done.read_text())
        summary["counts"] = (
            [json.loads(line) for line in output.read_text().splitlines()] if output.exists() else []
        )
        return summary

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop(timeout=30)
            self.running = None


def window_total(*runs: dict) -> int:
    """The records counted over every window: each window's latest count, the later run's last."""
    latest: dict[str, int] = {}
    for run in runs:
        for entry in sorted(run["counts"], key=lambda e: e["batch"]):
            latest[entry["window"]] = entry["count"]
    return sum(latest.values())


# ---- the state on disk -----------------------------------------------------------------------------------


def state_on_disk(checkpoint: Path) -> dict[str, Any]:
    """The files of ``state/`` without Spark's checksums and temporaries: count and bytes, also by kind."""
    kinds: dict[str, dict[str, int]] = {}
    for folder, _dirs, names in os.walk(checkpoint / "state"):
        for name in names:
            if name.startswith("."):
                continue
            suffix = name.rsplit(".", 1)[-1] if "." in name else "other"
            kind = suffix if suffix in ("delta", "snapshot", "zip", "changelog", "sst") else "other"
            entry = kinds.setdefault(kind, {"files": 0, "bytes": 0})
            entry["files"] += 1
            entry["bytes"] += os.path.getsize(os.path.join(folder, name))
    return {
        "files": sum(k["files"] for k in kinds.values()),
        "bytes": sum(k["bytes"] for k in kinds.values()),
        "by_kind": kinds,
    }


STORE_FILE = re.compile(r"([0-9]+)\.(delta|snapshot)")


def needed_to_load(checkpoint: Path) -> dict[str, int]:
    """What Spark's default state store reads to load the last committed batch's state: in each store the
    newest snapshot up to that version and the deltas after it (all deltas when it has no snapshot)."""
    version = max(int(name) for name in os.listdir(checkpoint / "commits") if name.isdigit()) + 1
    files = size = 0
    for folder, _dirs, names in os.walk(checkpoint / "state"):
        held = {}
        for name in names:
            match = STORE_FILE.fullmatch(name)
            if match and int(match.group(1)) <= version:
                held[(int(match.group(1)), match.group(2))] = os.path.getsize(os.path.join(folder, name))
        base = max((number for number, kind in held if kind == "snapshot"), default=0)
        chosen = [key for key in held if key == (base, "snapshot") or (key[1] == "delta" and key[0] > base)]
        files += len(chosen)
        size += sum(held[key] for key in chosen)
    return {"files": files, "bytes": size}


def checkpoint_files(checkpoint: Path) -> list[str]:
    """Every file of a local checkpoint, relative, without checksums and temporaries (what HDFS holds)."""
    found = []
    for folder, _dirs, names in os.walk(checkpoint):
        relative = os.path.relpath(folder, checkpoint)
        if any(part.startswith(".") for part in Path(relative).parts):
            continue
        found += [
            name if relative == "." else f"{relative}/{name}" for name in names if not name.startswith(".")
        ]
    return sorted(found)


def upload(checkpoint: Path, target: str) -> tuple[int, float]:
    """Copy a local checkpoint to a store location (as many files at a time as the carry); return the files
    and the seconds."""
    started = time.monotonic()
    names = checkpoint_files(checkpoint)
    store = open_store(target)

    def put(relative: str) -> None:
        store.replace(locations.join(target, *relative.split("/")), (checkpoint / relative).read_bytes())

    with ThreadPoolExecutor(max_workers=COPY_THREADS) as pool:
        for done in [pool.submit(put, name) for name in names]:
            done.result()
    return len(names), time.monotonic() - started


def remove(location: str) -> None:
    """Remove a checkpoint (a local folder or a folder on the store)."""
    if locations.scheme(location) is None:
        shutil.rmtree(location, ignore_errors=True)
        return
    store = open_store(location)
    store.fs.rm(store.fs_path(location), recursive=True)


# ---- the carry -------------------------------------------------------------------------------------------


def switch_carry(source: str, target: str, targets: dict, starts: dict) -> dict[str, Any]:
    """What a switch under ``job.state: carry`` does with the state (``switching/state.py``), timed."""
    started = time.perf_counter()
    # fence_and_stop: check_state_policy
    state_operators(source)
    checked = inspect_state(source)
    assert checked is not None, f"{source} holds no state"
    check_done = time.perf_counter()
    # submit: carry_state
    state_operators(source)
    if carried_from(target) is None:
        open_store(target).exists(locations.join(target, OWNER_FILE))
    inspected = time.perf_counter()
    state = inspect_state(source, checked.batch_id)
    assert state is not None
    inspect_done = time.perf_counter()
    carried = carry_checkpoint(state, target, OWNER, targets, starts)
    finished = time.perf_counter()
    return {
        "added_s": finished - started,
        "check_s": check_done - started,
        "inspect_s": inspect_done - inspected,
        "copy_s": finished - inspect_done,
        "files": carried.files,
        "bytes": carried.bytes,
        "batch_id": carried.batch_id,
        "operators": len(carried.operators),
    }


def carry_mapping(topic: str, partitions: int) -> tuple[dict, dict]:
    """Each partition of ``topic`` -> the same of ``A.<topic>``, read from its start (offset 0)."""
    targets = {TopicPartition(topic, p): TopicPartition(f"A.{topic}", p) for p in range(partitions)}
    starts = {TopicPartition(f"A.{topic}", p): 0 for p in range(partitions)}
    return targets, starts


def time_carries(source: str, target_root: str, mapping: tuple[dict, dict], repeats: int) -> dict[str, Any]:
    """``repeats`` carries of ``source``, each into a new checkpoint under ``target_root`` (removed after)."""
    runs = []
    open_store(source).exists(
        source
    )  # the store is opened before the clock starts (a switch opens it anyway)
    open_store(target_root).exists(target_root)
    for repeat in range(repeats):
        target = locations.join(target_root, f"epoch-{repeat + 1}")
        runs.append(switch_carry(source, target, *mapping))
        remove(target)
        run = runs[-1]
        say(
            f"    carry {repeat + 1}/{repeats}: {run['added_s']:.2f} s (check {run['check_s']:.2f} s, "
            f"inspect {run['inspect_s']:.2f} s, copy {run['copy_s']:.2f} s)"
        )
    added = [run["added_s"] for run in runs]
    return {
        **stats(added),
        "check_median_s": round(statistics.median(run["check_s"] for run in runs), 3),
        "inspect_median_s": round(statistics.median(run["inspect_s"] for run in runs), 3),
        "copy_median_s": round(statistics.median(run["copy_s"] for run in runs), 3),
        "runs_s": [round(value, 3) for value in added],
        "files": runs[0]["files"],
        "bytes": runs[0]["bytes"],
        "batch_id": runs[0]["batch_id"],
        "operators": runs[0]["operators"],
    }


# ---- where a carry spends its time -----------------------------------------------------------------------


class Profile:
    """Seconds and calls per kind of store call (and per WebHDFS request), summed over threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def add(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds
            self.calls[kind] = self.calls.get(kind, 0) + 1

    def timed(self, kind: str, function: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.add(kind, time.perf_counter() - started)

        return wrapper

    def report(self, wall: float) -> dict[str, Any]:
        return {
            "wall_s": round(wall, 3),
            "thread_s": {kind: round(value, 3) for kind, value in sorted(self.seconds.items())},
            "calls": dict(sorted(self.calls.items())),
            "note": COPY_THREADS_NOTE,
        }


STORE_CALLS = {"read": "read", "replace": "write", "create": "write", "delete": "write"}
LISTING_CALLS = ("files", "names", "exists")


@contextmanager
def profiled(profile: Profile, webhdfs: Any = None) -> Iterator[None]:
    """Time every store call (and ``os.fsync``; every WebHDFS request of ``webhdfs``) while in the block."""
    patched: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, kind: str) -> None:
        original = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name)
        if original is None:
            return
        patched.append((owner, name, original))
        setattr(owner, name, profile.timed(kind, original))

    for cls in (LocalStore, FsspecStore, WebHdfsStore):
        for name, kind in STORE_CALLS.items():
            patch(cls, name, kind)
        for name in LISTING_CALLS:
            patch(cls, name, "list")
    patch(os, "fsync", "of_which_fsync")
    if webhdfs is not None:
        original_request = webhdfs.session.request
        namenode_port = webhdfs.url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]

        def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            parts = urlsplit(url)
            node = "namenode" if str(parts.port) == namenode_port else "datanode"
            params = kwargs.get("params") or {}
            operation = params.get("op") or (parse_qs(parts.query).get("op") or ["?"])[0]
            started = time.perf_counter()
            try:
                return original_request(method, url, *args, **kwargs)
            finally:
                profile.add(f"http {node} {method.upper()} {operation}", time.perf_counter() - started)

        patched.append((webhdfs.session, "request", original_request))
        webhdfs.session.request = request
    try:
        yield
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


def profile_carry(source: str, target: str, mapping: tuple[dict, dict]) -> dict[str, Any]:
    store = open_store(target)
    profile = Profile()
    started = time.perf_counter()
    with profiled(profile, getattr(store, "fs", None)):
        switch_carry(source, target, *mapping)
    report = profile.report(time.perf_counter() - started)
    remove(target)
    return report


# ---- one size --------------------------------------------------------------------------------------------


class Sizes:
    """The measurements of every size, with what the benchmark started (stopped by :meth:`stop`)."""

    def __init__(self, root: Path, args: argparse.Namespace) -> None:
        self.root, self.args = root, args
        self.kafka: KafkaCluster | None = None
        self.hdfs: StateStore | None = None
        self.hdfs_problem: str | None = None
        self.queries: Queries | None = None
        self.bytes_per_record = float(args.bytes_per_record)
        self.fresh_first_batch_s: float | None = None
        self.summary: dict[str, Any] = {}

    def start(self) -> None:
        with ThreadPoolExecutor(2) as pool:
            kafka = pool.submit(start_kafka, self.root / "kafka")
            hdfs = pool.submit(self._start_hdfs) if not self.args.skip_hdfs else None
            self.kafka = kafka.result()
            if hdfs is not None:
                hdfs.result()
        bootstrap = self.kafka.bootstrap
        say(f"Kafka up at {bootstrap}" + (f"; HDFS up at {self.hdfs.server.uri}" if self.hdfs else ""))
        self.queries = Queries(self.root, bootstrap, self.args)

    def _start_hdfs(self) -> None:
        store = StateStore("hdfs", self.root / "hdfs")
        self.hdfs = store
        try:
            took = store.start()
            say(f"HDFS started in {took:.1f} s")
        except Exception as exc:  # measured without it, and said so
            self.hdfs_problem = f"not measured: HDFS did not start ({type(exc).__name__}: {exc})"[:600]
            say(self.hdfs_problem)
            store.stop()
            self.hdfs = None

    def stop(self) -> None:
        for what, stop in (
            ("the query", self.queries.stop if self.queries else None),
            ("HDFS", self.hdfs.stop if self.hdfs else None),
            ("Kafka", self.kafka.stop if self.kafka else None),
        ):
            if stop is None:
                continue
            try:
                stop()
            except Exception as exc:  # stop the rest regardless
                say(f"could not stop {what}: {exc}")

    def measure(self, label: str, size: int) -> None:
        records = max(int(size / self.bytes_per_record), 1000)
        topic = f"state-{label}"
        folder = self.root / label
        checkpoint = folder / "checkpoint"
        assert self.kafka is not None and self.queries is not None
        say(f"{label}: loading {records} records into {topic} ({self.args.partitions} partitions)")
        loaded_s = load_topic(self.kafka.bootstrap, topic, records, self.args.partitions)
        say(f"{label}: loaded in {loaded_s:.0f} s; running the query")
        max_offsets = math.ceil(records / self.args.batches)
        made = self.queries.run(f"{label}-make", topic, checkpoint, max_offsets)
        if made["records"] != records:
            raise RuntimeError(f"the query read {made['records']} of {records} records")
        disk = state_on_disk(checkpoint)
        if self.args.provider == "hdfs":
            disk["needed_to_load"] = needed_to_load(checkpoint)
        self.bytes_per_record = disk["bytes"] / records
        say(
            f"{label}: {made['batches']} batches in {made['seconds']:.0f} s; state on disk {disk['files']} "
            f"files, {disk['bytes'] / MB:.1f} MB ({self.bytes_per_record:.1f} bytes a record); rows "
            f"{made['state_rows']}"
        )
        figures: dict[str, Any] = {
            f"records_{label}": records,
            f"state_bytes_{label}": disk["bytes"],
            f"state_files_{label}": disk["files"],
            f"state_{label}": {
                **disk,
                "batches": made["batches"],
                "query_s": made["seconds"],
                "rows": made["state_rows"],
            },
        }
        self.summary.update(figures)
        mapping = carry_mapping(topic, self.args.partitions)
        self.summary.update(self._local(label, str(checkpoint), folder, mapping))
        self.summary.update(self._on_hdfs(label, checkpoint, mapping))
        if not self.args.skip_resume:
            try:
                resumed = self._resume(label, topic, str(checkpoint), folder, made, records, mapping)
            except Exception as exc:  # reported beside the figures measured
                traceback.print_exc()
                resumed = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:600]}
            self.summary[f"resume_{label}"] = resumed
        shutil.rmtree(folder, ignore_errors=True)

    def _local(self, label: str, checkpoint: str, folder: Path, mapping: tuple[dict, dict]) -> dict[str, Any]:
        say(f"{label}: carrying on local disk, {self.args.repeats} times")
        timed = time_carries(checkpoint, str(folder / "carried"), mapping, self.args.repeats)
        profile = profile_carry(checkpoint, str(folder / "profiled"), mapping)
        say(f"{label}: local carry median {timed['median_s']} s; profile {profile['thread_s']}")
        return self._figures(label, "local_to_local", timed, profile)

    def _on_hdfs(self, label: str, checkpoint: Path, mapping: tuple[dict, dict]) -> dict[str, Any]:
        if self.hdfs is None:
            return {}
        try:
            source = self.hdfs.location(label, "A", "epoch-0")
            files, took = upload(checkpoint, source)
            say(
                f"{label}: checkpoint uploaded to HDFS ({files} files) in {took:.0f} s; carrying, "
                f"{self.args.hdfs_repeats} times"
            )
            timed = time_carries(source, self.hdfs.location(label, "B"), mapping, self.args.hdfs_repeats)
            profile = profile_carry(source, self.hdfs.location(label, "profiled"), mapping)
            remove(source)
        except Exception as exc:  # reported, not faked
            traceback.print_exc()
            return {f"hdfs_{label}": f"not measured: {type(exc).__name__}: {exc}"[:600]}
        say(f"{label}: HDFS carry median {timed['median_s']} s; profile {profile['thread_s']}")
        return {
            **self._figures(label, "hdfs_to_hdfs", timed, profile),
            f"hdfs_upload_{label}_s": round(took, 1),
        }

    @staticmethod
    def _figures(label: str, stores: str, timed: dict, profile: dict) -> dict[str, Any]:
        key = f"{label}_{stores}"
        return {
            f"carry_added_s_{key}": timed["median_s"],
            f"carry_added_s_{key}_min": timed["min_s"],
            f"carry_added_s_{key}_max": timed["max_s"],
            f"carried_files_{key}": timed["files"],
            f"carried_bytes_{key}": timed["bytes"],
            f"carry_{key}": timed,
            f"profile_{key}": profile,
        }

    def _resume(
        self, label: str, topic: str, checkpoint: str, folder: Path, made: dict, records: int, mapping: tuple
    ) -> dict[str, Any]:
        """The query goes on from a carried checkpoint on ``A.<topic>``: old ids dropped, new ones counted."""
        assert self.kafka is not None and self.queries is not None
        replica, extra = f"A.{topic}", self.args.resume_records
        create_topic(self.kafka.bootstrap, replica, self.args.partitions)
        numbers = [*range(extra), *range(records, records + extra)]  # ids the old run counted, then new ones
        produce(self.kafka.bootstrap, replica, iter(numbers), self.args.partitions)
        carried = str(folder / "resumed")
        carry = switch_carry(checkpoint, carried, *mapping)
        resumed = self.queries.run(f"{label}-resume", replica, Path(carried), 10 * extra)
        first = carry["batch_id"] + 1
        total, expected = window_total(made, resumed), records + extra
        result = {
            "ok": resumed["records"] == 2 * extra
            and total == expected
            and str(first) in resumed["batch_seconds"],
            "first_batch": first,
            "first_batch_s": resumed["batch_seconds"].get(str(first)),
            "records_read": resumed["records"],
            "counted_total": total,
            "expected_total": expected,
            "query_s": resumed["seconds"],
        }
        if self.fresh_first_batch_s is None:
            fresh = self.queries.run(f"{label}-fresh", replica, folder / "fresh", 10 * extra)
            self.fresh_first_batch_s = fresh["batch_seconds"].get("0")
        result["fresh_first_batch_s"] = self.fresh_first_batch_s
        say(f"{label}: resumed on the carried checkpoint: {result}")
        return result


# ---- main ------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=SIZES, help=f"state sizes on disk, comma-separated ({SIZES})")
    parser.add_argument(
        "--quick", action="store_true", help=f"a smoke run: {QUICK_SIZE} only, 2 carries each"
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed carries per size on local disk (5)")
    parser.add_argument("--hdfs-repeats", type=int, default=3, help="timed carries per size on HDFS (3)")
    parser.add_argument(
        "--maintenance-interval",
        default="2s",
        help="spark.sql.streaming.stateStore.maintenanceInterval (2s: a snapshot every 10 versions or so)",
    )
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic (4)")
    parser.add_argument("--shuffle-partitions", type=int, default=4, help="spark.sql.shuffle.partitions (4)")
    parser.add_argument(
        "--batches", type=int, default=100, help="batches the query reads the records in (100)"
    )
    parser.add_argument(
        "--provider", choices=sorted(PROVIDERS), default="hdfs", help="Spark's state store (hdfs)"
    )
    parser.add_argument("--driver-memory", default="4g", help="the query's driver memory (4g)")
    parser.add_argument(
        "--bytes-per-record", type=float, default=300.0, help="state bytes a record, first guess (300)"
    )
    parser.add_argument("--resume-records", type=int, default=100, help="old and new ids of the resume (100)")
    parser.add_argument("--skip-hdfs", action="store_true", help="local disk only")
    parser.add_argument("--skip-resume", action="store_true", help="no query on a carried checkpoint")
    parser.add_argument("--query-timeout", type=float, default=1800.0, help="seconds a query may take (1800)")
    parser.add_argument("--keep", action="store_true", help="keep the run folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.hdfs_repeats, args.batches = QUICK_SIZE, 2, 2, 30
    args.size_list = [
        (label.strip().lower(), parse_size(label)) for label in args.sizes.split(",") if label.strip()
    ]
    args.size_list.sort(key=lambda item: item[1])
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    json_out = json_line_output()
    root = Path(tempfile.mkdtemp(prefix="bench-state-", dir="/tmp"))
    labels = [label for label, _ in args.size_list]
    say(f"run folder {root}; sizes {labels}; Spark state store {args.provider}")
    started = time.monotonic()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    sizes = Sizes(root, args)
    failed = None
    try:
        sizes.start()
        for label, size in args.size_list:
            sizes.measure(label, size)
    except Exception as exc:
        traceback.print_exc()
        failed = f"{type(exc).__name__}: {exc}"[:1000]
    finally:
        sizes.stop()
        if args.keep:
            say(f"run folder kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    summary: dict[str, Any] = {
        "sizes": [label for label, _ in args.size_list],
        "repeats": args.repeats,
        "hdfs_repeats": args.hdfs_repeats,
        "maintenance_interval": args.maintenance_interval,
        "partitions": args.partitions,
        "shuffle_partitions": args.shuffle_partitions,
        "batches": args.batches,
        "state_store_provider": args.provider,
        "stores": STORES,
        **sizes.summary,
        "seconds": round(time.monotonic() - started),
        "load_average": {"start": load_at_start, "end": [round(x, 2) for x in os.getloadavg()]},
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}",
    }
    if sizes.hdfs_problem or args.skip_hdfs:
        summary["hdfs"] = sizes.hdfs_problem or "not measured: --skip-hdfs"
    if failed:
        summary["error"] = failed
    json_out.write(json.dumps(summary) + "\n")
    json_out.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

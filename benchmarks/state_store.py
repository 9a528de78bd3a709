"""Where ``bench_job.py`` keeps both queries' state: local disk, moto's S3 server (``s3a://``) or HDFS.

One :class:`StateStore` per benchmark run: it starts and stops the store's server, registers it for this
process the way the Airflow side does (an ``aws`` or ``webhdfs`` connection, the provider's fsspec stores),
and gives both queries the same Spark settings for it (the S3A connector on the driver's class path and the
fail-fast timeouts of the integration tests; the S3 keys through an owner-only ``--properties-file``, built
by the provider's own :func:`~airflow_kafka_failover.hooks.storage.spark_store_properties` for both).

Measuring from a checkpoint on a store needs when each ``offsets/<b>`` and ``commits/<b>`` was written:
local files and HDFS give their modification time to the millisecond; S3's ``LastModified`` has whole
seconds only (moto's too), so on S3 the time an object is **first seen** by :meth:`StateStore.batch_times`,
called every 0.1 s while a query runs, stands for it (at most one poll late, for both queries alike).
"""

from __future__ import annotations

import getpass
import io
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from akf_devtools.sandbox.airflow_env import register_s3_connection, register_webhdfs_connection
from akf_devtools.sandbox.hdfs import HdfsCluster
from akf_devtools.sandbox.jars import s3a_jars
from akf_devtools.sandbox.s3 import FAIL_FAST_S3A, S3Server
from akf_devtools.sandbox.scram import write_private

from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import forget_all, open_store

KINDS = ("local", "s3", "hdfs")
CONNECTIONS = {"s3": ("s3a", "bench_state_s3"), "hdfs": ("hdfs", "bench_state_hdfs")}
STORAGE_TIMEOUT_S = 10.0


@dataclass
class StateStore:
    """The store of one benchmark run.

    :param kind: ``local``, ``s3`` or ``hdfs``.
    :param run_dir: the run's local folder (local state, the server's files).
    """

    kind: str
    run_dir: Path
    server: Any = None
    seen: dict[str, float] = field(default_factory=dict)  # S3: when each object was first listed
    s3_client: Any = None
    cache: dict[str, bytes] = field(default_factory=dict)  # offsets files, written once

    # ---- the server ----------------------------------------------------------------------------------

    def start(self) -> float:
        """Start the store's server (nothing for ``local``), register it; return the seconds taken."""
        if self.kind == "local":
            return 0.0
        if self.kind == "s3":
            s3a_jars()  # resolved before anything is timed
            self.server = S3Server(self.run_dir / "store")
            seconds = self.server.start()
            register_s3_connection(self.connection_id, self.server)
        else:
            self.server = HdfsCluster(self.run_dir / "store")
            seconds = self.server.start()
            register_webhdfs_connection(self.connection_id, self.server, user=getpass.getuser())
        self.register()
        return float(seconds)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def server_pgid(self) -> int | None:
        """The server's process group (it leads one), for the CPU samples."""
        return self.server.process.pid() if self.server is not None else None

    @property
    def connection_id(self) -> str:
        return CONNECTIONS[self.kind][1]

    @property
    def connections(self) -> dict[str, str]:
        """``job.storage_connections`` of the benchmark's runs."""
        return {} if self.kind == "local" else {CONNECTIONS[self.kind][0]: self.connection_id}

    def register(self) -> None:
        """Register the store for this process anew (what a new Airflow task process does: nothing opened)."""
        if self.kind == "local":
            return
        from airflow_kafka_failover.hooks.storage import use_storage

        forget_all()
        use_storage([self.location()], self.connections, STORAGE_TIMEOUT_S)

    # ---- locations and settings ----------------------------------------------------------------------

    def location(self, *parts: str) -> str:
        """A location of the benchmark's state: under the run folder, or on the store."""
        if self.kind == "local":
            return str(Path(self.run_dir, *parts))
        if self.kind == "s3":
            return self.server.uri("bench", *parts)
        return self.server.path("bench", *parts)

    def spark_conf(self) -> dict[str, str]:
        """What both queries' drivers need of the store that is no secret (``--conf``)."""
        if self.kind == "s3":
            return {
                "spark.driver.extraClassPath": ":".join(str(jar) for jar in s3a_jars()),
                "spark.hadoop.fs.s3a.bucket.probe": "2",
                "spark.hadoop.fs.s3a.fast.upload.buffer": "bytebuffer",
                **{f"spark.hadoop.{key}": value for key, value in FAIL_FAST_S3A.items()},
            }
        if self.kind == "hdfs":
            return self.server.spark_properties()
        return {}

    def properties_file(self, folder: Path, paths: list[str]) -> Path | None:
        """The plain query's owner-only ``--properties-file``: what the job's submit writes for the same
        paths (the S3 keys, endpoint, region, path-style access); None for a local run."""
        if self.kind == "local":
            return None
        from airflow_kafka_failover.hooks.storage import spark_store_properties

        properties = spark_store_properties(paths, self.connections)
        text = "".join(f"{key} {value}\n" for key, value in sorted(properties.items()))
        return write_private(folder / "store.properties", text)

    # ---- reading what the queries wrote ----------------------------------------------------------------

    def batch_times(self, checkpoint: str) -> tuple[dict[int, float], dict[int, float]]:
        """When each ``offsets/<b>`` and each ``commits/<b>`` of ``checkpoint`` was written: the
        modification time (local, HDFS: a listing of each folder) or when this method first saw it (S3: one
        listing of the checkpoint's keys, the cheapest poll of moto, which serves both queries)."""
        if self.kind == "s3":
            return self._s3_batch_times(checkpoint)
        found = []
        for folder in ("offsets", "commits"):
            where = f"{checkpoint}/{folder}"
            if self.kind == "local":
                names = os.listdir(where) if os.path.isdir(where) else []
                times = {int(n): os.stat(f"{where}/{n}").st_mtime for n in names if n.isdigit()}
            else:
                store = open_store(where)
                try:
                    entries = store.fs.ls(store.fs_path(where), detail=True)
                except FileNotFoundError:
                    entries = []
                times = {
                    int(entry["pathSuffix"]): entry["modificationTime"] / 1000
                    for entry in entries
                    if entry["pathSuffix"].isdigit()
                }
            found.append(times)
        return found[0], found[1]

    def _s3_batch_times(self, checkpoint: str) -> tuple[dict[int, float], dict[int, float]]:
        if self.s3_client is None:
            self.s3_client = self.server.client(fail_fast=False)
        prefix = locations.path_in_store(checkpoint).strip("/") + "/"
        now = time.time()
        found: dict[str, dict[int, float]] = {"offsets": {}, "commits": {}}
        pages = self.s3_client.get_paginator("list_objects_v2").paginate(
            Bucket=self.server.bucket, Prefix=prefix
        )
        for page in pages:
            for item in page.get("Contents", []):
                folder, _, name = item["Key"][len(prefix) :].partition("/")
                if folder in found and name.isdigit():
                    found[folder][int(name)] = self.seen.setdefault(item["Key"], now)
        return found["offsets"], found["commits"]

    def read_once(self, location: str) -> bytes:
        """An object that is written once (an offsets file), read once."""
        if location not in self.cache:
            if self.kind == "local":
                self.cache[location] = Path(location).read_bytes()
            else:
                self.cache[location] = open_store(location).read(location)
        return self.cache[location]

    def parquet_rows(self, folder: str) -> int:
        """Rows in the Parquet files under ``folder`` (from their footers)."""
        import pyarrow.parquet as pq

        if self.kind == "local":
            return sum(pq.ParquetFile(p).metadata.num_rows for p in Path(folder).rglob("*.parquet"))
        store = open_store(folder)
        rows = 0
        for path in store.fs.find(store.fs_path(folder)):
            if path.endswith(".parquet"):
                rows += pq.ParquetFile(io.BytesIO(store.fs.cat_file(path))).metadata.num_rows
        return rows

    def copy_to_local(self, folder: str, into: Path) -> int:
        """Copy every object under ``folder`` to the local folder ``into``; return how many."""
        if self.kind == "local":
            raise ValueError("the state is local already")
        store = open_store(folder)
        base = store.fs_path(folder).rstrip("/")
        copied = 0
        for path in store.fs.find(base):
            if path.endswith("/"):
                continue  # a folder's marker object (S3A writes some), not a file
            target = into / path[len(base) :].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(store.fs.cat_file(path))
            copied += 1
        return copied

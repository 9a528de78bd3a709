"""The storage layer's real stores: an S3-compatible server (moto) and HDFS (MiniDFSCluster), reached by a
real spark-submit (local mode) through S3A and HDFS, and by boto3.

One moto server and one HDFS serve the whole module. ``stores_driver.py`` runs once under spark-submit for
both stores: a ``rate`` -> Parquet query with its checkpoint and sink on the store (and again from that
checkpoint), Hadoop ``FileSystem`` calls (create without overwrite, two writers racing, read, list, delete,
append, rename; on S3A a conditional ``PutObject`` through S3A's own SDK client, a missing bucket and missing
credentials), and each store frozen (SIGSTOP) to see how its calls fail and what is there once it thaws
(with 3 s S3A timeouts: see ``S3A_SHORT_TIMEOUTS``). The S3 secret reaches Spark only
through an owner-only ``--properties-file``; a scan of every process's command line and environment during
the run must never see it. The last tests restart each store: HDFS comes back with its files at the same
URI, moto comes back empty.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from akf_devtools.sandbox.class_sharing import driver_java_options
from akf_devtools.sandbox.hdfs import HdfsCluster
from akf_devtools.sandbox.jars import s3a_jars
from akf_devtools.sandbox.s3 import S3Server

from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.hooks.streaming_job import LOG4J_CONFIG
from tests.integration.conftest import RUN_ROOT

pytestmark = [pytest.mark.sandbox, pytest.mark.spark]

DRIVER = Path(__file__).with_name("stores_driver.py")
DRIVER_TIMEOUT_S = 600
S3A_SHORT_TIMEOUTS = {
    "label": "3 s timeouts",
    # S3A 3.4.1 raises every network timeout below 15 s to 15 s, so a frozen store fails each call after
    # 15 s at best (measured with FAIL_FAST_S3A: 15.1 s a call; with one S3A retry, 30.7 s). The test lowers
    # that floor through hadoop-aws's own test hook to spend 3 s, not 15, on each frozen call.
    "s3a_minimum_timeout_ms": 1000,
    "conf": {
        **{
            key: "3s"
            for key in (
                "fs.s3a.connection.establish.timeout",
                "fs.s3a.connection.request.timeout",
                "fs.s3a.connection.acquisition.timeout",
            )
        },
        # The socket's read timeout above the request's: with both at 3 s, which fired first was a race
        # (in a fresh-clone run on 2026-12-02 a frozen write ended in the socket's SocketTimeoutException,
        # not the request's AWSApiCallTimeoutException the test names).
        "fs.s3a.connection.timeout": "6s",
    },
}


@pytest.fixture(scope="module")
def stores() -> Iterator[tuple[S3Server, HdfsCluster]]:
    """The module's moto server and HDFS, started side by side and stopped even when a test fails."""
    s3 = S3Server(RUN_ROOT / "stores-s3")
    hdfs = HdfsCluster(RUN_ROOT / "stores-hdfs")
    try:
        with ThreadPoolExecutor(2) as pool:
            s3_start, hdfs_start = pool.submit(s3.start), pool.submit(hdfs.start)
            print(f"moto up in {s3_start.result():.1f} s at {s3.endpoint_url}")
            hdfs_took = hdfs_start.result()
            print(f"HDFS up in {hdfs_took:.1f} s at {hdfs.uri}, RSS {hdfs.rss_bytes() / 2**20:.0f} MiB")
        yield s3, hdfs
    finally:
        s3.stop()
        hdfs.stop()
    assert not s3.process.is_running() and not hdfs.process.is_running()


def test_the_s3_server_refuses_a_second_create_only_write(stores):
    s3, _ = stores
    from botocore.exceptions import ClientError

    client = s3.client()
    key = "conditional/epoch-1"
    client.put_object(Bucket=s3.bucket, Key=key, Body=b"owner-1", IfNoneMatch="*")
    with pytest.raises(ClientError) as second:
        client.put_object(Bucket=s3.bucket, Key=key, Body=b"owner-2", IfNoneMatch="*")
    assert second.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert second.value.response["Error"]["Code"] == "PreconditionFailed"

    etag = client.head_object(Bucket=s3.bucket, Key=key)["ETag"]
    with pytest.raises(ClientError) as stale:
        client.put_object(Bucket=s3.bucket, Key=key, Body=b"owner-3", IfMatch='"0123456789abcdef"')
    assert stale.value.response["Error"]["Code"] == "PreconditionFailed"
    client.put_object(Bucket=s3.bucket, Key=key, Body=b"owner-1 again", IfMatch=etag)

    upload = client.create_multipart_upload(Bucket=s3.bucket, Key=key)
    part = client.upload_part(Bucket=s3.bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"x")
    with pytest.raises(ClientError) as multipart:
        client.complete_multipart_upload(
            Bucket=s3.bucket,
            Key=key,
            UploadId=upload["UploadId"],
            IfNoneMatch="*",
            MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
        )
    assert multipart.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=s3.bucket, Key=key)["Body"].read() == b"owner-1 again"


class SecretScan:
    """Every process's command line and environment, read every half second, searched for a secret."""

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()
        self.seen: set[tuple[str, str]] = set()
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SecretScan:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                for part in ("cmdline", "environ"):
                    try:
                        if self.secret in (proc / part).read_bytes():
                            self.seen.add((proc.name, part))
                    except OSError:
                        pass
            self.scans += 1


@pytest.fixture(scope="module")
def driver_run(stores) -> dict[str, Any]:
    """Run ``stores_driver.py`` once under spark-submit against both stores; return its results."""
    s3, hdfs = stores
    work = RUN_ROOT / "stores-driver"
    work.mkdir(parents=True, exist_ok=True)
    plan = {
        "result": str(work / "result.json"),
        "stores": [
            {
                "name": "s3",
                "base": s3.uri("stores"),
                "kind": "s3",
                "run_dir": str(s3.run_dir),
                "server_log": str(s3.process.log_file),
                "unreachable_calls": ["read", "write"],
                "unreachable_variants": [S3A_SHORT_TIMEOUTS],
            },
            {"name": "hdfs", "base": hdfs.path("stores"), "kind": "hdfs", "run_dir": str(hdfs.run_dir)},
        ],
    }
    (work / "plan.json").write_text(json.dumps(plan))
    properties = s3.write_spark_properties(
        work / "spark.properties",
        {
            **hdfs.spark_properties(),
            "spark.pyspark.python": sys.executable,
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "768m",
            # Local mode: the driver's class path is enough, and spares a 560 MB copy of the SDK bundle per
            # run (spark.jars copies every jar into the application's scratch folder).
            "spark.driver.extraClassPath": os.pathsep.join(map(str, s3a_jars())),
            "spark.driver.extraJavaOptions": (
                f"{driver_java_options()} -Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
            ),
        },
    )
    assert stat.S_IMODE(properties.stat().st_mode) == 0o600
    spark_submit = Path(sys.executable).with_name("spark-submit")
    driver = ManagedProcess("stores-driver", work)
    argv = [str(spark_submit), "--master", "local[2]", "--properties-file", str(properties), str(DRIVER)]
    started = time.monotonic()
    with SecretScan(s3.credentials().secret_key) as scan:
        driver.start(
            [*argv, str(work / "plan.json")],
            env={
                "PATH": f"{spark_submit.parent}{os.pathsep}{os.environ['PATH']}",
                "PYSPARK_PYTHON": sys.executable,
            },
        )
        try:
            deadline = started + DRIVER_TIMEOUT_S
            while driver.is_running() and time.monotonic() < deadline:
                time.sleep(1)
            finished = not driver.is_running()
        finally:
            driver.stop(timeout=20)
    took = time.monotonic() - started
    print(f"spark-submit took {took:.0f} s; {scan.scans} scans of /proc")
    assert finished, f"the driver did not finish in {DRIVER_TIMEOUT_S} s:\n{driver.log_tail(40)}"
    results = json.loads(Path(plan["result"]).read_text())
    print(json.dumps(results, indent=1))
    return {"results": results, "secret_seen": scan.seen, "scans": scan.scans, "log": driver.log_file}


def value(outcome: dict[str, Any]) -> Any:
    """The value of a phase or call that must have worked."""
    assert outcome["ok"], outcome
    return outcome["value"]


def error_class(outcome: dict[str, Any]) -> str:
    """The exception class of a call that must have failed."""
    assert outcome["ok"] is False, outcome
    return outcome["error"]["class"]


@pytest.mark.parametrize("store", ["s3", "hdfs"])
def test_a_streaming_query_keeps_its_checkpoint_and_sink_on_the_store(driver_run, store):
    stream = value(driver_run["results"][store]["stream"])
    first, again = stream["first"], stream["again"]
    assert first["batch_ids"][:2] == [0, 1]
    # The second run went on from the checkpoint: its first batch follows the last one the first run began.
    assert again["batch_ids"][0] > first["batch_ids"][-1]
    assert stream["sink_rows"] >= first["rows_in_batches"] + again["rows_in_batches"] > 0
    committed = {int(name) for name in stream["commits"] if name.isdigit()}
    assert set(first["batch_ids"]) | set(again["batch_ids"]) <= committed


def test_s3a_create_without_overwrite_checks_then_puts(driver_run):
    """Hadoop 3.4.1's S3A: create(overwrite=False) is a HEAD (and a LIST) at create, a plain PUT at close."""
    found = value(driver_run["results"]["s3"]["file_system"])
    assert found["class"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    new = found["create_new"]
    assert [request.split()[0] for request in new["requests"]] == ["HEAD", "GET", "PUT"], new
    existing = found["create_existing"]
    assert error_class(existing) == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert [request.split()[0] for request in existing["requests"]] == ["HEAD"]
    assert value(found["after_create_existing"]) == "owner-1"
    # Two writers that both checked before either closed: both succeed, the last close wins.
    assert value(found["race"]) == "both created and closed"
    assert value(found["after_race"]) == "writer-2"
    assert error_class(found["append"]) == "UnsupportedOperationException"
    assert error_class(found["rename_onto_existing"]) == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert value(found["read"]) == "owner-3"
    assert value(found["list_after_delete"]) == ["epoch-1"]
    assert value(found["delete_missing"]) is False
    assert error_class(found["read_missing"]) == "java.io.FileNotFoundException"


def test_s3a_sdk_client_makes_a_create_only_put(driver_run):
    """S3A's own AWS SDK client with an If-None-Match header: the store refuses the second put."""
    found = value(driver_run["results"]["s3"]["file_system"])
    assert value(found["conditional_put_new"]).startswith("put")
    refused = found["conditional_put_existing"]
    assert error_class(refused) == "software.amazon.awssdk.services.s3.model.S3Exception"
    assert refused["error"]["status"] == 412
    assert [request.split()[-1] for request in refused["requests"]] == ["412"]
    assert value(found["after_conditional_put"]) == "owner-1"


def test_s3a_names_a_missing_bucket_and_missing_credentials(driver_run):
    found = value(driver_run["results"]["s3"]["file_system"])
    missing_bucket = found["missing_bucket"]
    assert error_class(missing_bucket) == "org.apache.hadoop.fs.s3a.UnknownStoreException"
    assert "s3a://akf-test-missing/" in missing_bucket["error"]["message"]
    no_keys = found["missing_credentials"]
    assert error_class(no_keys) == "java.nio.file.AccessDeniedException"
    assert "No AWS credentials" in no_keys["error"]["message"]


def test_hdfs_create_without_overwrite_is_decided_by_the_namenode(driver_run):
    found = value(driver_run["results"]["hdfs"]["file_system"])
    assert found["class"] == "org.apache.hadoop.hdfs.DistributedFileSystem"
    assert error_class(found["create_existing"]) == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert value(found["after_create_existing"]) == "owner-1"
    # The second writer is refused at create, while the first still holds the file open.
    assert "AlreadyBeingCreatedException" in value(found["race"])
    assert value(found["after_race"]) == "writer-1"
    assert value(found["rename_onto_existing"]) is False
    assert value(found["append"]) == "appended"
    assert value(found["after_append"]) == "owner-3+appended"
    assert value(found["list_after_delete"]) == ["epoch-1"]
    assert error_class(found["read_missing"]) == "java.io.FileNotFoundException"


@pytest.mark.parametrize(
    ("store", "failure"),
    [
        ("s3", "org.apache.hadoop.fs.s3a.AWSApiCallTimeoutException"),
        ("hdfs", "java.net.SocketTimeoutException"),
    ],
)
def test_a_frozen_store_fails_calls_and_keeps_its_data(driver_run, store, failure):
    (frozen,) = value(driver_run["results"][store]["unreachable"]).values()
    for call in ("read", "write"):
        assert error_class(frozen[call]) == failure, frozen[call]
        failed = frozen[call]
        print(f"{store} frozen: {call} failed after {failed['seconds']} s: {failed['error']['message']}")
    assert value(frozen["read_after_thaw"]) == "before"
    # What a write that failed left behind is reported, not asserted: on HDFS a timed-out create can still
    # be carried out once the NameNode thaws (an empty file), on S3A it failed before its PUT.
    print(f"{store}: the failed write left {value(frozen['write_landed_after_thaw'])}")


def test_the_secret_reached_spark_through_the_properties_file_only(driver_run, stores):
    s3, _ = stores
    assert driver_run["scans"] > 0
    assert driver_run["secret_seen"] == set()
    assert s3.credentials().secret_key not in Path(driver_run["log"]).read_text(errors="replace")


STATEFUL_CHECKPOINT = {
    # What Spark 4.0 wrote for a dropDuplicatesWithinWatermark + windowed count query (two operators, two
    # state partitions, the HDFS-backed store), committed batches 0 and 1; the contents are shortened.
    "metadata": '{"id":"0b5c1f39-6a1b-4a55-9d7e-3f0f5f0e2a11"}',
    "offsets/0": 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{"spark.sql.shuffle.partitions":'
    '"2"}}\n{"orders":{"0":10,"1":12}}',
    "offsets/1": 'v1\n{"batchWatermarkMs":5,"batchTimestampMs":2,"conf":{"spark.sql.shuffle.partitions":'
    '"2"}}\n{"orders":{"0":50,"1":51}}',
    "commits/0": 'v1\n{"nextBatchWatermarkMs":5}',
    "commits/1": 'v1\n{"nextBatchWatermarkMs":9}',
    "sources/0/0": '{"orders":{"0":0,"1":0}}',
    **{
        f"state/{op}/{part}/{version}.delta": f"delta {op}/{part}/{version}"
        for op in (0, 1)
        for part in (0, 1)
        for version in (1, 2)
    },
    "state/0/0/_metadata/schema": "schema",
    "state/0/_metadata/metadata": "operator metadata",
    "state/1/_metadata/metadata": "operator metadata",
}


def test_a_stateful_checkpoint_is_carried_from_hdfs_to_hdfs(stores):
    """The state carry through the Airflow side's WebHDFS store: every file listed and copied, the positions
    rewritten to the target's topic, the old checkpoint unchanged, a second carry a no-op."""
    import getpass

    from fsspec.implementations.webhdfs import WebHDFS

    from airflow_kafka_failover.core.storage import store as stores_registry
    from airflow_kafka_failover.core.storage.fsspec_store import WebHdfsStore
    from airflow_kafka_failover.core.types import TopicPartition
    from airflow_kafka_failover.run_format.state_carry import carried_from, carry_checkpoint, inspect_state

    _, hdfs = stores
    host, port = hdfs.webhdfs_url.split("//", 1)[1].split("/", 1)[0].split(":")
    fs = WebHDFS(host=host, port=int(port), user=getpass.getuser(), skip_instance_cache=True)
    stores_registry.register(hdfs.uri, lambda root: WebHdfsStore(fs, root))
    try:
        old, new = hdfs.path("carry", "A", "epoch-0"), hdfs.path("carry", "B", "epoch-1")
        store = stores_registry.open_store(old)
        for name, text in STATEFUL_CHECKPOINT.items():
            store.replace(f"{old}/{name}", text.encode())
        before = {name: store.read(f"{old}/{name}") for name in store.files(old)}
        state = inspect_state(old)
        assert state is not None and state.operators == ("0", "1") and state.batch_id == 1
        targets = {TopicPartition("orders", p): TopicPartition("A.orders", p) for p in (0, 1)}
        starts = {TopicPartition("A.orders", 0): 48, TopicPartition("A.orders", 1): 50}
        owner = {"pair": "orders", "cluster": "B", "epoch": 1, "bootstrap_servers": "b:9092"}
        started = time.monotonic()
        carried = carry_checkpoint(state, new, owner, targets, starts)
        took = time.monotonic() - started
        print(f"carried {carried.files} files ({carried.bytes} bytes) over WebHDFS in {took:.2f} s")
        copied = set(store.files(new))
        assert copied == {
            "_owner.json",
            "metadata",
            "offsets/0",
            "offsets/1",
            "commits/1",
            "progress/1",
            *(name for name in STATEFUL_CHECKPOINT if name.startswith("state/")),
        }
        assert store.read(f"{new}/offsets/1").decode().splitlines()[2] == '{"A.orders":{"0":48,"1":50}}'
        assert store.read(f"{new}/state/1/1/2.delta") == b"delta 1/1/2"
        assert {name: store.read(f"{old}/{name}") for name in store.files(old)} == before
        recorded = carried_from(new)
        assert recorded is not None
        assert (recorded.source, recorded.batch_id, recorded.files) == (old, 1, carried.files)
        assert carry_checkpoint(state, new, owner, targets, starts) == recorded  # a retried step
    finally:
        stores_registry.forget_all()


def test_hdfs_comes_back_from_a_restart_with_its_files_at_the_same_uri(stores, driver_run):
    _, hdfs = stores
    uri = hdfs.uri
    hdfs.stop()
    took = hdfs.start()
    print(f"HDFS restarted in {took:.1f} s")
    assert hdfs.uri == uri
    import urllib.request

    with urllib.request.urlopen(f"{hdfs.webhdfs_url}/stores/fence/epoch-1?op=OPEN", timeout=30) as answer:
        assert answer.read() == b"owner-3+appended"


def test_moto_comes_back_from_a_restart_empty(stores, driver_run):
    s3, _ = stores
    took = s3.restart()
    print(f"moto restarted in {took:.1f} s")
    assert s3.client().list_objects_v2(Bucket=s3.bucket).get("KeyCount") == 0

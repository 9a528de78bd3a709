"""The Spark driver of ``test_stores.py``, run by spark-submit (local mode): Structured Streaming and Hadoop's
``FileSystem`` on each store named in its plan, results written as JSON for the test to check.

``stores_driver.py <plan.json>``; the plan lists the stores (``name``, ``base`` URI, and for the unreachable
phase the ``kind`` and ``run_dir`` of the server to freeze) and the result file. For each store, in order:

1. a ``rate`` -> Parquet query with its checkpoint and sink under ``base``, for a few batches, then the same
   query again from its checkpoint (it must go on with the next batch id);
2. ``FileSystem`` calls through py4j: create without overwrite (and again on the same path, and two writers
   racing on one new path), read, list, delete, append where the store has it, and on S3A a conditional
   ``PutObject`` (``If-None-Match: *``) through S3A's own AWS SDK client;
3. the store frozen (SIGSTOP, by :mod:`akf_devtools.sandbox.s3` / :mod:`~akf_devtools.sandbox.hdfs` through
   their pid files): how long a read, a write and a listing take to fail, and what is there once it thaws.

Every phase records its outcome (or its Java exception) rather than stopping the driver, so one run answers
every question; the test asserts on the file.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession


def java_error(exc: BaseException) -> dict[str, Any]:
    """The Java exception behind a py4j error (class, message, and the first causes), or the Python one."""
    if isinstance(exc, Py4JJavaError):
        error = exc.java_exception
        chain = []
        while error is not None and len(chain) < 4:
            name = error.getClass().getName()
            if name == "org.apache.hadoop.ipc.RemoteException":
                name = f"{name}({error.getClassName()})"  # the server-side exception it carries
            chain.append({"class": name, "message": str(error.getMessage()).split("\n")[0][:400]})
            error = error.getCause()
        status = None
        try:
            status = int(exc.java_exception.statusCode())
        except Exception:  # not an AWS service exception
            pass
        first = chain[0]
        return {"class": first["class"], "message": first["message"], "causes": chain[1:], "status": status}
    return {"class": type(exc).__name__, "message": str(exc)[:400], "causes": [], "status": None}


def outcome(call: Any) -> dict[str, Any]:
    """Run ``call``; return ``{"ok": True, "value": ..., "seconds": ...}`` or the error and the seconds."""
    started = time.monotonic()
    try:
        value = call()
        return {"ok": True, "value": value, "seconds": round(time.monotonic() - started, 2)}
    except Exception as exc:
        return {"ok": False, "error": java_error(exc), "seconds": round(time.monotonic() - started, 2)}


class Store:
    """Hadoop's FileSystem for one base URI, through py4j."""

    def __init__(self, spark: SparkSession, base: str, overrides: dict[str, str] | None = None) -> None:
        jvm = spark._jvm
        self.jvm = jvm
        self.base = base.rstrip("/")
        conf = spark._jsc.hadoopConfiguration()
        if overrides is not None:
            conf = jvm.org.apache.hadoop.conf.Configuration(conf)
            for key, value in overrides.items():
                conf.set(key, value)
            # A new instance: the cached one was made with the session's settings.
            self.fs = jvm.org.apache.hadoop.fs.FileSystem.newInstance(jvm.java.net.URI(self.base), conf)
        else:
            self.fs = self.path("").getFileSystem(conf)

    def path(self, relative: str) -> Any:
        return self.jvm.org.apache.hadoop.fs.Path(f"{self.base}/{relative}" if relative else self.base)

    def create(self, relative: str, text: str, overwrite: bool = False) -> str:
        stream = self.fs.create(self.path(relative), overwrite)
        stream.write(bytearray(text.encode()))
        stream.close()
        return "created"

    def read(self, relative: str) -> str:
        stream = self.fs.open(self.path(relative))
        try:
            return bytes(self.jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode()
        finally:
            stream.close()

    def list(self, relative: str) -> list[str]:
        return sorted(status.getPath().getName() for status in self.fs.listStatus(self.path(relative)))

    def exists(self, relative: str) -> bool:
        return bool(self.fs.exists(self.path(relative)))


def run_query(spark: SparkSession, base: str, batches: int, timeout: float = 120.0) -> dict[str, Any]:
    """Run ``rate`` -> Parquet with checkpoint and sink under ``base`` until ``batches`` batches completed."""
    started = time.monotonic()
    frame = spark.readStream.format("rate").option("rowsPerSecond", 20).option("numPartitions", 1).load()
    query = (
        frame.writeStream.format("parquet")
        .option("path", f"{base}/sink")
        .option("checkpointLocation", f"{base}/checkpoint")
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        deadline = time.monotonic() + timeout
        while len(query.recentProgress) < batches and time.monotonic() < deadline:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            time.sleep(0.2)
        progress = list(query.recentProgress)
        # Spark reports a batch's progress and writes its commits/<id> file close together, in no promised
        # order: stopped in between, the query leaves the reported batch uncommitted (seen on HDFS). Wait
        # for the commit of the last reported batch, so that what the test checks is a finished batch.
        if progress:
            store, last = Store(spark, base), progress[-1]["batchId"]
            while not store.exists(f"checkpoint/commits/{last}") and time.monotonic() < deadline:
                time.sleep(0.2)
    finally:
        query.stop()
    return {
        "batch_ids": [p["batchId"] for p in progress],
        "rows_in_batches": sum(p["numInputRows"] for p in progress),
        "seconds": round(time.monotonic() - started, 2),
    }


def stream_phase(spark: SparkSession, base: str) -> dict[str, Any]:
    first = run_query(spark, base, batches=2)
    again = run_query(spark, base, batches=1)
    store = Store(spark, base)
    return {
        "first": first,
        "again": again,
        "sink_rows": spark.read.parquet(f"{base}/sink").count(),
        "commits": store.list("checkpoint/commits"),
        "offsets": store.list("checkpoint/offsets"),
    }


def server_requests(log: Path | None, since: int) -> list[str]:
    """The S3 requests moto logged after byte ``since`` of its log (e.g. ``HEAD /akf-test/x 404``)."""
    if log is None:
        return []
    with open(log, "rb") as handle:
        handle.seek(since)
        lines = handle.read().decode(errors="replace").splitlines()
    requests = []
    for line in lines:
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)  # werkzeug colours 4xx and 5xx lines
        if line.count('"') >= 2 and "HTTP/1.1" in line:
            _, request, rest = line.split('"', 2)
            method, target = request.split()[:2]
            requests.append(f"{method} {target[:90]} {rest.split()[0]}")
    return requests


def watched(log: Path | None, call: Any) -> dict[str, Any]:
    """:func:`outcome` of ``call`` with the S3 requests it made (when the server's log is given)."""
    mark = log.stat().st_size if log else 0
    result = outcome(call)
    time.sleep(0.3)  # the server logs a request after answering it
    result["requests"] = server_requests(log, mark)
    return result


def file_system_phase(spark: SparkSession, store_plan: dict[str, Any]) -> dict[str, Any]:
    store = Store(spark, store_plan["base"])
    log = Path(store_plan["server_log"]) if store_plan.get("server_log") else None
    found: dict[str, Any] = {"scheme": str(store.fs.getScheme()), "class": store.fs.getClass().getName()}
    found["create_new"] = watched(log, lambda: store.create("fence/epoch-1", "owner-1"))
    found["create_existing"] = watched(log, lambda: store.create("fence/epoch-1", "owner-2"))
    found["after_create_existing"] = outcome(lambda: store.read("fence/epoch-1"))
    found["race"] = outcome(lambda: race(store, "fence/epoch-2"))
    found["after_race"] = outcome(lambda: store.read("fence/epoch-2"))
    found["overwrite"] = outcome(lambda: store.create("fence/epoch-1", "owner-3", overwrite=True))
    found["read"] = outcome(lambda: store.read("fence/epoch-1"))
    found["list"] = outcome(lambda: store.list("fence"))
    found["rename_onto_existing"] = outcome(
        lambda: bool(store.fs.rename(store.path("fence/epoch-2"), store.path("fence/epoch-1")))
    )
    found["append"] = outcome(lambda: append(store, "fence/epoch-1", "+appended"))
    found["after_append"] = outcome(lambda: store.read("fence/epoch-1"))
    found["delete"] = outcome(lambda: bool(store.fs.delete(store.path("fence/epoch-2"), False)))
    found["delete_missing"] = outcome(lambda: bool(store.fs.delete(store.path("fence/epoch-9"), False)))
    found["list_after_delete"] = outcome(lambda: store.list("fence"))
    found["read_missing"] = outcome(lambda: store.read("fence/epoch-9"))
    if found["scheme"] == "s3a":
        marker = "fence/epoch-3"
        found["conditional_put_new"] = watched(log, lambda: conditional_put(store, marker, "owner-1"))
        found["conditional_put_existing"] = watched(log, lambda: conditional_put(store, marker, "owner-2"))
        found["after_conditional_put"] = outcome(lambda: store.read("fence/epoch-3"))
        bucket = str(store.fs.getBucket())
        found["missing_bucket"] = outcome(lambda: Store(spark, f"s3a://{bucket}-missing/x", {}).list(""))
        no_keys = {"fs.s3a.access.key": "", "fs.s3a.secret.key": ""}
        found["missing_credentials"] = outcome(lambda: Store(spark, store.base, no_keys).list(""))
    return found


def race(store: Store, relative: str) -> str:
    """Two writers create one new path without overwrite before either closes; say what each got."""
    first = store.fs.create(store.path(relative), False)
    try:
        second = store.fs.create(store.path(relative), False)
    except Py4JJavaError as exc:
        first.write(bytearray(b"writer-1"))
        first.close()
        return "second create refused: " + java_error(exc)["class"]
    first.write(bytearray(b"writer-1"))
    second.write(bytearray(b"writer-2"))
    first.close()
    second.close()
    return "both created and closed"


def append(store: Store, relative: str, text: str) -> str:
    stream = store.fs.append(store.path(relative))
    stream.write(bytearray(text.encode()))
    stream.close()
    return "appended"


def conditional_put(store: Store, relative: str, text: str) -> str:
    """A create-only object write with S3A's own AWS SDK client: ``PutObject`` with ``If-None-Match: *``.

    SDK 2.24.6 (hadoop-aws 3.4.1's) has no ``ifNoneMatch`` field yet: the header goes in the request's
    override configuration.
    """
    sdk = store.jvm.software.amazon.awssdk
    bucket = store.fs.getBucket()
    key = store.fs.pathToKey(store.path(relative))
    override = sdk.awscore.AwsRequestOverrideConfiguration.builder().putHeader("If-None-Match", "*").build()
    request = (
        sdk.services.s3.model.PutObjectRequest.builder()
        .bucket(bucket)
        .key(key)
        .overrideConfiguration(override)
        .build()
    )
    client = store.fs.getS3AInternals().getAmazonS3Client("create-only marker")
    response = client.putObject(request, sdk.core.sync.RequestBody.fromString(text))
    return f"put, etag {response.eTag()}"


def landed(store: Store, relative: str) -> dict[str, Any] | None:
    """What a write that failed while the store was frozen left there: None, or the file's length."""
    if not store.exists(relative):
        return None
    return {"length": int(store.fs.getFileStatus(store.path(relative)).getLen())}


def with_cap(call: Any, cap: float) -> dict[str, Any]:
    """:func:`outcome` of ``call`` in a thread; ``{"ok": None, "still_waiting_after": cap}`` past ``cap``."""
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(outcome(call)), daemon=True)
    thread.start()
    thread.join(cap)
    if thread.is_alive():
        return {"ok": None, "still_waiting_after": cap, "thread": thread}
    return box


def unreachable_phase(spark: SparkSession, store_plan: dict[str, Any]) -> dict[str, Any] | None:
    """Freeze the store; time a read, a write and a listing; thaw; see what is there."""
    from akf_devtools.sandbox.hdfs import HdfsCluster
    from akf_devtools.sandbox.s3 import S3Server

    if not store_plan.get("kind"):
        return None
    run_dir = Path(store_plan["run_dir"])
    server = S3Server(run_dir) if store_plan["kind"] == "s3" else HdfsCluster(run_dir)
    found: dict[str, Any] = {}
    for variant in store_plan.get("unreachable_variants", [{"label": "session settings"}]):
        if "s3a_minimum_timeout_ms" in variant:
            # hadoop-aws's test hook for the 15 s floor it puts under every S3A network timeout.
            duration = spark._jvm.java.time.Duration.ofMillis(int(variant["s3a_minimum_timeout_ms"]))
            spark._jvm.org.apache.hadoop.fs.s3a.impl.AWSClientConfig.setMinimumOperationDuration(duration)
        store = Store(spark, store_plan["base"], variant.get("conf"))
        calls = store_plan.get("unreachable_calls", ["read", "write", "list"])
        found[variant["label"]] = frozen_calls(server, store, f"frozen/{variant['label']}", calls, variant)
    return found


def frozen_calls(
    server: Any, store: Store, folder: str, calls: list[str], variant: dict[str, Any]
) -> dict[str, Any]:
    """``calls`` on ``store`` while ``server`` is frozen, each abandoned after the variant's cap."""
    store.create(f"{folder}/existing", "before")
    store.read(f"{folder}/existing")  # a warm connection, as a running job has
    known = {
        "read": lambda: store.read(f"{folder}/existing"),
        "write": lambda: store.create(f"{folder}/during", "during"),
        "list": lambda: store.list(folder),
    }
    results: dict[str, Any] = {}
    pending = []
    server.freeze()
    try:
        for name in calls:
            result = with_cap(known[name], float(variant.get("cap", 100)))
            if "thread" in result:
                pending.append(result.pop("thread"))
            results[name] = result
    finally:
        server.thaw()
    for thread in pending:
        thread.join(120)
    thawed = time.monotonic()
    results["read_after_thaw"] = outcome(lambda: store.read(f"{folder}/existing"))
    results["first_answer_after_thaw_seconds"] = round(time.monotonic() - thawed, 2)
    results["write_landed_after_thaw"] = outcome(lambda: landed(store, f"{folder}/during"))
    return results


PHASES = {
    "stream": lambda spark, store_plan: stream_phase(spark, store_plan["base"]),
    "file_system": file_system_phase,
    "unreachable": unreachable_phase,
}


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    result_file = Path(plan["result"])
    spark = SparkSession.builder.appName("akf-stores").getOrCreate()
    hadoop = spark._jvm.org.apache.hadoop.util.VersionInfo.getVersion()
    results: dict[str, Any] = {"spark": spark.version, "hadoop": hadoop}
    try:
        for store_plan in plan["stores"]:
            found: dict[str, Any] = {}
            results[store_plan["name"]] = found
            for phase in plan.get("phases", list(PHASES)):
                found[phase] = outcome(
                    lambda run=PHASES[phase], store_plan=store_plan: run(spark, store_plan)
                )
                result_file.write_text(json.dumps(results, indent=1, default=str))
    finally:
        result_file.write_text(json.dumps(results, indent=1, default=str))
        spark.stop()


if __name__ == "__main__":
    main()

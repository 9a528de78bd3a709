"""A class-data-sharing archive for the local Spark drivers of the tests and the demo.

A local driver's JVM spends most of its start-up loading and verifying Spark's classes. Java's dynamic
class-data sharing (``-XX:ArchiveClassesAtExit`` once, ``-XX:SharedArchiveFile`` afterwards) maps them from
one file instead: on the 2-core machine a SparkSession starts in 4.2 s instead of 7.8 s and the Kafka source
loads in 0.3 s instead of 1.3 s (2026-11-27, ``python -m akf_devtools.sandbox.class_sharing --time 2``).

``make test`` builds the archive (``python -m akf_devtools.sandbox.jars --all``); :func:`driver_java_options`
uses it when it exists and matches this machine's ``java``, the installed pyspark and the drivers' class
path (the local file system's jar, :mod:`.local_fs`, whose hash it holds; its file name holds a key of all
three), so ``make demo`` after ``make test`` starts its drivers faster too. A JVM whose class path does not
match the archive (another Spark, a store's jars before it) ignores it; the flags that keep that quiet are
part of the options.
The provider itself sets no JVM option: a deployment that wants the same gain adds its own archive to
``job.spark_conf`` (see ``docs/runbook.md``, "Faster driver starts").
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.jars import jars_root, spark_kafka_jars
from akf_devtools.sandbox.local_fs import CLASS_PATH, local_fs_conf

log = logging.getLogger(__name__)

BASE_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
"""Short-lived drivers at a few records per second: a serial collector and the quick (C1) compiler leave
the CPU to the rest of the machine."""
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""No warning when a JVM cannot use the archive (it then loads its classes as usual)."""

# What the archiving driver does: the classes it loads are the ones archived (session, Kafka source,
# Parquet writer, the expressions of the job's observations), with the local drivers' class path and file
# system (akf_devtools.sandbox.local_fs), whose settings come as JSON. It prints the seconds to its
# SparkSession and to its loaded Kafka source, which ``--time`` reports.
_WORKLOAD = """
import json, sys, tempfile, time
started = time.monotonic()
from pyspark.sql import SparkSession, functions as F
builder = (
    SparkSession.builder.master("local[1]").appName("akf-class-sharing")
    .config("spark.ui.enabled", "false").config("spark.jars", sys.argv[2])
    .config("spark.driver.extraJavaOptions", sys.argv[1])
)
for key, value in json.loads(sys.argv[3]).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
session = time.monotonic()
source = (
    spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
    .option("subscribe", "orders").load()
)
print("SECONDS", session - started, time.monotonic() - session, flush=True)
source.observe("marks", F.count(F.lit(1)).alias("records"), F.max("offset").alias("o0"))
with tempfile.TemporaryDirectory() as folder:
    rows = spark.range(1000).selectExpr("id", "cast(id as string) as value", "current_timestamp() as ts")
    rows.observe("m", F.count(F.lit(1))).write.parquet(folder + "/rows")
    spark.read.parquet(folder + "/rows").agg(F.max("id")).collect()
spark.stop()
"""


def java_identity() -> str:
    """This machine's ``java``: its home and its ``release`` file (an archive is valid for one JVM build).

    :raises OSError: no ``java`` on PATH.
    """
    java = shutil.which("java")
    if java is None:
        raise OSError("java is not on PATH")
    java_home = Path(java).resolve().parents[1]
    release = java_home / "release"
    return (
        f"{java_home}\n{release.read_text() if release.is_file() else Path(java).resolve().stat().st_mtime}"
    )


def archive_path() -> Path:
    """Where the archive of this machine's ``java`` and the installed pyspark is (built or not).

    Cheap (no ``java`` process, no pyspark import): the DAG runs and tests call it on import. An archive is
    valid for one class path, so the key holds the local file system's jar (:func:`_class_path_key`) too.
    """
    from importlib.metadata import version

    spark = version("pyspark")
    identity = f"{java_identity()}\n{spark}\n{BASE_JAVA_OPTIONS}\n{_class_path_key()}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return jars_root() / "class-sharing" / f"spark-{spark}-{key}.jsa"


def _class_path_key() -> str:
    """The drivers' ``spark.driver.extraClassPath`` and its jars' hashes (a JVM refuses an archive whose
    class path changed, a jar's size or time included)."""
    class_path = local_fs_conf().get(CLASS_PATH, "")
    hashes = [hashlib.sha256(Path(jar).read_bytes()).hexdigest() for jar in class_path.split(":") if jar]
    return f"{class_path} {' '.join(hashes)}"


def driver_java_options() -> str:
    """``spark.driver.extraJavaOptions`` of a local test driver: the base options, and the archive's when
    it is built."""
    try:
        archive = archive_path()
    except (OSError, ImportError, SandboxError):  # no java, no pyspark, no checkout: no archive
        return BASE_JAVA_OPTIONS
    if not archive.is_file():
        return BASE_JAVA_OPTIONS
    return f"{BASE_JAVA_OPTIONS} -XX:SharedArchiveFile={archive} {QUIET}"


def ensure_archive() -> Path:
    """Build the archive unless it exists; return it (about 40 s on the 2-core machine).

    :raises SandboxError: the archiving driver failed, or wrote no archive.
    """
    archive = archive_path()
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.is_file():
            return archive
        for old in archive.parent.glob("spark-*.jsa"):  # of another pyspark, java or class path; not Kafka's
            old.unlink()
        partial = archive.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        log.info("Building the Spark drivers' class-sharing archive %s (about 40 s) ...", archive)
        result = _run_workload(f"{BASE_JAVA_OPTIONS} -XX:ArchiveClassesAtExit={partial} {QUIET}")
        if result.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            raise SandboxError(
                f"the archiving Spark driver failed (exit {result.returncode}) or wrote no {partial}:\n"
                f"{_tail(result)}"
            )
        partial.rename(archive)
    return archive


def _run_workload(options: str) -> subprocess.CompletedProcess[str]:
    """Run :data:`_WORKLOAD` in a new local driver whose JVM gets ``options``."""
    jars = ",".join(str(jar) for jar in spark_kafka_jars())
    with tempfile.TemporaryDirectory() as scratch:
        return subprocess.run(
            [sys.executable, "-c", _WORKLOAD, options, jars, json.dumps(local_fs_conf())],
            capture_output=True,
            text=True,
            check=False,
            cwd=scratch,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )


def _tail(result: subprocess.CompletedProcess[str]) -> str:
    """The last 15 lines a driver printed (for an error message)."""
    return "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])


def _session_seconds(options: str) -> tuple[float, float]:
    """Seconds to a SparkSession and to a loaded Kafka source, in a new driver with ``options``."""
    result = _run_workload(options)
    line = next((line for line in result.stdout.splitlines() if line.startswith("SECONDS")), None)
    if result.returncode != 0 or line is None:
        raise SandboxError(f"the timed Spark driver failed (exit {result.returncode}):\n{_tail(result)}")
    session, source = (float(value) for value in line.split()[1:])
    return session, source


def main(argv: list[str] | None = None) -> None:
    """Build the archive (if needed) and print its path; with ``--time``, time drivers with and without."""
    parser = argparse.ArgumentParser(
        prog="python -m akf_devtools.sandbox.class_sharing", description=main.__doc__
    )
    parser.add_argument("--time", type=int, default=0, metavar="N", help="time N drivers of each kind")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    started = time.monotonic()
    archive = ensure_archive()
    size, took = archive.stat().st_size // 2**20, time.monotonic() - started
    print(f"class-sharing archive: {archive} ({size} MB, {took:.1f} s)")
    for label, options in (("without", BASE_JAVA_OPTIONS), ("with", driver_java_options())):
        for _ in range(args.time):
            session, source = _session_seconds(options)
            print(f"{label} the archive: SparkSession {session:.2f} s, Kafka source {source:.2f} s")


if __name__ == "__main__":
    try:
        main()
    except SandboxError as exc:
        raise SystemExit(f"error: {exc}") from None

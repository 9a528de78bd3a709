"""A local driver with the tests' file system settings starts no ``chmod`` or ``readlink`` process, where
Hadoop's own local file system starts one per file (``akf_devtools.sandbox.local_fs``).

The driver runs with a ``PATH`` whose first folder holds a ``chmod`` and a ``readlink`` that log their
arguments and then run the real command. In one JVM it first creates a file through Hadoop's own
``LocalFileSystem`` (the log must show its ``chmod``: the check can fail), then runs a streaming query
(rate source, Parquet sink, checkpoint) for three batches through the tests' settings, and reads the sink
back.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from akf_devtools.demo.story import LOCAL_SPARK_CONF
from akf_devtools.sandbox.local_fs import FILE_SYSTEM

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DRIVER = """
import json, sys, time
from pathlib import Path
from pyspark.sql import SparkSession
root, conf = Path(sys.argv[1]), json.loads(sys.argv[2])
builder = SparkSession.builder.master("local[1]").appName("akf-local-fs-check")
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
jvm, hadoop_conf = spark._jvm, spark._jsc.hadoopConfiguration()
# Hadoop's own local file system, once, outside the cache: its create runs chmod.
own = jvm.org.apache.hadoop.conf.Configuration(hadoop_conf)
own.set("fs.file.impl", "org.apache.hadoop.fs.LocalFileSystem")
own.set("fs.file.impl.disable.cache", "true")
uri = jvm.java.net.URI("file:///")
hadoops = jvm.org.apache.hadoop.fs.FileSystem.newInstance(uri, own)
hadoops.create(jvm.org.apache.hadoop.fs.Path(f"file://{root}/hadoops/one")).close()
used = {
    "file_system": jvm.org.apache.hadoop.fs.FileSystem.get(uri, hadoop_conf).getClass().getName(),
    "raw": jvm.org.apache.hadoop.fs.FileSystem.get(uri, hadoop_conf).getRawFileSystem().getClass().getName(),
    "file_context": jvm.org.apache.hadoop.fs.FileContext.getFileContext(uri, hadoop_conf)
        .getDefaultFileSystem().getClass().getName(),
}
query = (
    spark.readStream.format("rate").option("rowsPerSecond", 20).load()
    .writeStream.format("parquet").option("checkpointLocation", str(root / "ours" / "checkpoint"))
    .trigger(processingTime="1 second").start(str(root / "ours" / "sink"))
)
deadline = time.monotonic() + 120
while (query.lastProgress is None or query.lastProgress["batchId"] < 3) and time.monotonic() < deadline:
    time.sleep(0.5)
query.stop()
used["batches"] = query.lastProgress["batchId"] if query.lastProgress else None
used["rows"] = spark.read.parquet(str(root / "ours" / "sink")).count()
print("USED", json.dumps(used), flush=True)
spark.stop()
"""

LOGGING_COMMAND = """#!/bin/sh
echo "$(basename "$0") $*" >> {log}
exec {real} "$@"
"""


def logging_commands(folder: Path, log: Path) -> None:
    """``chmod`` and ``readlink`` in ``folder`` that append their arguments to ``log``, then run the real
    ones."""
    folder.mkdir()
    for name in ("chmod", "readlink"):
        real = next(Path(d, name) for d in os.environ["PATH"].split(os.pathsep) if Path(d, name).is_file())
        wrapper = folder / name
        wrapper.write_text(LOGGING_COMMAND.format(log=log, real=real))
        wrapper.chmod(0o755)


def test_the_tests_drivers_start_no_chmod_or_readlink_where_hadoops_file_system_does(tmp_path: Path):
    assert LOCAL_SPARK_CONF["spark.hadoop.fs.file.impl"] == FILE_SYSTEM, "no local-fs jar: is javac there?"
    log = tmp_path / "commands.log"
    logging_commands(tmp_path / "bin", log)
    conf = {key: value for key, value in LOCAL_SPARK_CONF.items() if not key.startswith("spark.databricks")}
    conf["spark.local.dir"] = str(tmp_path / "scratch")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env["PYSPARK_PYTHON"] = sys.executable
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(tmp_path), json.dumps(conf)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    used_line = next((line for line in done.stdout.splitlines() if line.startswith("USED ")), None)
    assert done.returncode == 0 and used_line, (done.stdout + done.stderr)[-4000:]
    used = json.loads(used_line.removeprefix("USED "))
    assert used["file_system"] == FILE_SYSTEM
    assert used["raw"] == "akf.sandbox.ForklessRawLocalFileSystem"
    assert used["file_context"] == "akf.sandbox.ForklessLocalFs"
    assert used["batches"] >= 3 and used["rows"] > 0
    commands = log.read_text().splitlines() if log.exists() else []
    assert any(line.startswith("chmod") and "/hadoops" in line for line in commands), commands
    ours = [line for line in commands if "/hadoops" not in line]
    assert ours == [], ours[:20]
    # the files keep the permissions Hadoop gives them: the umask's (rw-r--r-- under 022)
    offsets = tmp_path / "ours" / "checkpoint" / "offsets" / "0"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(offsets.stat().st_mode) == 0o666 & ~umask

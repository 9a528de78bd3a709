"""Hadoop's local file system without a process per file operation, for the local Spark drivers of the
tests and the demo.

Without Hadoop's native library (pyspark ships none), Hadoop's ``RawLocalFileSystem`` runs ``chmod`` for
every file and folder it creates (Parquet part files, ``_temporary`` folders, checkpoint files) and
``readlink`` for every rename through a ``FileContext`` (each entry of Spark's checkpoint log), each a
process started through ``jspawnhelper``. One steady local driver at one batch a second started 2,704
processes in 40 s; with the subclasses of ``jvm/local-fs/src`` (``java.nio`` instead of those commands,
Hadoop's own code for the rest) it started 143, and the whole 2-core machine went from 0.41 to 0.24 cores
busy (2026-12-02, ``benchmarks/bench_job_steady.py --rate 40`` with the tests' JVM options).

The jar is compiled with ``javac`` against the submitting Spark's own jars, like the record-id jar
(:func:`akf_devtools.sandbox.jars.spark_compiled_jar`). :func:`local_fs_conf` names it on the driver's class
path and makes it Hadoop's implementation of ``file:`` for both of Hadoop's APIs. The provider itself sets
none of this: a deployment whose state is on local disk may (``docs/runbook.md``, "Local state without a
process per file").
"""

from __future__ import annotations

import logging
from pathlib import Path

from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.jars import spark_compiled_jar

log = logging.getLogger(__name__)

LOCAL_FS_JAR = "akf-local-fs.jar"
FILE_SYSTEM = "akf.sandbox.ForklessLocalFileSystem"
"""``fs.file.impl``: what ``FileSystem.get`` returns for ``file:`` paths (Parquet, Delta, the sink)."""
ABSTRACT_FILE_SYSTEM = "akf.sandbox.ForklessLocalFs"
"""``fs.AbstractFileSystem.file.impl``: what a ``FileContext`` uses for ``file:`` paths (the checkpoints)."""
CLASS_PATH = "spark.driver.extraClassPath"
EXECUTOR_CLASS_PATH = "spark.executor.extraClassPath"


def local_fs_jar(pyspark_jars_dir: Path | None = None) -> Path:
    """Return the local file system's jar, compiling it first when it is missing or its sources or the
    submitting Spark changed.

    :param pyspark_jars_dir: the submitting Spark's jar folder (the compile classpath); by default
        ``$SPARK_HOME/jars``, else the installed pyspark's.
    :raises SandboxError: no ``javac`` on the PATH, or the sources do not compile.
    """
    return spark_compiled_jar("local-fs", LOCAL_FS_JAR, "hadoop-client-api*.jar", pyspark_jars_dir)


def conf_for(jar: Path) -> dict[str, str]:
    """The Spark settings of a driver that uses ``jar``'s file system for ``file:`` paths; its executors
    too, where they run on this host (a test's standalone cluster): ``spark.hadoop.*`` reaches them, so the
    jar must be on their class path."""
    return {
        CLASS_PATH: str(jar),
        EXECUTOR_CLASS_PATH: str(jar),
        "spark.hadoop.fs.file.impl": FILE_SYSTEM,
        "spark.hadoop.fs.AbstractFileSystem.file.impl": ABSTRACT_FILE_SYSTEM,
    }


def local_fs_conf() -> dict[str, str]:
    """The Spark settings of a local test driver: :func:`conf_for` the jar, built first if needed; empty
    (Hadoop's own file system, with its processes) when it cannot be built, which is logged."""
    try:
        return conf_for(local_fs_jar())
    except (SandboxError, OSError, ImportError) as exc:
        log.warning("local Spark drivers use Hadoop's own local file system: %s", exc)
        return {}


def with_class_path(conf: dict[str, str], *entries: str) -> dict[str, str]:
    """``conf`` with ``entries`` after its ``spark.driver.extraClassPath`` (which a later setting of that key
    would otherwise replace, leaving the file system's classes unloadable)."""
    joined = ":".join(part for part in (conf.get(CLASS_PATH, ""), *entries) if part)
    return {**conf, CLASS_PATH: joined} if joined else dict(conf)

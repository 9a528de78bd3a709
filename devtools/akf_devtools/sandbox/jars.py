"""JVM artifacts of the sandbox and the Spark job: third-party jars resolved by Maven from the poms kept in
``jvm/``, and the job's own small jar compiled from ``jvm/record-id/src``.

Each artifact set (``kafka``: the broker; ``mirrormaker``: MirrorMaker 2, a release of its own;
``spark-kafka``: Spark's Kafka source; ``delta``: Delta Lake for the job-side API's Delta sink;
``hadoop-minicluster``: YARN and HDFS for the sandbox's cluster-mode tests and the storage tests; ``s3a``:
Hadoop's S3A connector and its AWS SDK bundle, for ``s3a://`` paths) is copied
by ``mvn dependency:copy-dependencies`` into ``<jars root>/<name>/``. A manifest written after a complete
resolution records the pom's hash and every jar's size, so a missing, partial or corrupt folder is
noticed and resolved again instead of failing later with a ClassNotFoundException.

``make setup`` (and so ``make demo``) resolves only :data:`DEMO_SETS`, what the demo loads; ``make test``
resolves every set (``--all``). A heavy set not resolved yet is resolved by the first call that needs it
(:func:`delta_jars`, :func:`hadoop_minicluster_classpath`, :func:`s3a_jars`), through the same idempotent
:meth:`ArtifactSet.ensure`.

The record-id jar (``<jars root>/record-id/akf-record-id.jar``) holds the job's JSON field reader (see
``jvm/record-id/src/akf/jobs/JsonStringField.java``). It is compiled with ``javac`` against pyspark's own
jars, so it needs a JDK but no download; its manifest records the sources' hash and the spark-sql-api jar
it was compiled against. The local drivers' file system jar (``<jars root>/local-fs/``, from
``jvm/local-fs/src``: :mod:`akf_devtools.sandbox.local_fs`) is compiled the same way
(:func:`spark_compiled_jar`). The sandbox's Hadoop jar (``<jars root>/hadoop-minicluster-main/``, from
``jvm/hadoop-minicluster/src``) is built the same way against the ``hadoop-minicluster`` set.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from akf_devtools.errors import SandboxError

log = logging.getLogger(__name__)

ARTIFACT_SETS = ("kafka", "mirrormaker", "spark-kafka", "delta", "hadoop-minicluster", "s3a")
DEMO_SETS = ("kafka", "mirrormaker", "spark-kafka")
"""What the demo loads: the sandbox's brokers and MirrorMaker 2, and Spark's Kafka source for its job, the
packaged Parquet job (which needs no Delta). The rest (Delta, the Hadoop minicluster, S3A with its 560 MB AWS
SDK bundle) only tests and benchmarks use."""
MANIFEST = ".manifest.json"
# Pinned so resolution behaves the same whatever Maven's default plugin version is.
COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"


def project_root() -> Path:
    """Return the repository root (the folder holding ``jvm/``), for editable installs and checkouts.

    ``AKF_PROJECT_ROOT`` overrides it for installs that are not a checkout of the repository.
    """
    override = os.environ.get("AKF_PROJECT_ROOT")
    root = Path(override) if override else Path(__file__).resolve().parents[3]
    if not (root / "jvm").is_dir():
        raise SandboxError(
            f"cannot find the jvm/ folder with the Maven poms under {root}; run from a checkout of "
            "airflow-kafka-failover or set AKF_PROJECT_ROOT to one"
        )
    return root


def poms_root() -> Path:
    """Return the folder of the artifact sets' poms, one sub-folder per set (``AKF_POMS_DIR`` overrides).

    The default is ``<project root>/jvm``, the newest stack the suite runs; the compatibility lane points it
    at ``jvm/compat`` (the oldest Kafka, Spark and Delta it supports), beside its own ``AKF_JARS_DIR``.
    """
    override = os.environ.get("AKF_POMS_DIR")
    return Path(override) if override else project_root() / "jvm"


def jars_root() -> Path:
    """Return the folder that holds one sub-folder of jars per artifact set (``AKF_JARS_DIR`` overrides)."""
    override = os.environ.get("AKF_JARS_DIR")
    return Path(override) if override else project_root() / ".jars"


@dataclass(frozen=True)
class ArtifactSet:
    """One folder of resolved jars and the pom it was resolved from.

    :param name: the artifact set, one of ``ARTIFACT_SETS``.
    """

    name: str

    @property
    def pom(self) -> Path:
        return poms_root() / self.name / "pom.xml"

    @property
    def folder(self) -> Path:
        return jars_root() / self.name

    def jars(self) -> list[Path]:
        return sorted(self.folder.glob("*.jar"))

    def problem(self) -> str | None:
        """Say what is wrong with the resolved folder, or None when it is complete and matches the pom."""
        manifest_path = self.folder / MANIFEST
        if not manifest_path.is_file():
            return f"{self.folder} has not been resolved yet"
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError) as exc:
            return f"{manifest_path} is unreadable ({exc})"
        if manifest.get("pom_sha256") != _sha256(self.pom):
            return f"{self.pom} changed since {self.folder} was resolved"
        for jar_name, size in manifest.get("jars", {}).items():
            jar = self.folder / jar_name
            if not jar.is_file() or jar.stat().st_size != size:
                return f"{jar} is missing or has the wrong size"
        return None

    def ensure(self, *, check_zip: bool = False) -> list[Path]:
        """Resolve the set with Maven when it is missing or stale, and return its jars.

        :param check_zip: also open every jar's central directory (slower; catches corrupt content).
        """
        jars_root().mkdir(parents=True, exist_ok=True)
        # A file lock, so that threads and separate processes (parallel test runs) resolve one at a time.
        with open(jars_root() / ".resolve.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            problem = self.problem()
            if problem is None and check_zip:
                problem = next((f"{jar} is not a valid jar" for jar in self.jars() if not _is_jar(jar)), None)
            if problem is not None:
                log.info("Resolving %s jars with Maven: %s", self.name, problem)
                self.resolve()
        return self.jars()

    def resolve(self) -> None:
        """Run Maven to copy the pom's runtime dependencies into a fresh folder, then write the manifest."""
        mvn = shutil.which("mvn")
        if mvn is None:
            raise SandboxError(
                "mvn (Apache Maven 3.8+) is not on PATH: install Maven, e.g. `apt-get install maven`"
            )
        if shutil.which("java") is None:
            raise SandboxError(
                "java is not on PATH: install a Java 17 JDK, e.g. `apt-get install openjdk-17-jdk`"
            )
        staging = self.folder.with_name(self.folder.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(self.pom),
            COPY_GOAL,
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise SandboxError(f"Maven could not resolve {self.pom} (exit {result.returncode}):\n{tail}")
        jars = {jar.name: jar.stat().st_size for jar in staging.glob("*.jar")}
        if not jars:
            raise SandboxError(f"Maven resolved no jars from {self.pom}; check the pom")
        (staging / MANIFEST).write_text(json.dumps({"pom_sha256": _sha256(self.pom), "jars": jars}, indent=1))
        shutil.rmtree(self.folder, ignore_errors=True)
        staging.rename(self.folder)
        log.info("Resolved %d jars into %s", len(jars), self.folder)


MIRRORMAKER_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
"""MirrorMaker 2's dedicated driver: the one Kafka main class that runs from the ``mirrormaker`` set."""


def kafka_artifact_set(main_class: str) -> str:
    """The artifact set a Kafka main class runs from: ``mirrormaker`` for MirrorMaker 2's driver, ``kafka``
    for the rest (the broker, its storage tool). The two are separate releases: the suite's brokers are newer
    than the newest MirrorMaker 2 Maven Central serves here (``jvm/kafka/pom.xml``)."""
    return "mirrormaker" if main_class == MIRRORMAKER_MAIN else "kafka"


def kafka_classpath(main_class: str = "kafka.Kafka") -> str:
    """Return the Java classpath of a Kafka main class (:func:`kafka_artifact_set`), resolving it first if
    needed."""
    folder = ArtifactSet(kafka_artifact_set(main_class))
    folder.ensure()
    return str(folder.folder / "*")


def spark_kafka_jars(pyspark_jars_dir: Path | None = None) -> list[Path]:
    """Return the jars to pass to spark-submit ``--jars``: Spark's Kafka source and what pyspark lacks.

    Jars whose artifact pyspark already ships (scala-library, hadoop client, compression codecs) are left
    out, so that two versions of one library never meet on the classpath.

    :param pyspark_jars_dir: pyspark's own jar folder; found from the installed pyspark when omitted.
    """
    return _not_shipped(ArtifactSet("spark-kafka").ensure(), pyspark_jars_dir)


def delta_jars(pyspark_jars_dir: Path | None = None) -> list[Path]:
    """Return Delta Lake's jars for spark-submit ``--jars`` (without those pyspark already ships)."""
    return _not_shipped(ArtifactSet("delta").ensure(), pyspark_jars_dir)


def s3a_jars(pyspark_jars_dir: Path | None = None) -> list[Path]:
    """Return Hadoop's S3A connector (hadoop-aws 3.4.1), its AWS SDK v2 bundle and Spark's binding to its
    committers (spark-hadoop-cloud), for ``s3a://`` paths.

    Not part of :func:`job_jars`: the bundle is one jar of about 560 MB, which spark-submit ``--jars`` copies
    into every application's scratch folder (seconds, and 560 MB of disk per running job) and whose classes
    a job without ``s3a://`` paths never loads. Add these only where a path is ``s3a://``.
    """
    return _not_shipped(ArtifactSet("s3a").ensure(), pyspark_jars_dir)


def _not_shipped(jars: list[Path], pyspark_jars_dir: Path | None) -> list[Path]:
    if pyspark_jars_dir is None:
        pyspark_jars_dir = _pyspark_jars_dir()
    shipped = {_artifact_name(jar.name) for jar in pyspark_jars_dir.glob("*.jar")}
    return [jar for jar in jars if _artifact_name(jar.name) not in shipped]


RECORD_ID_JAR = "akf-record-id.jar"


def _pyspark_jars_dir() -> Path:
    """The jars of the Spark that submits the jobs: ``$SPARK_HOME/jars`` when ``SPARK_HOME`` is set (the
    spark-submit the Spark provider runs then comes from that Spark), else the installed pyspark's."""
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home:
        return Path(spark_home) / "jars"
    from importlib.util import find_spec  # pyspark's folder without importing it (which takes a while)

    spec = find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SandboxError("pyspark is not installed and SPARK_HOME is not set: no Spark jars to build with")
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def record_id_jar(pyspark_jars_dir: Path | None = None) -> Path:
    """Return the record-id jar, compiling it first when it is missing or its sources or pyspark changed.

    :param pyspark_jars_dir: pyspark's own jar folder (the compile classpath); the installed one by default.
    :raises SandboxError: no ``javac`` on the PATH, or the sources do not compile.
    """
    return spark_compiled_jar("record-id", RECORD_ID_JAR, "spark-sql-api*.jar", pyspark_jars_dir)


def spark_compiled_jar(
    what: str, jar_name: str, compiled_against: str, pyspark_jars_dir: Path | None
) -> Path:
    """Return ``<jars root>/<what>/<jar_name>``, compiled from ``jvm/<what>/src`` against the jars of the
    Spark that submits the jobs, first when it is missing or damaged or its sources or that Spark changed.

    :param compiled_against: a glob of the Spark jars whose names the manifest records (a new Spark, whose
        names differ, compiles the jar again).
    :raises SandboxError: no ``javac`` on the PATH, or the sources do not compile.
    """
    sources = sorted((project_root() / "jvm" / what / "src").rglob("*.java"))
    jars_dir = pyspark_jars_dir or _pyspark_jars_dir()
    wanted = {
        "sources_sha256": hashlib.sha256(b"".join(_sha256(src).encode() for src in sources)).hexdigest(),
        "spark_jars": sorted(jar.name for jar in jars_dir.glob(compiled_against)),
    }
    folder = jars_root() / what
    jar = folder / jar_name
    jars_root().mkdir(parents=True, exist_ok=True)
    with open(jars_root() / ".resolve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            current = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError):
            current = None
        if current == {**wanted, "size": jar.stat().st_size if jar.is_file() else None} and _is_jar(jar):
            return jar
        log.info("Compiling the %s jar from %s", what, sources[0].parent if sources else f"jvm/{what}/src")
        _compile_jar(sources, jars_dir, jar, what=what)
        (folder / MANIFEST).write_text(json.dumps({**wanted, "size": jar.stat().st_size}, indent=1))
    return jar


def _compile_jar(sources: list[Path], classpath_dir: Path, jar: Path, what: str = "record-id") -> None:
    javac = shutil.which("javac")
    if javac is None:
        raise SandboxError(
            f"javac is not on PATH: the {what} jar needs a Java 17 JDK (e.g. `apt-get install "
            "openjdk-17-jdk-headless`)"
            + ("; without it the job reads record ids with get_json_object" if what == "record-id" else "")
        )
    if not sources:
        raise SandboxError(f"no Java sources under {project_root() / 'jvm' / what / 'src'}")
    with tempfile.TemporaryDirectory(prefix=f"akf-{what}-") as work:
        classes = Path(work) / "classes"
        result = subprocess.run(
            [
                javac,
                "--release",
                "17",
                "-nowarn",
                "-cp",
                str(classpath_dir / "*"),
                "-d",
                str(classes),
                *map(str, sources),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise SandboxError(
                f"javac could not compile the {what} jar (exit {result.returncode}):\n"
                + "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            )
        jar.parent.mkdir(parents=True, exist_ok=True)
        partial = jar.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(
                "META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: airflow-kafka-failover\n\n"
            )
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, str(path.relative_to(classes)))
        os.replace(partial, jar)


HADOOP_MINICLUSTER_JAR = "akf-hadoop-minicluster.jar"


def hadoop_minicluster_classpath() -> str:
    """Return the Java classpath of the sandbox's Hadoop minicluster and its YARN test application.

    Resolves the ``hadoop-minicluster`` set and compiles ``jvm/hadoop-minicluster/src`` against it when
    either is missing or changed (the jar's manifest records the sources' hash and the set's pom hash).

    :raises SandboxError: Maven or ``javac`` is missing, or resolution or compilation fails.
    """
    artifact_set = ArtifactSet("hadoop-minicluster")
    artifact_set.ensure()
    sources = sorted((project_root() / "jvm" / "hadoop-minicluster" / "src").rglob("*.java"))
    wanted = {
        "sources_sha256": hashlib.sha256(b"".join(_sha256(src).encode() for src in sources)).hexdigest(),
        "pom_sha256": _sha256(artifact_set.pom),
    }
    folder = jars_root() / "hadoop-minicluster-main"
    jar = folder / HADOOP_MINICLUSTER_JAR
    with open(jars_root() / ".resolve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            current = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError):
            current = None
        fresh = current == {**wanted, "size": jar.stat().st_size if jar.is_file() else None}
        if not (fresh and _is_jar(jar)):
            log.info("Compiling the sandbox's Hadoop minicluster jar")
            _compile_jar(sources, artifact_set.folder, jar, what="hadoop-minicluster")
            (folder / MANIFEST).write_text(json.dumps({**wanted, "size": jar.stat().st_size}, indent=1))
    return f"{jar}{os.pathsep}{artifact_set.folder / '*'}"


def job_jars(*, delta: bool = True) -> list[Path]:
    """The job's default ``--jars``: Spark's Kafka source, Delta Lake, and the record-id jar when a JDK can
    build it.

    Without the record-id jar the job still runs; it reads record ids with ``get_json_object`` (slower).

    :param delta: include Delta Lake's jars (resolving them first if needed); the packaged Parquet job does
        not use them.
    """
    jars = spark_kafka_jars() + (delta_jars() if delta else [])
    try:
        jars.append(record_id_jar())
    except SandboxError as exc:
        log.warning("the job runs without the record-id jar: %s", exc)
    return jars


JOB_JARS_ENV = "AIRFLOW__KAFKA_FAILOVER__JOB_JARS"
"""The provider's ``[kafka_failover] job_jars`` option as an environment variable."""


def use_job_jars(*, delta: bool = True) -> str:
    """Point the provider's ``[kafka_failover] job_jars`` option at :func:`job_jars` unless it is set already.

    Called by the demo, the local Airflow, the benchmarks and the tests, so that their pairs need no
    ``job.jars`` of their own; returns the value in force.

    :param delta: include Delta Lake's jars (the demo and the local Airflow, whose pairs run the packaged
        Parquet job, leave them out).
    """
    if not os.environ.get(JOB_JARS_ENV):
        os.environ[JOB_JARS_ENV] = ",".join(str(jar) for jar in job_jars(delta=delta))
    return os.environ[JOB_JARS_ENV]


def _artifact_name(jar_name: str) -> str:
    """Strip the version from a Maven jar file name: ``kafka-clients-3.9.0.jar`` -> ``kafka-clients``."""
    stem = jar_name.removesuffix(".jar")
    # Greedy prefix: the version is the last "-<digits>.<digits>..." (with an optional "-GA"-like tail).
    match = re.match(r"(.+)-\d+(?:\.\d+)+(?:[.-]\w+)*$", stem)
    return match.group(1) if match else stem


def _is_jar(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return bool(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> None:
    """Resolve the demo's artifact sets (``make setup``), or with ``--all`` every set (``make test``), and
    compile the record-id jar and the local drivers' file system jar."""
    parser = argparse.ArgumentParser(prog="python -m akf_devtools.sandbox.jars", description=main.__doc__)
    parser.add_argument(
        "--all",
        action="store_true",
        help=f"every set ({', '.join(ARTIFACT_SETS)}), the Hadoop minicluster's jar and the local Spark "
        "drivers' class-sharing archive, as the tests need; "
        f"default: the demo's ({', '.join(DEMO_SETS)})",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in ARTIFACT_SETS if args.all else DEMO_SETS:
        artifact_set = ArtifactSet(name)
        jars = artifact_set.ensure(check_zip=True)
        print(f"{name}: {len(jars)} jars in {artifact_set.folder}")
    print(f"record-id: {record_id_jar()}")
    from akf_devtools.sandbox.local_fs import local_fs_jar  # it builds on this module

    print(f"local file system of the local drivers: {local_fs_jar()}")
    if args.all:
        print(f"hadoop-minicluster main: {hadoop_minicluster_classpath().split(os.pathsep)[0]}")
        from akf_devtools.sandbox.class_sharing import ensure_archive

        print(f"class-sharing archive of the local Spark drivers: {ensure_archive()}")
        from akf_devtools.sandbox.kafka_class_sharing import ensure_archives

        try:
            for role, archive in ensure_archives().items():
                print(f"class-sharing archive of the sandbox's {role}: {archive}")
        except SandboxError as exc:  # only start-up time is lost: the sandbox's JVMs run without
            print(f"warning: no class-sharing archives for the sandbox's Kafka JVMs (slower starts): {exc}")
    else:
        later = ", ".join(name for name in ARTIFACT_SETS if name not in DEMO_SETS)
        print(f"not resolved (the tests' sets): {later}; `make test` resolves them, or run with --all")
    value = ",".join(str(jar) for jar in job_jars(delta=args.all))
    without = "" if args.all else " (without Delta)"
    print(f"job jars for your own Airflow{without}: export {JOB_JARS_ENV}={value}")


if __name__ == "__main__":
    try:
        main()
    except SandboxError as exc:
        raise SystemExit(f"error: {exc}") from None

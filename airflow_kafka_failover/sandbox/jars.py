"""JVM artifacts of the sandbox and the Spark job, resolved by Maven from the poms kept in ``jvm/``.

Each artifact set (``kafka``: broker and MirrorMaker 2; ``spark-kafka``: Spark's Kafka source) is copied
by ``mvn dependency:copy-dependencies`` into ``<jars root>/<name>/``. A manifest written after a complete
resolution records the pom's hash and every jar's size, so a missing, partial or corrupt folder is
noticed and resolved again instead of failing later with a ClassNotFoundException.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import fcntl
import zipfile
from dataclasses import dataclass
from pathlib import Path

from airflow_kafka_failover.exceptions import SandboxError

log = logging.getLogger(__name__)

ARTIFACT_SETS = ("kafka", "spark-kafka")
MANIFEST = ".manifest.json"
# Pinned so resolution behaves the same whatever Maven's default plugin version is.
COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"


def project_root() -> Path:
    """Return the repository root (the folder holding ``jvm/``), for editable installs and checkouts.

    ``AKF_PROJECT_ROOT`` overrides it for installs that are not a checkout of the repository.
    """
    override = os.environ.get("AKF_PROJECT_ROOT")
    root = Path(override) if override else Path(__file__).resolve().parents[2]
    if not (root / "jvm").is_dir():
        raise SandboxError(
            f"cannot find the jvm/ folder with the Maven poms under {root}; run from a checkout of "
            "airflow-kafka-failover or set AKF_PROJECT_ROOT to one"
        )
    return root


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
        return project_root() / "jvm" / self.name / "pom.xml"

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
            raise SandboxError("mvn (Apache Maven 3.8+) is not on PATH: install Maven, e.g. `apt-get install maven`")
        if shutil.which("java") is None:
            raise SandboxError("java is not on PATH: install a Java 17 JDK, e.g. `apt-get install openjdk-17-jdk`")
        staging = self.folder.with_name(self.folder.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            mvn, "-q", "-B", "-f", str(self.pom), COPY_GOAL,
            f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
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


def kafka_classpath() -> str:
    """Return the Java classpath of the Kafka broker and MirrorMaker 2, resolving it first if needed."""
    folder = ArtifactSet("kafka")
    folder.ensure()
    return str(folder.folder / "*")


def spark_kafka_jars(pyspark_jars_dir: Path | None = None) -> list[Path]:
    """Return the jars to pass to spark-submit ``--jars``: Spark's Kafka source and what pyspark lacks.

    Jars whose artifact pyspark already ships (scala-library, hadoop client, compression codecs) are left
    out, so that two versions of one library never meet on the classpath.

    :param pyspark_jars_dir: pyspark's own jar folder; found from the installed pyspark when omitted.
    """
    jars = ArtifactSet("spark-kafka").ensure()
    if pyspark_jars_dir is None:
        import pyspark  # deferred: heavy, and only needed where a job is submitted

        pyspark_jars_dir = Path(pyspark.__file__).parent / "jars"
    shipped = {_artifact_name(jar.name) for jar in pyspark_jars_dir.glob("*.jar")}
    return [jar for jar in jars if _artifact_name(jar.name) not in shipped]


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


def main() -> None:
    """Resolve every artifact set (used by ``make setup``)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in ARTIFACT_SETS:
        artifact_set = ArtifactSet(name)
        jars = artifact_set.ensure(check_zip=True)
        print(f"{name}: {len(jars)} jars in {artifact_set.folder}")


if __name__ == "__main__":
    try:
        main()
    except SandboxError as exc:
        raise SystemExit(f"error: {exc}") from None

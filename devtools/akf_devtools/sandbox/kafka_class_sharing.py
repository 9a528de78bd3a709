"""Class-data-sharing archives for the sandbox's Kafka brokers and MirrorMaker 2.

Every sandbox start, every restart of a cluster after a fault and every restart of MirrorMaker 2 is a new
JVM that loads and verifies Kafka's classes. As for the Spark drivers (:mod:`.class_sharing`), Java's
dynamic class-data sharing maps them from a file instead: one archive per main class (``broker`` for
``kafka.Kafka``, ``mirrormaker`` for MirrorMaker 2), written by a sandbox that ran once with
``-XX:ArchiveClassesAtExit`` and stopped cleanly. On the quiet 2-core machine a sandbox came up in 12.2 and
10.9 s with them against 15.2 and 13.5 s without, and a cluster restarted in 12.4 s against 14.0 s; under the
load of a running test suite a broker answered in 2.6 to 5.9 s against 6.9 to 13.0 s (2026-11-27).

``make test`` builds them (``python -m akf_devtools.sandbox.jars --all``; 33 s on the quiet machine from a
fresh clone, 2026-11-27); :func:`java_options` adds an archive to a JVM's command line when it exists and
matches this machine's ``java`` and the jars that JVM runs from (the broker's set or MirrorMaker 2's; the
file name holds a key of both). A JVM that cannot use it loads its classes as usual, quietly. A failed build
is a warning of the setup, not an error: only start-up time is lost.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.class_sharing import java_identity
from akf_devtools.sandbox.jars import MIRRORMAKER_MAIN, jars_root, kafka_classpath

log = logging.getLogger(__name__)

ROLES = {"kafka.Kafka": "broker", MIRRORMAKER_MAIN: "mirrormaker"}
"""The main classes that get an archive, and the archive's name for each."""
QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
"""No warning when a JVM cannot use its archive (it then loads its classes as usual)."""

_archiving: Path | None = None
"""While :func:`ensure_archives` runs its sandbox: the folder the sandbox's JVMs write their archives to."""


def _main_class(role: str) -> str:
    return next(main for main, name in ROLES.items() if name == role)


def _key(role: str) -> str:
    """This machine's ``java`` and the jars ``role`` runs from (names, sizes, times): an archive is only valid
    for both."""
    folder = Path(kafka_classpath(_main_class(role)).removesuffix("*"))
    jars = "\n".join(
        f"{jar.name} {jar.stat().st_size} {jar.stat().st_mtime_ns}" for jar in sorted(folder.glob("*.jar"))
    )
    return hashlib.sha256(f"{java_identity()}\n{folder}\n{jars}".encode()).hexdigest()[:12]


def archive_path(role: str, key: str | None = None) -> Path:
    """Where the archive of ``role`` (``broker`` or ``mirrormaker``) is, built or not."""
    return jars_root() / "class-sharing" / f"kafka-{role}-{key or _key(role)}.jsa"


def java_options(main_class: str) -> list[str]:
    """The options that give a JVM running ``main_class`` its archive ([] without one).

    While :func:`ensure_archives` builds them, the options that make the JVM write one at its exit.
    """
    role = ROLES.get(main_class)
    if role is None:
        return []
    if _archiving is not None:
        return [f"-XX:ArchiveClassesAtExit={_archiving / f'{role}-{uuid.uuid4().hex[:8]}.jsa'}", *QUIET]
    try:
        archive = archive_path(role)
    except (OSError, SandboxError):  # no java, or the jars cannot be resolved here: no archive
        return []
    return [f"-XX:SharedArchiveFile={archive}", *QUIET] if archive.is_file() else []


def ensure_archives() -> dict[str, Path]:
    """Build the archives unless they exist; return them by role (one sandbox start, replication and stop).

    :raises SandboxError: the archiving sandbox failed, or a JVM wrote no archive or one that does not map.
    """
    archives = {role: archive_path(role) for role in ROLES.values()}
    folder = next(iter(archives.values())).parent
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".build-kafka.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(archive.is_file() for archive in archives.values()):
            return archives
        for old in folder.glob("kafka-*.jsa"):  # of other jars or another java
            old.unlink()
        log.info(
            "Building the Kafka JVMs' class-sharing archives under %s (a sandbox that runs once) ...", folder
        )
        with tempfile.TemporaryDirectory(prefix="akf-kafka-cds-") as scratch, _archiving_into(Path(scratch)):
            _run_sandbox(Path(scratch) / "sandbox")
            for role, archive in archives.items():
                written = sorted(Path(scratch).glob(f"{role}-*.jsa"))
                if not written:
                    raise SandboxError(
                        f"the archiving sandbox's {role} wrote no class-sharing archive in {scratch}"
                    )
                _check_maps(written[0], role)
                shutil.move(written[0], archive)
    return archives


@contextlib.contextmanager
def _archiving_into(folder: Path) -> Iterator[None]:
    global _archiving
    _archiving = folder
    try:
        yield
    finally:
        _archiving = None


def _run_sandbox(run_dir: Path) -> None:
    """Start a sandbox, replicate a few records A -> B, and stop every JVM cleanly (they write at exit)."""
    from akf_devtools.sandbox.kafka_io import create_topic, end_offsets, produce
    from akf_devtools.sandbox.loopback import wait_until
    from akf_devtools.sandbox.sandbox import Sandbox

    sandbox = Sandbox(run_dir)
    try:
        sandbox.up()
        create_topic(sandbox.bootstrap("A"), "warm-up", 2)
        produce(sandbox.bootstrap("A"), "warm-up", [(None, b"x", i % 2, None) for i in range(200)])
        copied = wait_until(
            lambda: sum((end_offsets(sandbox.bootstrap("B"), "A.warm-up") or {}).values()) >= 200,
            90,
            interval=0.5,
        )
        if not copied:
            raise SandboxError(
                f"the archiving sandbox did not replicate A -> B within 90 s; logs in {run_dir}"
            )
        # Each JVM writes its archive as it exits: a generous grace, one process at a time.
        sandbox.mirrormaker.process.stop(timeout=60)
        for cluster in sandbox.clusters.values():
            for node in cluster.nodes:
                node.process.stop(timeout=60)
    finally:
        sandbox.down()


def _check_maps(archive: Path, role: str) -> None:
    """Start a JVM that must map ``archive`` (``-Xshare:on`` fails otherwise) and print its version."""
    java = shutil.which("java") or "java"
    result = subprocess.run(
        [
            java,
            "-Xshare:on",
            f"-XX:SharedArchiveFile={archive}",
            "-cp",
            kafka_classpath(_main_class(role)),
            "-version",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SandboxError(
            f"the {role} class-sharing archive {archive} does not map:\n"
            + "\n".join((result.stdout + result.stderr).strip().splitlines()[-10:])
        )


def main() -> None:
    """Build the archives (if needed) and print them."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    started = time.monotonic()
    for role, archive in ensure_archives().items():
        print(f"{role} class-sharing archive: {archive} ({archive.stat().st_size // 2**20} MB)")
    print(f"in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    # The sandbox's JVMs read ``_archiving`` of the imported module, not of this ``__main__`` copy.
    from akf_devtools.sandbox import kafka_class_sharing

    try:
        kafka_class_sharing.main()
    except SandboxError as exc:
        raise SystemExit(f"error: {exc}") from None

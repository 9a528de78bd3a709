"""A real Hadoop on loopback: YARN (ResourceManager + one NodeManager) and HDFS (NameNode with WebHDFS + one
DataNode) in one JVM, from the ``hadoop-minicluster`` jars of Maven Central (Hadoop 3.4.1, Spark 4.0's).

The JVM runs ``akf.sandbox.HadoopMiniCluster`` (``jvm/hadoop-minicluster/src``), which binds every port to a
free one, and once both clusters answer writes a client configuration (``core-site.xml``, ``hdfs-site.xml``,
``yarn-site.xml``) into :attr:`HadoopMiniCluster.conf_dir`, the folder to use as ``HADOOP_CONF_DIR`` and
``YARN_CONF_DIR``. The tests' YARN application (``akf.sandbox.SleepingApplication``, an application master
that registers and sleeps) is submitted with :meth:`HadoopMiniCluster.submit_sleeping_application`.

On the 2-core test machine (shared with other tests) it answers 12 to 22 s after the start, the JVM holds
about 400 MB resident with its 512 MB heap, and a clean stop takes about 20 s (the NodeManager waits for its
containers). Containers are separate JVMs: the tests' sleeping master uses a 64 MB heap; a PySpark
application in cluster mode a 512 MB driver and a 512 MB executor.

Devtools only: the provider never imports this module.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from airflow_kafka_failover.core.process_group import ManagedProcess
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.jars import hadoop_minicluster_classpath
from akf_devtools.sandbox.loopback import wait_until

log = logging.getLogger(__name__)

JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
    # The web apps' Guice (cglib) defines classes through ClassLoader.defineClass.
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
)
READY_FILE = "ready.properties"


def java_binary() -> str:
    """The ``java`` on the PATH.

    :raises SandboxError: there is none.
    """
    java = shutil.which("java")
    if java is None:
        raise SandboxError(
            "java is not on PATH: install a Java 17 JDK, e.g. `apt-get install openjdk-17-jdk`"
        )
    return java


def read_ready_file(conf_dir: Path, what: str, start_call: str) -> dict[str, str]:
    """The addresses a minicluster JVM wrote into ``<conf_dir>/ready.properties`` once it answered.

    :param what: the cluster, for the error message.
    :param start_call: the method that starts it, for the error message (``up()``).
    :raises SandboxError: the file is not there (the cluster is not up).
    """
    ready = conf_dir / READY_FILE
    try:
        lines = ready.read_text().splitlines()
    except OSError as exc:
        raise SandboxError(f"the {what} has not written {ready} ({exc}); call {start_call} first") from None
    return dict(line.split("=", 1) for line in lines if "=" in line)


@dataclass
class HadoopMiniCluster:
    """One minicluster JVM under ``run_dir``.

    :param run_dir: folder for the pid file, the log, the clusters' data and the client configuration.
    :param heap: the JVM's maximum heap (the NameNode, DataNode, ResourceManager and NodeManager share it).
    :param node_memory_mb: memory the NodeManager offers to containers (not reserved: containers are
        separate JVMs that use only what they start with).
    :param node_vcores: virtual cores the NodeManager offers.
    """

    run_dir: Path
    heap: str = "512m"
    node_memory_mb: int = 4096
    node_vcores: int = 4

    @property
    def process(self) -> ManagedProcess:
        return ManagedProcess("hadoop-minicluster", self.run_dir)

    @property
    def work_dir(self) -> Path:
        return self.run_dir / "hadoop-work"

    @property
    def conf_dir(self) -> Path:
        """The client configuration folder (``HADOOP_CONF_DIR`` / ``YARN_CONF_DIR``)."""
        return self.run_dir / "hadoop-conf"

    def addresses(self) -> dict[str, str]:
        """The addresses the JVM wrote once ready (``rm_webapp_address``, ``fs_default_fs``, ``webhdfs``...).

        :raises SandboxError: the cluster is not up.
        """
        return read_ready_file(self.conf_dir, "minicluster", "up()")

    @property
    def resource_manager_url(self) -> str:
        """The ResourceManager's web address (UI and REST API), e.g. ``http://localhost:40123``."""
        return f"http://{self.addresses()['rm_webapp_address']}"

    @property
    def webhdfs_url(self) -> str:
        """The NameNode's WebHDFS base, e.g. ``http://localhost:40124/webhdfs/v1``."""
        return "http://" + self.addresses()["webhdfs"].removeprefix("webhdfs://") + "/webhdfs/v1"

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point Hadoop and Spark clients at this cluster."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir), "YARN_CONF_DIR": str(self.conf_dir)}

    def _java(self) -> str:
        return java_binary()

    def up(self, timeout: float = 120.0) -> float:
        """Start the JVM, wait until the ResourceManager REST API and WebHDFS answer; return seconds taken.

        :param timeout: seconds to wait for both; the JVM is stopped and its log tail raised after that.
        """
        started = time.monotonic()
        classpath = hadoop_minicluster_classpath()
        shutil.rmtree(self.work_dir, ignore_errors=True)
        shutil.rmtree(self.conf_dir, ignore_errors=True)
        self.work_dir.mkdir(parents=True)
        self.conf_dir.mkdir(parents=True)
        argv = [
            self._java(),
            f"-Xmx{self.heap}",
            *JVM_FLAGS,
            "-cp",
            classpath,
            "akf.sandbox.HadoopMiniCluster",
            str(self.work_dir),
            str(self.conf_dir),
            str(self.node_memory_mb),
            str(self.node_vcores),
        ]
        # MiniYARNCluster keeps its NodeManager's folders under ./target: the JVM runs inside work_dir.
        self.process.start(
            ["nice", "-n", "10", "/bin/sh", "-c", 'cd "$0" && exec "$@"', str(self.work_dir), *argv]
        )
        ready = self.conf_dir / READY_FILE
        if not wait_until(lambda: ready.is_file() or not self.process.is_running(), timeout, interval=0.5):
            tail = self.process.log_tail(40)
            self.down()
            raise SandboxError(f"the Hadoop minicluster did not start within {timeout:.0f} s:\n{tail}")
        if not ready.is_file():
            tail = self.process.log_tail(40)
            self.down()
            raise SandboxError(f"the Hadoop minicluster exited during start-up:\n{tail}")
        remaining = max(timeout - (time.monotonic() - started), 5.0)
        if not wait_until(self._answers, remaining, interval=0.5):
            tail = self.process.log_tail(40)
            self.down()
            raise SandboxError(
                f"the minicluster wrote {ready} but its ResourceManager ({self.resource_manager_url}) or "
                f"WebHDFS ({self.webhdfs_url}) did not answer:\n{tail}"
            )
        took = time.monotonic() - started
        log.info(
            "Hadoop minicluster up in %.1f s: YARN %s, HDFS %s",
            took,
            self.resource_manager_url,
            self.webhdfs_url,
        )
        return took

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"{self.resource_manager_url}/ws/v1/cluster/info", timeout=2
            ) as response:
                if json.load(response)["clusterInfo"]["state"] != "STARTED":
                    return False
            with urllib.request.urlopen(f"{self.webhdfs_url}/?op=GETFILESTATUS", timeout=2) as response:
                return "FileStatus" in json.load(response)
        except (OSError, ValueError, KeyError):
            return False

    def submit_sleeping_application(self, name: str, seconds: int = 600, timeout: float = 60.0) -> str:
        """Submit the tests' YARN application (a master that registers and sleeps); return its application id.

        :param name: the YARN application name.
        :param seconds: how long its master sleeps before finishing on its own.
        :param timeout: seconds allowed for the submission.
        """
        argv = [
            self._java(),
            "-Xmx128m",
            *JVM_FLAGS,
            "-cp",
            f"{self.conf_dir}{os.pathsep}{hadoop_minicluster_classpath()}",
            "akf.sandbox.SleepingApplication",
            "submit",
            name,
            str(seconds),
        ]
        result = subprocess.run(
            ["nice", "-n", "10", *argv], capture_output=True, text=True, timeout=timeout, check=False
        )
        lines = result.stdout.strip().splitlines()
        if result.returncode != 0 or not lines or not lines[-1].startswith("application_"):
            raise SandboxError(
                f"submitting the sleeping YARN application failed (exit {result.returncode}):\n"
                + "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
            )
        return lines[-1]

    def down(self, timeout: float = 60.0) -> None:
        """Stop the JVM (its NodeManager stops the containers it runs), then any container left behind.

        :param timeout: seconds for a clean stop before SIGKILL.
        """
        self.process.stop(timeout=timeout)
        for pid in self.container_pids():
            log.warning("killing container process %s left behind by the minicluster", pid)
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def container_pids(self, application_id: str | None = None) -> list[int]:
        """Processes of YARN containers working inside this cluster's folder (of one application, if given).

        Containers run in their own sessions, so a NodeManager killed without its clean stop leaves them
        running; the minicluster JVM itself (which also works there) is not counted.

        :param application_id: only the containers of this application.
        """
        work = str(self.work_dir.resolve())
        own = self.process.pid()
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == own:
                continue
            try:
                cwd = os.readlink(proc / "cwd")
            except OSError:
                continue
            inside = cwd == work or cwd.startswith(work + os.sep)
            if inside and (application_id is None or f"{os.sep}{application_id}{os.sep}" in cwd + os.sep):
                pids.append(int(proc.name))
        return pids


def main() -> None:
    """Start the minicluster in the foreground until Ctrl-C (for trying things by hand)."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="A Hadoop minicluster (YARN + HDFS) on loopback")
    parser.add_argument("--run-dir", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="akf-hadoop-"))
    cluster = HadoopMiniCluster(run_dir)
    took = cluster.up()
    print(f"up in {took:.1f} s; export HADOOP_CONF_DIR={cluster.conf_dir} YARN_CONF_DIR={cluster.conf_dir}")
    print(f"ResourceManager {cluster.resource_manager_url}, WebHDFS {cluster.webhdfs_url}")
    try:
        while cluster.process.is_running():
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.down()


if __name__ == "__main__":
    main()

"""HDFS alone on loopback for the storage tests: a NameNode (RPC and WebHDFS) and one DataNode in one JVM,
Hadoop 3.4.1's MiniDFSCluster from the ``hadoop-minicluster`` jars (no YARN: see :mod:`.hadoop` for both).

The JVM runs ``akf.sandbox.HdfsMiniCluster`` (``jvm/hadoop-minicluster/src``) on two ports chosen at the
first start and kept in ``<run dir>/hdfs/ports.json``, so that :meth:`HdfsCluster.stop` then
:meth:`HdfsCluster.start` brings the same file system back at the same URI: the NameNode reloads its image
and edits from ``<run dir>/hdfs/work`` and the DataNode its blocks. :meth:`HdfsCluster.freeze` (SIGSTOP)
makes it unreachable without stopping it: the ports still accept connections, nothing answers, the way a
hung NameNode looks to a client; :meth:`HdfsCluster.thaw` resumes it.

Devtools only: the provider never imports this module.
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from airflow_kafka_failover.core.process_group import ManagedProcess
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.hadoop import JVM_FLAGS, READY_FILE, java_binary, read_ready_file
from akf_devtools.sandbox.jars import hadoop_minicluster_classpath
from akf_devtools.sandbox.loopback import PORT_RELEASE_WAIT_S, free_ports, port_in_use, wait_until
from akf_devtools.sandbox.scram import write_private

log = logging.getLogger(__name__)

FAIL_FAST_HDFS = {
    # The NameNode RPC: a 5 s answer deadline and at most one reconnect (defaults: 120 s, and 45 connect
    # retries on timeouts of 20 s each).
    "ipc.client.rpc-timeout.ms": "5000",
    "ipc.client.connect.timeout": "2000",
    "ipc.client.connect.max.retries": "1",
    "ipc.client.connect.max.retries.on.timeouts": "1",
    # The DataNode streams: a 5 s socket timeout (default 60 s), and short waits between retries.
    "dfs.client.socket-timeout": "5000",
    "dfs.client.retry.window.base": "200",
    "dfs.client.block.write.locateFollowingBlock.retries": "2",
}
"""Hadoop client settings that make an unreachable HDFS fail in about 5 s; see test_stores.py."""


@dataclass
class HdfsCluster:
    """One HDFS JVM under ``<run_dir>/hdfs``.

    :param run_dir: folder for the pid file, the log, and ``hdfs/`` (data, client configuration, ports).
    :param heap: the JVM's maximum heap (NameNode and DataNode share it).
    """

    run_dir: Path
    heap: str = "256m"

    @property
    def process(self) -> ManagedProcess:
        return ManagedProcess("hdfs", self.run_dir)

    @property
    def folder(self) -> Path:
        return self.run_dir / "hdfs"

    @property
    def work_dir(self) -> Path:
        """The NameNode's and the DataNode's storage (kept by :meth:`stop`)."""
        return self.folder / "work"

    @property
    def conf_dir(self) -> Path:
        """The client configuration folder (``HADOOP_CONF_DIR``): ``core-site.xml``, ``hdfs-site.xml``."""
        return self.folder / "conf"

    @property
    def ports_file(self) -> Path:
        return self.folder / "ports.json"

    def _ports(self) -> tuple[int, int]:
        try:
            ports = json.loads(self.ports_file.read_text())
            return int(ports["rpc"]), int(ports["http"])
        except (OSError, ValueError, KeyError, TypeError):
            raise SandboxError(f"HDFS in {self.run_dir} was never started; call start() first") from None

    @property
    def uri(self) -> str:
        """The file system's URI, ``hdfs://127.0.0.1:<NameNode RPC port>``."""
        return f"hdfs://127.0.0.1:{self._ports()[0]}"

    @property
    def webhdfs_url(self) -> str:
        """The NameNode's WebHDFS base, ``http://127.0.0.1:<port>/webhdfs/v1``."""
        return f"http://127.0.0.1:{self._ports()[1]}/webhdfs/v1"

    @property
    def webhdfs_uri(self) -> str:
        """The same file system through WebHDFS: ``webhdfs://127.0.0.1:<port>`` (Hadoop's, fsspec's)."""
        return f"webhdfs://127.0.0.1:{self._ports()[1]}"

    def path(self, *parts: str) -> str:
        """``hdfs://127.0.0.1:<port>/<parts joined by />``."""
        return "/".join([self.uri, *(part.strip("/") for part in parts)])

    @property
    def env(self) -> dict[str, str]:
        """``HADOOP_CONF_DIR`` pointing Hadoop and Spark clients at this file system (``fs.defaultFS``)."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir)}

    def start(self, timeout: float = 120.0, fresh: bool = False) -> float:
        """Start the JVM and wait until WebHDFS answers with the DataNode registered; return seconds taken.

        The first start formats a new file system; later ones load the one on disk (same URI and files).

        :param timeout: seconds to wait; the JVM is stopped and its log tail raised after that.
        :param fresh: format anyway (every file is lost).
        """
        started = time.monotonic()
        if self.process.is_running():
            raise SandboxError(f"HDFS in {self.run_dir} is already running; stop it first")
        classpath = hadoop_minicluster_classpath()
        format_storage = fresh or not (self.work_dir / "dfs").is_dir()
        if format_storage:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        if not self.ports_file.is_file():
            rpc, http = free_ports(2)
            write_private(self.ports_file, json.dumps({"rpc": rpc, "http": http}))
        rpc, http = self._ports()
        for port in (rpc, http):  # connections of the JVM just stopped may hold a port for a moment
            if not wait_until(lambda port=port: not port_in_use(port), PORT_RELEASE_WAIT_S, 0.25):
                raise SandboxError(f"port {port} of HDFS in {self.run_dir} is taken by another process")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / READY_FILE).unlink(missing_ok=True)
        argv = [
            java_binary(),
            f"-Xmx{self.heap}",
            *JVM_FLAGS,
            "-cp",
            classpath,
            "akf.sandbox.HdfsMiniCluster",
            str(self.work_dir),
            str(self.conf_dir),
            str(rpc),
            str(http),
            "true" if format_storage else "false",
        ]
        self.process.start(["nice", "-n", "10", *argv])
        ready = self.conf_dir / READY_FILE
        if not wait_until(lambda: ready.is_file() or not self.process.is_running(), timeout, interval=0.3):
            tail = self.process.log_tail(40)
            self.stop()
            raise SandboxError(f"HDFS did not start within {timeout:.0f} s:\n{tail}")
        if not ready.is_file():
            raise SandboxError(f"HDFS exited during start-up:\n{self.process.log_tail(40)}")
        read_ready_file(self.conf_dir, "HDFS", "start()")
        remaining = max(timeout - (time.monotonic() - started), 5.0)
        if not wait_until(self._answers, remaining, interval=0.3):
            tail = self.process.log_tail(40)
            self.stop()
            raise SandboxError(f"HDFS wrote {ready} but WebHDFS ({self.webhdfs_url}) did not answer:\n{tail}")
        took = time.monotonic() - started
        log.info("HDFS up in %.1f s: %s, WebHDFS %s", took, self.uri, self.webhdfs_url)
        return took

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.webhdfs_url}/?op=GETFILESTATUS", timeout=2) as response:
                return "FileStatus" in json.load(response)
        except (OSError, ValueError):
            return False

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the JVM (thawing it first if frozen); the storage stays for the next :meth:`start`."""
        self.process.stop(timeout=timeout)

    def freeze(self) -> None:
        """Make HDFS unreachable without stopping it (SIGSTOP): NameNode and DataNode stop answering."""
        if not self.process.signal_group(signal.SIGSTOP):
            raise SandboxError(f"HDFS in {self.run_dir} is not running")

    def thaw(self) -> None:
        """Resume a frozen HDFS (SIGCONT)."""
        if not self.process.signal_group(signal.SIGCONT):
            raise SandboxError(f"HDFS in {self.run_dir} is not running")

    def hadoop_properties(self, fail_fast: bool = True) -> dict[str, str]:
        """Hadoop client settings for this file system: the single-DataNode write pipeline (no replacement
        DataNode to look for on append) and, with ``fail_fast``, :data:`FAIL_FAST_HDFS`."""
        properties = {"dfs.client.block.write.replace-datanode-on-failure.policy": "NEVER"}
        if fail_fast:
            properties.update(FAIL_FAST_HDFS)
        return properties

    def spark_properties(self, fail_fast: bool = True) -> dict[str, str]:
        """:meth:`hadoop_properties` as Spark properties (``spark.hadoop.`` prefix)."""
        return {f"spark.hadoop.{key}": value for key, value in self.hadoop_properties(fail_fast).items()}

    def rss_bytes(self) -> int:
        """The JVM's resident memory now.

        :raises SandboxError: it is not running.
        """
        pid = self.process.pid()
        status = Path(f"/proc/{pid}/status") if pid else None
        try:
            line = next(line for line in status.read_text().splitlines() if line.startswith("VmRSS:"))  # type: ignore[union-attr]
        except (AttributeError, OSError, StopIteration):
            raise SandboxError(f"HDFS in {self.run_dir} is not running") from None
        return int(line.split()[1]) * 1024

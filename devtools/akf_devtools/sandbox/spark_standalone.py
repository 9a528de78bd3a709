"""A real Spark standalone cluster on loopback: one master and one worker, started from pyspark's own
``spark-class``. It is the path users take when they outgrow local mode; the job's driver runs in client
mode next to Airflow (standalone clusters do not run Python drivers in cluster mode).
"""

from __future__ import annotations

import json
import logging
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from airflow_kafka_failover.core.process_group import ManagedProcess
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.loopback import accepts_connections, free_ports, wait_until

log = logging.getLogger(__name__)


@dataclass
class SparkStandalone:
    """A master and a worker under ``run_dir``.

    :param run_dir: folder for pid files, logs and the worker's work directory.
    :param worker_cores: cores the worker offers.
    :param worker_memory: memory the worker offers (e.g. ``1g``).
    """

    run_dir: Path
    worker_cores: int = 1
    worker_memory: str = "1g"
    master_port: int = 0
    master_ui_port: int = 0

    @property
    def master(self) -> ManagedProcess:
        return ManagedProcess("spark-master", self.run_dir)

    @property
    def worker(self) -> ManagedProcess:
        return ManagedProcess("spark-worker", self.run_dir)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _spark_class(self) -> str:
        return str(Path(sys.executable).with_name("spark-class"))

    def alive_workers(self) -> int:
        """Workers the master reports alive (from its web UI's JSON)."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.master_ui_port}/json/", timeout=2
            ) as response:
                return int(json.load(response).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def up(self, timeout: float = 90.0) -> str:
        """Start master and worker, wait until the worker registered; return the master URL."""
        started = time.monotonic()
        self.master_port, self.master_ui_port, worker_ui = free_ports(3)
        import pyspark  # deferred: only needed here; its folder is the SPARK_HOME of a PyPI install

        env = {
            "SPARK_NO_DAEMONIZE": "1",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_HOME": str(Path(pyspark.__file__).parent),
            "PYSPARK_PYTHON": sys.executable,
        }
        self.master.start(
            [
                self._spark_class(),
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.master_port),
                "--webui-port",
                str(self.master_ui_port),
            ],
            env=env,
        )
        if (
            not wait_until(
                lambda: accepts_connections(self.master_port) or not self.master.is_running(), timeout
            )
            or not self.master.is_running()
        ):
            self.down()
            raise SandboxError(
                f"the Spark master did not open port {self.master_port} within {timeout:.0f} s:\n"
                f"{self.master.log_tail()}"
            )
        work_dir = self.run_dir / "spark-work"
        work_dir.mkdir(parents=True, exist_ok=True)
        self.worker.start(
            [
                self._spark_class(),
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host",
                "127.0.0.1",
                "--cores",
                str(self.worker_cores),
                "--memory",
                self.worker_memory,
                "--webui-port",
                str(worker_ui),
                "--work-dir",
                str(work_dir),
            ],
            env=env,
        )
        remaining = max(timeout - (time.monotonic() - started), 5.0)
        if (
            not wait_until(
                lambda: self.alive_workers() >= 1 or not self.worker.is_running(), remaining, interval=0.5
            )
            or self.alive_workers() < 1
        ):
            tail = self.worker.log_tail()
            self.down()
            raise SandboxError(
                f"no Spark worker registered with {self.master_url} within {timeout:.0f} s:\n{tail}"
            )
        log.info("Spark standalone cluster up at %s in %.1f s", self.master_url, time.monotonic() - started)
        return self.master_url

    def down(self) -> None:
        """Stop the worker (and the executors it runs), then the master."""
        self.worker.stop(timeout=10)
        self.master.stop(timeout=10)

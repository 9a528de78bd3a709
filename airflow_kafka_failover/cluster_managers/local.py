"""A driver that runs as a detached process on the host that submitted it.

Local mode (a ``local[*]`` master: spark-submit is the driver) and client mode on YARN or Kubernetes (the
driver runs here, its executors there). spark-submit runs in its own process group with its output in
``<local_dir>/logs/job.log`` and its pid in ``<local_dir>/pids/job.json``; whether it runs is that
process's state (:class:`~airflow_kafka_failover.core.process_group.ManagedProcess`: a recycled pid is not
taken for it); a stop that the job does not obey terminates the process group. The process is known only on
the host that started it: a stop from another host reaches the job through its stop request and the fence.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from pathlib import Path

from airflow_kafka_failover.cluster_managers.handle import JobHandle, ManagerName
from airflow_kafka_failover.cluster_managers.manager import (
    JobStartError,
    Launch,
    Submission,
    stopped_on_request,
)
from airflow_kafka_failover.run_format.layout import RunLayout, mark_killed, read_status, status_file

log = logging.getLogger(__name__)

AIRFLOW_ONLY_ENV = ("AIRFLOW_CONN_", "AIRFLOW_VAR_", "AIRFLOW__")
"""Environment variables the job never inherits: Airflow's connections, variables and configuration hold
every connection's secrets, the metadata database's password and the Fernet key; the job needs none of them
(it gets its own cluster's settings through the owner-only settings file)."""
KILL_WAIT_S = 10.0
"""How long a terminated process group may take to go before it is killed."""


def job_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The job's whole environment: this process's without Airflow's (``AIRFLOW_ONLY_ENV``), ``PATH`` with
    the ``bin`` of the Spark that submits first (:func:`spark_bin_dir`), and the driver's Python:
    ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` when set, else this interpreter.

    :param extra: variables on top (a run's own).
    """
    bin_dir = spark_bin_dir()
    path = os.environ.get("PATH", "")
    inherited = {name: value for name, value in os.environ.items() if not name.startswith(AIRFLOW_ONLY_ENV)}
    child = {
        "PATH": bin_dir + (os.pathsep + path if path else ""),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
    }
    return {**inherited, **child, **(extra or {})}


def spark_bin_dir() -> str:
    """The folder whose spark-submit launches the jobs: ``$SPARK_HOME/bin`` when ``SPARK_HOME`` is set (a
    Spark distribution, or the pyspark of a driver's own virtualenv: Spark's own convention), else this
    interpreter's ``bin`` (the spark-submit of the ``spark`` extra's pyspark)."""
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home:
        return str(Path(spark_home) / "bin")
    return str(Path(sys.executable).parent)


def check_spark_submit(binary: str, env: dict[str, str], spark_conn_id: str) -> None:
    """Refuse a launch whose spark-submit cannot be found on the PATH it runs with (``env``'s).

    spark-submit runs on this host in every mode: the one of ``SPARK_HOME`` when it is set, else (with the
    provider's ``spark`` extra) the one of this interpreter's pyspark; :func:`job_environment` puts that
    folder first on PATH.

    :param binary: the command's first word (the connection's ``spark_binary``, or a path).
    :raises JobStartError: naming the binary, the PATH searched and the two ways to provide it.
    """
    if shutil.which(binary, path=env.get("PATH", "")) is not None:
        return
    raise JobStartError(
        f"spark-submit {binary!r} (the spark_binary of connection {spark_conn_id!r}) is not on the PATH the "
        f"job is launched with ({env.get('PATH', '')}): install pyspark on this host with the provider's "
        "extra (pip install 'airflow-kafka-failover[spark]'), or set SPARK_HOME to a Spark distribution (or "
        "a pyspark install's folder) whose bin/ holds spark-submit; nothing was started"
    )


class LocalDriver:
    """The cluster manager of a detached driver process (see the module)."""

    name = ManagerName.LOCAL

    def prepared(self, handle: JobHandle, submission: Submission) -> JobHandle:
        return handle

    def submission_conf(self, handle: JobHandle) -> dict[str, str]:
        return {}

    def live_run(self, handle: JobHandle, layout: RunLayout) -> JobHandle | None:
        return handle if self.alive(handle) else None

    def start(self, handle: JobHandle, launch: Launch) -> JobHandle:
        pid = handle.process.start(launch.command, env=launch.env, inherit_env=False)
        log.info("submitted %s: pid %s, log %s", handle.describe(), pid, handle.log_file)
        return handle

    def wait_running(self, handle: JobHandle, timeout: float) -> JobHandle:
        """Wait until the job writes ``running`` in its ``status.json``; raise with its log tail if its
        process ends first or it stays silent (it is then stopped)."""
        deadline = time.monotonic() + timeout
        while True:
            status = read_status(handle.run_dir)
            state = status.get("state")
            if state == "running":
                log.info(
                    "%s is running (Spark application %s)", handle.describe(), status.get("application_id")
                )
                return handle
            if state in ("refused", "failed") or not self.alive(handle):
                reason = status.get("reason") or f"the process exited during start-up (state {state!r})"
                raise JobStartError(
                    f"{handle.describe()} did not start: {reason}\n--- log tail ---\n{self.log_tail(handle)}"
                )
            if time.monotonic() > deadline:
                tail = self.log_tail(handle)
                handle.process.stop(timeout=KILL_WAIT_S)
                raise JobStartError(
                    f"{handle.describe()} did not report running in {status_file(handle.run_dir)} within "
                    f"{timeout:.0f} s (last state {state!r}); it was stopped. A job of your own must write "
                    "it (the job-side API does: docs/jobs.md); on a slow machine raise "
                    f"startup_timeout_seconds.\n--- log tail ---\n{tail}"
                )
            time.sleep(0.5)

    def alive(self, handle: JobHandle) -> bool | None:
        return handle.process.is_running()

    def stop(self, handle: JobHandle, timeout: float, at_once: bool = False) -> str:
        if not handle.process.is_running():
            last = handle.status().get("state")
            log.info("%s is not running (last state %r); nothing to stop", handle.describe(), last)
            return "not-running"
        ended = lambda: not handle.process.is_running()  # noqa: E731
        if stopped_on_request(handle, timeout, ended, interval=0.25, trust_status=False):
            return "stopped"
        if at_once:
            log.warning("killing the process group of %s (SIGKILL)", handle.describe())
            handle.process.kill()
        else:
            log.warning("terminating the process group of %s", handle.describe())
            handle.process.stop(timeout=KILL_WAIT_S)
        mark_killed(
            handle.run_dir,
            f"did not stop within {timeout:.0f} s of the stop request; its process group was "
            + ("killed" if at_once else "terminated"),
        )
        return "forced"

    def log_tail(self, handle: JobHandle, lines: int = 40) -> str:
        return handle.process.log_tail(lines)

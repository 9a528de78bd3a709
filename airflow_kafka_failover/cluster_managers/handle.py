"""The job handle: plain data naming one submitted run of the job and the cluster manager that runs it.

What the submit operator returns to XCom and the active record keeps; its JSON form holds no secret (the
settings file it points to does, and stays owner-only). It names its manager (:attr:`JobHandle.manager`);
whether the run lives, waiting for it and stopping it are the manager's
(:mod:`airflow_kafka_failover.cluster_managers`). What the handle answers itself comes from its own fields
and the run folder every manager shares: the local process locator, ``status.json``, a description.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import StrictInt, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from airflow_kafka_failover.cluster_managers.kubernetes_pods import DriverPodRef, is_kubernetes_master
from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.core.storage.locations import is_remote
from airflow_kafka_failover.run_format.layout import PROCESS_NAME, read_status
from airflow_kafka_failover.run_format.options import DeployMode

APPLICATION_ID = re.compile(r"application_\d+_\d+")
"""A YARN application id."""


class ManagerName(StrEnum):
    """The cluster manager that runs a handle's driver (one module each in ``cluster_managers/``)."""

    LOCAL = "local"
    """A detached driver process on the host that submitted it: local mode, or client mode on YARN or
    Kubernetes (the executors run there, the driver here)."""
    STANDALONE = "standalone"
    """A Spark standalone master: the client-mode driver process here and the master's view of it."""
    YARN = "yarn"
    """YARN's ResourceManager (cluster mode)."""
    KUBERNETES = "kubernetes"
    """The Kubernetes API server (cluster mode: the driver is a pod)."""


def is_yarn_master(master: str) -> bool:
    """Say whether a Spark master URL is YARN's (``yarn``, or ``yarn-cluster`` of old)."""
    return master.strip().lower().startswith("yarn")


def is_standalone_master(master: str) -> bool:
    """Say whether a Spark master URL is a standalone master's (``spark://...``)."""
    return master.strip().lower().startswith("spark://")


DEPLOY_MODES = tuple(mode.value for mode in DeployMode)
_REQUIRED = ("pair", "cluster", "epoch", "deploy_mode", "master", "run_dir", "checkpoint", "sink_root")


@dataclass(frozen=True)
class JobHandle:
    """One submitted run of the job.

    :param pair: the pair's name.
    :param cluster: the cluster the run reads.
    :param epoch: its epoch.
    :param deploy_mode: ``local`` (detached spark-submit in local mode), ``client`` (detached driver next to
        Airflow, executors on a cluster), or ``cluster`` (driver on the cluster, known by its id).
    :param master: the Spark master URL.
    :param run_dir: folder of the settings, status and stop request (a local path or a store URI).
    :param checkpoint: the run's checkpoint directory.
    :param sink_root: the run's sink root.
    :param spark_conn_id: the ``spark`` connection it was submitted through.
    :param submitted_at: ISO 8601 time of submission.
    :param driver_id: standalone driver id or Kubernetes ``namespace:pod`` (cluster mode).
    :param application_id: YARN application id (cluster mode), or Spark's id once the job reported it
        (client mode on a standalone master: the id the master knows the application by).
    :param resource_manager: the YARN ResourceManager's web address recorded at submission (YARN only).
    :param master_webui_port: the standalone master's web UI port recorded at submission (standalone only;
        None: Spark's default 8080).
    :param local_dir: the folder, on the host that started spark-submit, of its process file and output
        (local and client mode; None: the run folder, which must then be local).
    :param kubernetes_conn_id: the Airflow ``kubernetes`` connection the driver pod is read and deleted
        through, recorded at submission (Kubernetes only; None: ``kubernetes_default``).
    """

    pair: str
    cluster: str
    epoch: StrictInt
    deploy_mode: DeployMode
    master: str
    run_dir: str
    checkpoint: str
    sink_root: str
    spark_conn_id: str = "spark_default"
    submitted_at: str = ""
    driver_id: str | None = None
    application_id: str | None = None
    resource_manager: str | None = None
    master_webui_port: StrictInt | None = None
    local_dir: str | None = None
    kubernetes_conn_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (XCom, the active record)."""
        data: dict[str, Any] = _JOB_HANDLE.dump_python(self, mode="json")
        return data

    @classmethod
    def from_dict(cls, data: Any) -> JobHandle:
        """Rebuild a handle from XCom or the active record; raise ConfigError naming what is wrong.

        :param data: the handle's JSON form (or a handle, returned as is).
        """
        if isinstance(data, JobHandle):
            return data
        if not isinstance(data, dict):
            raise ConfigError(f"a job handle must be a mapping (the submit operator's XCom), got {data!r}")
        missing = sorted(name for name in _REQUIRED if name not in data)
        if missing:
            raise ConfigError(f"job handle {data!r} lacks {missing}; pass the submit operator's return value")
        if data["deploy_mode"] not in DEPLOY_MODES:
            raise ConfigError(
                f"job handle has deploy_mode {data['deploy_mode']!r}; expected one of {DEPLOY_MODES}"
            )
        try:
            return _JOB_HANDLE.validate_python(data)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']} (got {e.get('input')!r})"
                for e in err.errors()
            )
            raise ConfigError(
                f"job handle {data!r} is malformed: {problems}; pass the submit operator's return value"
            ) from None

    @property
    def process(self) -> ManagedProcess:
        """The detached spark-submit process (local and client mode), known on the host that started it."""
        folder = self.local_dir or self.run_dir
        if is_remote(folder):
            raise ConfigError(
                f"job handle of pair {self.pair!r} ({self.deploy_mode}) names no local folder for its "
                f"process and its run folder {self.run_dir} is on a store; pass the handle the submit "
                "operator returned"
            )
        return ManagedProcess(PROCESS_NAME, Path(folder))

    @property
    def log_file(self) -> Path:
        return self.process.log_file

    def status(self) -> dict[str, Any]:
        """What the job last wrote about itself (``{"state": "running", ...}``)."""
        return read_status(self.run_dir)

    @property
    def manager(self) -> ManagerName:
        """The cluster manager that runs the driver (from the deploy mode and the master)."""
        if self.deploy_mode == DeployMode.CLUSTER:
            if is_kubernetes_master(self.master):
                return ManagerName.KUBERNETES
            if is_yarn_master(self.master):
                return ManagerName.YARN
            return ManagerName.STANDALONE  # a driver id spark-submit --kill takes
        if is_standalone_master(self.master):
            return ManagerName.STANDALONE
        return ManagerName.LOCAL

    @property
    def runs_on_kubernetes(self) -> bool:
        """The driver is a pod on Kubernetes (cluster deploy mode on a ``k8s://`` master)."""
        return self.deploy_mode == DeployMode.CLUSTER and is_kubernetes_master(self.master)

    def driver_pod(self) -> DriverPodRef:
        """The driver pod of a Kubernetes handle.

        :raises ConfigError: the handle names no pod in the form ``<namespace>:<pod>``.
        """
        return DriverPodRef.parse(self.driver_id)

    def check_cluster_manager(self) -> None:
        """Refuse a handle whose ids belong to another cluster manager than its master's.

        :raises ConfigError: a Kubernetes driver pod on a YARN master, a YARN application id on a Kubernetes
            or standalone master, a cluster-mode handle on YARN without an application id, or one on
            Kubernetes without a driver pod ``<namespace>:<pod>``.
        """
        master = self.master.strip().lower()
        if is_yarn_master(master):
            if self.driver_id:
                raise ConfigError(
                    f"job handle of pair {self.pair!r} names driver {self.driver_id!r} (a Kubernetes pod or "
                    f"a standalone driver) but its master is YARN ({self.master!r}); YARN knows the job by "
                    "its application id: pass the handle the submit operator returned"
                )
            if self.deploy_mode == DeployMode.CLUSTER and not self.application_id:
                raise ConfigError(
                    f"job handle of pair {self.pair!r} runs in cluster mode on YARN but names no application "
                    "id; pass the handle the submit operator returned"
                )
        elif self.application_id and APPLICATION_ID.fullmatch(self.application_id):
            raise ConfigError(
                f"job handle of pair {self.pair!r} names YARN application {self.application_id!r} but its "
                f"master is {self.master!r}, not YARN; pass the handle the submit operator returned"
            )
        if self.runs_on_kubernetes:
            if not self.driver_id:
                raise ConfigError(
                    f"job handle of pair {self.pair!r} runs in cluster mode on Kubernetes ({self.master!r}) "
                    "but names no driver pod; pass the handle the submit operator returned"
                )
            self.driver_pod()

    def describe(self) -> str:
        """A short sentence naming the job and where it runs (never raises, asks nothing remote)."""
        if self.deploy_mode == DeployMode.CLUSTER:
            where = self.driver_id or self.application_id
        else:
            pid = self.process.pid()
            where = f"pid {pid}" if pid is not None else "not running"
            if is_standalone_master(self.master):
                try:
                    reported = self.application_id or self.status().get("application_id")
                except Exception:  # a description must not fail on an unreadable run folder
                    reported = None
                where += f", Spark application {reported or '(not reported yet)'}"
        return (
            f"job of pair {self.pair!r} on {self.cluster} at epoch {self.epoch} ({self.deploy_mode}, {where})"
        )


_JOB_HANDLE = TypeAdapter(JobHandle)

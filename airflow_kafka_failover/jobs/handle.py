"""The job handle: what the submit operator returns to XCom, and what stop and progress checks need.

A handle is a typed model (a pydantic dataclass) whose JSON form travels through XCom and the active
record; it holds no secret: the settings file it points to does, and stays on disk with owner-only
permissions.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import StrictInt, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from airflow_kafka_failover.exceptions import ConfigError
from airflow_kafka_failover.jobs.layout import PROCESS_NAME, read_status
from airflow_kafka_failover.jobs.yarn_applications import (
    ResourceManagerClient,
    find_resource_manager,
    is_yarn_master,
)
from airflow_kafka_failover.process_group import ManagedProcess


class DeployMode(StrEnum):
    """Where the driver runs: see :class:`JobHandle`'s ``deploy_mode``."""

    LOCAL = "local"
    CLIENT = "client"
    CLUSTER = "cluster"


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
    :param run_dir: folder of the settings, status, stop request and (local/client) the log.
    :param checkpoint: the run's checkpoint directory.
    :param sink_root: the run's sink root.
    :param spark_conn_id: the ``spark`` connection it was submitted through.
    :param submitted_at: ISO 8601 time of submission.
    :param driver_id: standalone driver id or Kubernetes ``namespace:pod`` (cluster mode).
    :param application_id: YARN application id (cluster mode), or Spark's id once the job reported it.
    :param resource_manager: the YARN ResourceManager's web address recorded at submission (YARN only).
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
        """The detached spark-submit process (local and client mode)."""
        return ManagedProcess(PROCESS_NAME, Path(self.run_dir))

    @property
    def log_file(self) -> Path:
        return self.process.log_file

    def status(self) -> dict[str, Any]:
        """What the job last wrote about itself (``{"state": "running", ...}``)."""
        return read_status(self.run_dir)

    def is_alive(self) -> bool | None:
        """True/False for a detached process or a YARN application (asked of the ResourceManager, which
        raises ``ResourceManagerUnreachable`` rather than guess); None for other cluster-mode drivers."""
        if self.deploy_mode == DeployMode.CLUSTER:
            if is_yarn_master(self.master) and self.application_id:
                return ResourceManagerClient(find_resource_manager(self.resource_manager)).is_alive(
                    self.application_id
                )
            return None
        return self.process.is_running()

    def log_tail(self, lines: int = 40) -> str:
        if self.deploy_mode == DeployMode.CLUSTER:
            where = self.driver_id or self.application_id
            return f"(the driver runs on the cluster as {where}; see its logs there)"
        return self.process.log_tail(lines)

    def describe(self) -> str:
        if self.deploy_mode == DeployMode.CLUSTER:
            where = self.driver_id or self.application_id
        else:
            pid = self.process.pid()
            where = f"pid {pid}" if pid is not None else "not running"
        return (
            f"job of pair {self.pair!r} on {self.cluster} at epoch {self.epoch} ({self.deploy_mode}, {where})"
        )


_JOB_HANDLE = TypeAdapter(JobHandle)

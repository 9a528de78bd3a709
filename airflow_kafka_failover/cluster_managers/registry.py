"""The cluster manager of each job handle, and the questions every caller asks of a job through it.

Callers keep one :class:`ClusterManagers` for as long as they watch (the keeper's trigger holds one across
its looks, so that a Kubernetes client is built once); :func:`job_alive` and :func:`job_log_tail` ask once.
"""

from __future__ import annotations

import logging
from functools import cached_property

from airflow_kafka_failover.cluster_managers.handle import JobHandle, ManagerName
from airflow_kafka_failover.cluster_managers.kubernetes import Kubernetes
from airflow_kafka_failover.cluster_managers.kubernetes_pods import DriverStateUnknown
from airflow_kafka_failover.cluster_managers.local import LocalDriver
from airflow_kafka_failover.cluster_managers.manager import ClusterManager
from airflow_kafka_failover.cluster_managers.standalone import Standalone
from airflow_kafka_failover.cluster_managers.yarn import Yarn

log = logging.getLogger(__name__)


class ClusterManagers:
    """One instance of each cluster manager, picked by the handle (:attr:`JobHandle.manager`)."""

    local = LocalDriver()
    standalone = Standalone()
    yarn = Yarn()

    @cached_property
    def kubernetes(self) -> Kubernetes:
        """The Kubernetes manager, with its clients (built on first use)."""
        return Kubernetes()

    def of(self, handle: JobHandle) -> ClusterManager:
        """The manager that runs ``handle``'s driver."""
        name = handle.manager
        if name == ManagerName.KUBERNETES:
            return self.kubernetes
        if name == ManagerName.YARN:
            return self.yarn
        return self.standalone if name == ManagerName.STANDALONE else self.local

    def alive(self, handle: JobHandle) -> bool | None:
        """Whether the job runs (see :meth:`ClusterManager.alive`: raises when it cannot be told)."""
        return self.of(handle).alive(handle)

    def alive_or_unknown(self, handle: JobHandle) -> bool | None:
        """:meth:`alive`, with None (logged) while the manager cannot tell: for callers that wait anyway and
        let their own deadline decide. A pod or application the manager does not know still raises."""
        try:
            return self.alive(handle)
        except (DriverStateUnknown, ConnectionError) as exc:
            log.warning("cannot tell whether %s runs: %s", handle.describe(), exc)
            return None

    def log_tail(self, handle: JobHandle, lines: int = 40) -> str:
        """The driver's last log lines, or where they are (never raises)."""
        return self.of(handle).log_tail(handle, lines)


def job_alive(handle: JobHandle) -> bool | None:
    """:meth:`ClusterManagers.alive` of one handle, asked once."""
    return ClusterManagers().alive(handle)


def job_log_tail(handle: JobHandle, lines: int = 40) -> str:
    """:meth:`ClusterManagers.log_tail` of one handle, asked once."""
    return ClusterManagers().log_tail(handle, lines)

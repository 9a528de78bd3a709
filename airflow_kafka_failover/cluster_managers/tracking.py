"""Whether a job runs, asked where each deploy mode can answer: the one entry point of the Airflow side.

:meth:`JobHandle.is_alive <airflow_kafka_failover.cluster_managers.handle.JobHandle.is_alive>` answers for a detached
process (local, client), a standalone master (its ``/json/``) and YARN (the ResourceManager's REST API),
with the standard library only, because ``jobs/`` runs on the Spark driver and imports no Airflow. A
Kubernetes driver is a pod, and the Spark provider tracks pods through the cncf-kubernetes provider and the
``kubernetes`` client (its ``track_driver_via_k8s_api``), which need Airflow. Two designs were possible:

- a standard-library REST client in ``jobs/`` (as for YARN): but then the provider would read kubeconfig
  files, exec credential plugins, in-cluster service-account tokens and client certificates itself, with
  the bugs that brings, and not use the Spark provider's tracking stack at all;
- the Kubernetes check on the Airflow side, through the cncf-kubernetes provider's public
  ``KubernetesHook`` (an Airflow connection: kubeconfig, in-cluster, context, namespace; request
  timeouts), the same client and calls the Spark provider's tracking makes (``read_namespaced_pod``,
  ``delete_namespaced_pod``).

The second is what is built: :class:`JobTracker` answers for every handle, asking the API server for a
Kubernetes driver (``cluster_managers/kubernetes.py``) and the handle for the rest, and every Airflow-side
caller (the keeper's trigger and operator, the start DAG, the interrupted-switch healing, the progress
sensor, the submit and stop of ``StreamingJobHook``, the status view) asks through it. On the driver side,
``JobHandle.is_alive`` of a Kubernetes handle raises :class:`~airflow_kafka_failover.cluster_managers.kubernetes_pods.
DriverStateUnknown` pointing here, so a caller that forgot this module waits rather than guesses.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.kubernetes_pods import (
    DEFAULT_KUBERNETES_CONN_ID,
    DriverPodReport,
    DriverStateUnknown,
    UnknownDriverPod,
)

if TYPE_CHECKING:
    from airflow_kafka_failover.cluster_managers.kubernetes import DriverPodClient

log = logging.getLogger(__name__)


class JobTracker:
    """Asks about jobs; keeps one Kubernetes client per connection for its life (a keeper's trigger holds
    one across its looks)."""

    def __init__(self) -> None:
        self._clients: dict[str, DriverPodClient] = {}

    def pods(self, handle: JobHandle) -> DriverPodClient:
        """The driver-pod client of a Kubernetes handle's connection."""
        from airflow_kafka_failover.cluster_managers.kubernetes import DriverPodClient

        conn_id = handle.kubernetes_conn_id or DEFAULT_KUBERNETES_CONN_ID
        if conn_id not in self._clients:
            self._clients[conn_id] = DriverPodClient(conn_id)
        return self._clients[conn_id]

    def driver_pod(self, handle: JobHandle) -> DriverPodReport:
        """What the API server says about a Kubernetes handle's driver pod.

        :raises UnknownDriverPod: no such pod; :raises KubernetesApiUnreachable: no answer;
        :raises DriverStateUnknown: its node does not report; :raises ConfigError: a handle that is not a
            Kubernetes driver's, a namespace the connection refuses.
        """
        handle.check_cluster_manager()
        return self.pods(handle).read(handle.driver_pod())

    def alive(self, handle: JobHandle) -> bool | None:
        """Whether the job runs: True, False, or None where nothing can tell (a cluster-mode handle on a
        master that is neither YARN nor Kubernetes).

        A Kubernetes driver pod is alive while ``Pending`` or ``Running`` (even while being deleted), dead
        once ``Succeeded`` or ``Failed``. A pod the API server does not have is dead only when the run
        folder says the provider deleted it itself (a forced stop); otherwise it raises, as do an API
        server that does not answer, a pod whose node does not report, and a connection that may not read
        it: never taken for a dead job, so that nothing submits a second driver of the same epoch.
        """
        if handle.runs_on_kubernetes:
            try:
                return self.driver_pod(handle).alive
            except UnknownDriverPod:
                if deleted_by_us(handle):
                    return False
                raise
        return handle.is_alive()

    def alive_or_unknown(self, handle: JobHandle) -> bool | None:
        """:meth:`alive`, with None (logged) while the cluster manager cannot tell: for callers that wait
        anyway and let their own deadline decide. A pod or application it does not know still raises."""
        try:
            return self.alive(handle)
        except (DriverStateUnknown, ConnectionError) as exc:
            log.warning("cannot tell whether %s runs: %s", handle.describe(), exc)
            return None

    def log_tail(self, handle: JobHandle, lines: int = 40) -> str:
        """The job's last log lines: its log file, or its driver pod's log on Kubernetes (never raises)."""
        if handle.runs_on_kubernetes:
            try:
                return self.pods(handle).log_tail(handle.driver_pod(), lines)
            except Exception as exc:  # the log is information
                return f"(no log of {handle.describe()}: {exc})"
        return handle.log_tail(lines)


def deleted_by_us(handle: JobHandle) -> bool:
    """The run folder's ``status.json`` says the provider deleted this handle's driver pod (a forced stop,
    or a start-up that timed out)."""
    try:
        status = handle.status()
    except Exception:  # an unreadable run folder proves nothing
        return False
    return status.get("state") == "killed" and f"deleted driver pod {handle.driver_id} " in str(
        status.get("reason") or ""
    )


def job_alive(handle: JobHandle) -> bool | None:
    """:meth:`JobTracker.alive` of one handle (a new client per call: for one-off questions)."""
    return JobTracker().alive(handle)


def job_log_tail(handle: JobHandle, lines: int = 40) -> str:
    """:meth:`JobTracker.log_tail` of one handle."""
    return JobTracker().log_tail(handle, lines)

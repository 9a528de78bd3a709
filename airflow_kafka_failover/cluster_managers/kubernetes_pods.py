"""A Spark driver pod on Kubernetes as the provider names and reads it: pure, no Airflow, no client.

In cluster deploy mode on a ``k8s://`` master the driver is a pod. The provider names each submission's
pod itself (``spark.kubernetes.driver.pod.name``, :func:`driver_pod_name`) and labels it with the run it
belongs to (``spark.kubernetes.driver.label.akf-run``, :func:`run_label`), so that the pod is known before
spark-submit returns and a live driver of a run can be found again without any file. The job handle keeps
it as ``<namespace>:<pod>`` (:class:`DriverPodRef`), the form spark-submit prints as the submission id.

What the pod's ``status`` says (:func:`parse_pod`) follows the Spark provider's own reading of it
(``SparkSubmitHook._poll_k8s_driver_via_api``): ``Pending`` and ``Running`` are alive, ``Succeeded`` and
``Failed`` ended, ``Unknown`` (its node does not report) cannot be told. The Kubernetes API itself is asked
on the Airflow side (``cluster_managers/kubernetes.py``, through the cncf-kubernetes provider), since this
package runs on the driver and imports no Airflow.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError

KUBERNETES_CONN_EXTRA = "kubernetes_conn_id"
"""The ``spark`` connection's extra key naming the ``kubernetes`` connection the provider reads pods with."""
DEFAULT_KUBERNETES_CONN_ID = "kubernetes_default"
"""Without that extra: the cncf-kubernetes provider's default connection (when it does not exist, the
in-cluster service account, else the default kubeconfig: what spark-submit itself uses)."""
DEFAULT_NAMESPACE = "default"
"""Spark's ``spark.kubernetes.namespace`` when neither the connection nor the conf names one."""
RUN_LABEL = "akf-run"
"""The driver pod's label naming its run (pair, cluster, epoch)."""
DRIVER_CONTAINER = "spark-kubernetes-driver"
"""The driver container's name in Spark's driver pods."""
POD_NAME_CONF = "spark.kubernetes.driver.pod.name"
NAMESPACE_CONF = "spark.kubernetes.namespace"

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_MAX_POD_NAME = 63  # Spark also names the driver's service and host after it; keep it a DNS label


class DriverStateUnknown(FailoverError):
    """Whether the driver pod runs cannot be told now (never taken as dead)."""


class KubernetesApiUnreachable(DriverStateUnknown, ConnectionError):
    """The Kubernetes API server did not answer, or answered with a server error."""


class UnknownDriverPod(FailoverError, LookupError):
    """The Kubernetes API server has no such pod in the namespace."""


class PodPhase(StrEnum):
    """``status.phase`` of a pod."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    @property
    def alive(self) -> bool:
        return self in (PodPhase.PENDING, PodPhase.RUNNING)

    @property
    def ended(self) -> bool:
        return self in (PodPhase.SUCCEEDED, PodPhase.FAILED)


def is_kubernetes_master(master: str) -> bool:
    """Say whether a Spark master URL is a Kubernetes API server's (``k8s://...``)."""
    return master.strip().lower().startswith("k8s://")


def api_server_of(master: str) -> str:
    """The API server a ``k8s://`` master names, as a URL (``k8s://host:443`` is ``https://host:443``)."""
    rest = master.strip()[len("k8s://") :]
    return (rest if "://" in rest else f"https://{rest}").rstrip("/")


@dataclass(frozen=True)
class DriverPodRef:
    """A driver pod: its namespace and name (``<namespace>:<pod>`` in the job handle)."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}:{self.name}"

    @classmethod
    def parse(cls, driver_id: Any) -> DriverPodRef:
        """Read ``<namespace>:<pod>``.

        :param driver_id: the handle's ``driver_id``.
        :raises ConfigError: anything else (a standalone driver id, a bare pod name, names Kubernetes
            refuses).
        """
        namespace, sep, name = str(driver_id or "").partition(":")
        if not (sep and _DNS_LABEL.fullmatch(namespace) and _DNS_SUBDOMAIN.fullmatch(name)):
            raise ConfigError(
                f"driver {driver_id!r} is not a Kubernetes driver pod '<namespace>:<pod>' (lower-case DNS "
                "names, as spark-submit prints the submission id); pass the handle the submit operator "
                "returned"
            )
        return cls(namespace, name)


def check_namespace(namespace: Any, where: str) -> str:
    """Return ``namespace`` if Kubernetes accepts it as a namespace name (a DNS label).

    :param namespace: the value.
    :param where: what set it, for the message.
    :raises ConfigError: another value.
    """
    if not isinstance(namespace, str) or not _DNS_LABEL.fullmatch(namespace):
        raise ConfigError(
            f"Kubernetes namespace {namespace!r} ({where}) is not a valid namespace name (lower-case "
            "letters, digits and '-', at most 63)"
        )
    return namespace


def run_label(pair: str, cluster: str, epoch: int) -> str:
    """The ``akf-run`` label value of the run (pair, cluster, epoch): a digest, always a valid label."""
    return hashlib.sha256(f"{pair}\0{cluster}\0{epoch}".encode()).hexdigest()[:20]


def driver_pod_name(pair: str, cluster: str, epoch: int, token: str | None = None) -> str:
    """A new driver pod name for one submission of the run: readable, unique, a DNS label.

    :param token: the unique part (random by default).
    """
    token = token or uuid.uuid4().hex[:8]
    suffix = f"-e{epoch}-{token}-driver"
    stem = re.sub(r"[^a-z0-9]+", "-", f"akf-{pair}-{cluster}".lower()).strip("-")
    return stem[: _MAX_POD_NAME - len(suffix)].rstrip("-") + suffix


@dataclass(frozen=True)
class DriverPodReport:
    """What the API server says about one driver pod.

    :param ref: the pod.
    :param phase: its phase.
    :param reason: the pod's ``status.reason`` (``Evicted``, ...), may be empty.
    :param message: the pod's ``status.message``, may be empty.
    :param details: the driver container's state and a scheduling problem, in words, may be empty.
    :param deleting: the pod has a ``deletionTimestamp`` (it is being deleted but may still run).
    :param labels: its labels.
    """

    ref: DriverPodRef
    phase: PodPhase
    reason: str = ""
    message: str = ""
    details: str = ""
    deleting: bool = False
    labels: Mapping[str, str] | None = None

    @property
    def alive(self) -> bool:
        """``Pending`` or ``Running`` (a pod being deleted runs until it is gone)."""
        return self.phase.alive

    def describe(self) -> str:
        """``Failed (Evicted: The node was low on resource: memory; container ... exit code 137)``."""
        parts = [": ".join(p for p in (self.reason, self.message) if p), self.details]
        if self.deleting:
            parts.append("being deleted")
        said = "; ".join(p for p in parts if p)
        return f"{self.phase.value} ({said})" if said else self.phase.value


def parse_pod(ref: DriverPodRef, payload: Any) -> DriverPodReport:
    """Read a pod object (``GET /api/v1/namespaces/{ns}/pods/{name}``, as JSON).

    :param ref: the pod asked about (for messages).
    :param payload: the decoded body.
    :raises DriverStateUnknown: the body is not a pod, or its phase is ``Unknown`` or missing.
    """
    status = payload.get("status") if isinstance(payload, Mapping) else None
    metadata = payload.get("metadata") if isinstance(payload, Mapping) else None
    if not isinstance(status, Mapping) or not isinstance(metadata, Mapping):
        raise DriverStateUnknown(
            f"the Kubernetes API's answer for pod {ref} is not a pod: {str(payload)[:300]}"
        )
    try:
        phase = PodPhase(status.get("phase") or "Pending")  # a pod not yet scheduled may have none
    except ValueError:
        raise DriverStateUnknown(
            f"driver pod {ref} is in phase {status.get('phase')!r}, not one of {[p.value for p in PodPhase]}"
        ) from None
    report = DriverPodReport(
        ref=ref,
        phase=phase,
        reason=str(status.get("reason") or ""),
        message=str(status.get("message") or ""),
        details=_details(status),
        deleting=bool(metadata.get("deletionTimestamp")),
        labels=dict(metadata.get("labels") or {}),
    )
    if phase == PodPhase.UNKNOWN:
        raise DriverStateUnknown(
            f"driver pod {ref} is {report.describe()}: its node does not report (the kubelet is "
            "unreachable), so whether the driver runs cannot be told"
        )
    return report


def _details(status: Mapping[str, Any]) -> str:
    said = []
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            said.append(f"not scheduled: {condition.get('reason') or ''}: {condition.get('message') or ''}")
    containers = list(status.get("containerStatuses") or [])
    driver = next((c for c in containers if c.get("name") == DRIVER_CONTAINER), None)
    driver = driver or (containers[0] if containers else None)
    if driver:
        state = driver.get("state") or {}
        name = driver.get("name") or DRIVER_CONTAINER
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting:
            said.append(f"container {name} waiting: {_words(waiting.get('reason'), waiting.get('message'))}")
        elif terminated:
            said.append(
                f"container {name} terminated with exit code {terminated.get('exitCode')}: "
                + _words(terminated.get("reason"), terminated.get("message"))
            )
        if driver.get("restartCount"):
            said.append(f"{driver['restartCount']} container restarts")
    return "; ".join(said)


def _words(reason: Any, message: Any) -> str:
    return ": ".join(str(p) for p in (reason, message) if p) or "no reason given"

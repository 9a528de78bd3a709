"""A Spark driver pod through the Kubernetes API: read, find a run's live driver, delete, read its log.

The Spark provider's own Kubernetes tracking (``SparkSubmitHook(track_driver_via_k8s_api=True)``) is a
blocking loop inside a task that runs the driver to its end (``_poll_k8s_driver_via_api``, private, at least
20 s between two looks). What it stands on is public: the cncf-kubernetes provider and the ``kubernetes``
client, reading the driver pod's phase with ``read_namespaced_pod`` and killing it with
``delete_namespaced_pod``. This client makes the same calls through that provider's public
``KubernetesHook``, so the API server, credentials and namespace come from an Airflow ``kubernetes``
connection (the ``spark`` connection's extra ``kubernetes_conn_id``, default ``kubernetes_default``; when
that does not exist, the hook uses the in-cluster service account, else the default kubeconfig, as
spark-submit itself does), and every request has a timeout.

Errors are named, never guessed: an API server that does not answer (or answers 5xx, 429) raises
:class:`~airflow_kafka_failover.cluster_managers.kubernetes_pods.KubernetesApiUnreachable` (the driver may still run);
a pod the server does not have raises :class:`~airflow_kafka_failover.cluster_managers.kubernetes_pods.UnknownDriverPod`
(naming the namespace and the server, since a wrong namespace or cluster looks the same); 401 and 403 are a
``ConfigError`` naming the connection and the namespace. The cncf-kubernetes provider is an optional
dependency (extra ``kubernetes``): without it, only a Kubernetes master fails, with the extra to install.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from functools import cached_property
from typing import Any

from airflow_kafka_failover.cluster_managers.kubernetes_pods import (
    RUN_LABEL,
    DriverPodRef,
    DriverPodReport,
    KubernetesApiUnreachable,
    UnknownDriverPod,
    parse_pod,
)
from airflow_kafka_failover.core.exceptions import ConfigError

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "Kubernetes masters need the cncf-kubernetes provider: pip install 'airflow-kafka-failover[kubernetes]' "
    "(apache-airflow-providers-cncf-kubernetes)"
)
REQUEST_TIMEOUT = (5.0, 15.0)
"""(connect, read) seconds allowed for one request to the API server."""
_BUILDING = threading.Lock()
"""``KubernetesHook`` loads a kubeconfig into the ``kubernetes`` client's process-wide default configuration,
then copies that default into the new client: two clients built at the same moment in one process (the
triggerer looks at several pairs in threads) could, in principle, swap servers. Built one at a time, each
copies its own. (Not reproduced in a test: the window is a few bytecodes wide.)"""


def kubernetes_hook_class() -> Any:
    """The cncf-kubernetes provider's ``KubernetesHook``.

    :raises ConfigError: the provider is not installed (naming the extra to install).
    """
    try:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
    except ImportError as exc:
        raise ConfigError(f"{INSTALL_HINT} ({exc})") from None
    return KubernetesHook


class DriverPodClient:
    """Driver pods through one ``kubernetes`` connection.

    :param kubernetes_conn_id: the Airflow ``kubernetes`` connection.
    """

    def __init__(self, kubernetes_conn_id: str) -> None:
        self.kubernetes_conn_id = kubernetes_conn_id

    @cached_property
    def hook(self) -> Any:
        return kubernetes_hook_class()(conn_id=self.kubernetes_conn_id)

    @cached_property
    def core(self) -> Any:
        """The ``CoreV1Api`` of the hook (built once; a connection that cannot build one is a ConfigError)."""
        try:
            with _BUILDING:
                return self.hook.core_v1_client
        except Exception as exc:  # the kubeconfig or in-cluster files: the connection is misconfigured
            raise ConfigError(
                f"kubernetes connection {self.kubernetes_conn_id!r} gives no Kubernetes client "
                f"({type(exc).__name__}: {exc}); set its kube_config_path, kube_config or in_cluster, or "
                "name another connection in the spark connection's extra 'kubernetes_conn_id'"
            ) from None

    @property
    def api_server(self) -> str:
        """The API server the connection talks to (for messages)."""
        try:
            return str(self.core.api_client.configuration.host)
        except ConfigError:
            return "(no client)"

    def connection_namespace(self) -> str | None:
        """The namespace the ``kubernetes`` connection names (None: it names none)."""
        namespace = self.hook.get_namespace()
        return str(namespace) if namespace else None

    # ---- reading -------------------------------------------------------------------------------------

    def read(self, ref: DriverPodRef) -> DriverPodReport:
        """The driver pod's phase and why.

        :raises UnknownDriverPod: the API server has no such pod in that namespace.
        :raises KubernetesApiUnreachable: no answer, or a server error.
        :raises DriverStateUnknown: the pod's node does not report (phase ``Unknown``).
        :raises ConfigError: the connection may not read it (401, 403).
        """
        response = self._call(f"read driver pod {ref}", ref, "read_namespaced_pod", ref.name, ref.namespace)
        return parse_pod(ref, _json(response))

    def run_drivers(self, namespace: str, label: str) -> list[DriverPodReport]:
        """The driver pods labelled ``akf-run=<label>`` in ``namespace`` (any phase but ``Unknown``).

        :raises KubernetesApiUnreachable: no answer, or a server error.
        :raises DriverStateUnknown: one of them is in phase ``Unknown``.
        :raises ConfigError: the connection may not list pods there.
        """
        where = DriverPodRef(namespace, f"(pods labelled {RUN_LABEL}={label})")
        response = self._call(
            f"list the driver pods labelled {RUN_LABEL}={label} in namespace {namespace!r}",
            where,
            "list_namespaced_pod",
            namespace,
            label_selector=f"{RUN_LABEL}={label},spark-role=driver",
        )
        items = _json(response).get("items") or []
        return [
            parse_pod(DriverPodRef(namespace, str(item.get("metadata", {}).get("name"))), item)
            for item in items
        ]

    def log_tail(self, ref: DriverPodRef, lines: int = 40) -> str:
        """The last ``lines`` of the driver container's log, or why there is none (never raises)."""
        try:
            response = self.core.read_namespaced_pod_log(
                ref.name,
                ref.namespace,
                tail_lines=lines,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
            text = response.data.decode(errors="replace").rstrip()
        except Exception as exc:  # the log is information; its absence is said, not raised
            return f"(no log of driver pod {ref}: {_short(exc)})"
        return text or f"(driver pod {ref} logged nothing)"

    # ---- deleting ------------------------------------------------------------------------------------

    def delete(self, ref: DriverPodRef) -> bool:
        """Delete the driver pod (Kubernetes stops its containers with the pod's grace period).

        :return: False when it was already gone.
        :raises KubernetesApiUnreachable: no answer, or a server error.
        :raises ConfigError: the connection may not delete it.
        """
        try:
            self._call(f"delete driver pod {ref}", ref, "delete_namespaced_pod", ref.name, ref.namespace)
        except UnknownDriverPod:
            return False
        return True

    def wait_gone(self, ref: DriverPodRef, seconds: float) -> DriverPodReport | None:
        """Wait until the pod is gone or ended; return its last report (None: gone).

        :raises KubernetesApiUnreachable: it still ran after ``seconds``, or the server stopped answering.
        """
        deadline = time.monotonic() + seconds
        while True:
            try:
                report = self.read(ref)
            except UnknownDriverPod:
                return None
            if report.phase.ended:
                return report
            if time.monotonic() > deadline:
                raise KubernetesApiUnreachable(
                    f"driver pod {ref} is still {report.describe()} {seconds:.0f} s after the Kubernetes API "
                    f"at {self.api_server} accepted its deletion; check it there"
                )
            time.sleep(1)

    # ---- errors --------------------------------------------------------------------------------------

    def _call(self, what: str, ref: DriverPodRef, method: str, *args: Any, **kwargs: Any) -> Any:
        """``CoreV1Api.<method>(*args, **kwargs)`` with a timeout, the raw response, and named errors."""
        call = getattr(self.core, method)  # no provider, or no client from the connection: a ConfigError here
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return call(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except ApiException as exc:
            raise self._api_error(what, ref, exc) from None
        except (HTTPError, OSError) as exc:
            raise KubernetesApiUnreachable(
                f"cannot {what}: the Kubernetes API at {self.api_server} (connection "
                f"{self.kubernetes_conn_id!r}) does not answer ({_short(exc)}); whether the driver runs is "
                "unknown, and it may still run"
            ) from None

    def _api_error(self, what: str, ref: DriverPodRef, exc: Any) -> Exception:
        said = _status_message(exc)
        where = f"the Kubernetes API at {self.api_server} (connection {self.kubernetes_conn_id!r})"
        if exc.status == 404:
            return UnknownDriverPod(
                f"cannot {what}: {where} has no pod {ref.name!r} in namespace {ref.namespace!r} ({said}). "
                "It was deleted (kubectl delete, a node drain), or the handle names another namespace or "
                "cluster than the driver runs in; whether the driver runs is not guessed"
            )
        if exc.status in (401, 403):
            namespace = self._namespace_said()
            return ConfigError(
                f"cannot {what}: {where} refuses it with HTTP {exc.status} ({said}); give the connection "
                f"the right to get, list and delete pods in namespace {ref.namespace!r}"
                + (
                    f" (the connection names namespace {namespace!r}: the spark connection submits to "
                    f"{ref.namespace!r})"
                    if namespace and namespace != ref.namespace
                    else ""
                )
            )
        return KubernetesApiUnreachable(
            f"cannot {what}: {where} answered HTTP {exc.status} ({said}); whether the driver runs is "
            "unknown, and it may still run"
        )

    def _namespace_said(self) -> str | None:
        try:
            return self.connection_namespace()
        except Exception:  # only for a message
            return None


def _json(response: Any) -> dict[str, Any]:
    try:
        data = json.loads(response.data)
    except (AttributeError, ValueError) as exc:
        raise KubernetesApiUnreachable(f"the Kubernetes API did not answer JSON ({_short(exc)})") from None
    return data if isinstance(data, dict) else {}


def _status_message(exc: Any) -> str:
    """The ``message`` of the API's ``Status`` body, else the HTTP reason."""
    try:
        body = json.loads(exc.body or b"{}")
        message = body.get("message") if isinstance(body, dict) else None
    except (TypeError, ValueError):
        message = None
    return str(message or exc.reason or f"HTTP {exc.status}")


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__

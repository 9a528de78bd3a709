"""Kubernetes, the cluster manager of a driver pod: submit, adopt, wait, watch and stop it through the API.

**Submission.** ``StreamingJobHook`` submits through the Spark provider's ``SparkSubmitHook`` with
``track_driver_via_k8s_api=True`` (its public switch for releasing spark-submit once the driver pod exists
and not asking spark-submit for an exit code the driver has not produced yet); :class:`Kubernetes` adds two
settings: ``spark.kubernetes.driver.pod.name``, a new name per submission (``driver_pod_name`` of
``kubernetes_pods.py``), so that the pod is known before spark-submit returns (Spark 4.0 prints it only as
``submission ID <namespace>:<pod>``, which the Spark provider 6.3's parser reads only in a namespace called
``spark``), and ``spark.kubernetes.driver.label.akf-run`` (``run_label``), so that a retried submit, the
keeper and the start DAG find a live driver of the run through the API server, without any shared file.
Then it waits until the pod is ``Running``, adopts a live driver instead of submitting twice, and deletes
the pod when a stop request is not obeyed.

**The client.**

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
``KubernetesApiUnreachable`` (the driver may still run); a pod the server does not have raises
``UnknownDriverPod`` (naming the namespace and the server, since a wrong namespace or cluster looks the
same); 401 and 403 are a ``ConfigError`` naming the connection and the namespace. The cncf-kubernetes
provider is an optional dependency (extra ``kubernetes``): without it, only a Kubernetes master fails, with
the extra to install.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from functools import cached_property
from typing import Any

from airflow_kafka_failover.cluster_managers.handle import JobHandle, ManagerName
from airflow_kafka_failover.cluster_managers.kubernetes_pods import (
    DEFAULT_KUBERNETES_CONN_ID,
    DEFAULT_NAMESPACE,
    POD_NAME_CONF,
    RUN_LABEL,
    DriverPodRef,
    DriverPodReport,
    DriverStateUnknown,
    KubernetesApiUnreachable,
    PodPhase,
    UnknownDriverPod,
    api_server_of,
    check_namespace,
    driver_pod_name,
    parse_pod,
    run_label,
)
from airflow_kafka_failover.cluster_managers.manager import (
    JobStartError,
    Launch,
    Submission,
    record_kill,
    record_submission,
    recorded_submission,
    stopped_on_request,
)
from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError
from airflow_kafka_failover.run_format.layout import RunLayout

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


GONE_WAIT_S = 60.0
"""How long a deleted driver pod may take to go (its grace period is 30 s by default)."""


def submission_conf(handle: JobHandle) -> dict[str, str]:
    """The Spark settings that name the run's new driver pod and label it with the run."""
    ref = handle.driver_pod()
    return {
        POD_NAME_CONF: ref.name,
        f"spark.kubernetes.driver.label.{RUN_LABEL}": run_label(handle.pair, handle.cluster, handle.epoch),
    }


def prepare(
    client: DriverPodClient, handle: JobHandle, namespace: str | None, conf: dict[str, Any]
) -> JobHandle:
    """The handle of a new submission (its driver pod and connection), after the checks that need no pod.

    :param handle: the handle so far (master, run).
    :param namespace: the namespace the Spark provider submits to (None: Spark's ``default``).
    :param client: the pod client of the ``kubernetes`` connection pods are read with.
    :param conf: the job's Spark settings.
    :raises ConfigError: the cncf-kubernetes provider is missing, the connection gives no client, the
        conf names the driver pod itself, or the namespaces of the two connections differ.
    """
    where = "the spark connection's extra 'namespace' or spark.kubernetes.namespace"
    namespace = check_namespace(namespace or DEFAULT_NAMESPACE, where)
    if POD_NAME_CONF in conf:
        raise ConfigError(
            f"spark_conf sets {POD_NAME_CONF}={conf[POD_NAME_CONF]!r}: the provider names each driver pod "
            "itself (one per submission, so that a restart never collides with the pod of a run that "
            "ended); remove it"
        )
    kubernetes_conn_id = client.kubernetes_conn_id
    client.core  # noqa: B018 - a connection that gives no client fails the submit here, before spark-submit
    said = client.connection_namespace()
    if said and said != namespace:
        raise ConfigError(
            f"namespace mismatch: the spark connection submits the driver to namespace {namespace!r} "
            f"({where}) but kubernetes connection {kubernetes_conn_id!r} is for namespace {said!r}; set the "
            "same namespace in both, or name another kubernetes connection in the spark connection's extra "
            "'kubernetes_conn_id'"
        )
    server, ours = api_server_of(handle.master), client.api_server
    if server.rstrip("/") != ours.rstrip("/"):
        log.warning(
            "the spark master %s submits to the API server %s, and kubernetes connection %r reads pods from "
            "%s: if these are not the same cluster, the driver cannot be tracked (it is then reported as an "
            "unknown pod, never as dead)",
            handle.master,
            server,
            kubernetes_conn_id,
            ours,
        )
    pod = driver_pod_name(handle.pair, handle.cluster, handle.epoch)
    return JobHandle(
        **{
            **handle.to_dict(),
            "driver_id": str(DriverPodRef(namespace, pod)),
            "kubernetes_conn_id": kubernetes_conn_id,
        }
    )


def live_driver(client: DriverPodClient, handle: JobHandle, recorded: JobHandle | None) -> JobHandle | None:
    """The handle of the run's live driver pod (None: none runs, submit one).

    Asks the API server for the pods labelled with the run in the submission's namespace. A recorded
    handle of the run (``cluster_handle.json``) in another namespace is asked too.

    :raises JobStartError: two live drivers, a driver being deleted, a live driver in another namespace
        than the submission's, or an API server that does not answer: nothing may be submitted.
    :raises ConfigError: the API server refuses the connection (401, 403).
    """
    ref = handle.driver_pod()
    try:
        pods = client.run_drivers(ref.namespace, run_label(handle.pair, handle.cluster, handle.epoch))
        elsewhere = _live_elsewhere(client, ref.namespace, recorded)
    except DriverStateUnknown as exc:  # a connection the API server refuses stays a ConfigError
        raise JobStartError(
            f"cannot tell whether a driver of {_run(handle)} already runs: {exc}. Nothing was "
            f"submitted, so that two drivers of epoch {handle.epoch} never run; retry once the Kubernetes "
            "API answers"
        ) from None
    if elsewhere is not None:
        raise JobStartError(
            f"namespace mismatch: driver pod {elsewhere.ref} of this run is {elsewhere.describe()} in "
            f"namespace {elsewhere.ref.namespace!r}, and the spark connection now submits to "
            f"{ref.namespace!r}; nothing was submitted. Stop that driver (or set the namespace back), then "
            "submit again"
        )
    live = [pod for pod in pods if pod.alive]
    if len(live) > 1:
        raise JobStartError(
            f"{len(live)} driver pods of {_run(handle)} run: "
            f"{', '.join(f'{p.ref} ({p.describe()})' for p in live)}; nothing was submitted. Delete all but "
            "one (kubectl delete pod), then submit again"
        )
    if not live:
        return None
    pod = live[0]
    if pod.deleting:
        raise JobStartError(
            f"driver pod {pod.ref} of {_run(handle)} is being deleted ({pod.describe()}); nothing was "
            "submitted: retry once it is gone"
        )
    if recorded is not None and recorded.driver_id == str(pod.ref):
        return recorded
    return JobHandle(**{**handle.to_dict(), "driver_id": str(pod.ref)})


def _run(handle: JobHandle) -> str:
    return f"the run of pair {handle.pair!r} on {handle.cluster} at epoch {handle.epoch}"


def _live_elsewhere(
    client: DriverPodClient, namespace: str, recorded: JobHandle | None
) -> DriverPodReport | None:
    if recorded is None or not recorded.runs_on_kubernetes:
        return None
    ref = recorded.driver_pod()
    if ref.namespace == namespace:
        return None
    try:
        report = client.read(ref)
    except UnknownDriverPod:
        return None
    return report if report.alive else None


def wait_running(client: DriverPodClient, handle: JobHandle, timeout: float) -> None:
    """Wait until the driver pod is ``Running``.

    :raises JobStartError: the pod ended (its reason, message, container state and log tail), was
        deleted, or was not running after ``timeout`` (it is then deleted).
    """
    ref = handle.driver_pod()
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while True:
        try:
            report = client.read(ref)
        except UnknownDriverPod as exc:
            raise JobStartError(
                f"{exc}. spark-submit created it for {handle.describe()} moments ago: if the spark master "
                f"{handle.master} and kubernetes connection {client.kubernetes_conn_id!r} are not the same "
                "cluster, the driver may run there untracked: check it"
            ) from None
        except DriverStateUnknown as exc:  # passing: the deadline decides
            last = str(exc)
        else:
            last = report.describe()
            if report.phase == PodPhase.RUNNING:
                log.info("%s is running (driver pod %s)", handle.describe(), ref)
                return
            if report.phase.ended:
                raise JobStartError(
                    f"driver pod {ref} ({handle.describe()}) ended during start-up: {report.describe()}\n"
                    f"--- log tail ---\n{client.log_tail(ref)}"
                )
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    how = _delete_and_wait(client, ref)
    raise JobStartError(
        f"driver pod {ref} ({handle.describe()}) was not Running within {timeout:.0f} s (last: {last}); "
        f"{how}. Check the cluster's free capacity and the image, or raise startup_timeout_seconds"
    )


def _delete_and_wait(client: DriverPodClient, ref: DriverPodRef) -> str:
    try:
        client.delete(ref)
        client.wait_gone(ref, GONE_WAIT_S)
    except (DriverStateUnknown, ConfigError) as exc:
        return f"it could not be deleted: {exc}"
    return f"it was deleted through the Kubernetes API at {client.api_server}"


def stop_driver(client: DriverPodClient, handle: JobHandle, timeout: float) -> str:
    """Stop the run's driver pod: nothing when it ended or is gone, else the stop request, then delete it.

    :param timeout: seconds the stop request is given before the pod is deleted.
    :return: ``not-running``, ``stopped`` or ``forced``.
    :raises FailoverError: the pod could not be deleted.
    """
    ref = handle.driver_pod()
    try:
        report: DriverPodReport | None = client.read(ref)
    except UnknownDriverPod as exc:
        log.warning("%s; nothing to stop", exc)
        return "not-running"
    except DriverStateUnknown as exc:
        log.warning("%s; stopping it anyway", exc)
        report = None
    if report is not None and report.phase.ended:
        log.info(
            "%s is not running (driver pod %s is %s); nothing to stop",
            handle.describe(),
            ref,
            report.describe(),
        )
        return "not-running"
    if stopped_on_request(handle, timeout, lambda: _ended_or_gone(client, ref)):
        return "stopped"
    log.info(
        "deleting driver pod %s of %s through the Kubernetes API at %s",
        ref,
        handle.describe(),
        client.api_server,
    )
    try:
        client.delete(ref)
        last = client.wait_gone(ref, GONE_WAIT_S)
    except (DriverStateUnknown, ConfigError) as exc:
        raise FailoverError(f"could not kill {handle.describe()}: {exc}") from None
    said = "it is gone" if last is None else f"it is {last.describe()}"
    record_kill(
        handle, f"deleted driver pod {ref} through the Kubernetes API at {client.api_server} ({said})"
    )
    return "forced"


def _ended_or_gone(client: DriverPodClient, ref: DriverPodRef) -> bool | None:
    try:
        return client.read(ref).phase.ended
    except UnknownDriverPod:
        return True
    except DriverStateUnknown as exc:
        log.warning("%s", exc)
        return None


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


class Kubernetes:
    """The cluster manager of a driver pod (see the module); keeps one pod client per ``kubernetes``
    connection for its life (a keeper's trigger holds one across its looks)."""

    name = ManagerName.KUBERNETES

    def __init__(self) -> None:
        self._clients: dict[str, DriverPodClient] = {}

    def pods(self, handle: JobHandle) -> DriverPodClient:
        """The pod client of a handle's ``kubernetes`` connection."""
        return self._client(handle.kubernetes_conn_id or DEFAULT_KUBERNETES_CONN_ID)

    def _client(self, conn_id: str) -> DriverPodClient:
        if conn_id not in self._clients:
            self._clients[conn_id] = DriverPodClient(conn_id)
        return self._clients[conn_id]

    def prepared(self, handle: JobHandle, submission: Submission) -> JobHandle:
        client = self._client(submission.kubernetes_conn_id)
        return prepare(client, handle, submission.kubernetes_namespace, submission.spark_conf)

    def submission_conf(self, handle: JobHandle) -> dict[str, str]:
        return {"spark.kubernetes.submission.waitAppCompletion": "false", **submission_conf(handle)}

    def live_run(self, handle: JobHandle, layout: RunLayout) -> JobHandle | None:
        return live_driver(self.pods(handle), handle, recorded_submission(layout))

    def start(self, handle: JobHandle, launch: Launch) -> JobHandle:
        # The pod is named before spark-submit runs: a task killed meanwhile (on_kill) deletes it.
        record_submission(launch.layout, handle)
        launch.submit_to_cluster()
        log.info("submitted %s", handle.describe())
        return handle

    def wait_running(self, handle: JobHandle, timeout: float) -> JobHandle:
        wait_running(self.pods(handle), handle, timeout)
        return handle

    def report(self, handle: JobHandle) -> DriverPodReport:
        """What the API server says about the handle's driver pod.

        :raises UnknownDriverPod: no such pod; :raises KubernetesApiUnreachable: no answer;
        :raises DriverStateUnknown: its node does not report; :raises ConfigError: a handle that is not a
            Kubernetes driver's, a namespace the connection refuses.
        """
        handle.check_cluster_manager()
        return self.pods(handle).read(handle.driver_pod())

    def alive(self, handle: JobHandle) -> bool | None:
        """``Pending`` and ``Running`` are alive (even while being deleted), ``Succeeded`` and ``Failed``
        dead. A pod the API server does not have is dead only when the run folder says the provider deleted
        it itself (a forced stop); otherwise it raises, as do an API server that does not answer, a pod whose
        node does not report, and a connection that may not read it."""
        try:
            return self.report(handle).alive
        except UnknownDriverPod:
            if deleted_by_us(handle):
                return False
            raise

    def stop(self, handle: JobHandle, timeout: float, at_once: bool = False) -> str:
        handle.check_cluster_manager()
        return stop_driver(self.pods(handle), handle, timeout)

    def log_tail(self, handle: JobHandle, lines: int = 40) -> str:
        try:
            return self.pods(handle).log_tail(handle.driver_pod(), lines)
        except Exception as exc:  # the log is information
            return f"(no log of {handle.describe()}: {exc})"

"""One run's driver pod on Kubernetes: how it is submitted, adopted, waited for and stopped.

``StreamingJobHook`` submits through the Spark provider's ``SparkSubmitHook`` with
``track_driver_via_k8s_api=True`` (its public switch for releasing spark-submit once the driver pod exists
and not asking spark-submit for an exit code the driver has not produced yet), and adds two settings:

- ``spark.kubernetes.driver.pod.name``: a new name per submission (:func:`~airflow_kafka_failover.jobs.
  kubernetes_pods.driver_pod_name`), so that the pod is known before spark-submit returns. The handle does
  not depend on parsing spark-submit's output: Spark 4.0 prints the pod only as ``submission ID
  <namespace>:<pod>``, which the Spark provider 6.3's parser reads only in a namespace called ``spark``.
- ``spark.kubernetes.driver.label.akf-run``: the run's label (:func:`~airflow_kafka_failover.jobs.
  kubernetes_pods.run_label`), so that a retried submit, the keeper and the start DAG find a live driver of
  the run through the API server, without any shared file.

Then :func:`wait_running` waits until the pod is ``Running``, :func:`live_driver` adopts instead of
submitting twice, and :func:`stop_driver` deletes the pod when the stop request was not obeyed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.kubernetes import DriverPodClient
from airflow_kafka_failover.cluster_managers.kubernetes_pods import (
    DEFAULT_NAMESPACE,
    POD_NAME_CONF,
    RUN_LABEL,
    DriverPodRef,
    DriverPodReport,
    DriverStateUnknown,
    PodPhase,
    UnknownDriverPod,
    api_server_of,
    check_namespace,
    driver_pod_name,
    run_label,
)
from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError

log = logging.getLogger(__name__)

GONE_WAIT_S = 60.0
"""How long a deleted driver pod may take to go (its grace period is 30 s by default)."""


class DriverStartError(FailoverError):
    """The driver pod ended, vanished or did not run during start-up (StreamingJobHook raises it as
    ``JobStartError``)."""


def submission_conf(handle: JobHandle) -> dict[str, str]:
    """The Spark settings that name the run's new driver pod and label it with the run."""
    ref = handle.driver_pod()
    return {
        POD_NAME_CONF: ref.name,
        f"spark.kubernetes.driver.label.{RUN_LABEL}": run_label(handle.pair, handle.cluster, handle.epoch),
    }


def prepare(
    handle: JobHandle, namespace: str | None, kubernetes_conn_id: str, conf: dict[str, Any]
) -> JobHandle:
    """The handle of a new submission (its driver pod and connection), after the checks that need no pod.

    :param handle: the handle so far (master, run).
    :param namespace: the namespace the Spark provider submits to (None: Spark's ``default``).
    :param kubernetes_conn_id: the ``kubernetes`` connection to read pods with.
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
    client = DriverPodClient(kubernetes_conn_id)
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

    :raises DriverStartError: two live drivers, a driver being deleted, a live driver in another namespace
        than the submission's, or an API server that does not answer: nothing may be submitted.
    :raises ConfigError: the API server refuses the connection (401, 403).
    """
    ref = handle.driver_pod()
    try:
        pods = client.run_drivers(ref.namespace, run_label(handle.pair, handle.cluster, handle.epoch))
        elsewhere = _live_elsewhere(client, ref.namespace, recorded)
    except DriverStateUnknown as exc:  # a connection the API server refuses stays a ConfigError
        raise DriverStartError(
            f"cannot tell whether a driver of {_run(handle)} already runs: {exc}. Nothing was "
            f"submitted, so that two drivers of epoch {handle.epoch} never run; retry once the Kubernetes "
            "API answers"
        ) from None
    if elsewhere is not None:
        raise DriverStartError(
            f"namespace mismatch: driver pod {elsewhere.ref} of this run is {elsewhere.describe()} in "
            f"namespace {elsewhere.ref.namespace!r}, and the spark connection now submits to "
            f"{ref.namespace!r}; nothing was submitted. Stop that driver (or set the namespace back), then "
            "submit again"
        )
    live = [pod for pod in pods if pod.alive]
    if len(live) > 1:
        raise DriverStartError(
            f"{len(live)} driver pods of {_run(handle)} run: "
            f"{', '.join(f'{p.ref} ({p.describe()})' for p in live)}; nothing was submitted. Delete all but "
            "one (kubectl delete pod), then submit again"
        )
    if not live:
        return None
    pod = live[0]
    if pod.deleting:
        raise DriverStartError(
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

    :raises DriverStartError: the pod ended (its reason, message, container state and log tail), was
        deleted, or was not running after ``timeout`` (it is then deleted).
    """
    ref = handle.driver_pod()
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while True:
        try:
            report = client.read(ref)
        except UnknownDriverPod as exc:
            raise DriverStartError(
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
                raise DriverStartError(
                    f"driver pod {ref} ({handle.describe()}) ended during start-up: {report.describe()}\n"
                    f"--- log tail ---\n{client.log_tail(ref)}"
                )
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    how = _delete_and_wait(client, ref)
    raise DriverStartError(
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


def stop_driver(
    client: DriverPodClient,
    handle: JobHandle,
    stopped_on_request: Callable[[Callable[[], bool]], bool],
    record_kill: Callable[[str], None],
) -> str:
    """Stop the run's driver pod: nothing when it ended or is gone, else the stop request, then delete it.

    :param stopped_on_request: writes the stop request and waits, given a check that the pod ended.
    :param record_kill: records the kill in the run folder.
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
    if stopped_on_request(lambda: _ended_or_gone(client, ref)):
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
    record_kill(f"deleted driver pod {ref} through the Kubernetes API at {client.api_server} ({said})")
    return "forced"


def _ended_or_gone(client: DriverPodClient, ref: DriverPodRef) -> bool:
    try:
        return client.read(ref).phase.ended
    except UnknownDriverPod:
        return True
    except DriverStateUnknown as exc:
        log.warning("%s", exc)
        return False

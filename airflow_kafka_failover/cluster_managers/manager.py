"""What the provider asks of a cluster manager, and what every manager does the same way.

One class per manager implements :class:`ClusterManager` (``local.py``, ``standalone.py``, ``yarn.py``,
``kubernetes.py``); :class:`~airflow_kafka_failover.cluster_managers.registry.ClusterManagers` picks the one a
handle names. Every caller asks only through it: the submit and stop of ``StreamingJobHook``, the keeper,
the start DAG's adoption, the interrupted-switch healing, the progress sensor and the status view.

**Unknown is never dead.** A manager that cannot tell whether a driver runs (its ResourceManager, master or
API server does not answer, or does not know the id) raises instead of answering False, so that nothing
submits a second driver of one epoch; a caller that waits anyway uses ``alive_or_unknown``.

**Stop on request, then kill.** Every stop first writes the run's stop request (the job finishes its batch
and stops, ``run_format/layout.py``) and waits; a driver that did not stop within the timeout is killed the
manager's way, and the kill is recorded in the run's ``status.json`` (``killed``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_kafka_failover.cluster_managers.handle import JobHandle, ManagerName
from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import StoreUnavailable, read_json, replace_json
from airflow_kafka_failover.run_format.layout import RunLayout, mark_killed, request_stop

log = logging.getLogger(__name__)

STOPPED_STATES = ("stopped", "fenced", "failed")
"""What a job writes in ``status.json`` when it ended on its own (a stop request, the fence, an error)."""


class JobStartError(FailoverError):
    """The job died or did not report running during start-up, or whether one runs cannot be told."""


@dataclass(frozen=True)
class Submission:
    """What a manager needs to know of one submission before spark-submit runs.

    :param spark_conf: the job's Spark settings (``--conf``).
    :param kubernetes_namespace: the namespace the Spark provider submits to (Kubernetes; None: Spark's).
    :param kubernetes_conn_id: the ``kubernetes`` connection driver pods are read and deleted through.
    :param resource_manager: YARN's ResourceManager web address from the ``spark`` connection (None: from
        ``yarn-site.xml``).
    :param master_webui_port: the standalone master's web UI port from the ``spark`` connection (None: 8080).
    """

    spark_conf: dict[str, Any] = field(default_factory=dict)
    kubernetes_namespace: str | None = None
    kubernetes_conn_id: str = "kubernetes_default"
    resource_manager: str | None = None
    master_webui_port: int | None = None


@dataclass(frozen=True)
class Launch:
    """How one run is started, built by the submitting hook.

    :param command: spark-submit's command line (run detached in local and client mode).
    :param env: the job's whole environment.
    :param submit_to_cluster: runs spark-submit in cluster mode (detached: it returns once the cluster
        accepted the application) and returns the driver id and the application id it printed (each None
        when it printed none).
    :param layout: the run's folders.
    """

    command: list[str]
    env: dict[str, str]
    submit_to_cluster: Callable[[], tuple[str | None, str | None]]
    layout: RunLayout


CLUSTER_HANDLE_FILE = "cluster_handle.json"
"""In the run folder: the handle of the run's newest cluster-mode submission (a retried submit adopts it, a
stop kills what it names)."""


def recorded_submission(layout: RunLayout) -> JobHandle | None:
    """The handle of the run's newest cluster-mode submission (``cluster_handle.json``); None when none.

    :raises JobStartError: the file cannot be read (whether that application runs cannot be told).
    """
    where = locations.join(layout.run_dir, CLUSTER_HANDLE_FILE)
    try:
        return JobHandle.from_dict(read_json(where))
    except FileNotFoundError:
        return None
    except StoreUnavailable:
        raise
    except (OSError, ValueError, ConfigError) as exc:
        raise JobStartError(
            f"cannot read {where}, the handle of the run's last cluster-mode submission ({exc}); check on "
            "the cluster whether that application still runs, then remove the file"
        ) from None


def record_submission(layout: RunLayout, handle: JobHandle) -> None:
    """Keep ``handle`` as the run's newest cluster-mode submission (``cluster_handle.json``)."""
    replace_json(locations.join(layout.run_dir, CLUSTER_HANDLE_FILE), handle.to_dict())


class ClusterManager(Protocol):
    """One cluster manager: how a run of the job is started, adopted, watched and stopped there."""

    name: ManagerName

    def prepared(self, handle: JobHandle, submission: Submission) -> JobHandle:
        """The handle of a new submission with what the manager records before spark-submit runs (the
        driver pod's name, the ResourceManager's or the master's address); checks that need no driver.

        :raises ConfigError: the submission cannot work on this manager (a namespace mismatch, ...).
        """
        ...

    def submission_conf(self, handle: JobHandle) -> dict[str, str]:
        """Spark settings the manager adds to the submission (a detached submit, the driver pod's name)."""
        ...

    def live_run(self, handle: JobHandle, layout: RunLayout) -> JobHandle | None:
        """The handle of a live driver of ``handle``'s run (pair, cluster, epoch) to adopt; None: none runs.

        :raises JobStartError: whether one runs cannot be told (nothing may be submitted then).
        """
        ...

    def start(self, handle: JobHandle, launch: Launch) -> JobHandle:
        """Start the run; return its handle with the ids the manager knows it by."""
        ...

    def wait_running(self, handle: JobHandle, timeout: float) -> JobHandle:
        """Wait until the run runs; return its handle (with ids reported meanwhile).

        :raises JobStartError: it ended during start-up, or did not run within ``timeout`` (then stopped).
        """
        ...

    def alive(self, handle: JobHandle) -> bool | None:
        """Whether the run's driver runs: True, False, or None where nothing can tell (never False then).

        :raises ConnectionError | LookupError | FailoverError: the manager cannot tell (see the module).
        """
        ...

    def stop(self, handle: JobHandle, timeout: float, at_once: bool = False) -> str:
        """Stop request, wait up to ``timeout``, then kill; ``not-running``, ``stopped`` or ``forced``.

        ``at_once``: the kill gives the driver no grace (a local process group gets SIGKILL, not SIGTERM).
        """
        ...

    def log_tail(self, handle: JobHandle, lines: int = 40) -> str:
        """The driver's last log lines, or where they are (never raises)."""
        ...


def stopped_on_request(
    handle: JobHandle,
    timeout: float,
    ended: Callable[[], bool | None],
    interval: float = 1.0,
    trust_status: bool = True,
) -> bool:
    """Write the stop request and wait up to ``timeout`` for the job to end on it (``ended()``: the manager's
    word, or, while the manager cannot tell, its ``status.json``); False when it did not (the caller kills
    it).

    :param handle: the run.
    :param timeout: seconds to wait.
    :param ended: the manager's own check that the driver ended: True, False (it still runs: the job's
        ``stopped`` is not enough, its driver may still be ending, or hang there), or None (the manager
        cannot tell now).
    :param interval: seconds between two looks.
    :param trust_status: whether the job's own last word counts while ``ended()`` cannot tell (a driver on
        a cluster may never be seen ending otherwise); False: only ``ended()`` does (a local process,
        whose end is seen at once).
    """
    try:
        request = request_stop(handle.run_dir)
    except OSError as exc:
        log.warning("cannot write the stop request of %s (%s); killing it", handle.run_dir, exc)
        return False
    log.info(
        "asked %s to finish its batch and stop (waiting up to %.0f s; a driver that does not see %s is then "
        "killed)",
        handle.describe(),
        timeout,
        request,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = ended()
        if seen or (seen is None and trust_status and handle.status().get("state") in STOPPED_STATES):
            log.info("%s stopped on request: %s", handle.describe(), handle.status().get("reason"))
            return True
        time.sleep(interval)
    log.warning("%s did not stop within %.0f s of the stop request; killing it", handle.describe(), timeout)
    return False


def record_kill(handle: JobHandle, how: str) -> None:
    """Record in the run's ``status.json`` that the job was killed through its cluster manager, and ``how``
    (a killed job cannot say so itself)."""
    try:
        mark_killed(handle.run_dir, f"killed through the cluster manager: {how}")
    except OSError as exc:  # the run folder may be out of reach, which is why the kill went this way
        log.info("could not record the kill in %s: %s", handle.run_dir, exc)

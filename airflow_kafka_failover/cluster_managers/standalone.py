"""A Spark standalone master: the client-mode driver process and the master's view of its application.

A Python driver on a standalone master runs in client mode, next to Airflow (:class:`Standalone` is the
local manager's process plus the master's word); its pid says whether it runs only on the host that started
it. The master knows the application by Spark's id (``app-...``, which the
job writes in ``status.json`` as ``application_id``), and lists it under ``activeapps`` (``WAITING``,
``RUNNING``) or ``completedapps`` (``FINISHED``, ``FAILED``, ``KILLED``). Standard library only, so the job
handle (which imports no Airflow) can ask it itself.

Where the master's web UI is: the hosts of the master URL (``spark://h1:7077,h2:7077`` names two), each at
the port of the ``spark`` connection's extra ``standalone_master_webui_port`` (default 8080, Spark's),
recorded in the job handle at submission. With several masters (ZooKeeper recovery) the one whose status is
``ALIVE`` answers; a standby lists no applications. Simple (unauthenticated) HTTP only.

A master that does not answer raises :class:`StandaloneMasterUnreachable`: the application may still run,
so it is never reported dead. A cluster-mode driver (a JVM application's: Python drivers cannot run so on a
standalone master) is known by its driver id, and killed with ``spark-submit --kill``.
"""

from __future__ import annotations

import json
import logging
import subprocess
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from airflow_kafka_failover.cluster_managers.handle import JobHandle, ManagerName, is_standalone_master
from airflow_kafka_failover.cluster_managers.local import LocalDriver, job_environment
from airflow_kafka_failover.cluster_managers.manager import (
    JobStartError,
    Submission,
    record_kill,
    stopped_on_request,
)
from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError
from airflow_kafka_failover.run_format.layout import RunLayout
from airflow_kafka_failover.run_format.options import DeployMode

log = logging.getLogger(__name__)

MASTER_WEBUI_PORT_EXTRA = "standalone_master_webui_port"
"""The ``spark`` connection's extra key naming the standalone master's web UI port."""
DEFAULT_MASTER_WEBUI_PORT = 8080
ACTIVE_STATES = ("WAITING", "RUNNING")
"""``ApplicationState`` values of an application that still runs (or waits for executors)."""
ENDED_STATES = ("FINISHED", "FAILED", "KILLED")


class StandaloneMasterUnreachable(FailoverError, ConnectionError):
    """No standalone master answered (or none is the alive one): the application's state is unknown."""


@dataclass(frozen=True)
class StandaloneApplication:
    """What the master says about one application.

    :param application_id: Spark's id (``app-<date>-<number>``).
    :param name: the application's name (``spark.app.name``).
    :param state: ``WAITING``, ``RUNNING``, ``FINISHED``, ``FAILED``, ``KILLED`` or ``UNKNOWN``.
    """

    application_id: str
    name: str
    state: str

    @property
    def alive(self) -> bool:
        """True while the master lists the application as active (``WAITING`` or ``RUNNING``)."""
        return self.state in ACTIVE_STATES


def check_webui_port(port: Any) -> int:
    """Return the port as an int if it is one (1-65535).

    :param port: the connection extra's value (an int, or a string of digits).
    :raises ConfigError: anything else.
    """
    text = str(port).strip()
    if isinstance(port, bool) or not text.isdigit() or not 0 < int(text) < 65536:
        raise ConfigError(
            f"the spark connection's extra {MASTER_WEBUI_PORT_EXTRA!r} is {port!r}; give the standalone "
            f"master's web UI port (1-65535, Spark's default {DEFAULT_MASTER_WEBUI_PORT})"
        )
    return int(text)


def master_webui_urls(master: str, port: int) -> list[str]:
    """The web UI address of each master a ``spark://`` URL names.

    :param master: ``spark://host:port`` or ``spark://h1:port1,h2:port2``.
    :param port: the masters' web UI port.
    :raises ConfigError: not a standalone master URL, or one without a host.
    """
    if not is_standalone_master(master):
        raise ConfigError(f"{master!r} is not a Spark standalone master URL (spark://host:port)")
    urls = []
    for address in master.strip()[len("spark://") :].split(","):
        host = address.strip().rsplit(":", 1)[0] if ":" in address else address.strip()
        if not host:
            raise ConfigError(f"Spark master URL {master!r} names a master without a host")
        urls.append(f"http://{host}:{port}")
    return urls


def parse_master_state(payload: Any) -> tuple[str, dict[str, StandaloneApplication]]:
    """Read ``GET /json/``'s body: the master's status and its applications by id.

    :param payload: the decoded JSON body.
    :raises StandaloneMasterUnreachable: the body is not a standalone master's state.
    """
    if not isinstance(payload, Mapping) or "activeapps" not in payload or "completedapps" not in payload:
        raise StandaloneMasterUnreachable(
            f"the answer is not a Spark standalone master's state: {json.dumps(payload)[:300]}; check the "
            f"spark connection's {MASTER_WEBUI_PORT_EXTRA!r}"
        )
    apps: dict[str, StandaloneApplication] = {}
    # Active apps last: an id listed twice (never seen, but cheap to be sure of) counts as running.
    for entry in [*payload["completedapps"], *payload["activeapps"]]:
        if isinstance(entry, Mapping) and "id" in entry:
            app_id = str(entry["id"])
            apps[app_id] = StandaloneApplication(app_id, str(entry.get("name", "")), str(entry.get("state")))
    return str(payload.get("status", "ALIVE")), apps


@dataclass(frozen=True)
class StandaloneMasterClient:
    """The standalone masters of one master URL.

    :param master: the Spark master URL (``spark://...``).
    :param webui_port: the masters' web UI port.
    :param timeout: seconds allowed for one HTTP request.
    """

    master: str
    webui_port: int = DEFAULT_MASTER_WEBUI_PORT
    timeout: float = 5.0

    def application(self, application_id: str) -> StandaloneApplication | None:
        """The application as the alive master lists it; None when it lists no application of that id.

        :param application_id: Spark's application id.
        :raises StandaloneMasterUnreachable: no master answered as the alive one.
        """
        problems = []
        for url in master_webui_urls(self.master, self.webui_port):
            try:
                with urllib.request.urlopen(f"{url}/json/", timeout=self.timeout) as response:
                    status, apps = parse_master_state(json.loads(response.read()))
            except (OSError, ValueError, StandaloneMasterUnreachable) as exc:
                problems.append(f"{url}: {type(exc).__name__}: {exc}")
                continue
            if status != "ALIVE":
                problems.append(f"{url}: status {status}")
                continue
            return apps.get(application_id)
        raise StandaloneMasterUnreachable(
            f"no Spark standalone master of {self.master} answered as the alive one ({'; '.join(problems)}); "
            f"the state of {application_id} is unknown and it may still run: check the master and the "
            f"spark connection's {MASTER_WEBUI_PORT_EXTRA!r} (default {DEFAULT_MASTER_WEBUI_PORT})"
        )


class Standalone(LocalDriver):
    """The cluster manager of a driver on a standalone master (see the module)."""

    name = ManagerName.STANDALONE  # type: ignore[assignment]

    def prepared(self, handle: JobHandle, submission: Submission) -> JobHandle:
        port = submission.master_webui_port
        return handle if port is None else replace(handle, master_webui_port=port)

    def live_run(self, handle: JobHandle, layout: RunLayout) -> JobHandle | None:
        try:
            return handle if self.alive(handle) else None
        except (FailoverError, OSError) as exc:
            raise JobStartError(
                f"cannot tell whether {handle.describe()} still runs ({exc}); nothing was submitted, so that "
                "two drivers of one epoch never run: retry once the master answers"
            ) from exc

    def wait_running(self, handle: JobHandle, timeout: float) -> JobHandle:
        """Wait as for a local driver, then record Spark's application id the job reported (the master knows
        the application by it)."""
        handle = super().wait_running(handle, timeout)
        reported = handle.status().get("application_id")
        if not reported or handle.application_id:
            return handle
        return replace(handle, application_id=str(reported))

    def alive(self, handle: JobHandle) -> bool | None:
        """The master's word when it knows the application (a driver whose pid file names another host's
        process is alive there, and an application the master ended is dead even if a pid lives); this
        host's process while the master lists none; unknown (raises) when the master is silent and no
        process of the run lives here. A cluster-mode driver's state is not tracked: None."""
        handle.check_cluster_manager()
        if handle.deploy_mode == DeployMode.CLUSTER:
            return None
        running_here = handle.process.is_running()
        try:
            app = self.application(handle)
        except StandaloneMasterUnreachable:
            if running_here:  # the driver is this host's process: alive, whatever the master
                return True
            raise
        return running_here if app is None else app.alive

    def application(self, handle: JobHandle) -> StandaloneApplication | None:
        """The run's application as the master lists it (None: no id reported yet, or none listed).

        :raises StandaloneMasterUnreachable: no master answered.
        """
        app_id = handle.application_id or handle.status().get("application_id")
        if not app_id:
            return None
        port = handle.master_webui_port or DEFAULT_MASTER_WEBUI_PORT
        return StandaloneMasterClient(handle.master, port).application(str(app_id))

    def stop(self, handle: JobHandle, timeout: float, at_once: bool = False) -> str:
        if handle.deploy_mode != DeployMode.CLUSTER:
            return super().stop(handle, timeout, at_once)
        if stopped_on_request(handle, timeout, lambda: None):  # the driver's end is not tracked: its word
            return "stopped"
        command = ["spark-submit", "--master", handle.master, "--kill", str(handle.driver_id)]
        log.info("killing %s: %s", handle.describe(), " ".join(command))
        result = subprocess.run(
            command, capture_output=True, text=True, env=job_environment(), check=False, timeout=120
        )
        if result.returncode != 0:
            raise FailoverError(
                f"could not kill {handle.describe()}: {' '.join(command)} exited "
                f"{result.returncode}: {(result.stderr or result.stdout)[-1000:]}"
            )
        record_kill(handle, " ".join(command))
        return "forced"

    def log_tail(self, handle: JobHandle, lines: int = 40) -> str:
        if handle.deploy_mode == DeployMode.CLUSTER:
            where = handle.driver_id or handle.application_id
            return f"(the driver runs on the cluster as {where}; see its logs there)"
        return super().log_tail(handle, lines)

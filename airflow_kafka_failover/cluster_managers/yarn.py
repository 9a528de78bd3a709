"""A YARN application's state and kill, through the ResourceManager's REST API (``/ws/v1/cluster/apps``).

Airflow workers have no ``yarn`` command, and the Spark provider (6.3.x) tracks YARN applications through
this same API only inside ``SparkSubmitHook.submit()``, in private methods. This small client needs nothing
but the standard library. :class:`Yarn` is the cluster manager on top of it: a cluster-mode submit waits
until the application is ``RUNNING``, a retried submit adopts a live application of the run, a stop kills it
through the ResourceManager when the stop request is not obeyed.

Where the ResourceManager is, first found first: the ``spark`` connection's extra
``yarn_resourcemanager_webapp_address`` (the key the Spark provider reads, e.g. ``http://rm:8088`` or
``rm:8088``), recorded in the job handle at submission; else ``yarn.resourcemanager.webapp.address`` (or
``yarn.resourcemanager.hostname`` with port 8088) in ``yarn-site.xml`` of ``YARN_CONF_DIR`` or
``HADOOP_CONF_DIR``. Simple (unauthenticated) HTTP only: Kerberos (SPNEGO) is not supported.

A ResourceManager that does not answer raises :class:`ResourceManagerUnreachable`: the application may
still run, so it is never reported dead. An id the ResourceManager does not know raises
:class:`UnknownYarnApplication` (note that a ResourceManager forgets completed applications after
``yarn.resourcemanager.max-completed-applications`` and all of them on a restart without recovery).
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from airflow_kafka_failover.cluster_managers.handle import APPLICATION_ID, JobHandle, ManagerName
from airflow_kafka_failover.cluster_managers.manager import (
    CLUSTER_HANDLE_FILE,
    JobStartError,
    Launch,
    Submission,
    record_kill,
    recorded_submission,
    stopped_on_request,
)
from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.run_format.layout import RunLayout

log = logging.getLogger(__name__)

RESOURCE_MANAGER_EXTRA = "yarn_resourcemanager_webapp_address"
"""The ``spark`` connection's extra key naming the ResourceManager's web address (as the Spark provider)."""
DEFAULT_WEBAPP_PORT = 8088


class YarnApplicationState(StrEnum):
    """``app.state`` of the REST API (``org.apache.hadoop.yarn.api.records.YarnApplicationState``)."""

    NEW = "NEW"
    NEW_SAVING = "NEW_SAVING"
    SUBMITTED = "SUBMITTED"
    ACCEPTED = "ACCEPTED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"

    @property
    def is_final(self) -> bool:
        return self in (
            YarnApplicationState.FINISHED,
            YarnApplicationState.FAILED,
            YarnApplicationState.KILLED,
        )


class ResourceManagerUnreachable(FailoverError, ConnectionError):
    """The ResourceManager did not answer (or answered with an error): the application's state is unknown."""


class UnknownYarnApplication(FailoverError, LookupError):
    """The ResourceManager does not know the application id."""


@dataclass(frozen=True)
class YarnApplicationReport:
    """What the ResourceManager says about one application.

    :param application_id: the id asked about.
    :param state: its state.
    :param final_status: ``UNDEFINED`` while it runs, then ``SUCCEEDED``, ``FAILED`` or ``KILLED``.
    :param diagnostics: YARN's own explanation (why an attempt failed, who killed it), may be empty.
    """

    application_id: str
    state: YarnApplicationState
    final_status: str
    diagnostics: str

    @property
    def alive(self) -> bool:
        """True until the application reached a final state (queued and starting count as alive)."""
        return not self.state.is_final


def check_application_id(application_id: Any) -> str:
    """Return the id if it has YARN's form ``application_<cluster timestamp>_<sequence>``.

    :param application_id: the id to check.
    :raises ConfigError: anything else (e.g. Spark's own ``app-...`` or ``local-...`` id).
    """
    if not isinstance(application_id, str) or not APPLICATION_ID.fullmatch(application_id):
        raise ConfigError(
            f"{application_id!r} is not a YARN application id (expected application_<timestamp>_<number>, "
            "as spark-submit prints it in cluster deploy mode)"
        )
    return application_id


def parse_application_report(application_id: str, payload: Any) -> YarnApplicationReport:
    """Read ``GET /ws/v1/cluster/apps/{id}``'s JSON body.

    :param application_id: the id asked about (for messages).
    :param payload: the decoded JSON body.
    :raises ResourceManagerUnreachable: the body is not an application report.
    """
    app = payload.get("app") if isinstance(payload, Mapping) else None
    if not isinstance(app, Mapping) or "state" not in app:
        raise ResourceManagerUnreachable(
            f"the ResourceManager's answer for {application_id} is not an application report: "
            f"{json.dumps(payload)[:300]}; check that the address is a ResourceManager's web address"
        )
    try:
        state = YarnApplicationState(app["state"])
    except ValueError:
        raise ResourceManagerUnreachable(
            f"the ResourceManager reports {application_id} in state {app['state']!r}, which is not one of "
            f"{[s.value for s in YarnApplicationState]}"
        ) from None
    return YarnApplicationReport(
        application_id=application_id,
        state=state,
        final_status=str(app.get("finalStatus") or "UNDEFINED"),
        diagnostics=str(app.get("diagnostics") or ""),
    )


def normalize_resource_manager_url(address: str) -> str:
    """``rm:8088`` -> ``http://rm:8088``; a URL keeps its scheme; trailing slashes go.

    :param address: a host:port or an http(s) URL.
    :raises ConfigError: an empty address or another scheme.
    """
    address = address.strip()
    if not address:
        raise ConfigError("the YARN ResourceManager address is empty; give host:port or http(s)://host:port")
    url = address if "://" in address else f"http://{address}"
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"YARN ResourceManager address {address!r} must be host:port or an http(s) URL")
    return url.rstrip("/")


def resource_manager_from_hadoop_conf(env: Mapping[str, str] | None = None) -> str | None:
    """The ResourceManager's web address from ``yarn-site.xml`` in ``YARN_CONF_DIR`` or ``HADOOP_CONF_DIR``.

    :param env: the environment to read the folders from (this process's by default).
    :return: the URL, or None when neither folder holds a ``yarn-site.xml`` naming the ResourceManager.
    :raises ConfigError: a ``yarn-site.xml`` that is not valid XML.
    """
    env = os.environ if env is None else env
    for variable in ("YARN_CONF_DIR", "HADOOP_CONF_DIR"):
        folder = env.get(variable)
        if not folder:
            continue
        site = Path(folder) / "yarn-site.xml"
        if not site.is_file():
            continue
        properties = _hadoop_properties(site)
        webapp = properties.get("yarn.resourcemanager.webapp.address")
        if webapp:
            return normalize_resource_manager_url(webapp)
        host = properties.get("yarn.resourcemanager.hostname")
        if host:
            return normalize_resource_manager_url(f"{host}:{DEFAULT_WEBAPP_PORT}")
    return None


def _hadoop_properties(site: Path) -> dict[str, str]:
    try:
        root = ElementTree.parse(site).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        raise ConfigError(f"cannot read the Hadoop configuration {site}: {exc}") from None
    properties = {}
    for prop in root.iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name and value is not None:
            properties[name.strip()] = value.strip()
    return properties


def find_resource_manager(recorded: str | None, env: Mapping[str, str] | None = None) -> str:
    """The ResourceManager to ask: the recorded address (the connection's extra), else the Hadoop config.

    :param recorded: an address recorded at submission (the job handle's ``resource_manager``), or None.
    :param env: the environment holding ``YARN_CONF_DIR`` / ``HADOOP_CONF_DIR`` (this process's by default).
    :raises ConfigError: neither names a ResourceManager.
    """
    if recorded:
        return normalize_resource_manager_url(recorded)
    found = resource_manager_from_hadoop_conf(env)
    if found is None:
        raise ConfigError(
            "cannot tell where the YARN ResourceManager is: set the spark connection's extra "
            f"{RESOURCE_MANAGER_EXTRA!r} (e.g. http://rm:8088), or YARN_CONF_DIR / HADOOP_CONF_DIR to a "
            "folder whose yarn-site.xml sets yarn.resourcemanager.webapp.address"
        )
    return found


@dataclass(frozen=True)
class ResourceManagerClient:
    """A YARN ResourceManager's application endpoints.

    :param url: its web address, e.g. ``http://rm:8088``.
    :param timeout: seconds allowed for one HTTP request.
    """

    url: str
    timeout: float = 10.0

    def application(self, application_id: str) -> YarnApplicationReport:
        """The application's report.

        :param application_id: a YARN application id.
        :raises ConfigError: a malformed id.
        :raises UnknownYarnApplication: the ResourceManager does not know it.
        :raises ResourceManagerUnreachable: the ResourceManager did not answer.
        """
        check_application_id(application_id)
        return parse_application_report(application_id, self._call("GET", application_id, ""))

    def is_alive(self, application_id: str) -> bool:
        """True while the application has not reached a final state (FINISHED, FAILED, KILLED).

        :param application_id: a YARN application id.
        """
        return self.application(application_id).alive

    def kill(self, application_id: str, wait_seconds: float = 30.0) -> YarnApplicationReport:
        """Ask the ResourceManager to kill the application and wait until it is in a final state.

        An application already in a final state is left as it is. Return its last report.

        :param application_id: a YARN application id.
        :param wait_seconds: how long to wait for the final state.
        :raises ResourceManagerUnreachable: the ResourceManager did not answer, or the application was still
            not in a final state after ``wait_seconds``.
        """
        report = self.application(application_id)
        if report.state.is_final:
            return report
        self._call("PUT", application_id, "/state", {"state": "KILLED"})
        deadline = time.monotonic() + wait_seconds
        while True:
            report = self.application(application_id)
            if report.state.is_final:
                return report
            if time.monotonic() > deadline:
                raise ResourceManagerUnreachable(
                    f"YARN application {application_id} is still {report.state} {wait_seconds:.0f} s after "
                    f"the ResourceManager at {self.url} accepted the kill; check it there"
                )
            time.sleep(0.5)

    def _call(self, method: str, application_id: str, suffix: str, body: Any = None) -> Any:
        url = f"{self.url}/ws/v1/cluster/apps/{application_id}{suffix}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")[:300]
            if exc.code == 404:
                raise UnknownYarnApplication(
                    f"the YARN ResourceManager at {self.url} does not know application {application_id} "
                    f"({text}); check the id, or whether the ResourceManager restarted or forgot it"
                ) from None
            if exc.code == 400:
                raise ConfigError(
                    f"the YARN ResourceManager at {self.url} refused application id {application_id!r}: "
                    f"{text}"
                ) from None
            raise ResourceManagerUnreachable(
                f"the YARN ResourceManager at {self.url} answered HTTP {exc.code} to {method} {url}: {text}; "
                f"the state of {application_id} is unknown"
            ) from None
        except (OSError, ValueError) as exc:
            raise ResourceManagerUnreachable(
                f"cannot reach the YARN ResourceManager at {self.url}, or it did not answer JSON "
                f"({type(exc).__name__}: {exc}); the state "
                f"of {application_id} is unknown and it may still run: check the ResourceManager and the "
                f"spark connection's {RESOURCE_MANAGER_EXTRA!r}"
            ) from None


class Yarn:
    """The cluster manager of a driver in YARN cluster mode (see the module)."""

    name = ManagerName.YARN

    def prepared(self, handle: JobHandle, submission: Submission) -> JobHandle:
        address = submission.resource_manager or resource_manager_from_hadoop_conf()
        return replace(handle, resource_manager=address)

    def submission_conf(self, handle: JobHandle) -> dict[str, str]:
        return {"spark.yarn.submit.waitAppCompletion": "false"}

    def live_run(self, handle: JobHandle, layout: RunLayout) -> JobHandle | None:
        recorded = recorded_submission(layout)
        if recorded is None or recorded.manager != ManagerName.YARN or not recorded.application_id:
            return None
        try:
            alive = self.alive(recorded)
        except UnknownYarnApplication as exc:
            recorded_file = locations.join(layout.run_dir, CLUSTER_HANDLE_FILE)
            raise JobStartError(
                f"{exc}. The run's last submission ({recorded_file}) names it; nothing was submitted: once "
                "you checked that it no longer runs, remove that file and submit again"
            ) from None
        except (ResourceManagerUnreachable, ConfigError) as exc:
            raise JobStartError(
                f"{exc}. Nothing was submitted, so that two drivers of epoch {handle.epoch} never run; retry "
                "once the ResourceManager answers"
            ) from None
        return recorded if alive else None

    def start(self, handle: JobHandle, launch: Launch) -> JobHandle:
        driver, app_id = launch.submit_to_cluster()
        if not app_id:
            raise JobStartError(
                f"spark-submit to {handle.master} returned without a YARN application id; the job's state is "
                "unknown: check the cluster before retrying"
            )
        handle = replace(handle, driver_id=driver, application_id=app_id)
        log.info("submitted %s", handle.describe())
        return handle

    def client(self, handle: JobHandle) -> ResourceManagerClient:
        """The ResourceManager the handle's application lives on."""
        return ResourceManagerClient(find_resource_manager(handle.resource_manager))

    def wait_running(self, handle: JobHandle, timeout: float) -> JobHandle:
        """Wait until the ResourceManager says ``RUNNING`` (``ACCEPTED``, waiting for a container, is not);
        an application that ends during start-up, or is not running after ``timeout`` (it is then killed),
        raises."""
        app_id = str(handle.application_id)
        client = self.client(handle)
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            try:
                report = client.application(app_id)
            except ResourceManagerUnreachable as exc:  # passing: the deadline decides
                last = str(exc)
            else:
                last = f"state {report.state}"
                if report.state == YarnApplicationState.RUNNING:
                    log.info("%s is running (YARN application %s)", handle.describe(), app_id)
                    return handle
                if report.state.is_final:
                    raise JobStartError(
                        f"YARN application {app_id} ({handle.describe()}) ended {report.state} "
                        f"({report.final_status}) during start-up: {report.diagnostics or 'no diagnostics'}; "
                        f"its driver's log is in the ResourceManager's UI at {client.url}"
                    )
            if time.monotonic() > deadline:
                break
            time.sleep(1)
        try:
            killed = client.kill(app_id)
        except ResourceManagerUnreachable as exc:
            raise JobStartError(
                f"YARN application {app_id} ({handle.describe()}) was not RUNNING within {timeout:.0f} s "
                f"({last}), and could not be killed: {exc}"
            ) from None
        raise JobStartError(
            f"YARN application {app_id} ({handle.describe()}) was not RUNNING within {timeout:.0f} s "
            f"({last}); it was killed through the ResourceManager ({killed.state}). Check the cluster's free "
            "capacity, or raise startup_timeout_seconds"
        )

    def alive(self, handle: JobHandle) -> bool | None:
        handle.check_cluster_manager()
        return self.client(handle).is_alive(str(handle.application_id))

    def _state(self, handle: JobHandle) -> YarnApplicationState | None:
        """The application's state; None when the ResourceManager does not answer."""
        try:
            return self.client(handle).application(str(handle.application_id)).state
        except ResourceManagerUnreachable as exc:
            log.warning("%s", exc)
            return None

    def stop(self, handle: JobHandle, timeout: float, at_once: bool = False) -> str:
        handle.check_cluster_manager()
        state = self._state(handle)
        if state is not None and state.is_final:
            log.info("%s is not running (YARN says %s); nothing to stop", handle.describe(), state)
            return "not-running"

        def ended() -> bool | None:
            state = self._state(handle)
            return None if state is None else state.is_final

        if stopped_on_request(handle, timeout, ended):
            return "stopped"
        client = self.client(handle)
        log.info("killing %s through the YARN ResourceManager at %s", handle.describe(), client.url)
        report = client.kill(str(handle.application_id))
        record_kill(
            handle,
            f"YARN application {handle.application_id} is {report.state} (ResourceManager {client.url})",
        )
        return "forced"

    def log_tail(self, handle: JobHandle, lines: int = 40) -> str:
        return f"(the driver runs on the cluster as {handle.application_id}; see its logs there)"

"""A Spark application's state on a standalone master, through the master's web UI JSON (``/json/``).

A Python driver on a standalone master runs in client mode, next to Airflow; its pid says whether it runs
only on the host that started it. The master knows the application by Spark's id (``app-...``, which the
job writes in ``status.json`` as ``application_id``), and lists it under ``activeapps`` (``WAITING``,
``RUNNING``) or ``completedapps`` (``FINISHED``, ``FAILED``, ``KILLED``). Standard library only, so the job
handle (which imports no Airflow) can ask it itself.

Where the master's web UI is: the hosts of the master URL (``spark://h1:7077,h2:7077`` names two), each at
the port of the ``spark`` connection's extra ``standalone_master_webui_port`` (default 8080, Spark's),
recorded in the job handle at submission. With several masters (ZooKeeper recovery) the one whose status is
``ALIVE`` answers; a standby lists no applications. Simple (unauthenticated) HTTP only.

A master that does not answer raises :class:`StandaloneMasterUnreachable`: the application may still run,
so it is never reported dead.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError

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


def is_standalone_master(master: str) -> bool:
    """Say whether a Spark master URL is a standalone master's (``spark://...``)."""
    return master.strip().lower().startswith("spark://")


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

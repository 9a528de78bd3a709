"""Counting the requests a sandbox broker answers, by client id, from Kafka's request log.

With ``Sandbox.up(request_log=True)`` the brokers log every request they complete (the logger
``kafka.request.logger`` at DEBUG, into each broker's own log): one line ``Completed request:{...}`` whose
JSON header names the request's ``clientId`` and ``requestApiKeyName``. A :class:`RequestCounter` reads what
the logs gained since its last reading, so a benchmark counts the requests of a time window. Give the
clients to count a ``client.id`` of their own (a ``kafka`` connection's extra holds it).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

REQUEST_LOGGER_LEVEL = "logger.request.level = DEBUG"
"""The line of the brokers' log4j2 configuration that turns the request log on."""
_COMPLETED = "Completed request:"
_HEADER = re.compile(r'"requestHeader":(\{[^{}]*\})')


def request_header(line: str) -> dict | None:
    """The request header of one ``Completed request`` line of a broker's log, or None for another line."""
    if _COMPLETED not in line:
        return None
    match = _HEADER.search(line)
    if match is None:
        return None
    try:
        header = json.loads(match.group(1))
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


class RequestCounter:
    """The requests the brokers of one cluster completed since the last :meth:`read`, by client id and API.

    :param log_files: the brokers' log files (those of a crashed and restarted broker are the same files).
    """

    def __init__(self, log_files: list[Path]) -> None:
        self.log_files = list(log_files)
        self.offsets = {path: 0 for path in self.log_files}

    def skip(self) -> None:
        """Forget what the logs hold so far: the next :meth:`read` counts from now."""
        for path in self.log_files:
            self.offsets[path] = path.stat().st_size if path.exists() else 0

    def read(self) -> Counter[tuple[str, str]]:
        """``(client id, request name) -> count`` of the requests logged since the last reading."""
        counts: Counter[tuple[str, str]] = Counter()
        for path in self.log_files:
            if not path.exists():
                continue
            with open(path, "rb") as log:
                log.seek(self.offsets[path])
                data = log.read()
            complete = data.rfind(b"\n") + 1  # a line still being written is read next time
            self.offsets[path] += complete
            for line in data[:complete].decode("utf-8", "replace").splitlines():
                header = request_header(line)
                if header is not None:
                    counts[(str(header.get("clientId")), str(header.get("requestApiKeyName")))] += 1
        return counts


def by_client(counts: Counter[tuple[str, str]], client_id: str) -> Counter[str]:
    """The counts of one client id, by request name."""
    return Counter({name: n for (client, name), n in counts.items() if client == client_id})

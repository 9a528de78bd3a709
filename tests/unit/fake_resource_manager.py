"""A stand-in for a YARN ResourceManager's application endpoints, on loopback, for the unit tests.

Its answers have the shape of Hadoop 3.4.1's ``RMWebServices`` (status codes and bodies as the sandbox's real
ResourceManager returned them by hand); tests/integration/test_cluster_managers.py runs the same client
against the real one.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

APP_PATH = re.compile(r"^/ws/v1/cluster/apps/([^/]+)(/state)?$")


@dataclass
class FakeResourceManager:
    """Applications by id, each a state; ``kill_takes`` GETs of KILLING... after a PUT (still RUNNING)."""

    apps: dict[str, str] = field(default_factory=dict)
    kill_takes: int = 1
    diagnostics: dict[str, str] = field(default_factory=dict)
    status_override: int | None = None
    body_override: bytes | None = None
    requests: list[tuple[str, str]] = field(default_factory=list)
    _pending_kills: dict[str, int] = field(default_factory=dict)
    url: str = ""

    def answer(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        self.requests.append((method, path))
        if self.status_override is not None or self.body_override is not None:
            return self.status_override or 200, self.body_override or b"{}"
        match = APP_PATH.match(path)
        if not match:
            return 404, b"<html>not found</html>"
        app_id, state_path = match.groups()
        if not app_id.startswith("application_"):
            return 400, _remote_exception(
                "BadRequestException",
                f"java.lang.IllegalArgumentException: Invalid ApplicationId prefix: {app_id}",
            )
        if app_id not in self.apps:
            return 404, _remote_exception(
                "NotFoundException", f"java.lang.Exception: app with id: {app_id} not found"
            )
        if method == "PUT" and state_path:
            if json.loads(body).get("state") != "KILLED":
                return 400, _remote_exception("BadRequestException", "only KILLED")
            if self.apps[app_id] in ("FINISHED", "FAILED", "KILLED"):
                return 200, json.dumps({"state": self.apps[app_id]}).encode()
            self._pending_kills[app_id] = self.kill_takes
            return 202, b'{"state":"KILLING"}'
        pending = self._pending_kills.get(app_id)
        if pending is not None:
            if pending <= 0:
                self.apps[app_id] = "KILLED"
                del self._pending_kills[app_id]
            else:
                self._pending_kills[app_id] = pending - 1
        state = self.apps[app_id]
        final = {"KILLED": "KILLED", "FAILED": "FAILED", "FINISHED": "SUCCEEDED"}.get(state, "UNDEFINED")
        report = {
            "app": {
                "id": app_id,
                "state": state,
                "finalStatus": final,
                "diagnostics": self.diagnostics.get(app_id, ""),
            }
        }
        return 200, json.dumps(report).encode()


def _remote_exception(kind: str, message: str) -> bytes:
    return json.dumps(
        {"RemoteException": {"exception": kind, "message": message, "javaClassName": f"x.{kind}"}}
    ).encode()


@contextmanager
def running(rm: FakeResourceManager) -> Iterator[FakeResourceManager]:
    """Serve ``rm`` on a free loopback port for the block; ``rm.url`` is its address."""

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            status, body = rm.answer(self.command, self.path, self.rfile.read(length) if length else b"")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = _serve
        do_PUT = _serve

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() waits for serve_forever's next poll: 0.05 s instead of the default 0.5 s per test.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    rm.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield rm
    finally:
        server.shutdown()
        server.server_close()

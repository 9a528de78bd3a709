"""A stand-in for a Spark standalone master's web UI JSON (``GET /json/``), on loopback, for the unit tests.

Its answer has the shape of Spark 4's ``JsonProtocol.writeMasterState`` (the fields the client reads, as the
sandbox's real master returned them); tests/integration/test_cluster_managers.py runs the same client against
the real one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class FakeStandaloneMaster:
    """Applications by id, each a state (active: WAITING, RUNNING; completed: FINISHED, FAILED, KILLED)."""

    apps: dict[str, str] = field(default_factory=dict)
    status: str = "ALIVE"
    body_override: bytes | None = None
    port: int = 0

    def answer(self, path: str) -> tuple[int, bytes]:
        if path.rstrip("/") != "/json":
            return 404, b"<html>not found</html>"
        if self.body_override is not None:
            return 200, self.body_override
        active = [self._app(i, s) for i, s in self.apps.items() if s in ("WAITING", "RUNNING")]
        completed = [self._app(i, s) for i, s in self.apps.items() if s not in ("WAITING", "RUNNING")]
        if self.status != "ALIVE":
            active, completed = [], []
        state = {
            "url": "spark://127.0.0.1:7077",
            "workers": [],
            "aliveworkers": 1,
            "activeapps": active,
            "completedapps": completed,
            "activedrivers": [],
            "completeddrivers": [],
            "status": self.status,
        }
        return 200, json.dumps(state).encode()

    @staticmethod
    def _app(app_id: str, state: str) -> dict[str, object]:
        return {"id": app_id, "name": f"akf-{app_id}", "state": state, "cores": 1, "user": "airflow"}


@contextmanager
def serving(master: FakeStandaloneMaster) -> Iterator[FakeStandaloneMaster]:
    """Serve ``master`` on a free loopback port for the block; ``master.port`` is its web UI port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = master.answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() waits for serve_forever's next poll: 0.05 s instead of the default 0.5 s per test.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    master.port = server.server_address[1]
    try:
        yield master
    finally:
        server.shutdown()
        server.server_close()

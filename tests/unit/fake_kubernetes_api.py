"""A stand-in for a Kubernetes API server's core/v1 endpoints, on loopback, for the tests.

It serves what Spark's submission client (fabric8, inside spark-submit) and the provider's driver-pod
client (the ``kubernetes`` package through the cncf-kubernetes provider's ``KubernetesHook``) call: create
pods, ConfigMaps and Services (``POST``; server-side apply ``PATCH``), read, list (by label selector) and
delete pods, read a pod's log. Answers have the shape of the Kubernetes API: objects with ``metadata``
(``uid``, ``resourceVersion``, ``creationTimestamp``), ``PodList``, and ``Status`` bodies for errors (``404
NotFound``, ``403 Forbidden``, ``409 AlreadyExists``, ``401 Unauthorized``).

A test moves a pod through its life with :meth:`FakeKubernetesApi.set_phase` (``Pending`` with a waiting
container, ``Running``, ``Succeeded``, ``Failed`` with a reason); a deleted pod lingers with a
``deletionTimestamp`` for ``delete_takes`` reads, then is gone (404), as a pod does during its grace period.
:class:`ApiServer` serves it, and can take it down and bring it back at the same address. No Kubernetes
can run on this machine: this is how the provider's Kubernetes tracking is tested (see docs/limits.md).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

DRIVER_CONTAINER = "spark-kubernetes-driver"
KINDS = {"pods": "Pod", "configmaps": "ConfigMap", "services": "Service", "persistentvolumeclaims": "PVC"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str, name: str = "", kind: str = "") -> dict[str, Any]:
    """A ``Status`` object, as the API server returns for errors."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if name or kind:
        body["details"] = {"name": name, "kind": kind}
    return body


def container_status(state: dict[str, Any], ready: bool = False, restarts: int = 0) -> dict[str, Any]:
    return {
        "name": DRIVER_CONTAINER,
        "image": "apache/spark:4.0.0",
        "imageID": "",
        "ready": ready,
        "restartCount": restarts,
        "started": "running" in state,
        "state": state,
    }


@dataclass
class FakeKubernetesApi:
    """Objects by (kind, namespace, name); pods carry their ``status``.

    :param namespaces: the namespaces that exist.
    :param forbidden: namespaces whose pods the caller may not touch (403, as RBAC answers).
    :param token: when set, requests without ``Authorization: Bearer <token>`` get 401.
    :param delete_takes: reads of a deleted pod that still return it (terminating) before it is gone.
    :param created_phase: the phase of a pod when it is created (``Pending``); a test moves it on.
    :param status_override: answer every request with this HTTP status (a failing API server).
    """

    namespaces: set[str] = field(default_factory=lambda: {"default", "spark-jobs"})
    forbidden: set[str] = field(default_factory=set)
    token: str | None = None
    delete_takes: int = 1
    created_phase: str = "Pending"
    status_override: int | None = None
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    logs: dict[tuple[str, str], str] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    _deleting: dict[tuple[str, str], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ---- what a test does ---------------------------------------------------------------------------------

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(("pods", namespace, name))

    def pods(self) -> list[dict[str, Any]]:
        return [obj for (kind, _, _), obj in self.objects.items() if kind == "pods"]

    def add_pod(
        self, namespace: str, name: str, phase: str = "Running", labels: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """A driver pod created outside the test's spark-submit (e.g. by an earlier attempt)."""
        pod = {"metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})}, "spec": {}}
        with self._lock:
            stored = self._store("pods", namespace, name, pod)
        self.set_phase(namespace, name, phase)
        return stored

    def set_phase(
        self,
        namespace: str,
        name: str,
        phase: str,
        reason: str | None = None,
        message: str | None = None,
        waiting: tuple[str, str] | None = None,
        terminated: tuple[int, str, str] | None = None,
        unschedulable: str | None = None,
    ) -> None:
        """Move a pod to ``phase``.

        :param waiting: ``(reason, message)`` of its container waiting (``Pending``: an image pull).
        :param terminated: ``(exit code, reason, message)`` of its container.
        :param unschedulable: the scheduler's message (``PodScheduled`` false, reason ``Unschedulable``).
        """
        with self._lock:
            pod = self.objects[("pods", namespace, name)]
            status: dict[str, Any] = {"phase": phase, "conditions": []}
            if reason:
                status["reason"] = reason
            if message:
                status["message"] = message
            if unschedulable:
                status["conditions"].append(
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": unschedulable,
                        "lastTransitionTime": _now(),
                    }
                )
            if phase == "Running":
                status["startTime"] = _now()
                status["containerStatuses"] = [container_status({"running": {"startedAt": _now()}}, True)]
            elif waiting:
                status["containerStatuses"] = [
                    container_status({"waiting": {"reason": waiting[0], "message": waiting[1]}})
                ]
            if terminated:
                code, why, text = terminated
                state = {
                    "terminated": {
                        "exitCode": code,
                        "reason": why,
                        "message": text,
                        "startedAt": _now(),
                        "finishedAt": _now(),
                    }
                }
                status["containerStatuses"] = [container_status(state)]
            pod["status"] = status

    # ---- the API ------------------------------------------------------------------------------------------

    def answer(self, method: str, path: str, headers: Any, body: bytes) -> tuple[int, dict[str, Any] | str]:
        url = urlsplit(path)
        with self._lock:
            self.requests.append((method, url.path))
        if self.status_override is not None:
            code = self.status_override
            return code, status_body(code, "InternalError", f"fake API server answers {code}")
        if self.token is not None and headers.get("Authorization") != f"Bearer {self.token}":
            return 401, status_body(401, "Unauthorized", "Unauthorized")
        parts = url.path.strip("/").split("/")
        namespace, kind, name = (parts[3:6] + ["", "", ""])[:3]
        if kind == "pods" and parts[6:] == ["log"] and namespace not in self.forbidden:
            return self._log(namespace, name, parse_qs(url.query))
        if parts[:3] != ["api", "v1", "namespaces"] or kind not in KINDS:
            return 404, status_body(
                404, "NotFound", f"the server could not find the requested resource {path}"
            )
        if namespace in self.forbidden:
            return 403, status_body(
                403,
                "Forbidden",
                f'{kind} "{name}" is forbidden: User "system:serviceaccount:airflow:airflow" cannot '
                f'{method.lower()} resource "{kind}" in API group "" in the namespace "{namespace}"',
                name,
                kind,
            )
        if namespace not in self.namespaces:
            return 404, status_body(404, "NotFound", f'namespaces "{namespace}" not found', namespace)
        with self._lock:
            return self._on(method, kind, namespace, name, parse_qs(url.query), body)

    def _on(
        self, method: str, kind: str, namespace: str, name: str, query: dict[str, list[str]], body: bytes
    ) -> tuple[int, dict[str, Any]]:
        if method == "POST" and not name:
            return self._create(kind, namespace, json.loads(body))
        if method == "PATCH" and name:  # server-side apply (fabric8 sends JSON): create or update
            return self._apply(kind, namespace, name, json.loads(body))
        if method == "GET" and not name:
            return self._list(kind, namespace, (query.get("labelSelector") or [""])[0])
        if (kind, namespace, name) not in self.objects:
            return 404, status_body(404, "NotFound", f'{kind} "{name}" not found', name, kind)
        if method == "GET":
            obj = self._read((kind, namespace, name))
            if obj is None:
                return 404, status_body(404, "NotFound", f'{kind} "{name}" not found', name, kind)
            return 200, obj
        if method == "DELETE":
            return self._delete(kind, namespace, name)
        return 405, status_body(405, "MethodNotAllowed", f"{method} is not allowed on {kind}")

    def _log(
        self, namespace: str, name: str, query: dict[str, list[str]]
    ) -> tuple[int, dict[str, Any] | str]:
        """The driver container's log (``GET .../pods/{name}/log?tailLines=n``), as text."""
        if ("pods", namespace, name) not in self.objects:
            return 404, status_body(404, "NotFound", f'pods "{name}" not found', name, "pods")
        lines = self.logs.get((namespace, name), "").splitlines()
        tail = int((query.get("tailLines") or [len(lines)])[0])
        return 200, "".join(f"{line}\n" for line in lines[-tail:] if tail)

    def _create(self, kind: str, namespace: str, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.bodies.append(obj)
        name = obj["metadata"]["name"]
        if (kind, namespace, name) in self.objects:
            return 409, status_body(409, "AlreadyExists", f'{kind} "{name}" already exists', name, kind)
        stored = self._store(kind, namespace, name, obj)
        if kind == "pods":
            stored["status"] = {"phase": self.created_phase}
        return 201, stored

    def _apply(self, kind: str, namespace: str, name: str, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.bodies.append(obj)
        existing = self.objects.get((kind, namespace, name))
        if existing is None:
            return 201, self._store(kind, namespace, name, obj)
        existing["metadata"].update(obj.get("metadata") or {})
        return 200, existing

    def _list(self, kind: str, namespace: str, selector_text: str) -> tuple[int, dict[str, Any]]:
        selector = dict(term.split("=", 1) for term in selector_text.split(",") if term)
        items = []
        for key in [k for k in self.objects if k[0] == kind and k[1] == namespace]:
            obj = self._read(key)
            labels = (obj or {}).get("metadata", {}).get("labels") or {}
            if obj is not None and all(labels.get(n) == v for n, v in selector.items()):
                items.append(obj)
        return 200, {"kind": f"{KINDS[kind]}List", "apiVersion": "v1", "metadata": {}, "items": items}

    def _delete(self, kind: str, namespace: str, name: str) -> tuple[int, dict[str, Any]]:
        obj = self.objects[(kind, namespace, name)]
        if kind != "pods" or self.delete_takes <= 0:
            del self.objects[(kind, namespace, name)]
            return 200, obj
        obj["metadata"].setdefault("deletionTimestamp", _now())
        obj["metadata"]["deletionGracePeriodSeconds"] = 30
        self._deleting.setdefault((namespace, name), self.delete_takes)
        return 200, obj

    def _read(self, key: tuple[str, str, str]) -> dict[str, Any] | None:
        """The object, after one more read of a terminating pod (gone once ``delete_takes`` reads passed)."""
        left = self._deleting.get(key[1:]) if key[0] == "pods" else None
        if left is not None:
            if left <= 0:
                del self._deleting[key[1:]]
                del self.objects[key]
                return None
            self._deleting[key[1:]] = left - 1
        return self.objects[key]

    def _store(self, kind: str, namespace: str, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        metadata = dict(obj.get("metadata") or {})
        metadata.update(
            name=name,
            namespace=namespace,
            uid=str(uuid.uuid4()),
            resourceVersion=str(len(self.requests)),
            creationTimestamp=_now(),
        )
        stored = {"kind": KINDS[kind], "apiVersion": "v1", **obj, "metadata": metadata}
        self.objects[(kind, namespace, name)] = stored
        return stored


class ApiServer:
    """Serves a :class:`FakeKubernetesApi` on a loopback port. :meth:`down` takes it off the network (new
    connections are refused, open keep-alive ones are cut) until :meth:`up` serves it again at the same
    address, as an API server that went down and came back.

    :param api: the fake to serve; its ``url`` is set to the server's address.
    """

    def __init__(self, api: FakeKubernetesApi) -> None:
        self.api = api
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()

    def up(self) -> None:
        """Serve on the port of the last :meth:`up` (a free one the first time)."""
        api, connections = self.api, self._connections

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                connections.add(self.connection)

            def finish(self) -> None:
                connections.discard(self.connection)
                try:
                    super().finish()
                except OSError:  # a connection cut by down()
                    pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, payload = api.answer(self.command, self.path, self.headers, body)
                text = isinstance(payload, str)
                data = payload.encode() if text else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if text else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], OSError):  # a cut connection is what down() does
                    super().handle_error(request, client_address)

        server = Server(("127.0.0.1", self.port), Handler)
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._server = server
        api.url = f"http://127.0.0.1:{self.port}"

    def down(self) -> None:
        """Stop listening and cut every open connection."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server = None
        for connection in list(self._connections):
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@contextmanager
def running(api: FakeKubernetesApi) -> Iterator[FakeKubernetesApi]:
    """Serve ``api`` on a free loopback port for the block; ``api.url`` is its address."""
    server = ApiServer(api)
    server.up()
    try:
        yield api
    finally:
        server.down()


def kubeconfig(
    api: FakeKubernetesApi, namespace: str | None = None, token: str | None = None
) -> dict[str, Any]:
    """A kubeconfig (as a mapping) whose current context talks to ``api``."""
    context: dict[str, Any] = {"cluster": "fake", "user": "airflow"}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": api.url}}],
        "users": [{"name": "airflow", "user": {"token": token} if token else {}}],
        "contexts": [{"name": "fake", "context": context}],
        "current-context": "fake",
    }

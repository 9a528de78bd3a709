"""Loopback networking for the sandbox: free ports, waiting for a listener, starting side by side."""

from __future__ import annotations

import os
import random
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

LOWEST_PORT = 10_000
"""The lowest port :func:`free_ports` hands out."""
PORT_RESERVATION_S = 3600.0
"""How long a port handed out by :func:`free_ports` is not handed out again by any process of this user.
Between the choice and the bind of the service it is meant for (a JVM takes seconds to start) the port
is free, and a test running beside (another pytest-xdist worker) could otherwise be handed it for its
own server: a broker then found an HTTP server on its port."""
PORT_REGISTRY_ENV = "AKF_PORT_REGISTRY"
"""Environment variable naming the folder of port reservations (default: ``akf-ports-<uid>`` in the
temporary folder); every process that shares ports with another must see the same folder."""
PORT_RELEASE_WAIT_S = 15.0
"""How long a service restarted on its ports waits for them to be free (connections of the process just
stopped can hold one for a moment)."""


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range of ports for outgoing connections (Linux: ``ip_local_port_range``)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def port_registry() -> Path:
    """The folder where :func:`free_ports` records the ports it handed out (one empty file per port)."""
    configured = os.environ.get(PORT_REGISTRY_ENV)
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"akf-ports-{os.getuid()}"


def _reserve(registry: Path, port: int) -> bool:
    """Claim ``port`` in ``registry`` for :data:`PORT_RESERVATION_S` seconds; say whether it was ours to
    claim (a claim older than that is taken over: its service has long bound the port or is gone)."""
    marker = registry / str(port)
    for _ in range(2):
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return True
        except FileExistsError:
            try:
                if time.time() - marker.stat().st_mtime < PORT_RESERVATION_S:
                    return False
                marker.unlink()
            except FileNotFoundError:
                pass  # released by someone else in between: try once more
    return False


def free_ports(count: int) -> list[int]:
    """Return ``count`` distinct TCP ports that are free on 127.0.0.1 right now, below the kernel's range of
    ports for outgoing connections: a broker, HDFS or moto restarted on its ports must not find one taken by
    a client's connection in between (a port of that range is the local end of any outgoing connection).

    All sockets are held open until every port is chosen, so the same port is never handed out twice, and
    each port is reserved for :data:`PORT_RESERVATION_S` seconds in :func:`port_registry`, so no other
    process of the user is handed it before its service binds it.

    :param count: how many ports.
    """
    low, _ = _ephemeral_range()
    candidates = list(range(LOWEST_PORT, low))
    random.SystemRandom().shuffle(candidates)  # not the shared generator, which tests may seed
    registry = port_registry()
    registry.mkdir(mode=0o700, parents=True, exist_ok=True)
    with ExitStack() as stack:
        ports: list[int] = []
        for port in candidates:
            if len(ports) == count:
                break
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            if _reserve(registry, port):
                ports.append(port)
        while len(ports) < count:  # no free port below the range (or no room below it): any free one
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


def in_parallel(calls: Iterable[Callable[[], None]]) -> None:
    """Run ``calls`` in threads of their own, wait for every one, then raise the first error (in the order
    given) in the calling thread."""
    calls = list(calls)
    if not calls:
        return
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
    for future in futures:
        future.result()


def port_in_use(port: int) -> bool:
    """Say whether something already listens on (or holds) 127.0.0.1:port.

    SO_REUSEADDR, as Kafka itself sets it, so that connections of a crashed broker still in TIME_WAIT
    do not count; a live listener on the port still does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def accepts_connections(port: int, timeout: float = 0.5) -> bool:
    """Say whether a TCP connection to 127.0.0.1:port succeeds within ``timeout`` seconds."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(predicate, timeout: float, interval: float = 0.2) -> bool:
    """Call ``predicate`` until it returns true or ``timeout`` seconds pass; return its last answer."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


class TcpProxy:
    """A TCP forwarder on loopback whose path can be cut and restored, to fake a network split.

    Cutting closes the listener and every forwarded connection, so new connections are refused and
    open ones break, while the target keeps serving everyone who reaches it directly.

    :param target_port: where connections are forwarded (on 127.0.0.1).
    :param listen_port: the proxy's own port; a free one when 0.
    """

    def __init__(self, target_port: int, listen_port: int = 0) -> None:
        self.target_port = target_port
        self.listen_port = listen_port or free_ports(1)[0]
        self._listener: socket.socket | None = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> TcpProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.listen_port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True, name="proxy-accept").start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was closed: cut or stopped
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._connections.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True, name="proxy-pump").start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.discard(sock)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def cut(self) -> None:
        """Refuse new connections and break the open ones."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            open_now = list(self._connections)
        for sock in open_now:
            self._close(sock)

    def restore(self) -> None:
        """Accept and forward connections again on the same port."""
        if self._listener is None:
            self.start()

    def stop(self) -> None:
        self.cut()

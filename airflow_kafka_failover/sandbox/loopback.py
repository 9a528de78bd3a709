"""Loopback networking for the sandbox: free ports and waiting for a listener."""

from __future__ import annotations

import socket
import time
from contextlib import ExitStack


def free_ports(count: int) -> list[int]:
    """Return ``count`` distinct TCP ports that are free on 127.0.0.1 right now.

    All sockets are held open until every port is chosen, so the same port is never handed out twice.

    :param count: how many ports.
    """
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


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

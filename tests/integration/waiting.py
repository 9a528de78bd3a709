"""Polling helper for tests that wait on asynchronous replication."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(probe: Callable[[], T], timeout: float, what: str, interval: float = 0.5) -> T:
    """Call ``probe`` until it returns something truthy; fail the test naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: T = probe()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last value {last!r})")
        time.sleep(interval)
        last = probe()
    return last

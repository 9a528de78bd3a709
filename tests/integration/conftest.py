"""Fixtures that run the real two-cluster sandbox (Kafka brokers in KRaft mode and MirrorMaker 2).

Every sandbox a test starts is stopped in the fixture's teardown, which pytest runs after failures and
on Ctrl-C; an atexit hook is a last resort for an interpreter that exits some other way.
"""

from __future__ import annotations

import atexit
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from airflow_kafka_failover.sandbox.mirrormaker import ReplicationSettings
from airflow_kafka_failover.sandbox.sandbox import Sandbox

REPO = Path(__file__).resolve().parents[2]
RUN_ROOT = REPO / ".run" / f"pytest-{os.getpid()}"

_started: list[Sandbox] = []


def _stop_everything() -> None:
    while _started:
        _started.pop().down()


atexit.register(_stop_everything)


def start_sandbox(name: str, settings: ReplicationSettings | None = None) -> Sandbox:
    """Start a sandbox in its own run directory and remember it for teardown."""
    sandbox = Sandbox(RUN_ROOT / name, settings=settings)
    _started.append(sandbox)
    sandbox.up()
    return sandbox


def stop_sandbox(sandbox: Sandbox) -> None:
    sandbox.down()
    if sandbox in _started:
        _started.remove(sandbox)
    shutil.rmtree(sandbox.run_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    """A shared sandbox (default policy, flows A->B and B->A). Tests must not fault it."""
    shared = start_sandbox("shared")
    yield shared
    stop_sandbox(shared)


@pytest.fixture(scope="module")
def own_sandbox() -> Iterator[Sandbox]:
    """A sandbox for one test module that injects faults into it."""
    own = start_sandbox(f"own-{uuid.uuid4().hex[:6]}")
    yield own
    stop_sandbox(own)


@pytest.fixture
def unique_topic() -> Callable[[str], str]:
    """Return a factory of topic names unique to this test run, e.g. ``orders-3f9a1c``."""

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    return make

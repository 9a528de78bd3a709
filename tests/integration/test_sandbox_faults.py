"""Whole-cluster faults on the module's sandbox (the wipe stops it from being handed to another module).

Tests run in file order: wipe comes last because it destroys cluster A's data.
"""

from __future__ import annotations

import socket

import pytest
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.kafka_io import create_topic, end_offsets, produce, read_all
from akf_devtools.sandbox.sandbox import MARKER, Sandbox

from tests.integration.waiting import wait_for


def _fill(sandbox, topic: str, count: int = 100) -> None:
    create_topic(sandbox.bootstrap("A"), topic, 3)
    produce(sandbox.bootstrap("A"), topic, [(f"k{i}".encode(), b"v", None, None) for i in range(count)])


def _try_bind(sock: socket.socket, port: int) -> bool:
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


def _pids(sandbox) -> dict[str, int | None]:
    return {name: proc["pid"] for name, proc in sandbox.status()["processes"].items()}


def test_hang_then_resume_serves_again_with_its_data(own_sandbox, unique_topic):
    topic = unique_topic("hang")
    _fill(own_sandbox, topic)
    own_sandbox.fault("hang", "A")
    try:
        assert own_sandbox.status()["processes"]["broker-A"]["frozen"]
        assert not own_sandbox.broker("A").answers_metadata(timeout=2.0)
        assert own_sandbox.broker("B").answers_metadata(timeout=2.0)
    finally:
        own_sandbox.fault("resume", "A")
    assert own_sandbox.broker("A").answers_metadata(timeout=10.0)
    assert len(read_all(own_sandbox.bootstrap("A"), topic)) == 100


def test_crash_times_out_clients_and_restart_keeps_data(own_sandbox, unique_topic):
    topic = unique_topic("crash")
    _fill(own_sandbox, topic)
    own_sandbox.fault("crash", "A")
    assert not own_sandbox.status()["processes"]["broker-A"]["running"]
    assert end_offsets(own_sandbox.bootstrap("A"), topic, timeout=2.0) is None
    # B keeps serving reads and writes while A is down.
    other = unique_topic("on-b")
    create_topic(own_sandbox.bootstrap("B"), other, 1)
    produce(own_sandbox.bootstrap("B"), other, [(None, b"x", None, None)] * 5)
    assert len(read_all(own_sandbox.bootstrap("B"), other)) == 5

    own_sandbox.fault("restart", "A")
    # Leadership can still be moving for a moment after the restart under load (NOT_LEADER_FOR_PARTITION).
    wait_for(
        lambda: _count_or_none(own_sandbox.bootstrap("A"), topic) == 100, 30, "the 100 records on A again"
    )


def _count_or_none(bootstrap: str, topic: str) -> int | None:
    from confluent_kafka import KafkaException

    try:
        return len(read_all(bootstrap, topic))
    except KafkaException:
        return None


def test_restart_on_a_port_taken_meanwhile_fails_clearly(own_sandbox):
    own_sandbox.fault("crash", "A")
    port = own_sandbox.broker("A").port
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    wait_for(lambda: _try_bind(squatter, port), 30, f"port {port} to be released by the crashed broker")
    squatter.listen()
    before = _pids(own_sandbox)
    try:
        with pytest.raises(SandboxError, match=rf"port {port} of cluster A is taken"):
            own_sandbox.fault("restart", "A")
        assert _pids(own_sandbox) == before  # B and MirrorMaker 2 untouched, A still down
    finally:
        squatter.close()
    own_sandbox.fault("restart", "A")
    assert own_sandbox.broker("A").answers_metadata(timeout=10.0)


def test_unknown_cluster_in_fault_names_it_and_changes_nothing(own_sandbox):
    before = _pids(own_sandbox)
    with pytest.raises(SandboxError, match=r"unknown cluster 'C': this sandbox has clusters A, B"):
        own_sandbox.fault("crash", "C")
    with pytest.raises(SandboxError, match=r"unknown fault 'melt'"):
        own_sandbox.fault("melt", "A")
    assert _pids(own_sandbox) == before
    assert all(proc["running"] for proc in own_sandbox.status()["processes"].values())


def test_run_dir_owned_by_something_else_is_refused(tmp_path):
    foreign = tmp_path / "not-ours"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    with pytest.raises(SandboxError, match=rf"{foreign} is not empty and was not created by the sandbox"):
        Sandbox(foreign).up()
    assert [p.name for p in foreign.iterdir()] == ["precious.txt"]
    assert not (foreign / MARKER).exists()


def test_wipe_brings_a_back_empty(own_sandbox, unique_topic):
    topic = unique_topic("wipe")
    _fill(own_sandbox, topic)
    own_sandbox.fault("wipe", "A")
    assert own_sandbox.broker("A").answers_metadata(timeout=10.0)
    assert end_offsets(own_sandbox.bootstrap("A"), topic, timeout=5.0) is None  # the topic is gone

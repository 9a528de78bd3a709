"""The configuration the sandbox writes for brokers and MirrorMaker 2 (no processes started)."""

from __future__ import annotations

from pathlib import Path

import pytest
from akf_devtools.sandbox.broker import KafkaBroker, new_cluster_id
from akf_devtools.sandbox.mirrormaker import MirrorMaker, ReplicationSettings


def _props(text: str) -> dict[str, str]:
    return dict(
        line.split(" = ", 1) if " = " in line else line.split("=", 1) for line in text.splitlines() if line
    )


def test_broker_is_a_combined_kraft_node_on_loopback(tmp_path: Path):
    broker = KafkaBroker(
        "A",
        tmp_path,
        port=9001,
        controller_port=9002,
        cluster_id="x",
        extra_listeners={"PROXIED": (9003, "127.0.0.1:9100")},
    )
    props = _props(broker.properties())
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9002"
    assert (
        props["listeners"]
        == "PLAINTEXT://127.0.0.1:9001,CONTROLLER://127.0.0.1:9002,PROXIED://127.0.0.1:9003"
    )
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9001,PROXIED://127.0.0.1:9100"
    assert props["log.dirs"] == str(tmp_path / "A" / "data")
    assert props["auto.create.topics.enable"] == "false"


def test_cluster_ids_never_look_like_options():
    assert not any(new_cluster_id().startswith("-") for _ in range(2000))


def test_default_policy_runs_both_flows_with_syncs_on_the_target(tmp_path: Path):
    mm2 = MirrorMaker(
        tmp_path, {"A": "h:1", "B": "h:2"}, ReplicationSettings(topics="orders.*", groups="job-.*")
    )
    props = _props(mm2.properties())
    assert props["A->B.enabled"] == "true" and props["B->A.enabled"] == "true"
    assert props["replication.policy.class"].endswith("DefaultReplicationPolicy")
    assert props["offset-syncs.topic.location"] == "target"
    assert props["emit.checkpoints.interval.seconds"] == "5"
    assert props["sync.group.offsets.enabled"] == "false"
    assert (props["topics"], props["groups"]) == ("orders.*", "job-.*")
    assert mm2.heartbeat_flows() == [("A", "B"), ("B", "A")]


def test_identity_policy_has_one_data_flow_and_a_heartbeat_only_return(tmp_path: Path):
    mm2 = MirrorMaker(tmp_path, {"A": "h:1", "B": "h:2"}, ReplicationSettings(policy="identity"))
    text = mm2.properties()
    props = _props(text)
    assert props["replication.policy.class"].endswith("IdentityReplicationPolicy")
    assert mm2.flows() == [("A", "B")]
    assert props["B->A.topics"] == "^$" and props["B->A.emit.checkpoints.enabled"] == "false"
    assert "A->B.topics" not in props


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown replication policy 'mirror'"):
        ReplicationSettings(policy="mirror")

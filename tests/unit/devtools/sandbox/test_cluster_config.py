"""Clusters of several brokers in the sandbox: layout, configuration, state, bad inputs (nothing started)."""

from __future__ import annotations

from pathlib import Path

import pytest
from akf_devtools.cli import build_parser
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.broker import KafkaBroker, new_cluster_id
from akf_devtools.sandbox.cluster import KafkaCluster
from akf_devtools.sandbox.mirrormaker import MirrorMaker, ReplicationSettings
from akf_devtools.sandbox.sandbox import Sandbox


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def _three(tmp_path: Path) -> KafkaCluster:
    return KafkaCluster.plan("A", tmp_path, 3, iter(range(9001, 9100)), "cid")


def test_three_brokers_beside_a_quorum_of_three_controllers(tmp_path: Path):
    cluster = _three(tmp_path)
    assert [node.label for node in cluster.nodes] == [
        "controller-A1", "controller-A2", "controller-A3", "broker-A1", "broker-A2", "broker-A3",
    ]  # fmt: skip
    assert cluster.bootstrap == "127.0.0.1:9004,127.0.0.1:9005,127.0.0.1:9006"
    assert KafkaCluster.ports_needed(3) == 6 and KafkaCluster.ports_needed(1, 1) == 3
    voters = "101@127.0.0.1:9001,102@127.0.0.1:9002,103@127.0.0.1:9003"
    controller = _props(cluster.controller(2).properties())
    assert controller["process.roles"] == "controller" and controller["node.id"] == "102"
    assert controller["controller.quorum.voters"] == voters
    assert controller["listeners"] == "CONTROLLER://127.0.0.1:9002"
    broker = _props(cluster.broker(3).properties())
    assert broker["process.roles"] == "broker" and broker["node.id"] == "3"
    assert (
        "broker.session.timeout.ms" not in broker | controller
    )  # Kafka's 9 s, as the tests of a lost broker need
    assert (
        broker["controller.quorum.voters"] == voters and broker["listeners"] == "PLAINTEXT://127.0.0.1:9006"
    )
    # Topics are created by the active controller, so the defaults must be on every node.
    for props in (controller, broker):
        assert props["default.replication.factor"] == "3" and props["min.insync.replicas"] == "2"
        assert props["offsets.topic.replication.factor"] == "3"
    assert cluster.broker(2).home == tmp_path / "A" / "broker-2"
    assert cluster.controller(1).heap == "96m" and cluster.broker(1).heap == "256m"


def test_a_cluster_of_one_keeps_its_combined_node_and_its_state_layout(tmp_path: Path):
    one = KafkaCluster.plan("B", tmp_path, 1, iter([9001, 9002, 9003]), "cid", {"PROXIED": 9100})
    node = one.nodes[0]
    assert one.combined and node.label == "broker-B" and node.home == tmp_path / "B"
    assert one.state() == {
        "port": 9001,
        "controller_port": 9002,
        "cluster_id": "cid",
        "extra_listeners": {"PROXIED": [9003, "127.0.0.1:9100"]},
    }
    props = _props(node.properties())
    assert props["default.replication.factor"] == "1"
    # Restarted after a crash, the node's own controller holds its old registration for a session.
    assert props["broker.session.timeout.ms"] == "4000"
    with pytest.raises(SandboxError, match="cluster B is a single combined node"):
        one.controller(1)


def test_state_round_trips(tmp_path: Path):
    cluster = _three(tmp_path)
    again = KafkaCluster.from_state("A", tmp_path, cluster.state(), None, None)
    assert again == cluster


def test_format_like_writes_what_storage_tool_writes(tmp_path: Path):
    """Kafka 4.3 and 3.7's layout: the bootstrap metadata in one file on every node."""
    cluster = _three(tmp_path)
    template, other = cluster.broker(1), cluster.broker(2)
    template.data_dir.mkdir(parents=True)
    (template.data_dir / "bootstrap.checkpoint").write_bytes(b"\x00records")
    (template.data_dir / "meta.properties").write_text("node.id=1\n")
    other.format_like(template)
    meta = _props((other.data_dir / "meta.properties").read_text())
    assert (meta["node.id"], meta["cluster.id"], meta["version"]) == ("2", "cid", "1")
    assert meta["directory.id"] and not meta["directory.id"].startswith("-")
    assert (other.data_dir / "bootstrap.checkpoint").read_bytes() == b"\x00records"
    assert other.formatted


def test_format_like_copies_a_controllers_bootstrap_snapshot(tmp_path: Path):
    """Kafka 4.4's layout: a snapshot in a controller's metadata log, nothing on a broker; a node is only
    formatted like one of its own role."""
    cluster = _three(tmp_path)
    template, other = cluster.controller(1), cluster.controller(2)
    snapshot = Path("__cluster_metadata-0") / "00000000000000000000-0000000000.checkpoint"
    (template.data_dir / snapshot.parent).mkdir(parents=True)
    (template.data_dir / snapshot).write_bytes(b"\x00features")
    (template.data_dir / "meta.properties").write_text("node.id=101\n")
    other.format_like(template)
    assert (other.data_dir / snapshot).read_bytes() == b"\x00features"
    assert _props((other.data_dir / "meta.properties").read_text())["node.id"] == "102"
    written = sorted(path.name for path in other.data_dir.iterdir())
    assert written == ["__cluster_metadata-0", "meta.properties"]
    with pytest.raises(SandboxError, match="a node of another role"):
        cluster.broker(1).format_like(template)
    assert not cluster.broker(1).formatted


def test_mirrormaker_creates_its_topics_with_the_clusters_replication_factor(tmp_path: Path):
    mm2 = MirrorMaker(tmp_path, {"A": "h:1,h:2", "B": "h:3"}, ReplicationSettings(), replication_factor=3)
    props = {k.strip(): v.strip() for k, v in (line.split("=", 1) for line in mm2.properties().splitlines())}
    assert props["A.bootstrap.servers"] == "h:1,h:2"
    for name in (
        "replication.factor",
        "heartbeats.topic.replication.factor",
        "config.storage.replication.factor",
    ):
        assert props[name] == "3"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"brokers": 0}, "brokers per cluster must be a whole number from 1 to 5, got 0"),
        ({"brokers": True}, "got True"),
        ({"brokers": 9}, "got 9"),
        ({"brokers": 3, "security": "tls"}, "security 'tls' runs on clusters of one broker only"),
    ],
)
def test_bad_cluster_sizes_are_refused(tmp_path: Path, kwargs, message):
    with pytest.raises(SandboxError, match=message):
        Sandbox(tmp_path, **kwargs)


def _sandbox_of_three(tmp_path: Path) -> Sandbox:
    sandbox = Sandbox(tmp_path, brokers=3)
    ports = iter(range(9001, 9100))
    sandbox.clusters = {name: KafkaCluster.plan(name, tmp_path, 3, ports, new_cluster_id()) for name in "AB"}
    return sandbox


def test_a_sandbox_of_three_names_its_nodes_and_refuses_ambiguous_or_unknown_ones(tmp_path: Path):
    sandbox = _sandbox_of_three(tmp_path)
    assert sandbox.brokers_per_cluster == 3
    assert len(sandbox.brokers) == 12 and "controller-B3" in sandbox.brokers
    assert sandbox.broker("A", 2).label == "broker-A2"
    with pytest.raises(SandboxError, match="cluster A has 3 brokers: name one"):
        sandbox.broker("A")
    with pytest.raises(SandboxError, match=r"cluster A has no broker 4: its brokers are 1\.\.3"):
        sandbox.broker("A", 4)
    with pytest.raises(SandboxError, match="cluster A has no controller 0"):
        sandbox.fault("crash", "A", controller=0)
    with pytest.raises(SandboxError, match="name a broker or a controller for the fault, not both"):
        sandbox.fault("crash", "A", broker=1, controller=1)
    with pytest.raises(SandboxError, match="fault 'wipe' hits a whole cluster"):
        sandbox.fault("wipe", "A", broker=1)
    with pytest.raises(SandboxError, match="unknown fault 'melt'"):
        sandbox.fault("melt", "A")
    assert sandbox.mirrormaker.replication_factor == 3


def test_quorum_and_rolling_faults_need_several_brokers(tmp_path: Path):
    sandbox = Sandbox(tmp_path)
    sandbox.brokers = {
        "A": KafkaBroker("A", tmp_path, 9001, 9002, "x"),
        "B": KafkaBroker("B", tmp_path, 9011, 9012, "y"),
    }
    with pytest.raises(SandboxError, match="single combined node without controllers"):
        sandbox.fault("lose-quorum", "A")
    with pytest.raises(SandboxError, match="a rolling restart needs several"):
        sandbox.fault("rolling-restart", "A")


def test_the_command_line_takes_a_size_and_a_node():
    parser = build_parser()
    up = parser.parse_args(["sandbox", "up", "--brokers", "3"])
    assert up.brokers == 3
    fault = parser.parse_args(["sandbox", "fault", "crash", "--cluster", "A", "--broker", "2"])
    assert (fault.kind, fault.cluster, fault.broker, fault.controller) == ("crash", "A", 2, None)
    quorum = parser.parse_args(["sandbox", "fault", "lose-quorum", "--cluster", "A"])
    assert quorum.kind == "lose-quorum"
    with pytest.raises(SystemExit):
        parser.parse_args(
            ["sandbox", "fault", "crash", "--cluster", "A", "--broker", "1", "--controller", "1"]
        )


def test_the_active_controller_is_the_newest_leader_a_running_voter_wrote_down(tmp_path: Path, monkeypatch):
    cluster = _three(tmp_path)
    states = {1: (4, 103), 2: (5, 102), 3: None}  # controller 3 never wrote one; 2 has the newest epoch
    for number, state in states.items():
        node = cluster.controller(number)
        if state is not None:
            folder = node.data_dir / "__cluster_metadata-0"
            folder.mkdir(parents=True)
            (folder / "quorum-state").write_text(f'{{"leaderEpoch": {state[0]}, "leaderId": {state[1]}}}')
    running = {"controller-A1", "controller-A2", "controller-A3"}
    monkeypatch.setattr(
        "airflow_kafka_failover.core.process_group.ManagedProcess.is_running",
        lambda self: self.name in running,
    )
    assert cluster.active_controller() == cluster.controller(2)
    running.discard("controller-A2")  # a crashed voter's file is not evidence
    assert cluster.active_controller() == cluster.controller(3)
    running.clear()
    assert cluster.active_controller() is None

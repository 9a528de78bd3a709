"""``kafka-failover validate`` (the config alone, offline) and ``check`` (what each cluster holds against what
a start or switch needs), end to end in one process. ``check``'s clusters answer through a stand-in of the
hook's metadata request; ``validate`` asks no cluster and no database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from airflow_kafka_failover import cli
from airflow_kafka_failover.hooks.kafka_cluster import ClusterMetadata, KafkaClusterHook, PartitionInfo
from tests.builders import closed_port

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def config(tmp_path, monkeypatch) -> Path:
    for name in ("a", "b"):
        conn = {"conn_type": "kafka", "extra": {"bootstrap.servers": f"127.0.0.1:{closed_port()}"}}
        monkeypatch.setenv(f"AIRFLOW_CONN_CLI_CHECK_{name.upper()}", json.dumps(conn))
    pair = {
        "clusters": {"A": {"connection": "cli_check_a"}, "B": {"connection": "cli_check_b"}},
        "primary": "A",
        "topics": ["orders"],
        "job": {"check_timeout_seconds": 0.5},
    }
    path = tmp_path / "pairs.yaml"
    path.write_text(yaml.safe_dump({"pairs": {"orders": pair}}))
    return path


@pytest.fixture
def clusters(monkeypatch) -> dict[str, dict[str, int]]:
    """What each connection's cluster holds: connection -> {topic: partitions}; fill it in the test."""
    held: dict[str, dict[str, int]] = {"cli_check_a": {}, "cli_check_b": {}}

    def describe_cluster(self, topics=(), timeout_seconds=None, *, client=None):
        topics = list(topics)
        on = held[self.kafka_config_id]
        parts = [PartitionInfo(t, p, 1, (1,), (1,)) for t in topics if t in on for p in range(on[t])]
        return ClusterMetadata("id", (1,), tuple(parts), tuple(t for t in topics if t not in on))

    monkeypatch.setattr(KafkaClusterHook, "describe_cluster", describe_cluster)
    return held


def test_check_names_what_a_start_would_refuse_when_only_a_holds_the_topic(config, clusters, capfd):
    clusters["cli_check_a"]["orders"] = 3
    assert cli.main(["check", "--config", str(config), "--pair", "orders"]) == cli.EXIT_CHECK_REFUSED
    out, err = capfd.readouterr()
    rows = [line.split()[:4] for line in out.splitlines()]
    assert rows == [
        ["pair", "cluster", "topic", "partitions"],
        ["orders", "A", "orders", "3"],
        ["orders", "A", "B.orders", "missing"],
        ["orders", "B", "orders", "missing"],
        ["orders", "B", "A.orders", "missing"],
    ]
    assert "error: pair orders: topic B.orders does not exist on A (the job on A reads it" in err
    assert "error: pair orders: topic orders does not exist on B" in err
    assert "error: 3 problem(s): a start or switch that needs them refuses to start" in err


def test_check_passes_when_both_clusters_hold_the_topic_and_each_others_copy(config, clusters, capfd):
    clusters["cli_check_a"].update({"orders": 3, "B.orders": 3})
    clusters["cli_check_b"].update({"orders": 3, "A.orders": 3})
    assert cli.main(["check", "--config", str(config), "--json"]) == 0
    document = json.loads(capfd.readouterr().out)
    assert [(t["cluster"], t["topic"], t["partitions"]) for t in document["topics"]] == [
        ("A", "orders", 3),
        ("A", "B.orders", 3),
        ("B", "orders", 3),
        ("B", "A.orders", 3),
    ]
    assert document["problems"] == [] and document["unread"] == []


def test_check_of_a_one_way_pair_needs_no_copy_on_the_primary(config, clusters, capfd):
    document = yaml.safe_load(config.read_text())
    document["pairs"]["orders"]["replication"] = {"flows": ["A->B"]}
    config.write_text(yaml.safe_dump(document))
    clusters["cli_check_a"]["orders"] = 1
    clusters["cli_check_b"].update({"orders": 1, "A.orders": 1})
    assert cli.main(["check", "--config", str(config), "--pair", "orders"]) == 0


def test_check_exits_1_when_a_cluster_does_not_answer(config, capfd):
    assert cli.main(["check", "--config", str(config)]) == 1
    err = capfd.readouterr().err
    assert (
        "error: cluster A (connection 'cli_check_a', 127.0.0.1:" in err
        and "did not answer within 0.5 s" in err
    )


def test_validate_prints_what_each_cluster_must_hold_without_asking_anyone(config, capfd):
    assert cli.main(["validate", "--config", str(config)]) == 0
    out = capfd.readouterr().out
    assert f"{config}: valid, 1 pair(s)" in out
    assert "policy default, flows A->B, B->A" in out
    assert "    B.orders: made by MirrorMaker 2, flow B->A (from orders on B)" in out
    assert "    orders: made by you (producers write to it while B is active)" in out
    assert "note: fencing_marker, run_root, checkpoint_root, sink_root left at this host's defaults" in out


def test_validate_names_the_field_of_a_bad_config(tmp_path, capfd):
    bad = tmp_path / "pairs.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "pairs": {
                    "orders": {
                        "clusters": {"A": {"connection": "a"}, "B": {"connection": "b"}},
                        "primary": "C",
                        "topics": ["orders"],
                    }
                }
            }
        )
    )
    assert cli.main(["validate", "--config", str(bad)]) == 1
    err = capfd.readouterr().err
    assert "error:" in err and "primary" in err and "'C'" in err


def test_the_example_config_validates(capfd):
    """examples/pairs.yaml's header names this command, which needs neither cluster (``plan`` needs both)."""
    example = REPO / "examples" / "pairs.yaml"
    header = example.read_text().split("\npairs:")[0]
    assert "kafka-failover validate --config examples/pairs.yaml" in header
    assert "kafka-failover plan" not in header
    assert cli.main(["validate", "--config", str(example)]) == 0

"""The pair config: every bad value is named with its file, pair and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_kafka_failover.config import load_pair, load_pairs, parse_pair
from airflow_kafka_failover.exceptions import ConfigError
from airflow_kafka_failover.translation.planner import route_topics

REPO = Path(__file__).resolve().parents[2]


def _pair(**overrides) -> dict:
    base = {
        "clusters": {"A": {"connection": "kafka_a"}, "B": {"connection": "kafka_b"}},
        "primary": "A",
        "topics": ["orders"],
    }
    base.update(overrides)
    return base


def test_the_example_file_is_valid_and_complete():
    pairs = load_pairs(REPO / "examples" / "pairs.yaml")
    pair = pairs["orders"]
    assert pair.primary == "A" and pair.standby == "B"
    assert pair.replication.flows == (("A", "B"), ("B", "A"))
    assert pair.topics_on("A") == ["orders", "B.orders"]
    assert pair.topics_on("B") == ["orders", "A.orders"]


def test_defaults():
    pair = parse_pair("p", _pair())
    assert pair.bookkeeping_group == "airflow-kafka-failover.p"
    assert pair.translation.methods == ("checkpoint", "offset_sync", "offset_sync_reverse", "timestamp")
    assert pair.replication.offset_syncs_location == "target"
    identity = parse_pair("p", _pair(replication={"policy": "identity"}))
    assert identity.replication.flows == (("A", "B"),)
    assert identity.topics_on("B") == ["orders"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"primary": "C"}, "primary: 'C' is not one of ['A', 'B']"),
        ({"primary": None}, "primary: None is not one of"),
        ({"topics": []}, "topics: must be a non-empty list of topic names, got []"),
        ({"clusters": {"A": {"connection": "k"}}}, "a pair has exactly two clusters, got 1"),
        (
            {"clusters": {"A": {"connection": "same"}, "B": {"connection": "same"}}},
            "both clusters use connection 'same'",
        ),
        ({"clusters": {"A": {"connection": "a"}, "B": {}}}, "clusters.B.connection: is required"),
        (
            {"clusters": {"A": {"connection": "a", "alias": "X"}, "B": {"connection": "b", "alias": "X"}}},
            "aliases must differ",
        ),
        (
            {"replication": {"policy": "mirror"}},
            "replication.policy: 'mirror' is not one of ['default', 'identity']",
        ),
        (
            {"replication": {"flows": ["A->C"]}},
            "replication.flows: 'A->C' is not '<cluster>-><other cluster>'",
        ),
        (
            {"replication": {"policy": "identity", "flows": ["A->B", "B->A"]}},
            "identity replication cannot prevent loops",
        ),
        (
            {"replication": {"offset_syncs_location": "middle"}},
            "offset_syncs_location: 'middle' is not one of",
        ),
        ({"translation": {"methods": ["guess"]}}, "translation.methods: 'guess' is not one of"),
        (
            {"translation": {"methods": ["identity"]}},
            "'identity' is only safe with an offset-preserving replicator",
        ),
        (
            {"translation": {"timestamp_margin_seconds": -1}},
            "timestamp_margin_seconds: must be a number >= 0, got -1",
        ),
        (
            {"health": {"probe_interval": 0}},
            "health: health threshold probe_interval must be a positive number",
        ),
        ({"colour": "blue"}, "pair: unknown key(s) ['colour']"),
    ],
)
def test_bad_values_are_named(overrides, message):
    with pytest.raises(ConfigError) as excinfo:
        parse_pair("orders", _pair(**overrides), "pairs.yaml")
    assert message in str(excinfo.value)
    assert str(excinfo.value).startswith("pairs.yaml: pair 'orders': ")


def test_file_level_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the pair config .*nope.yaml"):
        load_pairs(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("pairs: [unclosed")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_pairs(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("other: 1\n")
    with pytest.raises(ConfigError, match="top-level 'pairs' mapping"):
        load_pairs(empty)
    with pytest.raises(ConfigError, match=r"has no pair 'payments'; it has \['orders'\]"):
        load_pair(REPO / "examples" / "pairs.yaml", "payments")


def test_routes_forward_and_reverse():
    pair = parse_pair("p", _pair())
    routes = {
        r.source_topic: (r.target_topic, r.direction)
        for r in route_topics(pair, "B", "A", ["A.orders", "orders"])
    }
    assert routes == {"A.orders": ("orders", "reverse"), "orders": ("B.orders", "forward")}
    identity = parse_pair("p", _pair(replication={"policy": "identity"}))
    assert [(r.target_topic, r.direction) for r in route_topics(identity, "A", "B", ["orders"])] == [
        ("orders", "forward")
    ]
    assert [(r.target_topic, r.direction) for r in route_topics(identity, "B", "A", ["orders"])] == [
        ("orders", "reverse")
    ]

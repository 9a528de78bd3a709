from __future__ import annotations

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.domain.translation.replication_policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    checkpoints_topic,
    for_name,
    is_internal_topic,
    offset_syncs_cluster,
    offset_syncs_topic,
    remote_heartbeats_topic,
)


def test_default_remote_topic_and_back():
    policy = DefaultReplicationPolicy()
    assert policy.remote_topic("A", "orders") == "A.orders"
    assert policy.topic_source("A.orders") == "A"
    assert policy.upstream_topic("A.orders") == "orders"


def test_default_local_topic_is_not_remote():
    policy = DefaultReplicationPolicy()
    assert policy.topic_source("orders") is None
    assert policy.upstream_topic("orders") is None
    assert policy.original_topic("orders") == "orders"


def test_default_multi_hop():
    policy = DefaultReplicationPolicy()
    assert policy.topic_source("B.A.orders") == "B"
    assert policy.upstream_topic("B.A.orders") == "A.orders"
    assert policy.original_topic("B.A.orders") == "orders"


@pytest.mark.parametrize(
    ("topic", "source", "upstream"),
    [
        # Java's String.split drops trailing empty strings and keeps a leading one.
        ("A.", None, None),
        ("A..", None, None),
        (".", None, None),
        ("", None, None),
        (".orders", "", "orders"),
        ("A..orders", "A", ".orders"),
        ("A.orders.v2", "A", "orders.v2"),
    ],
)
def test_default_edge_names_match_java_split(topic, source, upstream):
    policy = DefaultReplicationPolicy()
    assert policy.topic_source(topic) == source
    assert policy.upstream_topic(topic) == upstream


def test_custom_separator():
    policy = DefaultReplicationPolicy(separator="__")
    assert policy.remote_topic("A", "orders") == "A__orders"
    assert policy.topic_source("A__orders") == "A"
    assert policy.upstream_topic("A__orders") == "orders"
    assert policy.topic_source("A.orders") is None
    assert policy.offset_syncs_topic("A", "B", "source") == "mm2-offset-syncs__B__internal"
    assert policy.checkpoints_topic("A") == "A__checkpoints__internal"
    assert policy.heartbeats_topic("A") == "A__heartbeats"


def test_custom_separator_with_internal_separator_disabled():
    policy = DefaultReplicationPolicy(separator="_", internal_topic_separator_enabled=False)
    assert policy.offset_syncs_topic("A", "B", "source") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"


def test_empty_separator_is_rejected():
    with pytest.raises(ConfigError, match="separator"):
        DefaultReplicationPolicy(separator="")


def test_internal_topic_names():
    # Named after the cluster that does not store the topic.
    assert offset_syncs_topic("A", "B", "source") == "mm2-offset-syncs.B.internal"
    assert offset_syncs_topic("A", "B", "target") == "mm2-offset-syncs.A.internal"
    assert offset_syncs_cluster("A", "B", "target") == "B"
    assert offset_syncs_cluster("A", "B", "source") == "A"
    with pytest.raises(
        ConfigError, match="offset-syncs.topic.location must be 'source' or 'target', got 'middle'"
    ):
        offset_syncs_topic("A", "B", "middle")
    assert checkpoints_topic("A") == "A.checkpoints.internal"
    assert remote_heartbeats_topic("A") == "A.heartbeats"
    policy = DefaultReplicationPolicy()
    assert policy.offset_syncs_topic("A", "B") == "mm2-offset-syncs.A.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.heartbeats_topic("A") == "A.heartbeats"


def test_is_internal_topic():
    assert is_internal_topic("mm2-offset-syncs.B.internal")
    assert is_internal_topic("A.checkpoints.internal")
    assert is_internal_topic("__consumer_offsets")
    assert is_internal_topic("connect-offsets-internal")
    assert not is_internal_topic("A.heartbeats")
    assert not is_internal_topic("orders")


def test_identity_keeps_names():
    policy = IdentityReplicationPolicy()
    assert policy.remote_topic("A", "orders") == "orders"
    assert policy.upstream_topic("orders") == "orders"
    assert policy.topic_source("orders") is None
    assert policy.original_topic("orders") == "orders"


def test_identity_with_source_alias():
    policy = IdentityReplicationPolicy(source_cluster_alias="A")
    assert policy.topic_source("orders") == "A"


def test_identity_prefixes_heartbeats():
    policy = IdentityReplicationPolicy()
    assert policy.remote_topic("A", "heartbeats") == "A.heartbeats"
    assert policy.topic_source("A.heartbeats") == "A"
    assert policy.upstream_topic("A.heartbeats") == "heartbeats"
    assert policy.heartbeats_topic("A") == "A.heartbeats"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("default", DefaultReplicationPolicy),
        ("DefaultReplicationPolicy", DefaultReplicationPolicy),
        ("org.apache.kafka.connect.mirror.DefaultReplicationPolicy", DefaultReplicationPolicy),
        ("identity", IdentityReplicationPolicy),
        ("IdentityReplicationPolicy", IdentityReplicationPolicy),
        (" Identity ", IdentityReplicationPolicy),
    ],
)
def test_for_name(name, expected):
    policy = for_name(name)
    assert type(policy) is expected


def test_for_name_passes_separator():
    assert for_name("default", separator="_").remote_topic("A", "x") == "A_x"


@pytest.mark.parametrize("name", ["legacy", "", "RenameTopicReplicationPolicy", None])
def test_for_name_unknown(name):
    with pytest.raises(ConfigError) as err:
        for_name(name)  # type: ignore[arg-type]
    message = str(err.value)
    assert repr(name) in message
    assert "DefaultReplicationPolicy" in message and "identity" in message


def test_policies_compare_by_configuration():
    assert DefaultReplicationPolicy() == DefaultReplicationPolicy()
    assert DefaultReplicationPolicy() != DefaultReplicationPolicy(separator="_")
    assert DefaultReplicationPolicy() != IdentityReplicationPolicy()
    assert "separator='.'" in repr(IdentityReplicationPolicy())

"""The pair config: every bad value is named with its file, pair and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.domain.config import load_pair, load_pairs, parse_pair
from airflow_kafka_failover.io.planner import route_topics

REPO = Path(__file__).resolve().parents[3]


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
            {"health": {"probe_interval_seconds": 0}},
            "health: health threshold probe_interval_seconds must be a positive number",
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


# ---------------------------------------------------------------- what the audit of issue 13 added


def _refusal(**overrides) -> str:
    with pytest.raises(ConfigError) as excinfo:
        parse_pair("orders", _pair(**overrides), "pairs.yaml")
    message = str(excinfo.value)
    assert message.startswith("pairs.yaml: pair 'orders': ")
    return message


def test_unknown_top_level_keys_of_the_file_are_refused(tmp_path):
    path = tmp_path / "pairs.yaml"
    path.write_text("pairs:\n  orders: {clusters: {}}\norders:\n  primary: A\n")
    with pytest.raises(ConfigError) as excinfo:
        load_pairs(path)
    assert str(excinfo.value) == (
        f"{path}: unknown top-level key(s) ['orders']; the file has one top-level key, 'pairs' "
        "(indent a pair's settings under its name)"
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize(
    ("section", "key"),
    [
        ("job", "startup_timeout_seconds"),
        ("job", "trigger_interval_seconds"),
        ("switch", "gap_wait_seconds"),
        ("switch", "watch_timeout_seconds"),
        ("translation", "timestamp_margin_seconds"),
    ],
)
def test_nan_and_infinite_seconds_are_refused(section, key, bad):
    message = _refusal(**{section: {key: bad}})
    assert f"{section}.{key}: must be a" in message and repr(bad) in message


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_and_infinite_health_seconds_are_refused(bad):
    message = _refusal(health={"probe_timeout_seconds": bad})
    assert (
        f"health: health threshold probe_timeout_seconds must be a positive number of seconds, got {bad!r}"
        in message
    )


@pytest.mark.parametrize(
    ("alias", "separator"),
    [("A.east", "."), ("A east", "."), ("A/B", "."), ("a_b", "_"), ("A-1", "-"), ("Ä", ".")],
)
def test_an_alias_outside_mirrormaker_2s_naming_rule_is_refused(alias, separator):
    message = _refusal(
        clusters={"A": {"connection": "a", "alias": alias}, "B": {"connection": "b"}},
        replication={"separator": separator},
    )
    assert f"clusters.A.alias: {alias!r} is not a valid MirrorMaker 2 alias" in message
    assert f"without the replication separator {separator!r}" in message


def test_a_cluster_name_that_breaks_the_alias_rule_needs_an_alias():
    message = _refusal(clusters={"east.1": {"connection": "a"}, "B": {"connection": "b"}}, primary="B")
    assert "clusters.east.1.alias: 'east.1' is not a valid MirrorMaker 2 alias" in message
    good = parse_pair(
        "orders",
        _pair(
            clusters={"east.1": {"connection": "a", "alias": "east_1"}, "B": {"connection": "b"}}, primary="B"
        ),
    )
    assert good.cluster("east.1").alias == "east_1"
    assert good.topics_on("B") == ["orders", "east_1.orders"]


@pytest.mark.parametrize("alias", ["east_1", "A-2", "dc1"])
def test_aliases_of_letters_digits_underscore_and_dash_are_accepted(alias):
    pair = parse_pair(
        "p", _pair(clusters={"A": {"connection": "a", "alias": alias}, "B": {"connection": "b"}})
    )
    assert pair.cluster("A").alias == alias and pair.cluster("B").alias == "B"


@pytest.mark.parametrize(
    ("section", "value", "quoted"),
    [
        ("kafka_options", {"enable.idempotence": True}, 'enable.idempotence: "true"'),
        ("kafka_options", {"max.poll.records": 500}, 'max.poll.records: "500"'),
        ("spark_conf", {"spark.sql.adaptive.enabled": False}, 'spark.sql.adaptive.enabled: "false"'),
        ("spark_conf", {"spark.executor.cores": 2.5}, 'spark.executor.cores: "2.5"'),
    ],
)
def test_yaml_booleans_and_numbers_in_client_options_are_refused_with_the_quoted_form(section, value, quoted):
    message = _refusal(job={section: value})
    assert f"job.{section}: option " in message and "not a string; quote it" in message and quoted in message


def test_quoted_client_options_are_kept_as_written():
    job = parse_pair("p", _pair(job={"kafka_options": {"enable.idempotence": "true"}})).job
    assert job.kafka_options == {"enable.idempotence": "true"}


STORE_PATHS = ["sink_root", "checkpoint_root", "run_root", "fencing_marker"]


@pytest.mark.parametrize("key", STORE_PATHS)
@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("s3a://bucket/x/", "s3a://bucket/x"),
        ("hdfs://nn:8020/data", "hdfs://nn:8020/data"),
        ("HDFS://nn:8020/data", "hdfs://nn:8020/data"),
        ("gs://b", "gs://b"),
        ("file:///tmp/x", "/tmp/x"),
    ],
)
def test_a_store_uri_is_kept_as_it_is_never_made_local(key, url, kept):
    assert getattr(parse_pair("p", _pair(job={key: url}), "/etc/pairs.yaml").job, key) == kept


@pytest.mark.parametrize("key", STORE_PATHS)
@pytest.mark.parametrize(
    ("url", "says"),
    [
        (
            "s3://bucket/x",
            "uses the unsupported scheme s3://; Hadoop's S3 connector is s3a://: write s3a://bucket/x",
        ),
        (
            "ftp://host/x",
            "uses the unsupported scheme ftp://; supported: a local path, hdfs://, s3a:// (tested)",
        ),
        ("https://store/x", "name a store by its file system URI"),
        ("s3a:///x", "names no bucket: write s3a://<bucket>/<path>"),
        ("hdfs:///x", "names no host: write hdfs://<host>/<path>"),
        ("s3a://key:secret@bucket/x", "carries credentials or a user in its authority"),
        ("hdfs://nn:8020/x?op=1", "has no query (?) or fragment (#) part"),
    ],
)
def test_an_unsupported_store_uri_is_refused_naming_it(key, url, says):
    message = _refusal(job={key: url})
    assert f"job.{key}: {url!r} " in message and says in message


def test_local_root_takes_no_uri():
    assert "job.local_root: 's3a://b/x' is a URL (s3a://); this option takes a local path" in _refusal(
        job={"local_root": "s3a://b/x"}
    )


def test_local_root_defaults_to_the_run_root_or_beside_the_state_when_the_run_root_is_remote():
    local = parse_pair("p", _pair(job={"run_root": "/runs"}), "/etc/pairs.yaml").job
    assert local.local_root == "/runs"
    remote = parse_pair("p", _pair(job={"run_root": "s3a://b/runs"}), "/etc/pairs.yaml").job
    assert remote.local_root.endswith("/kafka-failover/local")


def test_storage_connections_name_known_schemes_only():
    assert "job.storage_connections: names unknown schemes ['s3']" in _refusal(
        job={"storage_connections": {"s3": "aws_default"}}
    )
    job = parse_pair("p", _pair(job={"storage_connections": {"s3a": "my_s3"}})).job
    assert job.storage_connections == {"s3a": "my_s3"}


def test_relative_paths_still_resolve_against_the_file(tmp_path):
    path = tmp_path / "pairs.yaml"
    path.write_text(
        "pairs:\n  orders:\n    clusters: {A: {connection: a}, B: {connection: b}}\n    primary: A\n"
        "    topics: [orders]\n    job: {sink_root: out/s3:/bucket}\n"
    )
    assert load_pair(path, "orders").job.sink_root == str(tmp_path / "out" / "s3:" / "bucket")


def test_choices_are_enums_that_still_compare_as_the_yaml_strings():
    from airflow_kafka_failover.domain.config import GapAction, ReplicationPolicy, TranslationMethod

    pair = parse_pair("p", _pair(switch={"on_gap": "proceed"}))
    assert pair.switch.on_gap is GapAction.PROCEED and pair.switch.on_gap == "proceed"
    assert pair.replication.policy is ReplicationPolicy.DEFAULT
    assert pair.translation.methods[0] is TranslationMethod.CHECKPOINT
    assert _refusal(switch={"on_gap": True}).endswith("switch.on_gap: True is not one of ['wait', 'proceed']")


def test_a_name_given_inside_a_pair_or_cluster_is_refused():
    assert "pair: unknown key(s) ['name']" in _refusal(name="other")
    clusters = {"A": {"connection": "a", "name": "Z"}, "B": {"connection": "b"}}
    assert "clusters.A: unknown key(s) ['name']" in _refusal(clusters=clusters)


@pytest.mark.parametrize("version", ["2", " 3 "])
def test_an_offset_log_format_other_than_1_is_refused_naming_the_setting(version):
    message = _refusal(job={"spark_conf": {"spark.sql.streaming.offsetLog.formatVersion": version}})
    assert "job.spark_conf: sets spark.sql.streaming.offsetLog.formatVersion=" in message
    assert "format 1 (the default) only: remove the setting" in message


def test_the_default_offset_log_format_may_be_named():
    conf = {"spark.sql.streaming.offsetLog.formatVersion": "1"}
    assert parse_pair("p", _pair(job={"spark_conf": conf}), "/etc/pairs.yaml").job.spark_conf == conf

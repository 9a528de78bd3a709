from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.run_format.options import JobOptions, StreamOptions
from airflow_kafka_failover.run_format.settings import (
    SETTINGS_SCHEMA_VERSION,
    JobSettings,
    SwitchPlan,
    check_starting_offsets,
    missing_partitions,
    parse_starting_offsets,
)

REQUIRED = {
    "pair": "orders",
    "cluster": "A",
    "epoch": 3,
    "bootstrap_servers": "a1:9092,a2:9092",
    "checkpoint": "/ckpt/orders/A/epoch-3",
    "sink_root": "/sink/orders",
    "bookkeeping_group": "failover-orders",
    "fencing_marker": "/fence/orders.json",
    "run_dir": "/runs/orders/A/epoch-3",
}
STRING_FIELDS = (
    "pair",
    "cluster",
    "bootstrap_servers",
    "checkpoint",
    "sink_root",
    "bookkeeping_group",
    "fencing_marker",
    "run_dir",
    "record_id_field",
)


def make(**overrides) -> JobSettings:
    values = {**REQUIRED, "topics": ("orders",), **overrides}
    return JobSettings(**values)


def full() -> JobSettings:
    return make(
        topics=("orders", "A.orders"),
        starting_offsets={"orders": {"0": 42, "1": -2}, "A.orders": {"0": -1}},
        record_id_field="order_id",
        kafka_options={"security.protocol": "SASL_SSL", "sasl.jaas.config": 'x required password="s3cret";'},
        max_offsets_per_trigger=500,
        trigger_interval_seconds=2.5,
        poll_interval_seconds=0.5,
    )


# ---------------------------------------------------------------- validation


def test_valid_settings_keep_their_values():
    settings = make()
    assert settings.topics == ("orders",)
    assert settings.topic_pattern is None
    assert settings.starting_offsets == "earliest"
    assert settings.record_id_field == "id"
    assert settings.kafka_options == {}
    assert settings.max_offsets_per_trigger is None
    assert (settings.trigger_interval_seconds, settings.poll_interval_seconds) == (5.0, 1.0)
    assert settings.schema_version == SETTINGS_SCHEMA_VERSION


def test_the_stream_options_are_those_of_the_one_job_options_model():
    assert isinstance(make(), StreamOptions)
    assert set(StreamOptions.model_fields) <= set(JobOptions.model_fields)
    assert set(StreamOptions.model_fields) <= set(JobSettings.model_fields)


@pytest.mark.parametrize("name", STRING_FIELDS)
@pytest.mark.parametrize("bad", ["", "   ", None, 7])
def test_every_string_setting_must_be_non_empty(name, bad):
    with pytest.raises(ConfigError) as err:
        make(**{name: bad})
    expected = "is required" if bad is None else f"must be a non-empty string, got {bad!r}"
    assert str(err.value) == f"job settings: {name}: {expected}"


@pytest.mark.parametrize("bad", [-1, True, "3", 1.0, None])
def test_epoch_must_be_a_non_negative_integer(bad):
    with pytest.raises(ConfigError) as err:
        make(epoch=bad)
    assert str(err.value) == f"job settings: epoch: must be an integer >= 0, got {bad!r}"


def test_epoch_zero_is_valid():
    assert make(epoch=0).epoch == 0


@pytest.mark.parametrize(
    ("topics", "pattern"),
    [((), None), ((), ""), (("orders",), "orders.*")],
)
def test_exactly_one_of_topics_and_pattern(topics, pattern):
    with pytest.raises(ConfigError) as err:
        make(topics=topics, topic_pattern=pattern)
    assert str(err.value) == (
        f"job settings: job settings name topics={list(topics)!r} and topic_pattern={pattern!r}: "
        "give exactly one of them"
    )


def test_topic_pattern_alone_is_valid():
    settings = make(topics=(), topic_pattern=r"(A\.)?orders")
    assert settings.topic_pattern == r"(A\.)?orders"
    assert settings.topics == ()


@pytest.mark.parametrize("bad", ["two words", "orders/1", "", "ördern", 5])
def test_invalid_topic_names_are_refused(bad):
    with pytest.raises(ConfigError) as err:
        make(topics=("orders", bad))
    assert str(err.value) == f"job settings: topics: has an invalid topic name {bad!r}"


def test_topic_pattern_must_compile():
    with pytest.raises(ConfigError, match=r"topic_pattern '\(orders' is not a regex: "):
        make(topics=(), topic_pattern="(orders")


def test_bad_starting_offsets_are_refused_at_construction():
    with pytest.raises(ConfigError, match=r"starting_offsets: starting offset of orders-0 is -3"):
        make(starting_offsets={"orders": {"0": -3}})


@pytest.mark.parametrize("bad", [0, -5, True, 1.5, "100"])
def test_max_offsets_per_trigger_must_be_positive_integer(bad):
    with pytest.raises(ConfigError) as err:
        make(max_offsets_per_trigger=bad)
    assert str(err.value) == (
        f"job settings: max_offsets_per_trigger: must be an integer >= 1 or left out, got {bad!r}"
    )


@pytest.mark.parametrize("name", ["trigger_interval_seconds", "poll_interval_seconds"])
@pytest.mark.parametrize("bad", [0, -1.5, True, "5", None])
def test_intervals_must_be_positive_numbers(name, bad):
    with pytest.raises(ConfigError) as err:
        make(**{name: bad})
    assert str(err.value) == f"job settings: {name}: must be a number >= 0.1, got {bad!r}"


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_intervals_must_be_finite(bad):
    with pytest.raises(ConfigError) as err:
        make(trigger_interval_seconds=bad)
    assert str(err.value) == (
        f"job settings: trigger_interval_seconds: must be a finite number >= 0.1 of seconds, got {bad!r}"
    )


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ({"security.protocol": 1}, "option 'security.protocol' is the YAML int 1, not a string"),
        (
            {"enable.idempotence": True},
            'quote it so the client receives exactly that text, e.g. enable.idempotence: "true"',
        ),
        ({1: "x"}, "option names are strings, got 1"),
        ([("a", "b")], "must be a mapping, got list"),
        ("a=b", "must be a mapping, got str 'a=b'"),
    ],
)
def test_kafka_options_must_map_strings_to_strings(bad, problem):
    with pytest.raises(ConfigError) as err:
        make(kafka_options=bad)
    assert str(err.value).startswith("job settings: kafka_options: ") and problem in str(err.value)


def test_starting_offsets_option():
    assert make(starting_offsets="latest").starting_offsets_option == "latest"
    settings = make(starting_offsets={"orders": {"1": 7, "0": 5}, "A.orders": {"0": -2}})
    assert settings.starting_offsets_option == '{"A.orders": {"0": -2}, "orders": {"0": 5, "1": 7}}'


# ---------------------------------------------------------------- file round trip


def test_the_file_carries_its_schema_version_and_lists_topics(tmp_path):
    data = json.loads(Path(full().write(str(tmp_path / "settings.json"))).read_text())
    assert data["schema_version"] == SETTINGS_SCHEMA_VERSION == "3.1"
    assert data["topics"] == ["orders", "A.orders"]
    assert set(data) == set(JobSettings.model_fields)


def test_write_is_owner_only_and_load_round_trips(tmp_path):
    settings = full()
    path = Path(settings.write(str(tmp_path / "run" / "settings.json")))
    assert path == tmp_path / "run" / "settings.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]
    assert JobSettings.load(path) == settings
    written = json.loads(path.read_text())
    assert written["kafka_options"]["sasl.jaas.config"] == 'x required password="s3cret";'


def test_write_replaces_an_existing_file(tmp_path):
    path = tmp_path / "settings.json"
    make(epoch=1).write(path)
    make(epoch=2).write(path)
    assert JobSettings.load(path).epoch == 2


def test_load_missing_file(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(ConfigError) as err:
        JobSettings.load(path)
    assert str(err.value) == f"cannot read job settings {path}: no such file"


def test_load_invalid_json(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=rf"^job settings {re.escape(str(path))} are not valid JSON: "):
        JobSettings.load(path)


def file_data(**changes) -> dict:
    return {**make().model_dump(mode="json"), **changes}


def test_load_names_the_file_in_validation_errors(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(file_data(colour="blue")))
    with pytest.raises(ConfigError) as err:
        JobSettings.load(path)
    assert str(err.value).startswith(f"{path}: unknown key(s) ['colour']; known keys are [")


def test_a_newer_major_schema_version_is_refused_naming_the_file_and_both_versions(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(file_data(schema_version="4.0")))
    with pytest.raises(ConfigError) as err:
        JobSettings.load(path)
    assert str(err.value) == (
        f"{path}: schema_version '4.0' comes from a newer provider release; this job reads 3.1 (major 3): "
        "run the job from the same provider release as the operator that wrote the file"
    )


@pytest.mark.parametrize("version", [4, "4", "4.1"])
def test_an_integer_major_is_a_version_too(version):
    with pytest.raises(ConfigError, match=rf"schema_version {re.escape(repr(version))} comes from a newer"):
        JobSettings.parse(file_data(schema_version=version), "x.json")


@pytest.mark.parametrize("version", [1, "1.0", "2.0"])
def test_an_older_major_is_refused_too(version):
    with pytest.raises(ConfigError, match="comes from an older provider release; this job reads 3.1"):
        JobSettings.parse(file_data(schema_version=version), "x.json")


@pytest.mark.parametrize("version", ["3", 3, "3.0", "3.1"])
def test_the_same_major_is_read(version):
    assert JobSettings.parse(file_data(schema_version=version)) == make()


def test_the_plan_of_the_switch_that_started_the_run_round_trips(tmp_path):
    plan = {"summary": {"max_duplicates": 209, "created_at": "2026-11-29T06:03:30+00:00"}, "gap_records": 0}
    path = make(switch_plan=plan).write(str(tmp_path / "settings.json"))
    loaded = JobSettings.load(path)
    assert loaded.switch_plan == SwitchPlan(**plan) and make().switch_plan is None


@pytest.mark.parametrize(
    "plan, problem",
    [
        ({"summary": {}}, "switch_plan.gap_records"),
        ({"summary": {}, "gap_records": -1}, "switch_plan.gap_records"),
        ({"summary": [], "gap_records": 0}, "switch_plan.summary"),
        ({"summary": {}, "gap_records": 0, "bound": 3}, "switch_plan.bound"),
    ],
)
def test_a_malformed_switch_plan_is_refused_naming_it(plan, problem):
    with pytest.raises(ConfigError, match=rf"x\.json: .*{re.escape(problem)}"):
        JobSettings.parse(file_data(switch_plan=plan), "x.json")


def test_a_newer_minor_is_read_and_its_added_settings_ignored():
    assert JobSettings.parse(file_data(schema_version="3.9", added_later=True)) == make()


def test_unknown_settings_of_the_same_minor_are_refused_sorted():
    with pytest.raises(ConfigError) as err:
        JobSettings.parse(file_data(zeta=1, alpha=2), where="x.json")
    assert str(err.value).startswith("x.json: unknown key(s) ['alpha', 'zeta']")


@pytest.mark.parametrize("version", [None, "two", "2.x", True, [2]])
def test_a_malformed_schema_version_is_refused(version):
    with pytest.raises(ConfigError, match=r"x\.json: schema_version .* is not 'MAJOR\.MINOR'"):
        JobSettings.parse(file_data(schema_version=version), "x.json")


def test_a_file_without_schema_version_is_refused():
    data = file_data()
    del data["schema_version"]
    with pytest.raises(
        ConfigError, match="x.json: has no schema_version, so this provider's operators did not"
    ):
        JobSettings.parse(data, "x.json")


@pytest.mark.parametrize("data", [["pair"], "pair=orders", None, 3])
def test_parse_needs_an_object(data):
    with pytest.raises(ConfigError) as err:
        JobSettings.parse(data)
    assert str(err.value) == f"job settings: expected a JSON object, got {type(data).__name__}"


def test_parse_names_a_missing_required_setting():
    data = file_data()
    del data["bootstrap_servers"]
    with pytest.raises(ConfigError, match=r"^job settings: bootstrap_servers: is required$"):
        JobSettings.parse(data)


def test_parse_validates_values():
    with pytest.raises(ConfigError, match=r"^x.json: epoch: must be an integer >= 0, got -1$"):
        JobSettings.parse(file_data(epoch=-1), "x.json")


# ---------------------------------------------------------------- starting offsets


@pytest.mark.parametrize(
    "value",
    [
        "earliest",
        "latest",
        {"orders": {"0": 0}},
        {"orders": {"0": -2, "1": -1, "10": 123456789}, "b": {"3": 1}},
    ],
)
def test_check_starting_offsets_accepts(value):
    assert check_starting_offsets(value) is None


@pytest.mark.parametrize("value", ["EARLIEST", "", "none", {}, [], None, 0])
def test_check_starting_offsets_refuses_other_shapes(value):
    with pytest.raises(ConfigError) as err:
        check_starting_offsets(value)
    assert str(err.value) == (
        "starting offsets must be 'earliest', 'latest' or a map like {\"orders\": {\"0\": 42}}, "
        f"got {value!r}"
    )


@pytest.mark.parametrize("partitions", [{}, [0], 5, None])
def test_check_starting_offsets_refuses_a_topic_without_partition_map(partitions):
    with pytest.raises(ConfigError) as err:
        check_starting_offsets({"orders": partitions})
    assert str(err.value) == (
        f"starting offsets of topic 'orders' must map partitions to offsets, got {partitions!r}"
    )


@pytest.mark.parametrize("key", ["-1", "p0", "", "1.0", " 1", 0])
def test_check_starting_offsets_refuses_bad_partition_keys(key):
    with pytest.raises(ConfigError) as err:
        check_starting_offsets({"orders": {key: 5}})
    assert str(err.value) == (
        f"starting offsets of topic 'orders' have partition key {key!r}; expected a number like '0'"
    )


@pytest.mark.parametrize("offset", [-3, -100, True, False, 1.0, "5", None])
def test_check_starting_offsets_refuses_bad_offsets(offset):
    with pytest.raises(ConfigError) as err:
        check_starting_offsets({"orders": {"0": 1, "2": offset}})
    assert str(err.value) == (
        f"starting offset of orders-2 is {offset!r}; expected an integer >= 0, or -2 (earliest) / -1 (latest)"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("earliest", "earliest"),
        ("  latest\n", "latest"),
        ('{"orders": {"0": 5, "1": -1}}', {"orders": {"0": 5, "1": -1}}),
        ('"earliest"', "earliest"),
        ({"orders": {"0": 5}}, {"orders": {"0": 5}}),
    ],
)
def test_parse_starting_offsets_accepts(text, expected):
    assert parse_starting_offsets(text) == expected


@pytest.mark.parametrize("text", ["nope", "{orders: {0: 5}}", '{"orders": {"0": 5}'])
def test_parse_starting_offsets_refuses_non_json(text):
    with pytest.raises(ConfigError) as err:
        parse_starting_offsets(text)
    message = str(err.value)
    assert message.startswith("starting offsets are not valid JSON (")
    assert f"): {text!r}; give 'earliest', 'latest' or a map like" in message


def test_parse_starting_offsets_quotes_at_most_200_characters():
    text = "x" * 500
    with pytest.raises(ConfigError) as err:
        parse_starting_offsets(text)
    assert f"): {'x' * 200!r}; give" in str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"orders": {"0": -3}}', "starting offset of orders-0 is -3"),
        ('{"orders": {"a": 1}}', "have partition key 'a'"),
        ('{"orders": {"0": true}}', "starting offset of orders-0 is True"),
        ("[1, 2]", "got [1, 2]"),
        ('"LATEST"', "got 'LATEST'"),
    ],
)
def test_parse_starting_offsets_validates_decoded_json(text, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_starting_offsets(text)


# ---------------------------------------------------------------- missing partitions


@pytest.mark.parametrize("value", ["earliest", "latest"])
def test_missing_partitions_of_earliest_or_latest_is_empty(value):
    assert missing_partitions(value, {"orders": 3}) == {"missing": [], "unknown": [], "extra_topics": []}


def test_missing_partitions_of_a_fitting_map_is_empty():
    offsets = {"orders": {"0": 1, "1": 2}, "A.orders": {"0": 3}}
    assert missing_partitions(offsets, {"orders": 2, "A.orders": 1}) == {
        "missing": [],
        "unknown": [],
        "extra_topics": [],
    }


def test_missing_partitions_lists_missing_unknown_and_extra_topics():
    offsets = {
        "orders": {"0": 1, "12": 2, "3": 5},
        "payments": {"0": 0},
        "archive": {"0": 0},
    }
    counts = {"orders": 3, "refunds": 2, "payments": 1}
    assert missing_partitions(offsets, counts) == {
        "missing": ["orders-1", "orders-2", "refunds-0", "refunds-1"],
        "unknown": ["orders-3", "orders-12"],
        "extra_topics": ["archive"],
    }


def test_a_bare_topic_string_is_refused_not_split_into_letters():
    with pytest.raises(ConfigError, match="topics: must be a list of topic names, got 'orders'"):
        make(topics="orders")
    with pytest.raises(ConfigError, match="got 'orders'"):
        JobSettings.parse(file_data(topics="orders"))


@pytest.mark.parametrize("key", ["\u00b2", "\u0663", " 1", "1 "])
def test_partition_keys_are_ascii_digits_only(key):
    with pytest.raises(ConfigError, match="partition key"):
        check_starting_offsets({"t": {key: 0}})


def test_write_narrows_a_stale_temporary_file(tmp_path):
    import os

    target = tmp_path / "settings.json"
    stale = tmp_path / f".settings.json.{os.getpid()}.tmp"
    stale.write_text("old")
    stale.chmod(0o644)
    os.utime(stale, (0, 0))  # left by a writer that crashed long ago
    make(topics=("orders",)).write(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert not stale.exists()

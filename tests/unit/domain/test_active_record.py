"""The active record's typed model: today's stored JSON loads unchanged, bad fields are named."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.domain.active_record import ActiveRecord, SwitchEntry, SwitchKind

WHERE = "Variable kafka_failover.orders.active_record"

# Written by the release before the typed models (active_record.py's hand-written to_dict), copied verbatim.
STORED = """{"schema_version": 1, "pair": "orders", "active": "B", "epoch": 1, "job": {"pair": "orders",
"cluster": "B", "epoch": 1, "deploy_mode": "local", "master": "local[2]", "run_dir": "/runs/orders/B/epoch-1",
"checkpoint": "/ckpt/orders/B/epoch-1", "sink_root": "/sink/orders", "spark_conn_id": "spark_default",
"submitted_at": "2026-11-20T10:00:03+00:00", "driver_id": null, "application_id": null},
"checkpoint": "/ckpt/orders/B/epoch-1", "watermarks": {"A": {"orders-0": 1234, "orders-1": 987}},
"history": [{"at": "2026-11-20T10:00:05+00:00", "from": "A", "to": "B", "epoch": 1, "kind": "failover",
"reason": "automatic failover", "triggered_by": "manual__2026-11-20T09:59:00", "forced": false,
"plan": {"source_cluster": "A", "target_cluster": "B", "created_at": "2026-11-20T10:00:01.5+00:00",
"translated_partitions": 2, "untracked_partitions": 0, "untracked_start": "earliest",
"methods": {"checkpoint": 2}, "gap_partitions": 0, "gap_records": 0, "max_redelivery": 3,
"warnings": 0, "uncommitted_output_records": 0, "max_duplicates": 3}, "gap_records": 0}],
"updated_at": "2026-11-20T10:00:05+00:00"}"""


def test_a_record_written_by_the_previous_release_loads_and_is_written_back_the_same():
    data = json.loads(STORED)
    record = ActiveRecord.from_dict(data, ("A", "B"), WHERE)
    assert (record.active, record.epoch, record.checkpoint) == ("B", 1, "/ckpt/orders/B/epoch-1")
    assert record.job is not None and record.job["deploy_mode"] == "local"
    entry = record.history[0]
    assert isinstance(entry, SwitchEntry)
    assert (entry.kind, entry.from_, entry.to, entry.plan["max_duplicates"]) == (
        SwitchKind.FAILOVER,
        "A",
        "B",
        3,
    )
    assert record.to_dict() == data


def test_a_switch_appends_a_typed_entry_and_merges_watermarks():
    record = ActiveRecord.from_dict(json.loads(STORED), ("A", "B"), WHERE)
    entry = {
        "kind": "failback",
        "reason": "r",
        "triggered_by": "t",
        "forced": True,
        "plan": {},
        "gap_records": 2,
    }
    after = record.switched(
        to="A", job={"pair": "orders"}, checkpoint="/c", entry=entry, watermarks={"A": {"orders-0": 1000}}
    )
    assert (after.active, after.epoch, after.history[-1].kind, after.history[-1].from_) == (
        "A",
        2,
        "failback",
        "B",
    )
    assert after.watermarks["A"] == {"orders-0": 1234, "orders-1": 987}
    stored = after.to_dict()
    assert stored["history"][-1]["from"] == "B" and "from_" not in stored["history"][-1]
    assert ActiveRecord.from_dict(json.loads(json.dumps(stored)), ("A", "B"), WHERE) == after


def test_unknown_history_keys_of_a_newer_release_are_kept():
    data = json.loads(STORED)
    data["history"][0]["approved_by"] = "ops"
    assert ActiveRecord.from_dict(data, ("A", "B"), WHERE).to_dict()["history"][0]["approved_by"] == "ops"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"epoch": -1}, "epoch -1 is not an integer >= 0"),
        ({"epoch": True}, "epoch True is not an integer >= 0"),
        ({"epoch": "1"}, "epoch '1' is not an integer >= 0"),
        ({"history": {}}, "history must be a list of objects"),
        ({"history": [1]}, "history must be a list of objects"),
        ({"watermarks": {"A": [1]}}, "watermarks must map clusters to {'topic-partition': offset}"),
        ({"watermarks": {"A": {"orders-0": "12"}}}, "watermarks must map clusters to"),
        ({"job": "running"}, "job must be a job handle object or null"),
        ({"active": "C"}, "active cluster 'C' is not one of ['A', 'B']"),
        ({"schema_version": 2}, "schema_version 2 is not 1; this provider release cannot read it"),
    ],
)
def test_a_bad_field_is_named_with_the_variable(change, message):
    with pytest.raises(ConfigError) as err:
        ActiveRecord.from_dict({**json.loads(STORED), **change}, ("A", "B"), WHERE)
    assert str(err.value).startswith(f"{WHERE}: ")
    assert message in str(err.value)


def test_a_bad_history_entry_names_its_field():
    data = json.loads(STORED)
    data["history"][0]["kind"] = "sideways"
    with pytest.raises(
        ConfigError, match=r"history\.0\.kind: Input should be 'failover', 'failback' or 'start'"
    ):
        ActiveRecord.from_dict(data, ("A", "B"), WHERE)


def test_not_an_object():
    with pytest.raises(ConfigError, match="the active record must be a JSON object, got list"):
        ActiveRecord.from_dict([], ("A", "B"), WHERE)


def test_the_model_is_a_dataclass_that_validates_on_replace():
    record = ActiveRecord.initial("orders", "A")
    assert replace(record, checkpoint="/c").checkpoint == "/c"
    with pytest.raises(ValueError, match="epoch"):
        replace(record, epoch=-1)

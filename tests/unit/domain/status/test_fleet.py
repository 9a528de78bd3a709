"""Several pairs in one table, the ones in trouble first (``kafka-failover status`` over a fleet)."""

from __future__ import annotations

import json
from dataclasses import replace

from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.status.assembly import assemble
from airflow_kafka_failover.domain.status.fleet import fleet_counts, fleet_rows
from airflow_kafka_failover.domain.status.text import fleet_to_text, statuses_to_json
from airflow_kafka_failover.run_format.fencing import FenceState
from airflow_kafka_failover.run_format.progress import JobProgress
from tests.unit.domain.status.test_assembly import NOW, healthy


def pair(name: str, **changes):
    return assemble(replace(healthy(**changes), pair=name))


def behind(records: int, age: float) -> dict:
    """A running job ``records`` behind on orders-0 whose last batch is ``age`` seconds old."""
    position = {TopicPartition("orders", 0): 103 - records, TopicPartition("A.orders", 0): 42}
    return {"progress": JobProgress(7, position, 140, NOW - age)}


FLEET = [
    pair("calm"),
    pair("lagging", **behind(5000, 3)),
    pair("interrupted", fence=FenceState("orders", 3, "A", "")),
    pair("blind", active_ends=None, active_error="does not answer: timed out"),
    pair("stale", **behind(0, 400), replication=replace(healthy().replication, lags={"orders-0": None})),
    pair("slow", **behind(5000, 90)),
]


def test_rows_put_the_pairs_that_need_a_person_first_then_unread_then_warnings_then_the_furthest_behind():
    rows = fleet_rows(FLEET)
    assert [row.pair for row in rows] == ["interrupted", "blind", "stale", "slow", "lagging", "calm"]
    assert [row.trouble for row in rows] == [
        "ACTION NEEDED",
        "could not read",
        "warning",
        "ok",
        "ok",
        "ok",
    ]
    assert rows[0].first.startswith("INTERRUPTED SWITCH: the fence is at epoch 3 (cluster A)")
    assert rows[1].first == "active cluster B: does not answer: timed out"
    by_pair = {row.pair: row for row in rows}
    assert (by_pair["slow"].lag, by_pair["slow"].last_batch_age_seconds) == (5000, 90.0)
    assert (by_pair["calm"].lag, by_pair["calm"].replication_lag, by_pair["calm"].heartbeat_age_seconds) == (
        5,
        0,
        1.5,
    )
    assert by_pair["blind"].lag is None and by_pair["stale"].replication_lag is None
    assert by_pair["calm"].job == "running" and by_pair["calm"].first == ""


def test_counts_by_trouble():
    assert fleet_counts(FLEET) == {"ACTION NEEDED": 1, "could not read": 1, "warning": 1, "ok": 3}


def test_text_is_a_table_then_the_pairs_in_trouble_in_full():
    text = fleet_to_text(FLEET, "pairs.yaml")
    lines = text.splitlines()
    assert lines[0] == "6 pairs: 1 ACTION NEEDED, 1 could not read, 1 warning, 3 ok"
    assert lines[1].split() == [
        "pair", "active", "epoch", "job", "last", "batch", "lag", "replication", "lag", "heartbeat", "trouble"
    ]  # fmt: skip
    table = [line.split()[0] for line in lines[2:8]]
    assert table == ["interrupted", "blind", "stale", "slow", "lagging", "calm"]
    assert "  slow         B       2      running  90 s        5000  0                2 s        ok" in lines
    assert lines[2].endswith("ACTION NEEDED: INTERRUPTED SWITCH: the fence is at epoch 3 (cluster A) b...")
    details = text.split("\n\n")[1:]
    assert [block.split(":")[0] for block in details[:-1]] == ["pair interrupted", "pair blind", "pair stale"]
    assert details[-1] == "one pair in full: kafka-failover status --config pairs.yaml --pair NAME"


def test_json_keeps_every_pair_in_order_and_adds_the_fleet_rows():
    document = json.loads(statuses_to_json(FLEET))
    assert [status["pair"] for status in document["pairs"]] == [status.pair for status in FLEET]
    assert [row["pair"] for row in document["fleet"]] == [row.pair for row in fleet_rows(FLEET)]
    assert document["fleet"][0]["trouble"] == "ACTION NEEDED"
    assert document["exit_code"] == 4

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from airflow_kafka_failover.core.exceptions import TranslationError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.translation.plan import PartitionTranslation, TranslationPlan

CREATED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def translation(
    partition: int,
    offset: int | None,
    method: str = "offset_sync",
    bound: int | None = 0,
    gap: int = 0,
    warnings: list[str] | None = None,
    topic: str = "A.orders",
) -> PartitionTranslation:
    return PartitionTranslation(
        TopicPartition(topic.removeprefix("A."), partition),
        100 + partition,
        TopicPartition(topic, partition),
        offset,
        method,
        bound,
        gap,
        warnings or [],
    )


def make_plan(translations: list[PartitionTranslation], **kwargs) -> TranslationPlan:
    return TranslationPlan(
        "dc-a",
        "dc-b",
        CREATED,
        translations,
        kwargs.pop("target_partitions", {"A.orders": 4, "A.payments": 2}),
        **kwargs,
    )


def test_starting_offsets_cover_every_target_partition():
    plan = make_plan([translation(0, 90), translation(2, 95, "checkpoint", None)])
    offsets = json.loads(plan.to_spark_starting_offsets())
    assert offsets == {
        "A.orders": {"0": 90, "1": -2, "2": 95, "3": -2},
        "A.payments": {"0": -2, "1": -2},
    }
    assert [str(tp) for tp in plan.untracked] == ["A.orders-1", "A.orders-3", "A.payments-0", "A.payments-1"]


def test_partitions_are_listed_in_numeric_order():
    plan = make_plan([], target_partitions={"t": 12})
    assert list(json.loads(plan.to_spark_starting_offsets())["t"]) == [str(p) for p in range(12)]


def test_untracked_latest_policy():
    plan = make_plan([translation(0, 90)], untracked_partitions="latest")
    assert json.loads(plan.to_spark_starting_offsets())["A.orders"]["1"] == -1


def test_unknown_untracked_policy():
    with pytest.raises(ValueError, match="untracked_partitions"):
        make_plan([], untracked_partitions="none")


def test_translation_outside_target_partitions_is_refused():
    plan = make_plan([translation(9, 90)])
    with pytest.raises(TranslationError, match="A.orders-9.*not a partition of the target topics"):
        plan.to_spark_starting_offsets()
    unknown_topic = make_plan([translation(0, 1, topic="A.refunds")])
    with pytest.raises(TranslationError, match="A.refunds-0"):
        unknown_topic.to_spark_starting_offsets()


def test_missing_offset_without_gap_is_refused():
    plan = make_plan([translation(0, None, warnings=["no method could translate this partition"])])
    with pytest.raises(TranslationError, match="no start offset for A.orders-0.*no method could translate"):
        plan.to_spark_starting_offsets()


def test_missing_offset_with_gap_is_refused_too():
    plan = make_plan([translation(0, None, "none", gap=5, warnings=["no method could translate"])])
    assert [t.target for t in plan.without_start] == [TopicPartition("A.orders", 0)]
    with pytest.raises(TranslationError, match="no start offset for A.orders-0"):
        plan.to_spark_starting_offsets()


def test_negative_offset_is_refused():
    with pytest.raises(TranslationError, match="negative"):
        make_plan([translation(0, -1)]).to_spark_starting_offsets()


def test_duplicate_target_is_refused():
    with pytest.raises(ValueError, match="translated twice"):
        make_plan([translation(0, 1), translation(0, 2)])


def test_bad_partition_counts_and_naive_time():
    with pytest.raises(ValueError, match="partition count 0"):
        make_plan([], target_partitions={"t": 0})
    with pytest.raises(ValueError, match="timezone info"):
        TranslationPlan("a", "b", datetime(2025, 1, 1), [], {"t": 1})


def test_gap_and_redelivery_figures():
    plan = make_plan(
        [translation(0, 90, bound=3), translation(1, 80, bound=4, gap=7), translation(2, 70, bound=0)]
    )
    assert plan.has_gaps
    assert [t.target.partition for t in plan.gaps] == [1]
    assert plan.total_gap_records == 7
    assert plan.max_redelivery == 7


def test_unknown_bound_makes_total_unknown():
    plan = make_plan([translation(0, 90, bound=3), translation(1, 80, bound=None)])
    assert plan.max_redelivery is None
    assert not plan.has_gaps and plan.total_gap_records == 0


def test_json_round_trip():
    plan = make_plan(
        [translation(0, 90, bound=3, warnings=["w1", "w2"]), translation(1, None, gap=2, bound=None)],
        untracked_partitions="latest",
    )
    text = plan.to_json()
    assert json.loads(text)["created_at"] == "2025-01-02T03:04:05+00:00"
    again = TranslationPlan.from_json(text)
    assert again == plan
    assert again.to_json() == text


@pytest.mark.parametrize("text", ["nope", "{}", '{"source_cluster": "a"}', "[1]"])
def test_from_json_rejects_other_json(text):
    with pytest.raises(TranslationError, match="not a translation plan"):
        TranslationPlan.from_json(text)


def test_from_json_rejects_bad_translation():
    data = json.loads(make_plan([translation(0, 1)]).to_json())
    data["translations"][0]["method"] = "magic"
    with pytest.raises(TranslationError, match="not a translation plan.*translations.0.method.*'magic'"):
        TranslationPlan.from_json(json.dumps(data))


def test_create_stamps_utc_now():
    plan = TranslationPlan.create("a", "b", [], {"t": 1})
    assert plan.created_at.tzinfo is not None
    assert (datetime.now(UTC) - plan.created_at).total_seconds() < 60


def test_summary():
    plan = make_plan(
        [
            translation(0, 90, bound=3),
            translation(1, 80, "checkpoint", bound=None, gap=4, warnings=["careful"]),
        ]
    )
    assert plan.summary() == {
        "source_cluster": "dc-a",
        "target_cluster": "dc-b",
        "created_at": "2025-01-02T03:04:05+00:00",
        "translated_partitions": 2,
        "untracked_partitions": 4,
        "untracked_start": "earliest",
        "untracked_redelivery_bound": 0,
        "methods": {"checkpoint": 1, "offset_sync": 1},
        "gap_partitions": 1,
        "gap_records": 4,
        "without_start": 0,
        "max_redelivery": None,
        "warnings": 1,
    }
    json.dumps(plan.summary())


def test_table():
    plan = make_plan(
        [
            translation(1, 80, "checkpoint", bound=None, gap=4, warnings=["careful", "twice"]),
            translation(0, 12345, bound=3),
        ]
    )
    lines = plan.to_table().splitlines()
    header = ["source", "offset", "target", "start", "method", "redeliver<=", "gap", "warnings"]
    assert lines[0].split() == header
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].split() == ["orders-0", "100", "A.orders-0", "12345", "offset_sync", "3"]
    assert lines[3].split()[:6] == ["orders-1", "101", "A.orders-1", "80", "checkpoint", "-"]
    assert lines[3].endswith("4  careful; twice")
    # Fixed width: the target column starts at the same place on every row.
    assert lines[2].index("A.orders-0") == lines[3].index("A.orders-1") == lines[0].index("target")
    assert lines[-1] == (
        "dc-a -> dc-b: 2 partitions translated (checkpoint=1, offset_sync=1), 4 untracked start at earliest; "
        "gaps: 1 partitions, 4 records; re-delivery bound unknown"
    )


def test_empty_plan_table():
    plan = make_plan([])
    assert "0 partitions translated (none)" in plan.to_table()
    assert plan.to_table().endswith("re-delivery at most 0 records")


def test_plan_payload_is_typed_and_refuses_unknown_keys():
    from airflow_kafka_failover.domain.translation.plan import PlanPayload

    plan = make_plan([translation(0, 90)])
    payload = PlanPayload(
        plan=plan.to_json(),
        summary=plan.summary(),
        starting_offsets=plan.to_spark_starting_offsets(),
        gap_records=0,
        source_watermarks={"orders-0": 100},
        dry_run=False,
    ).model_dump(mode="json")
    assert json.loads(json.dumps(payload)) == payload
    assert TranslationPlan.from_json(payload["plan"]) == plan
    with pytest.raises(ValueError, match="source_watermarks.orders-0"):
        PlanPayload.model_validate({**payload, "source_watermarks": {"orders-0": "100"}})
    with pytest.raises(ValueError, match="lost_records"):
        PlanPayload.model_validate({**payload, "lost_records": 3})

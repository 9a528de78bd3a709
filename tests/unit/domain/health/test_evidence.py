"""Probe evidence: the three outcomes, the JSON round trip, and the log table."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_kafka_failover.domain.health.evidence import (
    ProbeResult,
    describe_exception,
    format_clock,
    format_partition_evidence,
    format_probe_table,
)

# 2023-11-14 22:13:20 UTC
BASE = 1_700_000_000.0

partitions = st.lists(st.from_regex(r"[a-z.]{1,12}-[0-9]{1,2}", fullmatch=True), max_size=4).map(tuple)

probes = st.builds(
    ProbeResult,
    cluster=st.sampled_from(["A", "B", "dc-east"]),
    at=st.floats(min_value=0, max_value=4_000_000_000, allow_nan=False),
    reachable=st.booleans(),
    latency_s=st.none() | st.floats(min_value=0, max_value=60, allow_nan=False),
    broker_count=st.integers(min_value=0, max_value=50),
    leaderless_partitions=partitions,
    under_min_isr_partitions=partitions,
    canary_ok=st.none() | st.booleans(),
    error=st.none() | st.text(max_size=200),
    unreadable_partitions=partitions,
    under_replicated_partitions=partitions,
    partitions_checked=st.integers(min_value=0, max_value=500),
)


@given(probes)
def test_every_probe_is_exactly_one_of_ok_degraded_failed(probe: ProbeResult) -> None:
    assert [probe.ok, probe.degraded, probe.failed].count(True) == 1
    assert probe.outcome == {True: "FAILED"}.get(probe.failed, "degraded" if probe.degraded else "ok")


@given(probes)
def test_a_degraded_probe_is_of_one_kind_or_both(probe: ProbeResult) -> None:
    assert probe.degraded == (probe.partitions_down or probe.reads_failing)
    assert not (probe.failed and (probe.partitions_down or probe.reads_failing))
    # Under-replicated partitions are evidence for the log only: alone they leave a probe OK.
    if not probe.failed and probe.under_replicated_partitions:
        alone = probe.model_copy(
            update={
                "leaderless_partitions": (),
                "under_min_isr_partitions": (),
                "unreadable_partitions": (),
                "canary_ok": None,
            }
        )
        assert alone.ok


@given(probes)
def test_json_payload_round_trips(probe: ProbeResult) -> None:
    data = json.loads(json.dumps(probe.model_dump(mode="json")))
    assert ProbeResult.model_validate(data) == probe


def _probe(
    reachable: bool = True, latency_s: float | None = 0.01, broker_count: int = 3, **rest
) -> ProbeResult:
    return ProbeResult(
        cluster="A", at=BASE, reachable=reachable, latency_s=latency_s, broker_count=broker_count, **rest
    )


def test_an_unreachable_cluster_failed_and_a_leaderless_one_is_degraded() -> None:
    assert _probe(reachable=False, latency_s=None, broker_count=0, error="timeout").failed
    assert _probe(broker_count=0).failed  # an answer listing no broker serves nothing
    leaderless = _probe(leaderless_partitions=("orders-0",))
    assert leaderless.degraded and not leaderless.failed
    assert _probe(under_min_isr_partitions=("orders-1",)).degraded
    assert _probe(canary_ok=False).degraded
    assert _probe(canary_ok=True).ok
    assert _probe().ok


def test_the_metadata_says_partitions_are_down_the_probe_says_reads_fail() -> None:
    assert _probe(leaderless_partitions=("orders-0",)).partitions_down
    assert _probe(under_min_isr_partitions=("orders-0",)).partitions_down
    silent = _probe(unreadable_partitions=("orders-1 (leader 2: no answer within 2 s)",))
    assert silent.reads_failing and silent.degraded and not silent.partitions_down
    assert _probe(canary_ok=False).reads_failing
    assert _probe(under_replicated_partitions=("orders-0",)).ok


def test_partition_evidence_names_each_partition_and_its_trouble() -> None:
    text = format_partition_evidence(
        _probe(
            leaderless_partitions=("orders-0",),
            unreadable_partitions=("orders-1 (leader 2: no answer within 2 s)",),
            under_replicated_partitions=("orders-2",),
            partitions_checked=3,
        )
    )
    assert text.splitlines() == [
        "Partitions of cluster A at 22:13:20.0 UTC (degraded):",
        "  orders-0: no leader",
        "  orders-1 (leader 2: no answer within 2 s): leader does not answer",
        "  orders-2: under-replicated (not a failure)",
    ]
    assert format_partition_evidence(_probe(partitions_checked=3)) == ""


def test_validation_names_unknown_and_missing_keys() -> None:
    data = _probe().model_dump(mode="json")
    with pytest.raises(ValueError, match="brokers"):
        ProbeResult.model_validate({**data, "brokers": 3})
    del data["broker_count"]
    with pytest.raises(ValueError, match="broker_count"):
        ProbeResult.model_validate(data)


def test_the_payload_keeps_its_json_shape() -> None:
    assert _probe(leaderless_partitions=("orders-0",)).model_dump(mode="json") == {
        "cluster": "A",
        "at": BASE,
        "reachable": True,
        "latency_s": 0.01,
        "broker_count": 3,
        "leaderless_partitions": ["orders-0"],
        "under_min_isr_partitions": [],
        "canary_ok": None,
        "error": None,
        "unreadable_partitions": [],
        "under_replicated_partitions": [],
        "partitions_checked": 0,
    }


@pytest.mark.parametrize(
    ("exc", "text"),
    [(TimeoutError(), "TimeoutError"), (ValueError("bad offset"), "ValueError: bad offset")],
)
def test_an_exception_is_named_by_its_type_even_without_text(exc: BaseException, text: str) -> None:
    assert describe_exception(exc) == text


def test_format_clock_is_utc_with_tenths() -> None:
    assert format_clock(BASE) == "22:13:20.0"
    assert format_clock(BASE + 3661.27) == "23:14:21.2"


def _error_column(table: str) -> int:
    return table.splitlines()[0].index("error")


def test_table_has_one_aligned_row_per_probe_oldest_first() -> None:
    history = [
        ProbeResult(
            cluster="A",
            at=BASE + 4,
            reachable=False,
            latency_s=None,
            broker_count=0,
            error="KafkaError{code=_TRANSPORT}\nsecond line " + "x" * 80,
        ),
        ProbeResult(cluster="A", at=BASE, reachable=True, latency_s=0.0123, broker_count=3),
        ProbeResult(
            cluster="A",
            at=BASE + 2,
            reachable=True,
            latency_s=0.5,
            broker_count=3,
            leaderless_partitions=("orders-0", "orders-1"),
            canary_ok=False,
            partitions_checked=12,
        ),
    ]
    table = format_probe_table(history)
    lines = table.splitlines()
    assert len(lines) == 4
    assert lines[0].split() == [
        "time", "(UTC)", "cluster", "outcome", "reach", "brokers", "latency", "ms", "checked",
        "leaderless", "unreadable", "under", "isr", "under", "rep", "canary", "error",
    ]  # fmt: skip
    assert lines[1].startswith("22:13:20.0") and "12.3" in lines[1] and lines[1].split()[2] == "ok"
    assert lines[2].startswith("22:13:22.0") and "degraded" in lines[2] and "FAIL" in lines[2]
    assert lines[3].startswith("22:13:24.0") and "FAILED" in lines[3]
    # The error is the last column, on one line, cut with an ellipsis.
    error_cell = lines[3][_error_column(table) :]
    assert error_cell.startswith("KafkaError{code=_TRANSPORT} second line")
    assert error_cell.endswith("...") and len(error_cell) == 48
    # Fixed width: the leaderless count of every row ends under the header's column end.
    leaderless_end = lines[0].index("leaderless") + len("leaderless")
    assert [line[leaderless_end - 1] for line in lines[1:]] == ["0", "2", "0"]
    checked_end = lines[0].index("checked") + len("checked")
    assert [line[checked_end - 2 : checked_end] for line in lines[1:]] == [" 0", "12", " 0"]
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d\.\d", line[:10]) for line in lines[1:])


def test_table_of_nothing_says_so() -> None:
    assert format_probe_table([]).splitlines()[1] == "(no probes)"

from __future__ import annotations

import bisect
from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from airflow_kafka_failover.core.exceptions import TranslationError
from airflow_kafka_failover.core.types import TopicPartition, Watermarks
from airflow_kafka_failover.domain.translation.choosing import (
    PartitionRequest,
    choose_translation,
    translate_partition,
    translate_partitions,
    validate_method_order,
)
from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint
from airflow_kafka_failover.domain.translation.plan import (
    AUTOMATIC_METHODS,
    PartitionTranslation,
    TranslationMethod,
)
from airflow_kafka_failover.domain.translation.rules import (
    TimestampLookup,
    translate_by_checkpoint,
    translate_by_identity,
    translate_by_offset_sync,
    translate_by_offset_sync_reverse,
    translate_by_timestamp,
)
from airflow_kafka_failover.domain.translation.sync_history import OffsetSyncHistory
from tests.property_examples import examples

SRC = TopicPartition("orders", 0)
DST = TopicPartition("A.orders", 0)
PROPERTY = settings(max_examples=examples(150), deadline=None)


# ---------------------------------------------------------------- ground truth model


@dataclass
class ReplicatedPartition:
    """Ground truth: which upstream records were copied where, and the syncs MM2 emitted."""

    upstream_end: int  # next upstream offset to be written
    replicated: list[int]  # upstream offsets of records that were copied, increasing
    downstream_of: dict[int, int]  # upstream record -> its downstream offset
    downstream_end: int  # next downstream offset to be written
    syncs: list[tuple[int, int]]

    @property
    def downstream_offsets(self) -> list[int]:
        return [self.downstream_of[u] for u in self.replicated]

    def true_downstream_position(self, position: int) -> int:
        """Downstream offset of the first replicated record at or after ``position``."""
        i = bisect.bisect_left(self.replicated, position)
        return self.downstream_of[self.replicated[i]] if i < len(self.replicated) else self.downstream_end

    def redelivered_downstream(self, start: int, position: int) -> int:
        """Records already processed upstream (offset < position) that a downstream start re-delivers."""
        return sum(1 for u in self.replicated if u < position and self.downstream_of[u] >= start)

    def lost_downstream(self, start: int, position: int) -> int:
        """Records not yet processed that a downstream start skips."""
        return sum(1 for u in self.replicated if u >= position and self.downstream_of[u] < start)

    def true_upstream_position(self, position: int) -> int:
        """Upstream offset of the first replicated record copied at or after downstream ``position``."""
        for u in self.replicated:
            if self.downstream_of[u] >= position:
                return u
        return self.upstream_end

    def redelivered_upstream(self, start: int, position: int) -> int:
        """Records processed downstream (copy < position) whose originals an upstream start re-delivers."""
        return sum(1 for u in self.replicated if u >= start and self.downstream_of[u] < position)


@st.composite
def replicated_partitions(
    draw, min_records: int = 1, first_record_synced: bool = False
) -> ReplicatedPartition:
    upstream_start = draw(st.integers(0, 30))  # retention already removed older upstream records
    # Per upstream offset: copied, or dropped (transaction marker, aborted, compacted, filtered).
    kept = draw(st.lists(st.integers(0, 9).map(lambda n: n < 7), min_size=min_records, max_size=120))
    downstream = draw(st.integers(0, 40))
    replicated, downstream_of = [], {}
    for i, copied in enumerate(kept):
        if copied:
            downstream += draw(st.sampled_from([0, 0, 0, 0, 1, 2]))  # markers / foreign offsets downstream
            replicated.append(upstream_start + i)
            downstream_of[upstream_start + i] = downstream
            downstream += 1
    downstream_end = downstream + draw(st.sampled_from([0, 0, 1]))
    flags = draw(st.lists(st.booleans(), min_size=len(replicated), max_size=len(replicated)))
    if first_record_synced and flags:
        flags[0] = True  # MM2 emits a sync for the first record a task replicates
    syncs = [(u, downstream_of[u]) for u, flag in zip(replicated, flags, strict=True) if flag]
    return ReplicatedPartition(upstream_start + len(kept), replicated, downstream_of, downstream_end, syncs)


# ---------------------------------------------------------------- forward offset sync: properties


@PROPERTY
@given(replicated_partitions(), st.data())
def test_forward_sync_is_never_later_and_bound_holds(truth, data):
    history = OffsetSyncHistory.from_syncs(truth.syncs)
    position = data.draw(st.integers(0, truth.upstream_end + 3), label="position")
    result = translate_by_offset_sync(SRC, position, DST, history)
    if result.target_offset is None:
        assert not truth.syncs or truth.syncs[0][0] > position
        return
    true_position = truth.true_downstream_position(position)
    assert result.target_offset <= true_position
    assert result.redelivery_bound is not None
    assert truth.redelivered_downstream(result.target_offset, position) <= result.redelivery_bound
    assert truth.lost_downstream(result.target_offset, position) == 0


@PROPERTY
@given(replicated_partitions(), st.data())
def test_forward_sync_matches_mm2_rule(truth, data):
    """Reference: MM2's OffsetSyncStore.translateDownstream, written as a plain linear scan."""
    history = OffsetSyncHistory.from_syncs(truth.syncs)
    position = data.draw(st.integers(0, truth.upstream_end + 3))
    before = [s for s in truth.syncs if s[0] <= position]
    expected = None
    if before:
        upstream, downstream = before[-1]
        expected = downstream if upstream == position else downstream + 1
    assert translate_by_offset_sync(SRC, position, DST, history).target_offset == expected


def test_forward_sync_examples():
    history = OffsetSyncHistory.from_syncs([(100, 90), (200, 180)])
    exact = translate_by_offset_sync(SRC, 100, DST, history)
    assert (exact.target_offset, exact.redelivery_bound, exact.method) == (90, 0, "offset_sync")
    after = translate_by_offset_sync(SRC, 150, DST, history)
    # Never interpolate: 90 + 50 = 140 could skip records if upstream offsets were dropped.
    assert (after.target_offset, after.redelivery_bound) == (91, 49)
    # The next sync caps the true position at 180, a tighter bound than position - upstream - 1.
    near_next = translate_by_offset_sync(SRC, 199, DST, OffsetSyncHistory.from_syncs([(100, 90), (200, 120)]))
    assert (near_next.target_offset, near_next.redelivery_bound) == (91, 29)
    beyond = translate_by_offset_sync(SRC, 500, DST, history)
    assert (beyond.target_offset, beyond.redelivery_bound) == (181, 299)


def test_forward_sync_without_usable_sync():
    history = OffsetSyncHistory.from_syncs([(100, 90)])
    early = translate_by_offset_sync(SRC, 99, DST, history)
    assert early.target_offset is None
    assert "older than every offset sync" in early.warnings[0]
    empty = translate_by_offset_sync(SRC, 99, DST, OffsetSyncHistory.from_syncs([]))
    assert empty.target_offset is None and "no offset syncs" in empty.warnings[0]


# ---------------------------------------------------------------- reverse offset sync


@PROPERTY
@given(replicated_partitions(), st.data())
def test_reverse_sync_is_never_later_and_bound_holds(truth, data):
    history = OffsetSyncHistory.from_syncs(truth.syncs)
    position = data.draw(st.integers(0, truth.downstream_end + 3), label="downstream position")
    result = translate_by_offset_sync_reverse(DST, position, SRC, history)
    assert result.method == "offset_sync_reverse"
    if result.target_offset is None:
        assert not truth.syncs or truth.syncs[0][1] > position
        return
    assert result.target_offset <= truth.true_upstream_position(position)
    assert result.redelivery_bound is not None
    assert truth.redelivered_upstream(result.target_offset, position) <= result.redelivery_bound


def test_reverse_sync_examples():
    history = OffsetSyncHistory.from_syncs([(100, 90), (200, 180)])
    exact = translate_by_offset_sync_reverse(DST, 180, SRC, history)
    assert (exact.target_offset, exact.redelivery_bound) == (200, 0)
    between = translate_by_offset_sync_reverse(DST, 150, SRC, history)
    assert (between.target_offset, between.redelivery_bound) == (100, 60)
    assert translate_by_offset_sync_reverse(DST, 89, SRC, history).target_offset is None
    sparse = OffsetSyncHistory.from_syncs([(100, 90), (200, 120)])
    close = translate_by_offset_sync_reverse(DST, 119, SRC, sparse)
    assert (close.target_offset, close.redelivery_bound) == (100, 29)
    # 90 downstream offsets for 20 upstream ones: up to 70 records may be copies made twice (an MM2
    # restart after its last sync), so the next sync no longer caps the bound.
    dense = OffsetSyncHistory.from_syncs([(100, 90), (120, 180)])
    close = translate_by_offset_sync_reverse(DST, 179, SRC, dense)
    assert (close.target_offset, close.redelivery_bound) == (100, 89)


# ---------------------------------------------------------------- checkpoints


def mm2_checkpoint(history: OffsetSyncHistory, group_offset: int) -> Checkpoint | None:
    translated = translate_by_offset_sync(SRC, group_offset, DST, history).target_offset
    if translated is None:
        return None
    return Checkpoint("job", DST.topic, DST.partition, group_offset, translated)


@PROPERTY
@given(replicated_partitions(min_records=3, first_record_synced=True), st.data())
def test_checkpoint_is_never_later_and_bound_holds(truth, data):
    assume(truth.syncs)
    first_synced = truth.syncs[0][0]
    position = data.draw(st.integers(first_synced, truth.upstream_end + 3), label="position")
    group_offset = data.draw(st.integers(first_synced, position), label="group offset")
    # MM2 keeps a coarser history than the topic holds: it translated with a subset of the syncs.
    mm2_syncs = [truth.syncs[0]] + [s for s in truth.syncs[1:] if data.draw(st.booleans())]
    checkpoint = mm2_checkpoint(OffsetSyncHistory.from_syncs(mm2_syncs), group_offset)
    assert checkpoint is not None
    true_position = truth.true_downstream_position(position)
    for history in (None, OffsetSyncHistory.from_syncs(truth.syncs)):
        result = translate_by_checkpoint(SRC, position, DST, checkpoint, history)
        assert result.target_offset == checkpoint.downstream_offset
        assert result.target_offset <= true_position
        if result.redelivery_bound is not None:
            assert truth.redelivered_downstream(result.target_offset, position) <= result.redelivery_bound


def test_checkpoint_bound_unknown_without_syncs():
    checkpoint = Checkpoint("job", "A.orders", 0, 150, 91)
    result = translate_by_checkpoint(SRC, 160, DST, checkpoint)
    assert (result.target_offset, result.redelivery_bound, result.method) == (91, None, "checkpoint")


def test_checkpoint_bound_with_syncs():
    history = OffsetSyncHistory.from_syncs([(100, 90), (150, 140), (200, 190)])
    exact = Checkpoint("job", "A.orders", 0, 150, 140)
    assert translate_by_checkpoint(SRC, 160, DST, exact, history).redelivery_bound == 10
    coarse = Checkpoint("job", "A.orders", 0, 150, 91)  # MM2 only had the (100, 90) sync then
    assert translate_by_checkpoint(SRC, 160, DST, coarse, history).redelivery_bound == 59


def test_checkpoint_ahead_of_position_is_unusable():
    result = translate_by_checkpoint(SRC, 100, DST, Checkpoint("job", "A.orders", 0, 101, 95))
    assert result.target_offset is None
    assert "ahead of the position 100" in result.warnings[0]


def test_checkpoint_later_than_syncs_allow_is_refused():
    history = OffsetSyncHistory.from_syncs([(100, 90), (200, 150)])
    interpolated = Checkpoint("job", "A.orders", 0, 190, 180)  # old MM2: 90 + (190 - 100)
    result = translate_by_checkpoint(SRC, 195, DST, interpolated, history)
    assert result.target_offset is None
    assert "later than the offset sync" in result.warnings[0]


def test_checkpoint_without_offset_is_unusable():
    result = translate_by_checkpoint(SRC, 100, DST, Checkpoint("job", "A.orders", 0, 50, -1))
    assert result.target_offset is None


def test_checkpoint_for_other_partition_is_an_error():
    with pytest.raises(TranslationError, match="target-side topic"):
        translate_by_checkpoint(SRC, 100, DST, Checkpoint("job", "orders", 0, 50, 40))


# ---------------------------------------------------------------- identity, timestamp


def test_identity():
    result = translate_by_identity(SRC, 42, TopicPartition("orders", 0))
    assert (result.target_offset, result.redelivery_bound, result.method, result.is_proven) == (
        42,
        0,
        "identity",
        True,
    )


def test_timestamp():
    found = translate_by_timestamp(SRC, 10, DST, TimestampLookup(1_700_000_000_000, 77), high_watermark=100)
    assert (found.target_offset, found.redelivery_bound, found.method, found.is_proven) == (
        77,
        None,
        "timestamp",
        False,
    )
    assert "not proven" in found.warnings[0]
    none_after = translate_by_timestamp(SRC, 10, DST, TimestampLookup(5, None), high_watermark=100)
    assert none_after.target_offset == 100
    assert "high watermark" in none_after.warnings[-1]
    unknown_high = translate_by_timestamp(SRC, 10, DST, TimestampLookup(5, None), high_watermark=None)
    assert unknown_high.target_offset is None


def test_timestamp_into_the_origin_is_bounded_by_what_the_origin_holds_and_by_the_copies_processed():
    """The job read a replica (``B.orders`` on A) and the target is its origin (``orders`` on B): the
    originals read again lie between the start and the origin's end, one per processed copy at most."""
    replica, origin = TopicPartition("B.orders", 0), TopicPartition("orders", 0)
    found = translate_by_timestamp(replica, 2361, origin, TimestampLookup(5, 1161), 2362, reverse=True)
    assert (found.target_offset, found.redelivery_bound, found.is_proven) == (1161, 1201, False)
    assert "not proven" in found.warnings[0]  # the loss side is still an assumption
    few_copies = translate_by_timestamp(replica, 40, origin, TimestampLookup(5, 1161), 2362, reverse=True)
    assert few_copies.redelivery_bound == 40
    at_the_end = translate_by_timestamp(replica, 2361, origin, TimestampLookup(5, None), 2362, reverse=True)
    assert (at_the_end.target_offset, at_the_end.redelivery_bound) == (2362, 0)
    unknown_end = translate_by_timestamp(replica, 2361, origin, TimestampLookup(5, 1161), None, reverse=True)
    assert unknown_end.redelivery_bound is None


# ---------------------------------------------------------------- choosing


ORDER = ["checkpoint", "offset_sync", "timestamp"]


def candidate(
    method: str, offset: int | None, bound: int | None = None, warning: str = ""
) -> PartitionTranslation:
    return PartitionTranslation(SRC, 500, DST, offset, method, bound, warnings=[warning] if warning else [])


def test_choose_takes_greatest_proven_offset_and_smallest_bound():
    chosen = choose_translation(
        [candidate("checkpoint", 480, None), candidate("offset_sync", 470, 5), candidate("timestamp", 499)],
        ORDER,
    )
    assert (chosen.method, chosen.target_offset, chosen.redelivery_bound) == ("checkpoint", 480, 5)


def test_choose_ties_follow_configured_order():
    candidates = [candidate("checkpoint", 480, 7), candidate("offset_sync", 480, 3)]
    assert choose_translation(candidates, ORDER).method == "checkpoint"
    chosen = choose_translation(candidates, ["offset_sync", "checkpoint"])
    assert (chosen.method, chosen.redelivery_bound) == ("offset_sync", 3)


def test_choose_uses_unproven_only_without_proven():
    chosen = choose_translation(
        [
            candidate("checkpoint", None, warning="no checkpoint"),
            candidate("timestamp", 450, warning="ts caveat"),
        ],
        ORDER,
    )
    assert (chosen.method, chosen.target_offset) == ("timestamp", 450)
    assert chosen.warnings == ["ts caveat", "checkpoint not used: no checkpoint"]


def test_choose_reports_why_preferred_methods_were_skipped():
    chosen = choose_translation(
        [candidate("checkpoint", None, warning="no checkpoint"), candidate("offset_sync", 470, 5)], ORDER
    )
    assert chosen.warnings == ["checkpoint not used: no checkpoint"]


def test_choose_without_any_offset():
    chosen = choose_translation(
        [candidate("checkpoint", None, warning="a"), candidate("offset_sync", None, warning="b")], ORDER
    )
    assert chosen.target_offset is None
    assert chosen.method == "none"  # never the name of a method that produced nothing
    assert chosen.redelivery_bound is None
    assert chosen.warnings == ["no method could translate this partition", "checkpoint: a", "offset_sync: b"]


def test_clamp_below_low_watermark_counts_possible_loss():
    chosen = choose_translation([candidate("offset_sync", 470, 5)], ORDER, Watermarks(low=480, high=1000))
    assert (chosen.target_offset, chosen.gap_records, chosen.redelivery_bound) == (480, 10, 5)
    assert "deleted by retention" in chosen.warnings[-1]


def test_clamp_above_high_watermark_is_a_gap():
    chosen = choose_translation([candidate("offset_sync", 470, 5)], ORDER, Watermarks(low=0, high=460))
    assert (chosen.target_offset, chosen.gap_records, chosen.redelivery_bound) == (460, 10, 15)
    assert "beyond its high watermark 460" in chosen.warnings[-1]
    assert chosen.gap_records > 0


def test_clamp_inside_watermarks_changes_nothing():
    original = candidate("offset_sync", 470, 5)
    chosen = choose_translation([original], ORDER, Watermarks(low=470, high=470))
    assert (chosen.target_offset, chosen.gap_records, chosen.warnings) == (470, 0, [])


def test_choose_rejects_bad_input():
    with pytest.raises(TranslationError, match="at least one"):
        choose_translation([], ORDER)
    with pytest.raises(TranslationError, match="not in the configured order"):
        choose_translation([candidate("identity", 1)], ORDER)
    other = PartitionTranslation(TopicPartition("other", 0), 500, DST, 1, "offset_sync")
    with pytest.raises(TranslationError, match="mix partitions"):
        choose_translation([candidate("checkpoint", 1), other], ORDER)


@pytest.mark.parametrize(
    ("order", "message"),
    [
        ([], "non-empty"),
        ("checkpoint", "non-empty"),
        (["checkpoint", "magic"], "unknown translation method 'magic'"),
        (["checkpoint", "checkpoint"], "listed twice"),
    ],
)
def test_method_order_validation(order, message):
    with pytest.raises(TranslationError, match=message):
        validate_method_order(order)


def test_watermarks_validation():
    with pytest.raises(TranslationError, match="low <= high"):
        Watermarks(10, 5)


@PROPERTY
@given(replicated_partitions(first_record_synced=True), st.data())
def test_chosen_and_clamped_result_is_safe(truth, data):
    """After choosing and clamping: nothing is skipped without being counted, re-delivery stays bounded."""
    position = data.draw(st.integers(0, truth.upstream_end + 3), label="position")
    history = OffsetSyncHistory.from_syncs(truth.syncs)
    group_offset = data.draw(st.integers(0, position), label="group offset")
    mm2_syncs = [s for s in truth.syncs if data.draw(st.booleans())]
    checkpoint = mm2_checkpoint(OffsetSyncHistory.from_syncs(mm2_syncs), group_offset)
    # Target watermarks: retention may have removed a prefix, replication may lag behind.
    low = data.draw(st.integers(0, truth.downstream_end), label="low")
    high = data.draw(st.integers(low, truth.downstream_end), label="high")
    order = data.draw(st.permutations(["checkpoint", "offset_sync"]), label="order")
    request = PartitionRequest(
        SRC, position, DST, offset_syncs=history, checkpoint=checkpoint, watermarks=Watermarks(low, high)
    )
    result = translate_partition(request, order)
    if result.target_offset is None:
        return
    assert low <= result.target_offset <= high
    lost = truth.lost_downstream(result.target_offset, position)
    assert lost <= result.gap_records
    if result.redelivery_bound is not None:
        assert truth.redelivered_downstream(result.target_offset, position) <= result.redelivery_bound


# ---------------------------------------------------------------- per-partition and vectorised entry points


def test_translate_partition_uses_each_input():
    history = OffsetSyncHistory.from_syncs([(100, 90)])
    request = PartitionRequest(
        SRC,
        150,
        DST,
        offset_syncs=history,
        reverse_offset_syncs=history,
        checkpoint=Checkpoint("job", "A.orders", 0, 140, 95),
        timestamp_lookup=TimestampLookup(1, 120),
        watermarks=Watermarks(0, 1000),
    )
    for method, offset in [
        ("checkpoint", 95),
        ("offset_sync", 91),
        ("offset_sync_reverse", 100),
        ("identity", 150),
        ("timestamp", 120),
    ]:
        assert translate_partition(request, [method]).target_offset == offset


def test_translate_partition_missing_inputs_explain_themselves():
    request = PartitionRequest(SRC, 150, DST)
    result = translate_partition(
        request,
        [m.value for m in TranslationMethod if m != "identity" and m not in AUTOMATIC_METHODS],
    )
    assert (result.target_offset, result.method) == (None, "none")
    text = " ".join(result.warnings)
    for reason in [
        "no checkpoint",
        "no offset syncs",
        "no record timestamp",
        "earliest: the watermarks of A.orders-0 are unknown",
    ]:
        assert reason in text


@pytest.mark.parametrize("automatic", ["nothing_processed", "earliest", "none"])
def test_automatic_labels_are_not_methods_to_configure(automatic):
    with pytest.raises(TranslationError, match=rf"'{automatic}' is not a translation method to configure"):
        validate_method_order(["checkpoint", automatic])


def test_position_zero_starts_at_the_target_beginning_without_evidence():
    result = translate_partition(PartitionRequest(SRC, 0, DST), ["checkpoint", "offset_sync"])
    assert (result.target_offset, result.method, result.redelivery_bound, result.gap_records) == (
        0,
        "nothing_processed",
        0,
        0,
    )
    assert result.is_proven


def test_position_zero_on_a_trimmed_target_counts_the_trimmed_records_as_gap():
    request = PartitionRequest(SRC, 0, DST, watermarks=Watermarks(low=40, high=90))
    result = translate_partition(request, ["checkpoint"])
    assert (result.target_offset, result.gap_records) == (40, 40)


def test_translate_partition_rejects_negative_position():
    with pytest.raises(TranslationError, match="negative"):
        translate_partition(PartitionRequest(SRC, -1, DST), ["identity"])


def test_partition_translation_json_is_flat_and_round_trips():
    adapter = TypeAdapter(PartitionTranslation)
    original = PartitionTranslation(SRC, 5, DST, 3, "offset_sync", 1, 2, ["w"])
    data = adapter.dump_python(original, mode="json")
    assert data == {
        "source_topic": SRC.topic,
        "source_partition": SRC.partition,
        "source_offset": 5,
        "target_topic": DST.topic,
        "target_partition": DST.partition,
        "target_offset": 3,
        "method": "offset_sync",
        "redelivery_bound": 1,
        "gap_records": 2,
        "gap_upper_bound": False,
        "replication_complete": False,
        "warnings": ["w"],
    }
    assert adapter.validate_python(data) == original
    with pytest.raises(ValidationError, match="method"):
        adapter.validate_python({**data, "method": "guess"})
    with pytest.raises(ValidationError, match="target_offset"):
        adapter.validate_python({**data, "target_offset": "3"})


def test_topic_partition_str_and_order():
    assert str(TopicPartition("A.orders", 3)) == "A.orders-3"
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 1)]) == [
        TopicPartition("a", 1),
        TopicPartition("a", 2),
        TopicPartition("b", 0),
    ]


@pytest.mark.slow
def test_ten_thousand_partitions_translate_in_one_call():
    # Their speed is a figure of benchmarks/bench_translation_pure.py, not a timed assertion here.
    syncs = [(i * 1000, i * 990) for i in range(64)]
    history = OffsetSyncHistory.from_syncs(syncs)
    requests = [
        PartitionRequest(
            TopicPartition(f"t{t}", p),
            40_500,
            TopicPartition(f"A.t{t}", p),
            offset_syncs=history,
            checkpoint=Checkpoint("job", f"A.t{t}", p, 40_000, 39_600),
            watermarks=Watermarks(0, 70_000),
        )
        for t in range(100)
        for p in range(100)
    ]
    results = translate_partitions(requests, ["checkpoint", "offset_sync"])
    assert len(results) == 10_000
    assert results[0].target_offset == 39_601

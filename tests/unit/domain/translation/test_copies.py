"""Translation when MirrorMaker 2 copied a partition more than once (it restarted from an older offset).

The ground truth is a simulated MM2: it copies upstream records in order, emits offset syncs the way
MM2 does (the first record of each run, after a skipped upstream offset, and some others), and restarts
from an older upstream offset, copying those records again after the first copies. The properties
hold for the offset-sync rules in both directions and for the ``earliest`` fallback: no record the job
still needs lies before the start, and the re-delivery bound holds (issue: a failback after a double
copy promised 45 re-deliveries and re-delivered 263).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import event, given, settings
from hypothesis import strategies as st

from airflow_kafka_failover.core.types import TopicPartition, Watermarks
from airflow_kafka_failover.domain.translation.choosing import PartitionRequest, translate_partition
from airflow_kafka_failover.domain.translation.rules import (
    translate_by_offset_sync,
    translate_by_offset_sync_reverse,
    translate_from_earliest,
)
from airflow_kafka_failover.domain.translation.sync_history import OffsetSyncHistory
from tests.property_examples import examples

SRC = TopicPartition("orders", 0)
DST = TopicPartition("A.orders", 0)
PROPERTY = settings(max_examples=examples(300), deadline=None)


@dataclass
class CopiedPartition:
    """Ground truth of an upstream partition and its downstream replica, with every copy of every record."""

    upstream_records: list[int]  # upstream offsets holding records (markers and aborted ones are absent)
    upstream_end: int
    copies: list[tuple[int, int]] = field(default_factory=list)  # (upstream, downstream) in downstream order
    syncs: list[tuple[int, int]] = field(default_factory=list)
    downstream_end: int = 0
    # Index into syncs where each restart's first visible sync landed.
    restarts: list[int] = field(default_factory=list)
    # Runs that copied records but stopped before any of their syncs was sent: (first, last) downstream.
    runs_without_syncs: list[tuple[int, int]] = field(default_factory=list)

    def run_without_a_trace(self) -> bool:
        """A run none of whose syncs was sent, that nothing else shows: after the first visible sync, or
        below it while the records below that sync do not outnumber the upstream offsets (``d0 <= u0``).
        Below a first sync with ``d0 > u0`` the planner counts every record, so such a run is checked."""
        if not self.runs_without_syncs:
            return False
        if not self.syncs:
            return True
        u0, d0 = self.syncs[0]
        return any(last >= d0 for _first, last in self.runs_without_syncs) or d0 <= u0

    def restart_without_trace(self) -> bool:
        """A restart the syncs around it show neither as a backwards step nor as an excess: its repeats fill
        the places of dropped upstream records, and a lost sync (its first, or the last of the run before)
        hides where it began. Nothing can see it."""
        for k in self.restarts:
            if 0 < k < len(self.syncs):
                (u1, d1), (u2, d2) = self.syncs[k - 1], self.syncs[k]
                if u2 > u1 and d2 - d1 <= u2 - u1:
                    return True
        return False

    def lost_forward(self, start: int, position: int) -> list[int]:
        """Records at or after the position with no copy at or after a downstream start."""
        later = {up for up, down in self.copies if down >= start}
        copied = {up for up, _ in self.copies}
        return [up for up in self.upstream_records if up >= position and up in copied and up not in later]

    def redelivered_forward(self, start: int, position: int) -> int:
        return sum(1 for up, down in self.copies if down >= start and up < position)

    def lost_reverse(self, start: int, position: int) -> list[int]:
        """Unprocessed upstream records (no copy below the downstream position) that lie before the start."""
        processed = {up for up, down in self.copies if down < position}
        return [up for up in self.upstream_records if up not in processed and up < start]

    def redelivered_reverse(self, start: int, position: int) -> int:
        processed = {up for up, down in self.copies if down < position}
        return sum(1 for up in self.upstream_records if up >= start and up in processed)


@st.composite
def copied_partitions(draw) -> CopiedPartition:
    kept = draw(st.lists(st.integers(0, 9).map(lambda n: n < 7), min_size=1, max_size=80))
    records = [offset for offset, is_record in enumerate(kept) if is_record]
    truth = CopiedPartition(records, len(kept))
    if not records:
        return truth
    downstream = 0
    next_index = 0  # index into records of the next record MM2 copies
    runs = draw(st.integers(1, 4))
    for run in range(runs):
        if run:
            # Restart from an older record (MM2 committed less than it copied, or its offsets were lost).
            next_index = draw(st.integers(0, max(0, next_index - 1)), label="rewind")
        # Earlier runs end anywhere (MM2 stopped); the last one has caught up: records it has not copied
        # yet are replication lag, which the planner's gap measure reports, not a translation matter.
        last = run == runs - 1
        stop = len(records) if last else draw(st.integers(next_index, len(records)), label="run end")
        previous = None
        first_sync_at = len(truth.syncs)
        owed = False  # a sync that was due but replaced by a later one before MM2 sent it
        for index in range(next_index, stop):
            upstream = records[index]
            downstream += draw(st.sampled_from([0, 0, 0, 1]))  # foreign offsets downstream (markers)
            first, skipped = previous is None, previous is not None and upstream - previous != 1
            due = first or skipped or owed or draw(st.integers(0, 4)) == 0
            # MM2 keeps one pending sync per partition and overwrites it when the producer is busy, so a
            # due sync (even the first of a run) can go out later, at another record, or never.
            # The running MM2 (the last run) flushes its pending sync; a run that stopped may have lost it.
            owed = (
                due
                and draw(st.integers(0, 3), label="sync delayed") == 0
                and not (last and index == stop - 1)
            )
            if due and not owed:
                truth.syncs.append((upstream, downstream))
            truth.copies.append((upstream, downstream))
            if run and index == next_index:
                truth.restarts.append(first_sync_at)
            previous = upstream
            downstream += 1
        if stop > next_index and len(truth.syncs) == first_sync_at:
            truth.runs_without_syncs.append((truth.copies[-(stop - next_index)][1], truth.copies[-1][1]))
        next_index = stop
    truth.downstream_end = downstream
    return truth


@PROPERTY
@given(copied_partitions(), st.data())
def test_forward_start_loses_nothing_and_the_bound_holds_across_copies(truth, data):
    history = OffsetSyncHistory.from_syncs(truth.syncs)
    position = data.draw(st.integers(1, truth.upstream_end + 2), label="position")
    result = translate_by_offset_sync(SRC, position, DST, history)
    if result.target_offset is None:
        assert all(up > position for up, _ in truth.syncs)
        return
    assert truth.lost_forward(result.target_offset, position) == []
    assert result.redelivery_bound is not None
    if truth.restart_without_trace():
        event("a restart without a trace in the syncs: the bound is not checked")
    else:
        assert truth.redelivered_forward(result.target_offset, position) <= result.redelivery_bound
    if len(history.copies) > 1:
        assert any("more than once" in warning for warning in result.warnings)


@PROPERTY
@given(copied_partitions(), st.data())
def test_reverse_start_loses_nothing_and_the_bound_holds_across_copies(truth, data):
    history = OffsetSyncHistory.from_syncs(truth.syncs)
    position = data.draw(st.integers(1, truth.downstream_end + 2), label="downstream position")
    result = translate_by_offset_sync_reverse(DST, position, SRC, history)
    if result.target_offset is None:
        assert all(down > position for _, down in truth.syncs)
        return
    assert truth.lost_reverse(result.target_offset, position) == []
    assert result.redelivery_bound is not None
    if truth.restart_without_trace() or truth.run_without_a_trace():
        event("a restart or a run without a trace in the syncs: the bound is not checked")
    else:
        assert truth.redelivered_reverse(result.target_offset, position) <= result.redelivery_bound


@PROPERTY
@given(copied_partitions(), st.data())
def test_earliest_is_safe_and_its_bound_holds_when_no_sync_is_old_enough(truth, data):
    history = OffsetSyncHistory.from_syncs(truth.syncs)
    high = max(truth.downstream_end, 1)
    forward_position = data.draw(st.integers(1, truth.upstream_end + 2), label="position")
    forward = translate_partition(
        PartitionRequest(SRC, forward_position, DST, offset_syncs=history, watermarks=Watermarks(0, high)),
        ["offset_sync"],
    )
    assert forward.target_offset is not None
    if forward.method == "earliest":
        assert truth.lost_forward(0, forward_position) == []
        if forward.redelivery_bound is not None:
            assert truth.redelivered_forward(0, forward_position) <= forward.redelivery_bound
    reverse_position = data.draw(st.integers(1, high + 2), label="downstream position")
    reverse = translate_partition(
        PartitionRequest(
            DST,
            reverse_position,
            SRC,
            reverse_offset_syncs=history,
            watermarks=Watermarks(0, truth.upstream_end),
            reverse=True,
        ),
        ["offset_sync_reverse"],
    )
    assert reverse.target_offset is not None
    assert truth.lost_reverse(reverse.target_offset, reverse_position) == []
    assert reverse.redelivery_bound is not None
    if not (truth.restart_without_trace() or truth.run_without_a_trace()):
        assert truth.redelivered_reverse(reverse.target_offset, reverse_position) <= reverse.redelivery_bound


def test_double_copy_from_zero_failback_counts_the_first_copy():
    """The issue's case: MM2 copied 0..299 to 0..299, restarted from 0 and copied them again to 300..599."""
    syncs = [(u, u) for u in range(0, 300, 100)] + [(u, 300 + u) for u in range(0, 300, 100)]
    history = OffsetSyncHistory.from_syncs(syncs)
    assert [len(copy) for copy in history.copies] == [3, 3]
    # The job on B read both copies up to downstream 450 (upstream 150 of the second copy).
    result = translate_by_offset_sync_reverse(DST, 450, SRC, history)
    assert result.target_offset == 100
    # Originals 100..299 were processed through the first copy, 100..149 again through the second: 200.
    assert result.redelivery_bound is not None and result.redelivery_bound >= 200
    assert "copied orders-0 more than once" in result.warnings[0]
    # In the first copy: translated with the first copy's syncs, no later copy was read.
    first = translate_by_offset_sync_reverse(DST, 150, SRC, history)
    assert (first.target_offset, first.redelivery_bound, first.warnings) == (100, 50, [])


def test_forward_start_in_the_second_copy_says_so():
    syncs = [(0, 0), (100, 100), (0, 300), (100, 400)]
    history = OffsetSyncHistory.from_syncs(syncs)
    result = translate_by_offset_sync(SRC, 150, DST, history)
    assert (result.target_offset, result.redelivery_bound) == (401, 49)
    assert (
        "the start is in copy 2, which began at upstream offset 0 -> A.orders-0 offset 300"
        in (result.warnings[0])
    )
    assert (
        "earlier copies of the records from position 150 on (below A.orders-0 offset 300)"
        in (result.warnings[0])
    )


def test_forward_start_before_a_later_copy_whose_first_sync_was_lost_counts_its_head():
    """Seen on the sandbox: MM2 copied 0..99 again from 0 to 100.., the sync (0, 100) was overwritten.

    The second copy's first visible sync is (80, 180): the position 63 has no sync of it, so the start is
    in the first copy, and the job reads the second copy's records 100..179 too, copies of 0..79.
    """
    syncs = [(0, 0), (50, 50), (99, 99), (80, 180), (99, 199)]
    history = OffsetSyncHistory.from_syncs(syncs)
    assert [len(copy) for copy in history.copies] == [3, 2]
    result = translate_by_offset_sync(SRC, 63, DST, history)
    # 51..62 of the first copy, then 0..62 of the second copy, which lie in 100..179.
    assert result.target_offset == 51
    assert result.redelivery_bound is not None and result.redelivery_bound >= 12 + 63
    assert "their first syncs may have been lost" in result.warnings[0]


def test_forward_bound_counts_a_restart_shown_only_as_an_excess():
    """The restart's first sync was lost and the next one is ahead of every earlier sync: no backwards
    step, but the step from (10, 10) to (30, 50) is 20 upstream and 40 downstream."""
    history = OffsetSyncHistory.from_syncs([(0, 0), (10, 10), (30, 50)])
    assert len(history.copies) == 1
    result = translate_by_offset_sync(SRC, 5, DST, history)
    assert result.target_offset == 1
    assert result.redelivery_bound == 4 + 39
    assert "copied again by a MirrorMaker 2 restart" in result.warnings[0]


def test_earliest_states_its_bound_and_the_records_never_copied():
    history = OffsetSyncHistory.from_syncs([(50, 0), (90, 40)])
    result = translate_from_earliest(SRC, 20, DST, Watermarks(0, 60), history, reverse=False)
    assert (result.target_offset, result.method, result.redelivery_bound, result.gap_records) == (
        0,
        "earliest",
        0,
        30,
    )
    assert "up to 30 record(s) between them may never have been copied" in result.warnings[1]
    assert "an upper bound counted in offsets, not records" in result.warnings[1].lower()
    assert result.gap_upper_bound
    # 22 committed records in [20, 50) on the source, none of them below the oldest sync (d0 = 0): 22 missing.
    counted = translate_from_earliest(SRC, 20, DST, Watermarks(0, 60), history, False, 22)
    assert (counted.gap_records, counted.gap_upper_bound) == (22, False)
    assert "22 record(s) between them were never copied" in counted.warnings[1]
    trimmed = translate_from_earliest(SRC, 20, DST, Watermarks(5, 60), history, reverse=False)
    assert trimmed.target_offset is None
    assert "no longer starts at offset 0 (its log starts at 5)" in trimmed.warnings[0]
    unknown = translate_from_earliest(SRC, 20, DST, Watermarks(0, 60), None, reverse=False)
    assert (unknown.target_offset, unknown.redelivery_bound) == (0, None)
    back = translate_from_earliest(DST, 70, SRC, Watermarks(0, 500), history, reverse=True)
    assert (back.target_offset, back.redelivery_bound, back.gap_records) == (0, 70, 0)


def test_earliest_names_a_partition_mm2_copied_twice():
    """A first copy whose only surviving sync is its last one (MM2 overwrote the earlier pending syncs; seen
    on a loaded CI machine), then a second copy whose first sync is 93 records after the first copy's end:
    a position older than every sync starts at 0, says the partition was copied twice, and its bound counts
    the 99 records below the oldest sync and the 93 records before the second copy's first sync."""
    history = OffsetSyncHistory.from_syncs([(141, 99), (0, 193), (150, 300)])
    assert len(history.copies) == 2
    result = translate_from_earliest(SRC, 63, DST, Watermarks(0, 360), history, reverse=False)
    assert (result.target_offset, result.method, result.redelivery_bound) == (0, "earliest", 99 + 93)
    copied = [w for w in result.warnings if "more than once" in w]
    assert copied and "(2 copies" in copied[0] and "up to 93 more record(s)" in copied[0], result.warnings
    single = translate_from_earliest(
        SRC, 20, DST, Watermarks(0, 60), OffsetSyncHistory.from_syncs([(50, 0)]), False
    )
    assert not any("more than once" in w for w in single.warnings), single.warnings


def test_earliest_names_a_double_copy_whose_earlier_syncs_are_gone():
    """Seen on a loaded CI machine: MM2 sent no sync of either copy of the first 136 offsets (it overwrote
    the pending ones), so the oldest sync is 136 -> 194, the first record after the second copy. The replica
    holds 194 records below it, the source at most 136 offsets: the start at 0 says MM2 copied twice."""
    history = OffsetSyncHistory.from_syncs([(136, 194), (150, 208)])
    assert len(history.copies) == 1
    result = translate_from_earliest(SRC, 129, DST, Watermarks(0, 250), history, reverse=False)
    assert (result.target_offset, result.method, result.redelivery_bound) == (0, "earliest", 194)
    copied = [w for w in result.warnings if "more than once" in w]
    assert copied and "at least 58 record(s)" in copied[0] and "194 records below" in copied[0], (
        result.warnings
    )
    # As many records below the oldest sync as the source has offsets there: nothing proves a second copy.
    once = translate_from_earliest(
        SRC, 129, DST, Watermarks(0, 250), OffsetSyncHistory.from_syncs([(136, 136)]), False
    )
    assert not any("more than once" in w for w in once.warnings), once.warnings


# Seen in CI on partition 2 of a topic MM2 copied twice: no sync of the first copy (downstream 0..99) was
# sent, so the syncs begin inside the second copy, which began at downstream 100.
SECOND_COPY_ONLY = [(58, 140), (100, 171), (136, 200)]


def test_forward_start_after_a_copy_without_syncs_says_so():
    history = OffsetSyncHistory.from_syncs(SECOND_COPY_ONLY)
    assert len(history.copies) == 1 and history.records_below_first_sync() == 140
    result = translate_by_offset_sync(SRC, 63, DST, history)
    assert (result.target_offset, result.redelivery_bound) == (141, 4)  # the start and bound are unchanged
    assert any(
        "more than once" in w and "140 records below the oldest offset sync" in w for w in result.warnings
    )
    # The same copy shown by a step instead: a sync of the first copy, then the second copy's first visible.
    stepped = translate_by_offset_sync(
        SRC, 63, DST, OffsetSyncHistory.from_syncs([(0, 0), *SECOND_COPY_ONLY])
    )
    assert stepped.target_offset == 141
    assert any("more than once" in w and "step to 58 -> 140" in w for w in stepped.warnings), stepped.warnings
    # Copied once: nothing to say.
    once = translate_by_offset_sync(SRC, 63, DST, OffsetSyncHistory.from_syncs([(0, 0), (58, 40), (100, 71)]))
    assert once.warnings == []


def test_failback_after_a_copy_without_syncs_counts_every_record_below_the_first_sync():
    """The job on B read downstream 0..174, the first copy (0..99) included, whose originals run past the
    start; the bound given in CI was 29 and 54 records were read again."""
    history = OffsetSyncHistory.from_syncs(SECOND_COPY_ONLY)
    result = translate_by_offset_sync_reverse(DST, 175, SRC, history)
    assert result.target_offset == 100
    assert result.redelivery_bound is not None and result.redelivery_bound >= 140
    assert any("more than once" in w and "140 records below" in w for w in result.warnings), result.warnings
    # In a later copy, the oldest copy's records below its first sync count too: 371..379 of the position's
    # copy, 171..299 of the oldest copy from its sync at the start's offset, and its 140 records below 140.
    later = OffsetSyncHistory.from_syncs([*SECOND_COPY_ONLY, (0, 300), (100, 371)])
    again = translate_by_offset_sync_reverse(DST, 380, SRC, later)
    assert (again.target_offset, again.redelivery_bound) == (100, 9 + (300 - 171) + 140)

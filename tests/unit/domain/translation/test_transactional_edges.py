"""Translation next to transaction markers and aborted records (issue 32), against a simulated MirrorMaker 2.

The ground truth is an upstream partition written in transactions, some of them aborted, and the replica a
simulated MM2 makes of it: it copies the committed records in order (reading committed, as the sandbox's
MM2 does), from where its copy began, and writes offset syncs by MM2's own rule (``PartitionState.update``):
for the first record of a run, for a record after a skipped upstream offset (a marker or an aborted record
before it), and when the downstream offset drifted ``offset.lag.max`` past the last sync; the other records'
syncs wait for the next offset commit, and a run that stops loses the one still waiting. A restart resumes
after the last committed source offset and copies the records after it again. Every sync that was due is
written (``test_copies.py`` simulates syncs MM2 lost).

1. The gap before the oldest sync. Compaction of the offset-syncs topic leaves a suffix of the syncs, so a
   position can be older than all of them; the ``earliest`` start then states a gap. Counted in records on
   the source, it is exactly the records MM2 never copied; counted in offsets (the source unreadable), it is
   an upper bound that markers and aborted records inflate, and the plan must say so.
2. The reverse bound next to a sync. With aborts on either side of the sync, the stated bound holds, and it
   is exact while MM2 ran once: the position is the next offset to process, so the record at the position is
   not one the job read (the reading that made the issue count one re-delivery more).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from airflow_kafka_failover.core.types import TopicPartition, Watermarks
from airflow_kafka_failover.domain.translation.choosing import PartitionRequest, translate_partition
from airflow_kafka_failover.domain.translation.rules import translate_by_offset_sync_reverse
from airflow_kafka_failover.domain.translation.sync_history import OffsetSyncHistory

SRC = TopicPartition("orders", 0)
DST = TopicPartition("A.orders", 0)
PROPERTY = settings(max_examples=60, deadline=None)
RECORD, ABORTED, MARKER = "record", "aborted", "marker"


@dataclass
class TransactionalPartition:
    """An upstream partition written in transactions and the replica MM2 made of it."""

    kinds: list[str]  # per upstream offset: a committed record, an aborted record, or a transaction marker
    copies: list[tuple[int, int]]  # (upstream record, downstream offset) of every copy, in downstream order
    syncs: list[tuple[int, int]]  # the offset syncs MM2 wrote, in the order it wrote them
    runs: int  # how many times MM2 (re)started copying the partition

    @property
    def downstream_end(self) -> int:
        return len(self.copies)

    def records(self, start: int, end: int) -> list[int]:
        """Offsets of the committed records in ``[start, end)`` (what a read-committed consumer counts)."""
        return [offset for offset in range(start, min(end, len(self.kinds))) if self.kinds[offset] == RECORD]


@st.composite
def transactional_partitions(draw, restarts: bool = False, late_copy: bool = True) -> TransactionalPartition:
    kinds: list[str] = []
    for _ in range(draw(st.integers(1, 15), label="transactions")):
        aborted = draw(st.integers(0, 9), label="aborted") < 3
        kinds += [ABORTED if aborted else RECORD] * draw(st.integers(1, 4), label="size") + [MARKER]
    # MM2's copy begins here: 0 as usual; later when it started late or the source had deleted records first.
    late = late_copy and draw(st.integers(0, 3), label="copy begins late") == 0
    begin = draw(st.integers(0, len(kinds)), label="copy begins") if late else 0
    todo = [offset for offset in range(begin, len(kinds)) if kinds[offset] == RECORD]
    lag_max = draw(st.sampled_from([1, 3, 100]), label="offset.lag.max")
    copies: list[tuple[int, int]] = []
    syncs: list[tuple[int, int]] = []
    runs = 1 + (draw(st.integers(0, 2), label="restarts") if restarts else 0)
    committed = -1  # the last upstream record whose source offset MM2 committed
    for run in range(runs):
        index = next((i for i, upstream in enumerate(todo) if upstream > committed), len(todo))
        last = run == runs - 1
        stop = len(todo) if last else draw(st.integers(index, len(todo)), label="run stops")
        last_sync, previous, waiting = -1, -1, None
        for upstream in todo[index:stop]:
            downstream = len(copies)
            copies.append((upstream, downstream))
            if last_sync < 0 or upstream - previous != 1 or downstream - (last_sync + 1) >= lag_max:
                syncs.append((upstream, downstream))
                last_sync, waiting = downstream, None
            else:
                waiting = (upstream, downstream)
            previous = upstream
            if draw(st.integers(0, 4), label="offset commit") == 0:
                if waiting is not None:
                    syncs.append(waiting)
                    waiting = None
                committed = upstream
        if last and waiting is not None:
            syncs.append(waiting)  # the running MM2 writes it at its next offset commit
    return TransactionalPartition(kinds, copies, syncs, runs)


# ---- 1. the gap before the oldest sync -----------------------------------------------------------------


@PROPERTY
@given(transactional_partitions(), st.data())
def test_gap_before_the_oldest_sync_counts_records_not_markers(truth, data):
    """The syncs topic was compacted to a suffix of the syncs, and the position is older than all of it."""
    assume(truth.syncs)
    kept = truth.syncs[data.draw(st.integers(0, len(truth.syncs) - 1), label="syncs compacted away") :]
    history = OffsetSyncHistory.from_syncs(kept)
    oldest = history.copies[0].upstream[0]
    assume(oldest > 1)
    position = data.draw(st.integers(1, oldest - 1), label="position")
    request = PartitionRequest(
        SRC, position, DST, offset_syncs=history, watermarks=Watermarks(0, truth.downstream_end)
    )
    copied = {upstream for upstream, _ in truth.copies}
    between = truth.records(position, oldest)
    never_copied = [offset for offset in between if offset not in copied]

    by_offsets = translate_partition(request, ["offset_sync"])
    assert (by_offsets.method, by_offsets.target_offset) == ("earliest", 0)
    assert by_offsets.gap_records >= len(never_copied), "an offset count may only be high"
    if by_offsets.gap_records > len(never_copied):
        event("markers and aborted records make the offset count high")
    if by_offsets.gap_records:
        said = " ".join(by_offsets.warnings)
        assert "upper bound counted in offsets" in said, f"a count of offsets stated as records: {said}"
        assert by_offsets.gap_upper_bound

    by_records = translate_partition(
        replace(request, records_before_oldest_sync=len(between)), ["offset_sync"]
    )
    assert by_records.gap_records == len(never_copied)
    assert not by_records.gap_upper_bound
    assert by_records.target_offset == 0 and by_records.redelivery_bound == by_offsets.redelivery_bound


def test_the_issues_false_gap_before_the_oldest_sync_is_no_gap_in_records():
    """The issue's figures: position 19, oldest sync 88 -> 53, everything committed copied.

    88 upstream offsets hold 53 committed records (35 are aborted records and markers); 69 offsets lie
    between the position and the sync, 16 more than the 53 below it on the target. Of the 19 offsets before
    the position, 12 are records, so 41 records lie between, all copied below 53.
    """
    history = OffsetSyncHistory.from_syncs([(88, 53), (124, 80)])
    request = PartitionRequest(SRC, 19, DST, offset_syncs=history, watermarks=Watermarks(0, 81))
    by_offsets = translate_partition(request, ["offset_sync"])
    assert (by_offsets.method, by_offsets.gap_records, by_offsets.gap_upper_bound) == ("earliest", 16, True)
    assert "up to 16 record(s) between them may never have been copied" in by_offsets.warnings[1]
    by_records = translate_partition(replace(request, records_before_oldest_sync=41), ["offset_sync"])
    assert (by_records.gap_records, by_records.gap_upper_bound) == (0, False)
    assert not [w for w in by_records.warnings if "never" in w and "copied" in w]


# ---- 2. the reverse bound next to a sync ---------------------------------------------------------------


@PROPERTY
@given(transactional_partitions(restarts=True, late_copy=False), st.data())
def test_reverse_bound_holds_next_to_a_sync_with_aborts_around_it(truth, data):
    """Failback: the job read the replica up to ``position`` (the next offset it would process)."""
    assume(truth.syncs)
    near = truth.syncs[data.draw(st.integers(0, len(truth.syncs) - 1), label="sync")][1]
    position = data.draw(st.integers(max(1, near - 2), max(1, min(near + 3, truth.downstream_end))))
    history = OffsetSyncHistory.from_syncs(truth.syncs)
    result = translate_by_offset_sync_reverse(DST, position, SRC, history)
    if result.target_offset is None:
        assert all(downstream > position for _, downstream in truth.syncs)
        return
    start, bound = result.target_offset, result.redelivery_bound
    read = {upstream for upstream, downstream in truth.copies if downstream < position}
    records = truth.records(0, len(truth.kinds))
    assert [offset for offset in records if offset not in read and offset < start] == [], "a record skipped"
    read_again = sum(1 for offset in records if offset >= start and offset in read)
    assert bound is not None and read_again <= bound
    if truth.runs == 1:
        assert read_again == bound, "one run of MM2: every downstream offset before the position is a record"
    else:
        event("MM2 restarted and copied records again")
    if any(truth.kinds[offset] != RECORD for offset in range(start, start + 4) if offset < len(truth.kinds)):
        event("markers or aborted records right after the start")


def test_the_record_at_the_position_is_not_read_again():
    """The issue's failback figures: position 91 on the replica, start 88 on the origin, bound 3.

    The origin holds committed records at 88..91, then an aborted transaction (92 and 93 aborted, 94 its
    marker), then 95; MM2 copied 88..91 to 88..91 of the replica and 95 to 92. The job's position 91 is the
    next offset it would process: it read the copies at 88, 89 and 90. Starting the origin at 88 re-reads
    those three; record 91 is the first the job had not processed. Counting it as processed (reading the
    position as the last offset processed) gives the issue's four.
    """
    history = OffsetSyncHistory.from_syncs([(0, 0), (88, 88), (95, 92)])
    result = translate_by_offset_sync_reverse(DST, 91, SRC, history)
    assert (result.target_offset, result.redelivery_bound) == (88, 3)
    copies = {**{offset: offset for offset in range(92)}, 92: 95}
    read = {copies[downstream] for downstream in range(91)}
    origin_records = [*range(92), 95]
    read_again = [offset for offset in origin_records if offset >= 88 and offset in read]
    assert read_again == [88, 89, 90]
    read_through_91 = {copies[downstream] for downstream in range(92)}
    assert [offset for offset in origin_records if offset >= 88 and offset in read_through_91] == [
        88,
        89,
        90,
        91,
    ]

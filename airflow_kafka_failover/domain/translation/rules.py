"""Per-partition offset translation rules, one per method: pure functions, no I/O.

Each rule gives one candidate start offset; :mod:`airflow_kafka_failover.domain.translation.choosing` picks
among the candidates and clamps the choice to the target's data.

Vocabulary. The job's *position* on a partition is the next offset it has not processed.
Translation maps it to a start offset on the other cluster that must never be *later* than
the true position there (the offset of the first record the job has not processed), and should
be as little earlier as possible. Every rule below states why it is never later.

Model the proofs rely on (it is how MirrorMaker 2 replicates): each upstream record is either
dropped (transaction marker, aborted or compacted record, filter) or copied once to the
downstream partition, in order, so the mapping ``upstream record -> downstream offset`` is
strictly increasing; an offset sync ``(u, d)`` says the upstream record at ``u`` was copied to
``d``; downstream offsets that hold no record (e.g. transaction markers) may exist.
Sync histories are rebuilt from the offset-syncs topic with :meth:`OffsetSyncHistory.from_syncs`
(in :mod:`airflow_kafka_failover.domain.translation.sync_history`), which drops syncs made stale by a
restart or truncation, so the model holds within one history.

A *redelivery bound* is an upper bound on the number of records the job will see again by
starting at the translated offset instead of its true position.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from airflow_kafka_failover.core.exceptions import TranslationError
from airflow_kafka_failover.core.types import TopicPartition, Watermarks
from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint
from airflow_kafka_failover.domain.translation.plan import PartitionTranslation, TranslationMethod
from airflow_kafka_failover.domain.translation.sync_history import OffsetSyncHistory


@dataclass(frozen=True, slots=True)
class TimestampLookup:
    """The result of offsets-for-times on the target, resolved by the I/O layer.

    :param timestamp_ms: the timestamp looked up (newest processed record's timestamp minus a margin).
    :param offset: earliest offset with a timestamp >= ``timestamp_ms``; None if there is no such record.
    """

    timestamp_ms: int
    offset: int | None


def untranslated(
    source: TopicPartition,
    position: int | None,
    target: TopicPartition,
    method: TranslationMethod,
    reason: str,
) -> PartitionTranslation:
    """A candidate without an offset: ``method`` could not translate the partition, for ``reason``.

    :param source: partition the job read.
    :param position: its position there, if any.
    :param target: partition on the other cluster.
    :param method: the method that failed.
    :param reason: why, for the plan's warnings.
    """
    return PartitionTranslation.of(source, position, target, None, method, warnings=[reason])


def translate_by_offset_sync(
    source: TopicPartition, position: int, target: TopicPartition, history: OffsetSyncHistory
) -> PartitionTranslation:
    """Forward translation (MM2's rule since Kafka 3.5): upstream position -> downstream start offset.

    Take the sync ``(u, d)`` with the greatest ``u <= position``. If ``position == u`` the record
    at ``u`` is the first unprocessed one and sits at ``d``: exact. Otherwise the first unprocessed
    record comes after ``u``, so it sits after ``d``: start at ``d + 1``, never later. Never
    interpolate: dropped upstream records make ``d + (position - u)`` overshoot.

    Redelivery bound when ``position > u``: the records between ``d + 1`` and the true position
    are copies of upstream records strictly between ``u`` and ``position``, at most
    ``position - u - 1``; and the next sync ``(u2, d2)`` (``u2 > position``) puts the true
    position at or before ``d2``, so also at most ``d2 - d - 1``.

    Copies. When MM2 copied the partition more than once (it restarted from an older upstream
    offset), the search runs in the newest copy with a sync at or before the position: that copy
    holds every record from that sync on, in order, so the start is never later than the
    first unprocessed record *in that copy*; the records of earlier copies below it are duplicates
    the job skips.

    Restarts the syncs do not show where they began. MM2 keeps one pending sync per partition and
    overwrites it when a newer one is due before the first was sent, so the sync of a run's first record
    can be lost. A later copy whose first *visible* sync is after the position may then hold, below that
    sync, copies of records the job processed; and a restart that left no backwards step at all shows as
    an excess (see :meth:`OffsetSyncHistory.excess`). The job reads everything after the start, so the
    bound adds the records of each such region after the start: see :func:`_hidden_copies_after`.

    :param source: upstream partition the job read.
    :param position: next upstream offset to process.
    :param target: downstream partition.
    :param history: syncs of ``source``.
    """
    method = TranslationMethod.OFFSET_SYNC
    copies = history.copies
    found = next(
        (
            (number, copy, index)
            for number, copy in reversed(list(enumerate(copies, start=1)))
            if (index := copy.floor_by_upstream(position)) is not None
        ),
        None,
    )
    if found is None:
        if not history.upstream:
            reason = f"no offset syncs for {source}"
        else:
            oldest = copies[0]
            reason = (
                f"position {position} is older than every offset sync of {source} (oldest upstream offset "
                f"{oldest.upstream[0]}, copied to {target} offset {oldest.downstream[0]}); MM2 cannot "
                "translate it"
            )
        return untranslated(source, position, target, method, reason)
    number, copy, index = found
    upstream, downstream = copy.upstream[index], copy.downstream[index]
    hidden = _hidden_copies_after(copies, number, index)
    warnings = _copy_warnings(source, target, copies, number, position, hidden, index)
    if position == upstream:
        return PartitionTranslation.of(
            source, position, target, downstream, method, redelivery_bound=hidden, warnings=warnings
        )
    bound = position - upstream - 1
    if index + 1 < len(copy.upstream):
        bound = min(bound, copy.downstream[index + 1] - downstream - 1)
    return PartitionTranslation.of(
        source, position, target, downstream + 1, method, redelivery_bound=bound + hidden, warnings=warnings
    )


def _hidden_copies_after(copies: list[OffsetSyncHistory], number: int, index: int) -> int:
    """Records after the forward start that may be further copies of processed records, from the syncs.

    Every record of a region the syncs show a restart in is counted: the records between two syncs
    after ``index`` of the chosen copy when that step has an excess (records copied twice by a restart
    that left no backwards step in the syncs; upstream records MM2 dropped in the same step can make
    the excess smaller than the number of repeats, so the whole step counts), and in every later copy
    the records below its first visible sync (from the previous copy's last sync on) plus its steps
    with an excess. A restart whose repeats exactly fill the place of dropped upstream records, with its
    first sync lost, leaves no trace in the syncs and is not counted (``docs/limits.md``).

    :param copies: the partition's copies, oldest first.
    :param number: the chosen copy, counted from 1.
    :param index: the sync of the chosen copy the start is taken from.
    """
    chosen = copies[number - 1]
    regions = [_step(chosen, j) for j, _ in chosen.excess() if j > index]
    for previous, later in itertools.pairwise(copies[number - 1 :]):
        regions.append(later.downstream[0] - previous.downstream[-1] - 1)
        regions.extend(_step(later, j) for j, _ in later.excess())
    return sum(regions)


def _step(copy: OffsetSyncHistory, j: int) -> int:
    """The records strictly between sync ``j - 1`` and sync ``j`` of ``copy``, downstream."""
    return copy.downstream[j] - copy.downstream[j - 1] - 1


def _copy_warnings(
    source: TopicPartition,
    target: TopicPartition,
    copies: list[OffsetSyncHistory],
    number: int,
    position: int,
    hidden: int,
    index: int,
) -> list[str]:
    """Say which of several MM2 copies of ``source`` a forward start reads, and what the bound counts."""
    if len(copies) == 1:
        warnings = _repeats_before_start(source, target, copies[0], index)
        if hidden:
            warnings.append(
                f"the offset syncs of {source} show up to {hidden} record(s) of {target} after the start "
                "copied again by a MirrorMaker 2 restart that left no backwards step in the syncs; any of "
                "them may be a processed record, so the re-delivery bound includes them"
            )
        return warnings
    chosen = copies[number - 1]
    text = (
        f"MirrorMaker 2 copied {source} more than once into {target} ({len(copies)} copies: it restarted "
        f"from an older offset); the start is in copy {number}, which began at upstream offset "
        f"{chosen.upstream[0]} -> {target} offset {chosen.downstream[0]}"
    )
    if number > 1:
        text += (
            f"; the earlier copies of the records from position {position} on (below {target} offset "
            f"{chosen.downstream[0]}) are duplicates and are skipped"
        )
    if number < len(copies):
        text += (
            "; the later copies have no sync at or before the position, but their first syncs may have "
            "been lost (MirrorMaker 2 overwrites a pending sync), so the records below them may repeat "
            "processed ones"
        )
    if hidden:
        text += (
            f"; the re-delivery bound counts records of this copy and up to {hidden} record(s) of those "
            "regions"
        )
        return [text]
    return [text + "; the re-delivery bound counts records of this copy"]


def _repeats_before_start(
    source: TopicPartition, target: TopicPartition, copy: OffsetSyncHistory, index: int
) -> list[str]:
    """Name a copy of ``source`` that lies below a forward start taken from sync ``index`` of the only copy
    the syncs show: more records below the first sync than upstream offsets, or a step longer downstream
    than upstream at or before the start. The start skips those records; the warning says why the
    replica holds records twice."""
    u0, d0 = copy.upstream[0], copy.downstream[0]
    if copy.records_below_first_sync():
        why = _more_records_than_offsets(target, source, u0, d0)
    elif steps := [j for j, _ in copy.excess() if j <= index]:
        j = steps[-1]
        why = (
            f"the syncs' step to {copy.upstream[j]} -> {copy.downstream[j]} is longer on {target} than on "
            f"{source}"
        )
    else:
        return []
    return [
        f"MirrorMaker 2 copied records of {source} more than once into {target} before the start ({why}: it "
        "restarted from an older offset, and the syncs of where it began were lost); the earlier copies lie "
        "below the start and are skipped"
    ]


def _more_records_than_offsets(replica: TopicPartition, origin: TopicPartition, u0: int, d0: int) -> str:
    """The evidence of :meth:`OffsetSyncHistory.records_below_first_sync`, for a warning."""
    return (
        f"{replica} holds {d0} records below the oldest offset sync ({u0} -> {d0}) and {origin} at most {u0} "
        "offsets below it, unless MirrorMaker 2 wrote transaction markers there"
    )


def translate_by_offset_sync_reverse(
    source: TopicPartition, position: int, target: TopicPartition, history: OffsetSyncHistory
) -> PartitionTranslation:
    """Reverse translation: a position on a replicated (downstream) partition -> its origin partition.

    Take the sync ``(u, d)`` with the greatest ``d <= position``. Every record the job has not
    processed sits at or after ``position >= d`` downstream, so its upstream original sits at or
    after ``u``: starting at ``u`` is never later (exact when ``position == d``).

    Redelivery bound: re-read records are upstream originals of downstream records in
    ``[d, position)``, at most ``position - d``; the next sync ``(u2, d2)`` with ``d2 >= position``
    also bounds it by ``u2 - u``.

    Hidden restarts. When MM2 restarted from an offset after its last sync, the first copies of the
    records it copied again lie just before the sync that opened the new run, below ``d``, and the job
    read them: the bound adds them (see :func:`_hidden_first_copies`).

    Copies. When MM2 copied the partition more than once, the downstream log holds earlier copies
    below the copy the position is in, and the job processed them all: their records with an upstream
    offset at or after ``u`` are re-read too. In an earlier copy, the records below its sync
    ``(u1, d1)`` with the greatest ``u1 <= u`` are originals of offsets below ``u``; the rest of that
    copy, up to where the next copy begins, is added to the bound (the whole copy when no sync of it
    is at or before ``u``, from offset 0 for the oldest copy, whose first records may predate its syncs).

    :param source: downstream partition the job read (e.g. ``A.orders`` on B).
    :param position: next downstream offset to process.
    :param target: upstream partition (e.g. ``orders`` on A).
    :param history: syncs of the flow ``target -> source`` for this partition.
    """
    method = TranslationMethod.OFFSET_SYNC_REVERSE
    copies = history.copies
    holding = [n for n, copy in enumerate(copies) if copy.downstream and copy.downstream[0] <= position]
    if not holding:
        if not history.downstream:
            reason = f"no offset syncs for {target} -> {source}"
        else:
            reason = (
                f"position {position} is older than every offset sync into {source} (oldest downstream "
                f"offset {copies[0].downstream[0]}); cannot translate it back"
            )
        return untranslated(source, position, target, method, reason)
    number = holding[-1]
    copy = copies[number]
    index = copy.floor_by_downstream(position)
    assert index is not None  # the copy's first sync is at or before the position
    upstream, downstream = copy.upstream[index], copy.downstream[index]
    bound = position - downstream
    ceiling = copy.ceiling_by_downstream(position)
    if ceiling is not None and ceiling not in dict(copy.excess()):
        # Without an excess at the next sync, the records in [d, position) are copies of [u, u2).
        bound = min(bound, copy.upstream[ceiling] - upstream)
    warnings: list[str] = []
    unsynced = copies[0].records_below_first_sync() if not number else 0
    if unsynced:
        bound += unsynced
        warnings.append(
            f"MirrorMaker 2 copied {target} more than once into {source} before its oldest offset sync "
            f"({_more_records_than_offsets(source, target, copy.upstream[0], unsynced)}; the syncs of where "
            "it began were lost); the job read them all and any may be an original at or after the start, so "
            "the re-delivery bound includes them"
        )
    hidden = _hidden_first_copies(copy, index)
    if hidden:
        bound += hidden
        warnings.append(
            f"the offset syncs into {source} show up to {hidden} record(s) copied twice at or after {target} "
            f"offset {upstream} (MirrorMaker 2 restarted after its last sync); the job read both copies, so "
            "the re-delivery bound includes them"
        )
    if number:
        earlier = 0
        for older_number, older in enumerate(copies[:number]):
            end = copies[older_number + 1].downstream[0]
            floor = older.floor_by_upstream(upstream)
            begin = (
                older.downstream[floor] if floor is not None else (older.downstream[0] if older_number else 0)
            )
            # A step below the floor with an excess holds a restart whose first sync was lost: its records
            # may be copies of any offset, those at or after u included.
            below = [_step(older, j) for j, _ in older.excess() if floor is not None and j <= floor]
            if floor is not None and not older_number:
                # Below the oldest sync: a copy whose syncs were all lost, when it holds too many records.
                below.append(older.records_below_first_sync())
            earlier += end - begin + sum(below)
        bound += earlier
        warnings.append(
            f"MirrorMaker 2 copied {target} more than once into {source} ({len(copies)} copies); the "
            f"position is in copy {number + 1}, and the job also read the earlier copies below {source} "
            f"offset {copy.downstream[0]}: up to {earlier} of their records are originals at or after "
            f"{target} offset {upstream} and are re-read, which the re-delivery bound includes"
        )
    return PartitionTranslation.of(
        source, position, target, upstream, method, redelivery_bound=bound, warnings=warnings
    )


def _hidden_first_copies(copy: OffsetSyncHistory, index: int) -> int:
    """Records below sync ``index`` that may be first copies of upstream offsets at or after ``upstream``.

    A restart of MM2 the syncs show no backwards step for shows as an excess (see
    :meth:`OffsetSyncHistory.excess`) at the sync ``j`` that opened the new run. Between syncs ``j - 1`` and
    ``j`` lie the last records of the old run and the first of the new one. When MM2 sent every due sync, the
    old run's records at or after ``upstream`` are at most ``n_j - (upstream - u_j)``; but MM2 can lose a
    sync (it replaces a pending one), and then the old run may have gone on past ``u_j`` with records MM2
    dropped upstream in between: every record of the step counts.

    :param copy: the copy the position is in.
    :param index: the sync of that copy the start is taken from.
    """
    return sum(_step(copy, j) for j, _ in copy.excess() if j <= index)


def translate_by_checkpoint(
    source: TopicPartition,
    position: int,
    target: TopicPartition,
    checkpoint: Checkpoint,
    history: OffsetSyncHistory | None = None,
) -> PartitionTranslation:
    """Use MM2's checkpoint of the job's bookkeeping group: start at its downstream offset.

    The checkpoint is usable when its upstream offset is <= the position: MM2 translated that
    older offset with the never-later rule, and positions only grow, so its downstream offset is
    not later than the true position.

    Redelivery bound: the checkpoint carries no record of how precise MM2's own translation
    was (``d + 1`` from a distant sync re-delivers up to ``cu - u - 1`` records we cannot see),
    so ``position - checkpoint.upstream`` alone is *not* a bound. With a sync history it is:
    the least sync at or after the position caps the true position at its downstream ``d2``
    (bound ``d2 - cd``), and the sync at or before the checkpoint bounds MM2's own imprecision.
    Without syncs (they lived on a dead source cluster) the bound is unknown (None).
    The same syncs also catch a checkpoint later than provable (e.g. written by a pre-3.5 MM2
    that interpolated), which is then refused.

    :param source: upstream partition the job read.
    :param position: next upstream offset to process.
    :param target: downstream partition; must be the checkpoint's topic and partition.
    :param checkpoint: the latest checkpoint of the bookkeeping group for this partition.
    :param history: offset syncs of ``source`` if available; they tighten and verify the result.
    """
    method = TranslationMethod.CHECKPOINT
    if (checkpoint.topic, checkpoint.partition) != (target.topic, target.partition):
        raise TranslationError(
            f"checkpoint for {checkpoint.topic}-{checkpoint.partition} (group {checkpoint.group!r}) was "
            f"offered for target partition {target}; checkpoints name the target-side topic"
        )
    cu, cd = checkpoint.upstream_offset, checkpoint.downstream_offset
    if cu < 0 or cd < 0:
        reason = f"checkpoint of group {checkpoint.group!r} has no offset ({cu}, {cd})"
        return untranslated(source, position, target, method, reason)
    if cu > position:
        return untranslated(
            source,
            position,
            target,
            method,
            f"checkpoint of group {checkpoint.group!r} is at upstream offset {cu}, ahead of the position "
            f"{position}: the group committed more than the job's checkpoint says it processed",
        )
    bound: int | None = None
    if history is not None and history.upstream:
        ceiling_at_checkpoint = history.ceiling_by_upstream(cu)
        if ceiling_at_checkpoint is not None and cd > history.downstream[ceiling_at_checkpoint]:
            return untranslated(
                source,
                position,
                target,
                method,
                f"checkpoint ({cu} -> {cd}) of group {checkpoint.group!r} is later than the offset sync "
                f"({history.upstream[ceiling_at_checkpoint]} -> {history.downstream[ceiling_at_checkpoint]}) "
                "allows; refusing it (was it written by an MM2 older than 3.5?)",
            )
        bound = _checkpoint_redelivery_bound(position, cu, cd, history)
    return PartitionTranslation.of(source, position, target, cd, method, redelivery_bound=bound)


def _checkpoint_redelivery_bound(position: int, cu: int, cd: int, history: OffsetSyncHistory) -> int | None:
    bounds: list[int] = []
    ceiling = history.ceiling_by_upstream(position)
    if ceiling is not None:
        bounds.append(history.downstream[ceiling] - cd)
    floor = history.floor_by_upstream(cu)
    if floor is not None:
        # The true position of cu is d1 when u1 == cu, else at least d1 + 1 with at most cu - u1 - 1
        # records after that; records from cu to the position add at most position - cu.
        u1, d1 = history.upstream[floor], history.downstream[floor]
        step = 0 if u1 == cu else 1
        bounds.append(max(0, d1 + step - cd) + (position - u1 - step))
    return min(bounds) if bounds else None


def translate_by_identity(
    source: TopicPartition, position: int, target: TopicPartition
) -> PartitionTranslation:
    """Offset-preserving replication (Cluster Linking, shadowing): the same offset, exactly.

    :param source: partition the job read.
    :param position: next offset to process.
    :param target: partition on the other cluster.
    """
    return PartitionTranslation.of(
        source, position, target, position, TranslationMethod.IDENTITY, redelivery_bound=0
    )


def translate_by_timestamp(
    source: TopicPartition,
    position: int | None,
    target: TopicPartition,
    lookup: TimestampLookup,
    high_watermark: int | None,
    reverse: bool = False,
) -> PartitionTranslation:
    """Record the offset that offsets-for-times found on the target for a processed timestamp minus a margin.

    Not proven: record timestamps need not grow with offsets, and ``LogAppendTime`` on the
    target rewrites them; the margin makes an early start likely, not certain.

    Its re-delivery is bounded in reverse only (``target`` is the origin of ``source``'s records: the job
    read a replica, as the job on A reads ``B.orders`` after a failback): every record the job processed is
    a copy of an original that existed before the copy, so the originals read again lie between the start
    and the target's high watermark now, and there are at most ``position`` of them (one per processed
    copy). Forward, copies of processed records may still arrive after the plan, so the bound stays unknown.

    :param source: partition the job read.
    :param position: next offset to process on ``source``.
    :param target: partition on the other cluster.
    :param lookup: the timestamp looked up and the offset found (None: no record at or after it).
    :param high_watermark: the target's high watermark, used when no record was found.
    :param reverse: whether ``target`` is the origin of ``source``'s records.
    """
    method = TranslationMethod.TIMESTAMP
    caveat = (
        f"start found by timestamp {lookup.timestamp_ms} ms: assumes record timestamps on {target} do not "
        "decrease by more than the margin; not proven to be early enough"
    )
    if lookup.offset is not None:
        bound = None
        if reverse and high_watermark is not None:
            bound = max(0, high_watermark - lookup.offset)
            bound = bound if position is None else min(bound, position)
        return PartitionTranslation.of(
            source, position, target, lookup.offset, method, redelivery_bound=bound, warnings=[caveat]
        )
    if high_watermark is None:
        return untranslated(
            source,
            position,
            target,
            method,
            f"no record at or after {lookup.timestamp_ms} ms on {target} and its high watermark is unknown",
        )
    note = f"no record at or after {lookup.timestamp_ms} ms on {target}: starting at its high watermark"
    return PartitionTranslation.of(
        source,
        position,
        target,
        high_watermark,
        method,
        redelivery_bound=0 if reverse else None,
        warnings=[caveat, note],
    )


def translate_from_earliest(
    source: TopicPartition,
    position: int,
    target: TopicPartition,
    watermarks: Watermarks | None,
    history: OffsetSyncHistory | None,
    reverse: bool,
    records_before_oldest_sync: int | None = None,
) -> PartitionTranslation:
    """Offset 0 of the target, when no method translated the partition and none of its records were deleted.

    Never later than the truth: a target log that still starts at offset 0 lost no record to retention,
    so every copy (or, in reverse, every original) of the first unprocessed record sits at or after 0.
    It may re-deliver a lot, and the bound says how much:

    - forward (the target holds copies): the position is older than every offset sync, so every copy
      MM2's syncs describe began after it and holds no processed record; only the records below the
      oldest sync's downstream offset ``d0`` can be copies of processed records: bound ``d0``. The
      records between the position and the oldest sync's upstream offset ``u0`` were copied below
      ``d0`` at best, so beyond ``d0`` of them are not on the target: a gap (:func:`gap_before_oldest_sync`:
      in records when the source's records were counted, else an upper bound in offsets).
      Without any sync, the bound and the gap are unknown (None and 0, with a warning). A partition MM2
      copied more than once is named from its syncs' backwards steps, or, when the syncs of the earlier
      copies are gone, from ``d0 > u0`` (more records below the oldest sync than the source has offsets).
    - reverse (the target is the origin): each processed downstream record is a copy of at most one
      original, so at most ``position`` originals are read again; the origin lacks nothing.

    :param source: partition the job read.
    :param position: next offset to process there (> 0).
    :param target: partition on the other cluster.
    :param watermarks: the target's watermarks; unknown watermarks prove nothing.
    :param history: offset syncs of the partition's flow (forward: ``source`` upstream; reverse: ``target``
        upstream), if any.
    :param reverse: whether ``target`` is the origin of ``source``'s records.
    :param records_before_oldest_sync: forward only: the committed records the source holds from the position
        up to the oldest sync's upstream offset, when they could be counted; None counts offsets instead.
    """
    method = TranslationMethod.EARLIEST
    if watermarks is None:
        return untranslated(source, position, target, method, f"the watermarks of {target} are unknown")
    if watermarks.low > 0:
        return untranslated(
            source,
            position,
            target,
            method,
            f"{target} no longer starts at offset 0 (its log starts at {watermarks.low}): records before "
            "that were deleted and nothing proves the job had processed them, so no start is provably safe",
        )
    start = (
        f"no configured method translated position {position} of {source}; starting {target} at offset 0, "
        "where its log still starts (nothing was deleted there, so no record the job still needs lies before "
        "it)"
    )
    if reverse:
        return PartitionTranslation.of(
            source,
            position,
            target,
            0,
            method,
            redelivery_bound=position,
            warnings=[f"{start}; up to {position} records are read again (one per processed copy)"],
        )
    if history is None or not history.upstream:
        return PartitionTranslation.of(
            source,
            position,
            target,
            0,
            method,
            redelivery_bound=None,
            warnings=[
                f"{start}; without offset syncs for {source} the re-delivery bound is unknown and nothing "
                f"shows that {target} holds every record from the position on"
            ],
        )
    oldest = history.copies[0]
    u0, d0 = oldest.upstream[0], oldest.downstream[0]
    gap = gap_before_oldest_sync(position, (u0, d0), records_before_oldest_sync)
    hidden = _hidden_copies_after(history.copies, 1, 0)
    warnings = [
        f"{start}; up to {d0} records are read again (those below the oldest offset sync, {u0} -> {d0})"
    ]
    if len(history.copies) > 1:
        warnings.append(
            f"MirrorMaker 2 copied {source} more than once into {target} ({len(history.copies)} copies: it "
            "restarted from an older offset after the oldest sync); the start at offset 0 reads every copy: "
            f"up to {hidden} more record(s) of {target} may repeat processed ones, which the re-delivery "
            "bound includes"
        )
    elif hidden:
        warnings.append(
            f"the offset syncs of {source} show restarts of MirrorMaker 2 after the oldest sync: up to "
            f"{hidden} more record(s) of {target} may repeat processed ones, which the re-delivery bound "
            "includes"
        )
    elif oldest.records_below_first_sync():
        # The syncs of the earlier copies are gone (MM2 overwrites a sync it has not sent yet), but the
        # counts tell: the source has at most u0 offsets below the oldest sync, the replica d0 records.
        warnings.append(
            f"MirrorMaker 2 copied at least {d0 - u0} record(s) of {source} more than once into {target} "
            f"({_more_records_than_offsets(target, source, u0, d0)}: it restarted from an older offset "
            "before that sync); the start at offset 0 reads every copy, and the re-delivery bound counts all "
            f"{d0} records below that sync"
        )
    upper_bound = bool(gap) and records_before_oldest_sync is None
    if gap:
        warnings.append(_never_copied(source, position, target, (u0, d0), gap, records_before_oldest_sync))
    return PartitionTranslation.of(
        source,
        position,
        target,
        0,
        method,
        redelivery_bound=d0 + hidden,
        gap_records=gap,
        gap_upper_bound=upper_bound,
        warnings=warnings,
    )


def gap_before_oldest_sync(position: int, oldest_sync: tuple[int, int], records: int | None = None) -> int:
    """Records between a forward position and MirrorMaker 2's oldest offset sync that the target cannot hold.

    The oldest sync ``(u0, d0)`` says the record at ``u0`` was copied to ``d0``; the target holds ``d0``
    offsets below it, so at most ``d0`` copies of the records in ``[position, u0)``. With those records
    counted on the source (``records``), ``records - d0`` is exact when MirrorMaker 2 copied the partition
    once, in order, from where it began (the records it never copied are the ones before that start).
    Without the count, offsets stand in for records: ``(u0 - position) - d0`` is an upper bound, since
    transaction markers and aborted records take offsets that MirrorMaker 2 never copies; on a transactional
    topic they may be all of it.

    :param position: the job's position on the source, before ``u0``.
    :param oldest_sync: ``(u0, d0)``, the oldest sync of the partition's first copy.
    :param records: committed records the source holds in ``[position, u0)``; None when they were not counted.
    """
    u0, d0 = oldest_sync
    if records is not None and not 0 <= records <= u0 - position:
        raise TranslationError(
            f"{records} records counted between position {position} and the oldest offset sync's upstream "
            f"offset {u0}: a count must lie between 0 and the {u0 - position} offsets there; count committed "
            "records in [position, u0) only"
        )
    within = u0 - position if records is None else records
    return max(0, within - d0)


def _never_copied(
    source: TopicPartition,
    position: int,
    target: TopicPartition,
    oldest_sync: tuple[int, int],
    gap: int,
    records: int | None,
) -> str:
    """The warning of a gap before the oldest offset sync, saying how it was measured."""
    u0, d0 = oldest_sync
    where = (
        f"MirrorMaker 2's oldest sync of {source} is at upstream offset {u0}, after the position {position}:"
    )
    why = "(deleted before replication, or replication started later)"
    if records is not None:
        return (
            f"{where} {gap} record(s) between them were never copied to {target} {why}; counted by records "
            f"on the source: {records} committed record(s) there, and {target} holds {d0} below that sync"
        )
    return (
        f"{where} up to {gap} record(s) between them may never have been copied to {target} {why}. An upper "
        f"bound counted in offsets, not records ({u0 - position} offsets against the {d0} record(s) of "
        f"{target} below that sync): transaction markers and aborted records take offsets that MirrorMaker 2 "
        "never copies and may make up all of it; the source's records could not be counted"
    )

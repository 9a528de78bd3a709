"""Per-partition offset translation rules, one per method: pure functions, no I/O.

Each rule gives one candidate start offset; :mod:`airflow_kafka_failover.translation.choosing` picks
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
(in :mod:`airflow_kafka_failover.translation.sync_history`), which drops syncs made stale by a
restart or truncation, so the model holds within one history.

A *redelivery bound* is an upper bound on the number of records the job will see again by
starting at the translated offset instead of its true position.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_kafka_failover.exceptions import TranslationError
from airflow_kafka_failover.translation.mm2_records import Checkpoint
from airflow_kafka_failover.translation.plan import PartitionTranslation, TranslationMethod
from airflow_kafka_failover.translation.sync_history import OffsetSyncHistory
from airflow_kafka_failover.types import TopicPartition


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
    return PartitionTranslation(source, position, target, None, method, warnings=[reason])


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

    :param source: upstream partition the job read.
    :param position: next upstream offset to process.
    :param target: downstream partition.
    :param history: syncs of ``source``.
    """
    method = TranslationMethod.OFFSET_SYNC
    index = history.floor_by_upstream(position)
    if index is None:
        if not history.upstream:
            reason = f"no offset syncs for {source}"
        else:
            reason = (
                f"position {position} is older than every offset sync of {source} (oldest upstream offset "
                f"{history.upstream[0]}); MM2 cannot translate it"
            )
        return untranslated(source, position, target, method, reason)
    upstream, downstream = history.upstream[index], history.downstream[index]
    if position == upstream:
        return PartitionTranslation(source, position, target, downstream, method, redelivery_bound=0)
    bound = position - upstream - 1
    if index + 1 < len(history.upstream):
        bound = min(bound, history.downstream[index + 1] - downstream - 1)
    return PartitionTranslation(source, position, target, downstream + 1, method, redelivery_bound=bound)


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

    :param source: downstream partition the job read (e.g. ``A.orders`` on B).
    :param position: next downstream offset to process.
    :param target: upstream partition (e.g. ``orders`` on A).
    :param history: syncs of the flow ``target -> source`` for this partition.
    """
    method = TranslationMethod.OFFSET_SYNC_REVERSE
    index = history.floor_by_downstream(position)
    if index is None:
        if not history.downstream:
            reason = f"no offset syncs for {target} -> {source}"
        else:
            reason = (
                f"position {position} is older than every offset sync into {source} (oldest downstream "
                f"offset {history.downstream[0]}); cannot translate it back"
            )
        return untranslated(source, position, target, method, reason)
    upstream, downstream = history.upstream[index], history.downstream[index]
    bound = position - downstream
    ceiling = history.ceiling_by_downstream(position)
    if ceiling is not None:
        bound = min(bound, history.upstream[ceiling] - upstream)
    return PartitionTranslation(source, position, target, upstream, method, redelivery_bound=bound)


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
    return PartitionTranslation(source, position, target, cd, method, redelivery_bound=bound)


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
    return PartitionTranslation(
        source, position, target, position, TranslationMethod.IDENTITY, redelivery_bound=0
    )


def translate_by_timestamp(
    source: TopicPartition,
    position: int | None,
    target: TopicPartition,
    lookup: TimestampLookup,
    high_watermark: int | None,
) -> PartitionTranslation:
    """Record the offset that offsets-for-times found on the target for a processed timestamp minus a margin.

    Not proven: record timestamps need not grow with offsets, and ``LogAppendTime`` on the
    target rewrites them; the margin makes an early start likely, not certain.

    :param source: partition the job read.
    :param position: next offset to process on ``source`` (for the record only).
    :param target: partition on the other cluster.
    :param lookup: the timestamp looked up and the offset found (None: no record at or after it).
    :param high_watermark: the target's high watermark, used when no record was found.
    """
    method = TranslationMethod.TIMESTAMP
    caveat = (
        f"start found by timestamp {lookup.timestamp_ms} ms: assumes record timestamps on {target} do not "
        "decrease by more than the margin; not proven to be early enough"
    )
    if lookup.offset is not None:
        return PartitionTranslation(source, position, target, lookup.offset, method, warnings=[caveat])
    if high_watermark is None:
        return untranslated(
            source,
            position,
            target,
            method,
            f"no record at or after {lookup.timestamp_ms} ms on {target} and its high watermark is unknown",
        )
    note = f"no record at or after {lookup.timestamp_ms} ms on {target}: starting at its high watermark"
    return PartitionTranslation(source, position, target, high_watermark, method, warnings=[caveat, note])


def translate_initial(
    source: TopicPartition, position: int | None, target: TopicPartition, target_offset: int
) -> PartitionTranslation:
    """Record the job's configured initial offset (already resolved on the target) as the start.

    :param source: partition the job read.
    :param position: the job's position there, if any.
    :param target: partition on the other cluster.
    :param target_offset: the resolved initial offset on the target.
    """
    return PartitionTranslation(
        source,
        position,
        target,
        target_offset,
        TranslationMethod.INITIAL,
        warnings=[f"no translation: starting {target} at the configured initial offset {target_offset}"],
    )

"""Choose one partition's start offset among the methods' candidates, and clamp it: pure, no I/O.

:func:`translate_partition` runs every configured method (the rules of
:mod:`airflow_kafka_failover.domain.translation.rules`) on one :class:`PartitionRequest`, then
:func:`choose_translation` keeps the greatest proven candidate and clamps it to the target's watermarks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from airflow_kafka_failover.core.exceptions import TranslationError
from airflow_kafka_failover.core.types import TopicPartition, Watermarks
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
    translate_from_earliest,
    untranslated,
)
from airflow_kafka_failover.domain.translation.sync_history import OffsetSyncHistory


def validate_method_order(method_order: Sequence[str]) -> dict[str, int]:
    """Check a configured method order and return each method's rank (0 = preferred).

    :param method_order: method names, most preferred first.
    """
    if isinstance(method_order, str) or not method_order:
        raise TranslationError(
            f"method order must be a non-empty list of methods, got {method_order!r}; "
            f"choose from {[m.value for m in TranslationMethod]}"
        )
    rank: dict[str, int] = {}
    for position, name in enumerate(method_order):
        try:
            method = TranslationMethod(name)
        except ValueError:
            raise TranslationError(
                f"unknown translation method {name!r}; choose from {[m.value for m in TranslationMethod]}"
            ) from None
        if method in AUTOMATIC_METHODS:
            raise TranslationError(
                f"{name!r} is not a translation method to configure: the plan uses it by itself; choose from "
                f"{[m.value for m in TranslationMethod if m not in AUTOMATIC_METHODS]}"
            )
        if method.value in rank:
            raise TranslationError(f"translation method {name!r} is listed twice in {list(method_order)!r}")
        rank[method.value] = position
    return rank


def choose_translation(
    candidates: Sequence[PartitionTranslation],
    method_order: Sequence[str] | dict[str, int],
    watermarks: Watermarks | None = None,
) -> PartitionTranslation:
    """Pick one partition's start offset among the methods' candidates, then clamp it to the target's data.

    Among proven candidates (see :data:`PROVEN_METHODS`) every offset is not later than the true
    position, so the greatest of them is too, and it re-delivers no more than any other: it is
    chosen (ties go to the configured order), and it inherits the smallest known redelivery bound.
    Only if no proven candidate has an offset is an unproven one (timestamp, initial) used, the
    first in the configured order.

    Clamping (never silently): below ``low`` the skipped offsets were deleted by retention on the
    target; nothing proves the job had processed them, so they are counted in ``gap_records``.
    Above ``high`` the position is beyond what the target holds: start at ``high`` and count the
    difference as a gap; should those offsets be replicated later they are re-delivered, which the
    bound includes.

    :param candidates: one result per method tried, all for the same source and target partition.
    :param method_order: configured methods, most preferred first (or :func:`validate_method_order` ranks).
    :param watermarks: the target partition's watermarks; None skips clamping.
    """
    rank = method_order if isinstance(method_order, dict) else validate_method_order(method_order)
    if not candidates:
        raise TranslationError("choose_translation needs at least one candidate")
    first = candidates[0]
    for candidate in candidates:
        if candidate.method not in rank:
            raise TranslationError(
                f"candidate for {candidate.source} uses method {candidate.method!r}, which is not in the "
                f"configured order {sorted(rank, key=rank.__getitem__)}"
            )
        if (candidate.source, candidate.target, candidate.source_offset) != (
            first.source,
            first.target,
            first.source_offset,
        ):
            raise TranslationError(
                "candidates mix partitions: "
                f"{candidate.source}@{candidate.source_offset}->{candidate.target} and "
                f"{first.source}@{first.source_offset}->{first.target}"
            )
    chosen = _pick(candidates, rank)
    if chosen.target_offset is None or watermarks is None:
        return chosen
    return _clamp(chosen, watermarks)


def _pick(candidates: Sequence[PartitionTranslation], rank: dict[str, int]) -> PartitionTranslation:
    by_rank = sorted(candidates, key=lambda c: rank[c.method])
    proven = [c for c in by_rank if c.target_offset is not None and c.is_proven]
    if proven:
        best = max(proven, key=lambda c: (c.target_offset, -rank[c.method]))
        known = [c.redelivery_bound for c in proven if c.redelivery_bound is not None]
        bound = min(known) if known else None
    else:
        usable = [c for c in by_rank if c.target_offset is not None]
        if not usable:
            reasons = [f"{c.method}: {w}" for c in by_rank for w in c.warnings]
            reasons = reasons or ["no method produced an offset"]
            return by_rank[0].copied(
                method=TranslationMethod.NONE,
                redelivery_bound=None,
                warnings=["no method could translate this partition", *reasons],
            )
        best = usable[0]
        bound = best.redelivery_bound
    skipped = [
        f"{c.method} not used: {w}"
        for c in by_rank
        if c.target_offset is None and rank[c.method] < rank[best.method]
        for w in c.warnings
    ]
    return best.copied(redelivery_bound=bound, warnings=[*best.warnings, *skipped])


def _clamp(chosen: PartitionTranslation, watermarks: Watermarks) -> PartitionTranslation:
    offset = chosen.target_offset
    assert offset is not None
    low, high = watermarks.low, watermarks.high
    if offset < low:
        skipped = low - offset
        warning = (
            f"translated offset {offset} on {chosen.target} is below its low watermark {low}: offsets "
            f"{offset}..{low - 1} were deleted by retention on the target; nothing proves the job had "
            f"processed them, so all {skipped} count as possibly lost (gap); starting at {low}"
        )
        return chosen.copied(
            target_offset=low,
            gap_records=chosen.gap_records + skipped,
            warnings=[*chosen.warnings, warning],
        )
    if offset > high:
        missing = offset - high
        warning = (
            f"translated offset {offset} on {chosen.target} is beyond its high watermark {high}: the target "
            f"lacks {missing} offsets the job had already passed (replication lag or truncation); "
            f"starting at {high}"
        )
        bound = None if chosen.redelivery_bound is None else chosen.redelivery_bound + missing
        return chosen.copied(
            target_offset=high,
            redelivery_bound=bound,
            gap_records=chosen.gap_records + missing,
            warnings=[*chosen.warnings, warning],
        )
    return chosen


@dataclass(frozen=True, slots=True)
class PartitionRequest:
    """Everything the I/O layer gathered to translate one partition.

    :param source: partition the job read.
    :param position: next offset to process there.
    :param target: partition to read on the other cluster.
    :param offset_syncs: syncs with ``source`` upstream (for ``offset_sync`` and to verify checkpoints).
    :param reverse_offset_syncs: syncs with ``target`` upstream and ``source`` downstream
        (for ``offset_sync_reverse``).
    :param checkpoint: latest checkpoint of the bookkeeping group for ``target``.
    :param timestamp_lookup: offsets-for-times result on ``target``.
    :param watermarks: ``target``'s watermarks.
    :param reverse: whether ``target`` is the origin of ``source``'s records (the job read a replica).
    :param records_before_oldest_sync: committed records the source holds from ``position`` up to the oldest
        offset sync of ``offset_syncs``, counted by the I/O layer when the position is older than every sync;
        it measures the ``earliest`` start's gap in records instead of offsets.
    """

    source: TopicPartition
    position: int
    target: TopicPartition
    offset_syncs: OffsetSyncHistory | None = None
    reverse_offset_syncs: OffsetSyncHistory | None = None
    checkpoint: Checkpoint | None = None
    timestamp_lookup: TimestampLookup | None = None
    watermarks: Watermarks | None = None
    reverse: bool = False
    records_before_oldest_sync: int | None = None


def _offset_sync_candidate(request: PartitionRequest) -> PartitionTranslation:
    if request.offset_syncs is None:
        reason = f"no offset syncs for {request.source}"
        return untranslated(
            request.source, request.position, request.target, TranslationMethod.OFFSET_SYNC, reason
        )
    return translate_by_offset_sync(request.source, request.position, request.target, request.offset_syncs)


def _reverse_offset_sync_candidate(request: PartitionRequest) -> PartitionTranslation:
    if request.reverse_offset_syncs is None:
        reason = f"no offset syncs for {request.target} -> {request.source}"
        return untranslated(
            request.source, request.position, request.target, TranslationMethod.OFFSET_SYNC_REVERSE, reason
        )
    return translate_by_offset_sync_reverse(
        request.source, request.position, request.target, request.reverse_offset_syncs
    )


def _checkpoint_candidate(request: PartitionRequest) -> PartitionTranslation:
    if request.checkpoint is None:
        reason = f"no checkpoint for {request.target}"
        syncs = request.offset_syncs
        if syncs is not None and syncs.upstream and request.position < syncs.copies[0].upstream[0]:
            reason += (
                ": MirrorMaker 2 writes a checkpoint only for a committed offset it can translate, at or "
                f"after the oldest offset sync of {request.source} (upstream offset "
                f"{syncs.copies[0].upstream[0]}), and the position {request.position} is older"
            )
        return untranslated(
            request.source, request.position, request.target, TranslationMethod.CHECKPOINT, reason
        )
    return translate_by_checkpoint(
        request.source, request.position, request.target, request.checkpoint, request.offset_syncs
    )


def _identity_candidate(request: PartitionRequest) -> PartitionTranslation:
    return translate_by_identity(request.source, request.position, request.target)


def _timestamp_candidate(request: PartitionRequest) -> PartitionTranslation:
    if request.timestamp_lookup is None:
        reason = f"no record timestamp known for {request.source}"
        return untranslated(
            request.source, request.position, request.target, TranslationMethod.TIMESTAMP, reason
        )
    high = None if request.watermarks is None else request.watermarks.high
    return translate_by_timestamp(
        request.source, request.position, request.target, request.timestamp_lookup, high, request.reverse
    )


_CANDIDATE_BUILDERS: dict[str, Callable[[PartitionRequest], PartitionTranslation]] = {
    TranslationMethod.CHECKPOINT: _checkpoint_candidate,
    TranslationMethod.OFFSET_SYNC: _offset_sync_candidate,
    TranslationMethod.OFFSET_SYNC_REVERSE: _reverse_offset_sync_candidate,
    TranslationMethod.TIMESTAMP: _timestamp_candidate,
    TranslationMethod.IDENTITY: _identity_candidate,
}


def translate_partition(
    request: PartitionRequest, method_order: Sequence[str] | dict[str, int]
) -> PartitionTranslation:
    """Run every configured method on one partition and choose the result.

    :param request: the partition's inputs.
    :param method_order: configured methods, most preferred first (or :func:`validate_method_order` ranks).
    """
    rank = method_order if isinstance(method_order, dict) else validate_method_order(method_order)
    if request.position < 0:
        raise TranslationError(f"position {request.position} of {request.source} is negative")
    if request.position == 0:
        # Nothing of this partition was processed (e.g. a replicated topic that was still empty): start at
        # the target's beginning, whatever the replication evidence, which an empty partition never has.
        start = PartitionTranslation.of(
            request.source,
            0,
            request.target,
            0,
            TranslationMethod.NOTHING_PROCESSED,
            redelivery_bound=0,
        )
        return start if request.watermarks is None else _clamp(start, request.watermarks)
    candidates = [_CANDIDATE_BUILDERS[method](request) for method in rank]
    chosen = choose_translation(candidates, rank, request.watermarks)
    if chosen.target_offset is not None:
        return chosen
    return _from_earliest_if_safe(request, chosen)


def _from_earliest_if_safe(request: PartitionRequest, chosen: PartitionTranslation) -> PartitionTranslation:
    """Offset 0 of the target, when no configured method found a start and the target still starts at 0.

    :param request: the partition's inputs.
    :param chosen: the untranslated result of the configured methods (its warnings say why each failed).
    """
    history = request.reverse_offset_syncs if request.reverse else request.offset_syncs
    earliest = translate_from_earliest(
        request.source,
        request.position,
        request.target,
        request.watermarks,
        history,
        request.reverse,
        None if request.reverse else request.records_before_oldest_sync,
    )
    if earliest.target_offset is None:
        return chosen.copied(warnings=[*chosen.warnings, f"earliest: {earliest.warnings[0]}"])
    why = [w for w in chosen.warnings if w != "no method could translate this partition"]
    return earliest.copied(warnings=[*earliest.warnings, *(f"not used: {w}" for w in why)])


def translate_partitions(
    requests: Iterable[PartitionRequest], method_order: Sequence[str]
) -> list[PartitionTranslation]:
    """Translate many partitions in one call (validates the method order once).

    :param requests: one request per partition.
    :param method_order: configured methods, most preferred first.
    """
    rank = validate_method_order(method_order)
    return [translate_partition(request, rank) for request in requests]

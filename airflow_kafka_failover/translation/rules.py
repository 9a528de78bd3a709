"""Per-partition offset translation rules: pure functions, no I/O.

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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from airflow_kafka_failover.exceptions import TranslationError
from airflow_kafka_failover.translation.records import Checkpoint

if TYPE_CHECKING:
    # Annotations only: sync_history imports TopicPartition from here, so a runtime import would cycle.
    from airflow_kafka_failover.translation.sync_history import OffsetSyncHistory


class TranslationMethod(StrEnum):
    """How a partition's start offset on the target was found."""

    CHECKPOINT = "checkpoint"
    OFFSET_SYNC = "offset_sync"
    OFFSET_SYNC_REVERSE = "offset_sync_reverse"
    TIMESTAMP = "timestamp"
    IDENTITY = "identity"
    INITIAL = "initial"
    NOTHING_PROCESSED = "nothing_processed"


PROVEN_METHODS = frozenset(
    {
        TranslationMethod.CHECKPOINT,
        TranslationMethod.OFFSET_SYNC,
        TranslationMethod.OFFSET_SYNC_REVERSE,
        # Proven only under offset-preserving replication, which configuring it declares.
        TranslationMethod.IDENTITY,
        # Position 0: the job processed nothing of the partition, so the target's beginning is exact.
        TranslationMethod.NOTHING_PROCESSED,
    }
)
"""Methods whose result is provably not later than the true position. Timestamps are not
(record timestamps need not increase with offsets), nor is a configured initial position."""


@dataclass(frozen=True, order=True, slots=True)
class TopicPartition:
    """A partition of a topic on one cluster.

    :param topic: topic name.
    :param partition: partition number.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Watermarks:
    """A target partition's offset range: ``low`` is the first offset stored, ``high`` the next to be written.

    :param low: log start offset.
    :param high: high watermark (log end offset for committed reads).
    """

    low: int
    high: int

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high:
            raise TranslationError(
                f"watermarks must satisfy 0 <= low <= high, got low={self.low} high={self.high}"
            )


@dataclass(frozen=True, slots=True)
class TimestampLookup:
    """The result of offsets-for-times on the target, resolved by the I/O layer.

    :param timestamp_ms: the timestamp looked up (newest processed record's timestamp minus a margin).
    :param offset: earliest offset with a timestamp >= ``timestamp_ms``; None if there is no such record.
    """

    timestamp_ms: int
    offset: int | None


@dataclass(slots=True)
class PartitionTranslation:
    """One partition's translation: where the job was, where it starts on the target, and how sure we are.

    :param source: the partition the job read.
    :param source_offset: the job's position there (next offset to process); None if it had none.
    :param target: the partition to read on the other cluster.
    :param target_offset: the start offset there; None when this method could not translate.
    :param method: a :class:`TranslationMethod` value.
    :param redelivery_bound: upper bound on records delivered again; None when not computable.
    :param gap_records: target offsets skipped that may hold records the job never processed.
    :param warnings: human-readable notes for the operator.
    """

    source: TopicPartition
    source_offset: int | None
    target: TopicPartition
    target_offset: int | None
    method: str
    redelivery_bound: int | None = None
    gap_records: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def is_proven(self) -> bool:
        """Whether the method guarantees the offset is not later than the true position."""
        return self.method in PROVEN_METHODS

    @property
    def has_gap(self) -> bool:
        """Whether records may be missing on the target for this partition."""
        return self.gap_records > 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types, for XCom and history records."""
        return {
            "source_topic": self.source.topic,
            "source_partition": self.source.partition,
            "source_offset": self.source_offset,
            "target_topic": self.target.topic,
            "target_partition": self.target.partition,
            "target_offset": self.target_offset,
            "method": str(self.method),
            "redelivery_bound": self.redelivery_bound,
            "gap_records": self.gap_records,
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PartitionTranslation:
        """Rebuild from :meth:`to_dict` output, validating types.

        :param data: the dict.
        """
        try:
            method = TranslationMethod(data["method"])
            result = cls(
                source=TopicPartition(str(data["source_topic"]), _as_int(data["source_partition"])),
                source_offset=_as_optional_int(data["source_offset"]),
                target=TopicPartition(str(data["target_topic"]), _as_int(data["target_partition"])),
                target_offset=_as_optional_int(data["target_offset"]),
                method=method.value,
                redelivery_bound=_as_optional_int(data.get("redelivery_bound")),
                gap_records=_as_int(data.get("gap_records", 0)),
                warnings=[str(w) for w in data.get("warnings", [])],
            )
        except (KeyError, TypeError, ValueError) as err:
            raise TranslationError(f"invalid partition translation {data!r}: {err}") from None
        return result


def _as_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _as_optional_int(value: Any) -> int | None:
    return None if value is None else _as_int(value)


def _untranslated(
    source: TopicPartition, position: int | None, target: TopicPartition, method: str, reason: str
) -> PartitionTranslation:
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
    method = TranslationMethod.OFFSET_SYNC.value
    index = history.floor_by_upstream(position)
    if index is None:
        if not history.upstream:
            reason = f"no offset syncs for {source}"
        else:
            reason = (
                f"position {position} is older than every offset sync of {source} (oldest upstream offset "
                f"{history.upstream[0]}); MM2 cannot translate it"
            )
        return _untranslated(source, position, target, method, reason)
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
    method = TranslationMethod.OFFSET_SYNC_REVERSE.value
    index = history.floor_by_downstream(position)
    if index is None:
        if not history.downstream:
            reason = f"no offset syncs for {target} -> {source}"
        else:
            reason = (
                f"position {position} is older than every offset sync into {source} (oldest downstream "
                f"offset {history.downstream[0]}); cannot translate it back"
            )
        return _untranslated(source, position, target, method, reason)
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
    method = TranslationMethod.CHECKPOINT.value
    if (checkpoint.topic, checkpoint.partition) != (target.topic, target.partition):
        raise TranslationError(
            f"checkpoint for {checkpoint.topic}-{checkpoint.partition} (group {checkpoint.group!r}) was "
            f"offered for target partition {target}; checkpoints name the target-side topic"
        )
    cu, cd = checkpoint.upstream_offset, checkpoint.downstream_offset
    if cu < 0 or cd < 0:
        reason = f"checkpoint of group {checkpoint.group!r} has no offset ({cu}, {cd})"
        return _untranslated(source, position, target, method, reason)
    if cu > position:
        return _untranslated(
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
            return _untranslated(
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
        source, position, target, position, TranslationMethod.IDENTITY.value, redelivery_bound=0
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
    method = TranslationMethod.TIMESTAMP.value
    caveat = (
        f"start found by timestamp {lookup.timestamp_ms} ms: assumes record timestamps on {target} do not "
        "decrease by more than the margin; not proven to be early enough"
    )
    if lookup.offset is not None:
        return PartitionTranslation(source, position, target, lookup.offset, method, warnings=[caveat])
    if high_watermark is None:
        return _untranslated(
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
        TranslationMethod.INITIAL.value,
        warnings=[f"no translation: starting {target} at the configured initial offset {target_offset}"],
    )


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
            return replace(by_rank[0], warnings=["no method could translate this partition", *reasons])
        best = usable[0]
        bound = best.redelivery_bound
    skipped = [
        f"{c.method} not used: {w}"
        for c in by_rank
        if c.target_offset is None and rank[c.method] < rank[best.method]
        for w in c.warnings
    ]
    return replace(best, redelivery_bound=bound, warnings=[*best.warnings, *skipped])


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
        return replace(
            chosen,
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
        return replace(
            chosen,
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
    :param initial_offset: the job's initial offset resolved on ``target``.
    :param watermarks: ``target``'s watermarks.
    """

    source: TopicPartition
    position: int
    target: TopicPartition
    offset_syncs: OffsetSyncHistory | None = None
    reverse_offset_syncs: OffsetSyncHistory | None = None
    checkpoint: Checkpoint | None = None
    timestamp_lookup: TimestampLookup | None = None
    initial_offset: int | None = None
    watermarks: Watermarks | None = None


def _offset_sync_candidate(request: PartitionRequest) -> PartitionTranslation:
    if request.offset_syncs is None:
        reason = f"no offset syncs for {request.source}"
        return _untranslated(request.source, request.position, request.target, "offset_sync", reason)
    return translate_by_offset_sync(request.source, request.position, request.target, request.offset_syncs)


def _reverse_offset_sync_candidate(request: PartitionRequest) -> PartitionTranslation:
    if request.reverse_offset_syncs is None:
        reason = f"no offset syncs for {request.target} -> {request.source}"
        return _untranslated(request.source, request.position, request.target, "offset_sync_reverse", reason)
    return translate_by_offset_sync_reverse(
        request.source, request.position, request.target, request.reverse_offset_syncs
    )


def _checkpoint_candidate(request: PartitionRequest) -> PartitionTranslation:
    if request.checkpoint is None:
        reason = f"no checkpoint for {request.target}"
        return _untranslated(request.source, request.position, request.target, "checkpoint", reason)
    return translate_by_checkpoint(
        request.source, request.position, request.target, request.checkpoint, request.offset_syncs
    )


def _identity_candidate(request: PartitionRequest) -> PartitionTranslation:
    return translate_by_identity(request.source, request.position, request.target)


def _timestamp_candidate(request: PartitionRequest) -> PartitionTranslation:
    if request.timestamp_lookup is None:
        reason = f"no record timestamp known for {request.source}"
        return _untranslated(request.source, request.position, request.target, "timestamp", reason)
    high = None if request.watermarks is None else request.watermarks.high
    return translate_by_timestamp(
        request.source, request.position, request.target, request.timestamp_lookup, high
    )


def _initial_candidate(request: PartitionRequest) -> PartitionTranslation:
    if request.initial_offset is None:
        reason = f"no initial offset resolved for {request.target}"
        return _untranslated(request.source, request.position, request.target, "initial", reason)
    return translate_initial(request.source, request.position, request.target, request.initial_offset)


_CANDIDATE_BUILDERS = {
    TranslationMethod.CHECKPOINT.value: _checkpoint_candidate,
    TranslationMethod.OFFSET_SYNC.value: _offset_sync_candidate,
    TranslationMethod.OFFSET_SYNC_REVERSE.value: _reverse_offset_sync_candidate,
    TranslationMethod.TIMESTAMP.value: _timestamp_candidate,
    TranslationMethod.IDENTITY.value: _identity_candidate,
    TranslationMethod.INITIAL.value: _initial_candidate,
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
        start = PartitionTranslation(
            request.source,
            0,
            request.target,
            0,
            TranslationMethod.NOTHING_PROCESSED.value,
            redelivery_bound=0,
        )
        return start if request.watermarks is None else _clamp(start, request.watermarks)
    candidates = [_CANDIDATE_BUILDERS[method](request) for method in rank]
    return choose_translation(candidates, rank, request.watermarks)


def translate_partitions(
    requests: Iterable[PartitionRequest], method_order: Sequence[str]
) -> list[PartitionTranslation]:
    """Translate many partitions in one call (validates the method order once).

    :param requests: one request per partition.
    :param method_order: configured methods, most preferred first.
    """
    rank = validate_method_order(method_order)
    return [translate_partition(request, rank) for request in requests]

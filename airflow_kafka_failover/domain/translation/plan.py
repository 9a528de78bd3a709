"""A translation plan: every partition's start offset on the target cluster, ready for Spark.

:class:`PartitionTranslation` (one partition's result) and :class:`TranslationPlan` (all of them) are
typed payload models (pydantic dataclasses): the plan travels through XCom as their JSON, and a payload
that does not fit the model is refused with a :class:`TranslationError` naming the bad field.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, cast

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    StrictBool,
    StrictInt,
    TypeAdapter,
    ValidationError,
    field_serializer,
    model_serializer,
    model_validator,
)
from pydantic.dataclasses import dataclass

from airflow_kafka_failover.core.exceptions import TranslationError
from airflow_kafka_failover.core.types import TopicPartition


class TranslationMethod(StrEnum):
    """How a partition's start offset on the target was found."""

    CHECKPOINT = "checkpoint"
    OFFSET_SYNC = "offset_sync"
    OFFSET_SYNC_REVERSE = "offset_sync_reverse"
    TIMESTAMP = "timestamp"
    IDENTITY = "identity"
    NOTHING_PROCESSED = "nothing_processed"
    EARLIEST = "earliest"
    """No configured method translated the partition, but the target still holds its offset 0."""
    NONE = "none"
    """The label of a partition no method translated: it has no start offset."""


AUTOMATIC_METHODS = frozenset(
    {TranslationMethod.NOTHING_PROCESSED, TranslationMethod.EARLIEST, TranslationMethod.NONE}
)
"""Labels the plan sets by itself; they are not methods a pair configures."""

CONFIGURABLE_METHODS = tuple(method for method in TranslationMethod if method not in AUTOMATIC_METHODS)
"""The methods a pair's ``translation.methods`` may name, in the enum's order."""


PROVEN_METHODS = frozenset(
    {
        TranslationMethod.CHECKPOINT,
        TranslationMethod.OFFSET_SYNC,
        TranslationMethod.OFFSET_SYNC_REVERSE,
        # Proven only under offset-preserving replication, which configuring it declares.
        TranslationMethod.IDENTITY,
        # Position 0: the job processed nothing of the partition, so the target's beginning is exact.
        TranslationMethod.NOTHING_PROCESSED,
        # Offset 0 of a target log that still starts there: no copy of any record lies before it.
        TranslationMethod.EARLIEST,
    }
)
"""Methods whose result is provably not later than the true position. Timestamps are not
(record timestamps need not increase with offsets), nor is a configured initial position."""


def _describe_validation(err: ValidationError) -> str:
    """One line per bad field: ``field.path: problem (got value)``."""
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or 'value'}: {e['msg']} (got {e.get('input')!r})"
        for e in err.errors()
    )


@dataclass
class PartitionTranslation:
    """One partition's translation: where the job was, where it starts on the target, and how sure we are.

    Its JSON form is flat (``source_topic``, ``source_partition``, ``source_offset``, ``target_topic``, ...),
    the shape plans have always had in XCom.

    :param source: the partition the job read.
    :param source_offset: the job's position there (next offset to process); None if it had none.
    :param target: the partition to read on the other cluster.
    :param target_offset: the start offset there; None when this method could not translate.
    :param method: how it was found (a :class:`TranslationMethod`).
    :param redelivery_bound: upper bound on records delivered again; None when not computable.
    :param gap_records: target offsets skipped that may hold records the job never processed.
    :param warnings: human-readable notes for the operator.
    :param gap_upper_bound: whether ``gap_records`` is only an upper bound counted in offsets before
        MirrorMaker 2's oldest offset sync (the source could not be read to count its records): transaction
        markers and aborted records, which MirrorMaker 2 never copies, may make up all of it.
    :param replication_complete: whether the replicated heartbeats showed, when the plan was made, that
        MirrorMaker 2 copied from the source after the replica's newest record; checked only for a
        ``gap_upper_bound`` (see :attr:`TranslationPlan.blocking_gaps`).
    """

    source: TopicPartition
    source_offset: StrictInt | None
    target: TopicPartition
    target_offset: StrictInt | None
    method: TranslationMethod
    redelivery_bound: StrictInt | None = None
    gap_records: StrictInt = 0
    warnings: list[str] = field(default_factory=list)
    gap_upper_bound: StrictBool = False
    replication_complete: StrictBool = False

    @classmethod
    def of(
        cls,
        source: TopicPartition,
        source_offset: int | None,
        target: TopicPartition,
        target_offset: int | None,
        method: TranslationMethod,
        redelivery_bound: int | None = None,
        gap_records: int = 0,
        warnings: list[str] | None = None,
        gap_upper_bound: bool = False,
        replication_complete: bool = False,
    ) -> PartitionTranslation:
        """A translation the pure rules built, whose values already have the model's types: not validated
        again (a plan of 10,000 partitions builds some 40,000 candidates; JSON read back is validated).

        :param source: see the class's parameters.
        """
        made = object.__new__(cls)
        made.__dict__.update(
            source=source,
            source_offset=source_offset,
            target=target,
            target_offset=target_offset,
            method=method,
            redelivery_bound=redelivery_bound,
            gap_records=gap_records,
            warnings=[] if warnings is None else warnings,
            gap_upper_bound=gap_upper_bound,
            replication_complete=replication_complete,
        )
        return made

    def copied(self, **changes: Any) -> PartitionTranslation:
        """This translation with ``changes`` (field names to values of the model's types), not validated
        again: :meth:`of`'s reason."""
        made = object.__new__(type(self))
        made.__dict__.update(self.__dict__, **changes)
        return made

    @property
    def is_proven(self) -> bool:
        """Whether the method guarantees the offset is not later than the true position."""
        return self.method in PROVEN_METHODS

    @model_validator(mode="before")
    @classmethod
    def _from_flat(cls, data: Any) -> Any:
        # The JSON form names the partitions' topic and number apart; the model holds TopicPartitions.
        if isinstance(data, dict) and "source_topic" in data:
            data = dict(data)
            data["source"] = TopicPartition(str(data.pop("source_topic")), data.pop("source_partition", None))
            data["target"] = TopicPartition(str(data.pop("target_topic")), data.pop("target_partition", None))
        return data

    @model_serializer(mode="plain")
    def _to_flat(self) -> dict[str, Any]:
        return {
            "source_topic": self.source.topic,
            "source_partition": self.source.partition,
            "source_offset": self.source_offset,
            "target_topic": self.target.topic,
            "target_partition": self.target.partition,
            "target_offset": self.target_offset,
            "method": self.method.value,
            "redelivery_bound": self.redelivery_bound,
            "gap_records": self.gap_records,
            "warnings": list(self.warnings),
            "gap_upper_bound": self.gap_upper_bound,
            "replication_complete": self.replication_complete,
        }


UNTRACKED_START_OFFSETS = {"earliest": -2, "latest": -1}
"""Spark ``startingOffsets`` codes for partitions the plan has no translation for.

``earliest`` is the default: a partition missing from the job's position is one it never
read (new partition, or a topic it never got data from), so nothing of it was processed and
starting at its beginning loses nothing. ``latest`` skips whatever is there; use it only when
those records are known to be unwanted."""


class UntrackedStart(StrEnum):
    """Where partitions without a translation start (see :data:`UNTRACKED_START_OFFSETS`)."""

    EARLIEST = "earliest"
    LATEST = "latest"


@dataclass
class TranslationPlan:
    """Start offsets on the target cluster for every partition of the target topics.

    :param source_cluster: name of the cluster the job read.
    :param target_cluster: name of the cluster it will read.
    :param created_at: when the plan was made (timezone-aware).
    :param translations: one per partition the job had a position on.
    :param target_partitions: every target topic and its partition count; Spark needs them all.
    :param untracked_partitions: start of partitions without a translation: ``earliest`` or ``latest``.
    :param untracked_redelivery_bound: records the untracked partitions' start may deliver again: 0 when the
        job's position covers every partition it read (an untracked partition is one it never read); for a
        plan without any position that starts at ``earliest``, every record the target holds, since nothing
        proves that none was read before; None when unknown.
    """

    source_cluster: str
    target_cluster: str
    created_at: AwareDatetime
    translations: list[PartitionTranslation]
    target_partitions: dict[str, StrictInt]
    untracked_partitions: UntrackedStart = UntrackedStart.EARLIEST
    untracked_redelivery_bound: StrictInt | None = 0

    def __post_init__(self) -> None:
        for topic, count in self.target_partitions.items():
            if count < 1:
                raise TranslationError(f"target topic {topic!r} has partition count {count!r}; expected >= 1")
        seen: set[TopicPartition] = set()
        for translation in self.translations:
            if translation.target in seen:
                raise TranslationError(f"target partition {translation.target} is translated twice")
            seen.add(translation.target)

    @field_serializer("created_at")
    def _created_at_text(self, created_at: datetime) -> str:
        # The form plans have always carried in XCom (``+00:00``, not pydantic's ``Z``).
        return created_at.isoformat()

    @property
    def _by_target(self) -> dict[TopicPartition, PartitionTranslation]:
        return {translation.target: translation for translation in self.translations}

    @classmethod
    def create(
        cls,
        source_cluster: str,
        target_cluster: str,
        translations: list[PartitionTranslation],
        target_partitions: dict[str, int],
        untracked_partitions: UntrackedStart | str = UntrackedStart.EARLIEST,
        untracked_redelivery_bound: int | None = 0,
    ) -> TranslationPlan:
        """Build a plan stamped with the current UTC time.

        :param source_cluster: name of the cluster the job read.
        :param target_cluster: name of the cluster it will read.
        :param translations: one per partition the job had a position on.
        :param target_partitions: every target topic and its partition count.
        :param untracked_partitions: ``earliest`` (default) or ``latest``.
        :param untracked_redelivery_bound: see the class's parameter of that name.
        """
        return cls(
            source_cluster,
            target_cluster,
            datetime.now(UTC),
            translations,
            target_partitions,
            cast(UntrackedStart, untracked_partitions),  # validated (with its field's name) by the model
            untracked_redelivery_bound,
        )

    def all_target_partitions(self) -> list[TopicPartition]:
        """Every partition of the target topics, sorted."""
        return [
            TopicPartition(topic, partition)
            for topic in sorted(self.target_partitions)
            for partition in range(self.target_partitions[topic])
        ]

    @property
    def untracked(self) -> list[TopicPartition]:
        """Target partitions without a translation, which start at the untracked policy."""
        translated = self._by_target  # built once: a plan may cover thousands of partitions
        return [tp for tp in self.all_target_partitions() if tp not in translated]

    @property
    def gaps(self) -> list[PartitionTranslation]:
        """Translations whose target may miss records."""
        return [t for t in self.translations if t.gap_records > 0]

    @property
    def has_gaps(self) -> bool:
        """Whether any partition may miss records on the target."""
        return any(t.gap_records > 0 for t in self.translations)

    @property
    def blocking_gaps(self) -> list[PartitionTranslation]:
        """Gaps a switch with ``on_gap: wait`` waits for: all but upper bounds where replication is complete.

        A gap before MirrorMaker 2's oldest offset sync that only offsets could measure (``gap_upper_bound``)
        may be nothing but transaction markers and aborted records. MM2 copies nothing more before that sync,
        so no wait can change it; when the replicated heartbeats show replication past the replica's end
        (``replication_complete``) it does not hold the switch. The plan still reports it.
        """
        return [t for t in self.gaps if not (t.gap_upper_bound and t.replication_complete)]

    @property
    def total_gap_records(self) -> int:
        """Sum of gap records over all partitions."""
        return sum(t.gap_records for t in self.translations)

    @property
    def without_start(self) -> list[PartitionTranslation]:
        """Translations that have no start offset (no method translated them)."""
        return [t for t in self.translations if t.target_offset is None]

    @property
    def max_redelivery(self) -> int | None:
        """Upper bound on records delivered again over all partitions (the untracked ones' bound included);
        None if any is unknown."""
        if self.untracked_redelivery_bound is None:
            return None
        total = self.untracked_redelivery_bound
        for translation in self.translations:
            if translation.redelivery_bound is None:
                return None
            total += translation.redelivery_bound
        return total

    def validate(self) -> None:
        """Check the plan can start a job: every translation targets a known partition and has an offset.

        A partition without a start offset is refused, whatever its gap: the planner already starts at the
        target's offset 0 (method ``earliest``) whenever that is provably safe, so none is left.
        """
        for translation in self.translations:
            target = translation.target
            count = self.target_partitions.get(target.topic)
            if count is None or not 0 <= target.partition < count:
                topics = sorted(self.target_partitions)
                known = f"{count} partitions" if count is not None else f"topics {topics}"
                raise TranslationError(
                    f"translation of {translation.source} targets {target}, which is not a partition of the "
                    f"target topics ({known}); refresh the target's metadata or fix the topic mapping"
                )
            if translation.target_offset is None:
                raise TranslationError(
                    f"no start offset for {target} (from {translation.source} at "
                    f"{translation.source_offset}): "
                    + ("; ".join(translation.warnings) or "no method translated it")
                )
            if translation.target_offset is not None and translation.target_offset < 0:
                raise TranslationError(f"start offset {translation.target_offset} for {target} is negative")

    def to_spark_starting_offsets(self) -> str:
        """The ``startingOffsets`` JSON, covering every target partition (Spark refuses partial maps)."""
        self.validate()
        untracked = UNTRACKED_START_OFFSETS[self.untracked_partitions]
        offsets: dict[str, dict[str, int]] = {}
        by_target = self._by_target  # built once: a plan may cover thousands of partitions
        for tp in self.all_target_partitions():
            translation = by_target.get(tp)
            if translation is None:
                start = untracked
            else:
                assert translation.target_offset is not None  # validate() refused partitions without one
                start = translation.target_offset
            offsets.setdefault(tp.topic, {})[str(tp.partition)] = start
        return json.dumps(offsets)

    def to_json(self) -> str:
        """Serialise with plain JSON types (for XCom); :meth:`from_json` reverses it."""
        return _TRANSLATION_PLAN.dump_json(self).decode()

    @classmethod
    def from_json(cls, text: str) -> TranslationPlan:
        """Rebuild a plan from :meth:`to_json` output.

        :param text: the JSON text.
        """
        try:
            return _TRANSLATION_PLAN.validate_json(text)
        except ValidationError as err:
            raise TranslationError(
                f"not a translation plan ({_describe_validation(err)}): {text[:200]!r}"
            ) from None

    def summary(self) -> dict[str, Any]:
        """A short dict for the switch history."""
        return {
            "source_cluster": self.source_cluster,
            "target_cluster": self.target_cluster,
            "created_at": self.created_at.isoformat(),
            "translated_partitions": len(self.translations),
            "untracked_partitions": len(self.untracked),
            "untracked_start": self.untracked_partitions.value,
            "untracked_redelivery_bound": self.untracked_redelivery_bound,
            "methods": dict(sorted(Counter(str(t.method) for t in self.translations).items())),
            "gap_partitions": len(self.gaps),
            "gap_records": self.total_gap_records,
            "without_start": len(self.without_start),
            "max_redelivery": self.max_redelivery,
            "warnings": sum(len(t.warnings) for t in self.translations),
        }

    def to_table(self) -> str:
        """A fixed-width text table of every translation, with a summary line, for logs and the CLI."""
        headers = ("source", "offset", "target", "start", "method", "redeliver<=", "gap", "warnings")
        rows = [
            (
                str(t.source),
                _cell(t.source_offset),
                str(t.target),
                _cell(t.target_offset),
                str(t.method),
                _cell(t.redelivery_bound),
                str(t.gap_records) if t.gap_records else "",
                "; ".join(t.warnings),
            )
            for t in sorted(self.translations, key=lambda t: t.target)
        ]
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
        numeric = {1, 3, 5, 6}

        def line(cells: tuple[str, ...]) -> str:
            parts = [
                cell.rjust(width) if i in numeric else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
            ]
            return "  ".join(parts).rstrip()

        out = [line(headers), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)]
        out.append(self._summary_line())
        return "\n".join(out)

    def _summary_line(self) -> str:
        summary = self.summary()
        methods = ", ".join(f"{m}={n}" for m, n in summary["methods"].items()) or "none"
        bound = summary["max_redelivery"]
        redelivery = "bound unknown" if bound is None else f"at most {bound} records"
        return (
            f"{self.source_cluster} -> {self.target_cluster}: {summary['translated_partitions']} partitions "
            f"translated ({methods}), {summary['untracked_partitions']} untracked start at "
            f"{self.untracked_partitions}; gaps: {summary['gap_partitions']} partitions, "
            f"{summary['gap_records']} records; re-delivery {redelivery}"
        )


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


_TRANSLATION_PLAN = TypeAdapter(TranslationPlan)


class PlanPayload(BaseModel):
    """What a switch's plan step hands to the next tasks through XCom (its JSON form is the XCom value).

    :param plan: the :class:`TranslationPlan` as :meth:`TranslationPlan.to_json` text.
    :param summary: :meth:`TranslationPlan.summary`, with the old job's uncommitted output and the duplicates
        bound; stored in the switch's history entry.
    :param starting_offsets: Spark's ``startingOffsets`` JSON for the new job.
    :param gap_records: offsets possibly missing on the target (the plan's total).
    :param source_watermarks: ``topic-partition`` -> what the source is known to hold.
    :param dry_run: whether the switch only shows the plan.
    :param old_run: the run the plan started from (its identity: ``cluster``, ``epoch``, ``run_dir``,
        ``checkpoint``); None when the source's epoch had none. The commit refuses a record naming another.
    """

    model_config = ConfigDict(extra="forbid")

    plan: str
    summary: dict[str, Any]
    starting_offsets: str
    gap_records: StrictInt
    source_watermarks: dict[str, StrictInt]
    dry_run: StrictBool
    old_run: dict[str, Any] | None = None

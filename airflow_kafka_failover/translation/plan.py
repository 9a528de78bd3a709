"""A translation plan: every partition's start offset on the target cluster, ready for Spark."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_failover.exceptions import TranslationError
from airflow_kafka_failover.translation.rules import PartitionTranslation, TopicPartition

UNTRACKED_START_OFFSETS = {"earliest": -2, "latest": -1}
"""Spark ``startingOffsets`` codes for partitions the plan has no translation for.

``earliest`` is the default: a partition missing from the job's position is one it never
read (new partition, or a topic it never got data from), so nothing of it was processed and
starting at its beginning loses nothing. ``latest`` skips whatever is there; use it only when
those records are known to be unwanted."""

_GAP_START_OFFSET = UNTRACKED_START_OFFSETS["earliest"]


@dataclass
class TranslationPlan:
    """Start offsets on the target cluster for every partition of the target topics.

    :param source_cluster: name of the cluster the job read.
    :param target_cluster: name of the cluster it will read.
    :param created_at: when the plan was made (timezone-aware).
    :param translations: one per partition the job had a position on.
    :param target_partitions: every target topic and its partition count; Spark needs them all.
    :param untracked_partitions: start of partitions without a translation: ``earliest`` or ``latest``.
    """

    source_cluster: str
    target_cluster: str
    created_at: datetime
    translations: list[PartitionTranslation]
    target_partitions: dict[str, int]
    untracked_partitions: str = "earliest"
    _by_target: dict[TopicPartition, PartitionTranslation] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.untracked_partitions not in UNTRACKED_START_OFFSETS:
            raise TranslationError(
                f"untracked_partitions must be one of {sorted(UNTRACKED_START_OFFSETS)}, got "
                f"{self.untracked_partitions!r}"
            )
        if self.created_at.tzinfo is None:
            raise TranslationError(f"created_at must be timezone-aware, got {self.created_at.isoformat()}")
        for topic, count in self.target_partitions.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise TranslationError(f"target topic {topic!r} has partition count {count!r}; expected >= 1")
        self._by_target = {}
        for translation in self.translations:
            if translation.target in self._by_target:
                raise TranslationError(f"target partition {translation.target} is translated twice")
            self._by_target[translation.target] = translation

    @classmethod
    def create(
        cls,
        source_cluster: str,
        target_cluster: str,
        translations: list[PartitionTranslation],
        target_partitions: dict[str, int],
        untracked_partitions: str = "earliest",
    ) -> TranslationPlan:
        """Build a plan stamped with the current UTC time.

        :param source_cluster: name of the cluster the job read.
        :param target_cluster: name of the cluster it will read.
        :param translations: one per partition the job had a position on.
        :param target_partitions: every target topic and its partition count.
        :param untracked_partitions: ``earliest`` (default) or ``latest``.
        """
        return cls(
            source_cluster,
            target_cluster,
            datetime.now(UTC),
            translations,
            target_partitions,
            untracked_partitions,
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
        return [tp for tp in self.all_target_partitions() if tp not in self._by_target]

    @property
    def gaps(self) -> list[PartitionTranslation]:
        """Translations whose target may miss records."""
        return [t for t in self.translations if t.gap_records > 0]

    @property
    def has_gaps(self) -> bool:
        """Whether any partition may miss records on the target."""
        return any(t.gap_records > 0 for t in self.translations)

    @property
    def total_gap_records(self) -> int:
        """Sum of gap records over all partitions."""
        return sum(t.gap_records for t in self.translations)

    @property
    def max_redelivery(self) -> int | None:
        """Upper bound on records delivered again over all partitions; None if any partition's is unknown."""
        total = 0
        for translation in self.translations:
            if translation.redelivery_bound is None:
                return None
            total += translation.redelivery_bound
        return total

    def validate(self) -> None:
        """Check the plan can start a job: every translation targets a known partition and has an offset."""
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
            if translation.target_offset is None and translation.gap_records <= 0:
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
        for tp in self.all_target_partitions():
            translation = self._by_target.get(tp)
            if translation is None:
                start = untracked
            elif translation.target_offset is None:
                # A gap without an offset: none of the partition's data is known on the target, so the
                # beginning is the only start that cannot be later than the job's position.
                start = _GAP_START_OFFSET
            else:
                start = translation.target_offset
            offsets.setdefault(tp.topic, {})[str(tp.partition)] = start
        return json.dumps(offsets)

    def to_json(self) -> str:
        """Serialise with plain JSON types (for XCom); :meth:`from_json` reverses it."""
        return json.dumps(
            {
                "source_cluster": self.source_cluster,
                "target_cluster": self.target_cluster,
                "created_at": self.created_at.isoformat(),
                "target_partitions": dict(sorted(self.target_partitions.items())),
                "untracked_partitions": self.untracked_partitions,
                "translations": [t.to_dict() for t in self.translations],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> TranslationPlan:
        """Rebuild a plan from :meth:`to_json` output.

        :param text: the JSON text.
        """
        try:
            data = json.loads(text)
            created_at = datetime.fromisoformat(data["created_at"])
            return cls(
                source_cluster=str(data["source_cluster"]),
                target_cluster=str(data["target_cluster"]),
                created_at=created_at,
                translations=[PartitionTranslation.from_dict(t) for t in data["translations"]],
                target_partitions=dict(data["target_partitions"]),
                untracked_partitions=data.get("untracked_partitions", "earliest"),
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as err:
            if isinstance(err, TranslationError):
                raise
            raise TranslationError(
                f"not a translation plan ({type(err).__name__}: {err}): {text[:200]!r}"
            ) from None

    def summary(self) -> dict[str, Any]:
        """A short dict for the switch history."""
        return {
            "source_cluster": self.source_cluster,
            "target_cluster": self.target_cluster,
            "created_at": self.created_at.isoformat(),
            "translated_partitions": len(self.translations),
            "untracked_partitions": len(self.untracked),
            "untracked_start": self.untracked_partitions,
            "methods": dict(sorted(Counter(str(t.method) for t in self.translations).items())),
            "gap_partitions": len(self.gaps),
            "gap_records": self.total_gap_records,
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

"""Value types shared by every layer: partitions, their watermarks and their ``topic-partition`` keys.

A leaf module: it imports nothing of the provider but :mod:`airflow_kafka_failover.core.exceptions`, so the
pure domain (translation rules, health verdicts, the active record), the hooks and the job package can
all use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_kafka_failover.core.exceptions import TranslationError


@dataclass(frozen=True, order=True, slots=True)
class TopicPartition:
    """A partition of a topic on one cluster.

    :param topic: topic name.
    :param partition: partition number.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return partition_key(self)


@dataclass(frozen=True, slots=True)
class Watermarks:
    """A partition's offset range: ``low`` is the first offset stored, ``high`` the next to be written.

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


def partition_key(tp: TopicPartition) -> str:
    """The ``topic-partition`` text key of a partition (JSON keys of the active record, lag maps, logs).

    :param tp: the partition.
    """
    return f"{tp.topic}-{tp.partition}"

"""Read MirrorMaker 2's internal topics (offset syncs, checkpoints) through a cluster hook.

The one reader of these topics: the planner and the health watch both use it. Records are read from the
low to the high watermark of every partition. A tombstone (the topics are compacted) is skipped; a record
that does not decode is not decoded by guessing: it is reported in :attr:`MM2TopicReading.undecodable`
with where it sits, and each caller decides. The planner refuses to plan from a topic it cannot trust;
the health watch measures replication lag from the offset syncs that do decode.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from airflow_kafka_failover.core.exceptions import TranslationError
from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint, OffsetSync

if TYPE_CHECKING:
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook

Decoded = TypeVar("Decoded", OffsetSync, Checkpoint)


@dataclass(frozen=True)
class MM2TopicReading(Generic[Decoded]):
    """What one read of an MM2 internal topic found.

    :param decoded: the records that decoded, in topic order (per partition).
    :param undecodable: one message per record that did not decode, naming its offset and what to do.
    :param tombstones: how many tombstones (null key or value) were skipped.
    """

    decoded: list[Decoded] = field(default_factory=list)
    undecodable: list[str] = field(default_factory=list)
    tombstones: int = 0


def _read(
    hook: KafkaClusterHook,
    topic: str,
    where: str,
    decode: Callable[[bytes, bytes], Decoded],
    keep: Callable[[Decoded], bool],
    timeout: float | None,
) -> MM2TopicReading[Decoded]:
    decoded: list[Decoded] = []
    undecodable: list[str] = []
    tombstones = 0
    for message in hook.read_topic_to_end(topic, timeout_seconds=timeout):
        if message.key is None or message.value is None:
            tombstones += 1
            continue
        try:
            item = decode(message.key, message.value)
        except TranslationError as exc:
            undecodable.append(
                f"record at offset {message.offset} of {topic}-{message.partition} on {where} does not "
                f"decode: {exc}. Only MirrorMaker 2 should write to {topic}: find the client that wrote "
                "this record, or upgrade this provider if MirrorMaker 2 changed its format"
            )
            continue
        if keep(item):
            decoded.append(item)
    return MM2TopicReading(decoded, undecodable, tombstones)


def read_offset_syncs(
    hook: KafkaClusterHook,
    topic: str,
    where: str,
    topics: Collection[str] | None = None,
    timeout: float | None = None,
) -> MM2TopicReading[OffsetSync]:
    """Read an offset-syncs topic (``mm2-offset-syncs.<alias>.internal``) to its current end.

    :param hook: the cluster that holds the topic.
    :param topic: the offset-syncs topic.
    :param where: the cluster's name, for messages.
    :param topics: keep only the syncs of these upstream topics (None keeps all).
    :param timeout: seconds for the read (the hook's timeout when None).
    :raises Exception: whatever the hook raises when the topic cannot be read at all.
    """
    return _read(
        hook,
        topic,
        where,
        OffsetSync.decode,
        lambda sync: topics is None or sync.topic in topics,
        timeout,
    )


def read_checkpoints(
    hook: KafkaClusterHook, topic: str, where: str, group: str, timeout: float | None = None
) -> MM2TopicReading[Checkpoint]:
    """Read a checkpoints topic (``<alias>.checkpoints.internal``) to its end, keeping one group's.

    :param hook: the cluster that holds the topic (the target of the flow).
    :param topic: the checkpoints topic.
    :param where: the cluster's name, for messages.
    :param group: the consumer group whose checkpoints to keep.
    :param timeout: seconds for the read (the hook's timeout when None).
    :raises Exception: whatever the hook raises when the topic cannot be read at all.
    """
    return _read(hook, topic, where, Checkpoint.decode, lambda checkpoint: checkpoint.group == group, timeout)

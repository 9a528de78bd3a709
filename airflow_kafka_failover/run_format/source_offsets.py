"""The Kafka source's offsets as Spark writes them: ``{"<topic>": {"<partition>": <offset>}}``.

Spark's checkpoint (``offsets/<batch>``), the job's progress entries and a position given by hand all use this
shape; this module validates it once for all of them.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_kafka_failover.core.exceptions import CheckpointError
from airflow_kafka_failover.core.types import TopicPartition

_PARTITION_KEY = re.compile(r"[0-9]+")


def kafka_offsets_from_json(
    data: Any, where: str, error: type[Exception] = CheckpointError
) -> dict[TopicPartition, int]:
    """Validate a decoded Kafka-source offset object ``{topic: {"partition": offset}}``.

    Offsets must be integers >= 0: Spark's -2/-1 (earliest/latest) appear only in start
    options, never as a processed position.

    :param data: the decoded JSON value.
    :param where: file and line (or other origin) named in error messages.
    :param error: the exception class to raise.
    """
    if not isinstance(data, dict):
        raise error(f"{where}: expected a JSON object of topics, got {data!r}")
    offsets: dict[TopicPartition, int] = {}
    for topic, partitions in data.items():
        if not topic:
            raise error(f"{where}: empty topic name")
        if not isinstance(partitions, dict):
            raise error(
                f"{where}: topic {topic!r} maps to {partitions!r}, expected an object of partition -> offset "
                "(is this a Kafka source?)"
            )
        for key, offset in partitions.items():
            if not isinstance(key, str) or not _PARTITION_KEY.fullmatch(key):
                raise error(f"{where}: topic {topic!r} has partition key {key!r}, expected a number like '0'")
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise error(f"{where}: {topic}-{key} has non-numeric offset {offset!r}")
            if offset < 0:
                raise error(
                    f"{where}: {topic}-{key} has negative offset {offset}; -2/-1 mean earliest/latest in "
                    "start options and never appear in a checkpoint"
                )
            offsets[TopicPartition(topic, int(key))] = offset
    return offsets

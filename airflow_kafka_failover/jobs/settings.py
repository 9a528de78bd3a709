"""What one run of the streaming job is told: the settings file spark-submit's application reads.

The operator writes the settings to a file with owner-only permissions and passes only its path on the
command line, so Kafka secrets (SASL passwords, key passwords) never appear in ``ps`` or in the
spark-submit command Airflow logs. The job reads the same file back with :meth:`JobSettings.load`.

Pure module: no pyspark, no Airflow, so the job, the operators and the tests share it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from airflow_kafka_failover.exceptions import ConfigError

SETTINGS_VERSION = 1
RECORD_ID_FROM_KEY = "key"
"""``record_id_field`` value meaning: the record id is the Kafka key (as UTF-8 text)."""

_TOPIC = re.compile(r"^[A-Za-z0-9._-]+$")
_PARTITION = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class JobSettings:
    """Everything one run of the streaming job needs.

    :param pair: the pair's name.
    :param cluster: the cluster the job reads (a name of the pair).
    :param epoch: the epoch this run belongs to; the job stops when the fencing marker moves past it.
    :param bootstrap_servers: the cluster's bootstrap addresses.
    :param topics: topics to subscribe to (names on this cluster, e.g. ``orders`` and ``A.orders``);
        empty when ``topic_pattern`` is used.
    :param topic_pattern: a Java regex of topics to subscribe to instead of ``topics``.
    :param starting_offsets: Spark ``startingOffsets``: ``earliest``, ``latest`` or a map
        ``{topic: {"partition": offset}}`` naming every partition (-2 earliest, -1 latest).
    :param checkpoint: the checkpoint directory of this (cluster, epoch); never shared with another run.
    :param sink_root: where the Parquet output goes (one directory per epoch and batch).
    :param bookkeeping_group: consumer group the job commits each batch's end offsets to.
    :param fencing_marker: file holding the pair's current epoch.
    :param run_dir: folder of this run's status file and stop request.
    :param record_id_field: JSON field of the value that holds the record id, or ``key``.
    :param kafka_options: Java Kafka client options (``security.protocol``, ``sasl.jaas.config``, ...),
        without the ``kafka.`` prefix. May hold secrets: the file is written owner-only.
    :param max_offsets_per_trigger: cap on records per micro-batch; None for no cap.
    :param trigger_interval_s: processing-time trigger interval.
    :param poll_interval_s: how often the driver checks the stop request and the fencing marker.
    """

    pair: str
    cluster: str
    epoch: int
    bootstrap_servers: str
    checkpoint: str
    sink_root: str
    bookkeeping_group: str
    fencing_marker: str
    run_dir: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting_offsets: Any = "earliest"
    record_id_field: str = "id"
    kafka_options: dict[str, str] = field(default_factory=dict)
    max_offsets_per_trigger: int | None = None
    trigger_interval_s: float = 5.0
    poll_interval_s: float = 1.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ConfigError naming the first bad setting."""
        for name in (
            "pair",
            "cluster",
            "bootstrap_servers",
            "checkpoint",
            "sink_root",
            "bookkeeping_group",
            "fencing_marker",
            "run_dir",
            "record_id_field",
        ):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"job setting {name!r} must be a non-empty string, got {value!r}")
        if isinstance(self.epoch, bool) or not isinstance(self.epoch, int) or self.epoch < 0:
            raise ConfigError(f"job setting 'epoch' must be an integer >= 0, got {self.epoch!r}")
        self._validate_subscription()
        check_starting_offsets(self.starting_offsets)
        self._validate_numbers()
        if not isinstance(self.kafka_options, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.kafka_options.items()
        ):
            raise ConfigError("job setting 'kafka_options' must map option names to string values")

    def _validate_subscription(self) -> None:
        if isinstance(self.topics, str):
            raise ConfigError(
                f"job setting 'topics' must be a list of topic names, got the string {self.topics!r}"
            )
        if bool(self.topics) == bool(self.topic_pattern):
            raise ConfigError(
                f"job settings name topics={list(self.topics)!r} and topic_pattern={self.topic_pattern!r}: "
                "give exactly one of them"
            )
        for topic in self.topics:
            if not isinstance(topic, str) or not _TOPIC.match(topic):
                raise ConfigError(f"job setting 'topics' has an invalid topic name {topic!r}")
        if self.topic_pattern is not None:
            try:
                re.compile(self.topic_pattern)
            except re.error as exc:
                raise ConfigError(
                    f"job setting 'topic_pattern' {self.topic_pattern!r} is not a regex: {exc}"
                ) from None

    def _validate_numbers(self) -> None:
        cap = self.max_offsets_per_trigger
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ConfigError(
                f"job setting 'max_offsets_per_trigger' must be an integer >= 1 or null, got {cap!r}"
            )
        for name in ("trigger_interval_s", "poll_interval_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"job setting {name!r} must be a number of seconds > 0, got {value!r}")

    @property
    def starting_offsets_option(self) -> str:
        """The value of Spark's ``startingOffsets`` option."""
        if isinstance(self.starting_offsets, str):
            return self.starting_offsets
        return json.dumps(self.starting_offsets, sort_keys=True)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["topics"] = list(self.topics)
        data["version"] = SETTINGS_VERSION
        return data

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the settings to ``path`` readable by the owner only (it may hold secrets)."""
        from airflow_kafka_failover.atomic_file import OWNER_ONLY, write_json_atomically

        return write_json_atomically(path, self.to_dict(), OWNER_ONLY, indent=1)

    @classmethod
    def from_dict(cls, data: Any, where: str = "job settings") -> JobSettings:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a JSON object, got {type(data).__name__}")
        version = data.get("version", SETTINGS_VERSION)
        if version != SETTINGS_VERSION:
            raise ConfigError(
                f"{where}: settings version {version!r} is not {SETTINGS_VERSION}; the job and the provider "
                "come from different releases"
            )
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known - {"version"})
        if unknown:
            raise ConfigError(f"{where}: unknown setting(s) {unknown}")
        values = {k: v for k, v in data.items() if k in known}
        topics = values.get("topics") or ()
        values["topics"] = topics if isinstance(topics, str) else tuple(topics)
        try:
            return cls(**values)
        except TypeError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> JobSettings:
        """Read the settings file the operator wrote."""
        try:
            data = json.loads(Path(path).read_text())
        except OSError as exc:
            raise ConfigError(f"cannot read job settings {path}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"job settings {path} are not valid JSON: {exc}") from None
        return cls.from_dict(data, str(path))


def check_starting_offsets(value: Any) -> None:
    """Raise ConfigError unless ``value`` is ``earliest``, ``latest`` or ``{topic: {"partition": offset}}``.

    Offsets are integers >= -2 (-2 earliest, -1 latest), as Spark's ``startingOffsets`` takes them.
    """
    if value in ("earliest", "latest"):
        return
    if not isinstance(value, dict) or not value:
        raise ConfigError(
            f"starting offsets must be 'earliest', 'latest' or a map like {{\"orders\": {{\"0\": 42}}}}, "
            f"got {value!r}"
        )
    for topic, partitions in value.items():
        if not isinstance(partitions, dict) or not partitions:
            raise ConfigError(
                f"starting offsets of topic {topic!r} must map partitions to offsets, got {partitions!r}"
            )
        for partition, offset in partitions.items():
            if not isinstance(partition, str) or not _PARTITION.fullmatch(partition):
                raise ConfigError(
                    f"starting offsets of topic {topic!r} have partition key {partition!r}; "
                    "expected a number like '0'"
                )
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < -2:
                raise ConfigError(
                    f"starting offset of {topic}-{partition} is {offset!r}; expected an integer "
                    ">= 0, or -2 (earliest) / -1 (latest)"
                )


def parse_starting_offsets(value: Any) -> Any:
    """Accept a map, a JSON text of one (e.g. a plan's ``to_spark_starting_offsets()``), or earliest/latest."""
    if isinstance(value, str) and value.strip() not in ("earliest", "latest"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"starting offsets are not valid JSON ({exc}): {value[:200]!r}; give 'earliest', "
                '\'latest\' or a map like {"orders": {"0": 42}}'
            ) from None
    elif isinstance(value, str):
        value = value.strip()
    check_starting_offsets(value)
    return value


def missing_partitions(starting_offsets: Any, partition_counts: dict[str, int]) -> dict[str, Any]:
    """Compare a start map with the topics' real partitions; Spark refuses a map that misses any.

    :param starting_offsets: the start map (``earliest``/``latest`` cover everything).
    :param partition_counts: topic -> number of partitions on the cluster the job reads.
    :return: ``{"missing": [...], "unknown": [...], "extra_topics": [...]}`` of ``topic-partition`` names;
        all empty when the map fits.
    """
    problems: dict[str, Any] = {"missing": [], "unknown": [], "extra_topics": []}
    if isinstance(starting_offsets, str):
        return problems
    for topic, count in sorted(partition_counts.items()):
        given = starting_offsets.get(topic, {})
        problems["missing"] += [f"{topic}-{p}" for p in range(count) if str(p) not in given]
        problems["unknown"] += [f"{topic}-{p}" for p in sorted(given, key=int) if int(p) >= count]
    problems["extra_topics"] = sorted(set(starting_offsets) - set(partition_counts))
    return problems

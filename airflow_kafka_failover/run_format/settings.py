"""What one run of the streaming job is told: the settings file spark-submit's application reads.

The operator writes the settings to a file with owner-only permissions and passes only its path on the
command line, so Kafka secrets (SASL passwords, key passwords) never appear in ``ps`` or in the
spark-submit command Airflow logs. The job reads the same file back with :meth:`JobSettings.load`.

Pure module: no pyspark, no Airflow, so the job, the operators and the tests share it.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.schema import JobSeconds, Text, problem_of
from airflow_kafka_failover.run_format.options import RECORD_ID_FROM_KEY, StreamOptions

__all__ = [
    "RECORD_ID_FROM_KEY",
    "SETTINGS_SCHEMA_VERSION",
    "JobSettings",
    "SwitchPlan",
    "check_starting_offsets",
]

SETTINGS_SCHEMA_VERSION = "3.1"
"""The settings file's schema, ``MAJOR.MINOR``: a new minor only adds optional settings (an older job
ignores them); a new major changes their meaning, and a job refuses a file of another major. 3.0: the fence
is a folder of epoch markers, progress entries are one file per batch, and every path may be a store URI.
3.1: ``switch_plan``, the plan of the switch that started the run."""

_TOPIC = re.compile(r"^[A-Za-z0-9._-]+$")
_PARTITION = re.compile(r"[0-9]+")


def schema_major_minor(version: Any, where: str) -> tuple[int, int]:
    """``(major, minor)`` of a ``schema_version``: ``"MAJOR.MINOR"`` or an integer major.

    :param version: the file's value.
    :param where: the file, for messages.
    """
    text = str(version) if isinstance(version, int) and not isinstance(version, bool) else version
    match = re.fullmatch(r"([0-9]+)(?:\.([0-9]+))?", text) if isinstance(text, str) else None
    if match is None:
        raise ConfigError(
            f"{where}: schema_version {version!r} is not 'MAJOR.MINOR' (this job reads "
            f"{SETTINGS_SCHEMA_VERSION}); the file was not written by this provider"
        )
    return int(match.group(1)), int(match.group(2) or 0)


def _epoch(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"must be an integer >= 0, got {value!r}")
    return value


def _topics(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValueError(f"must be a list of topic names, got {value!r}")
    for topic in value:
        if not isinstance(topic, str) or not _TOPIC.match(topic):
            raise ValueError(f"has an invalid topic name {topic!r}")
    return tuple(value)


def _starting_offsets(value: Any) -> Any:
    check_starting_offsets(value)
    return value


class SwitchPlan(BaseModel):
    """What the switch that started a run planned, kept with the run so that whoever commits the run records
    the plan it started from (another switch run that adopted it, a retry, the keeper finishing the switch).

    :param summary: the plan's summary, the switch history entry's ``plan`` (with ``max_duplicates``).
    :param gap_records: offsets possibly missing on the target when the plan was made.
    """

    model_config = ConfigDict(extra="forbid")

    summary: dict[str, Any]
    gap_records: Annotated[int, Field(ge=0)]


class JobSettings(StreamOptions):
    """Everything one run of the streaming job needs: the file the operator writes and the job reads.

    Its stream options (``record_id_field``, ``trigger_interval_seconds``, ``max_offsets_per_trigger``,
    ``kafka_options``) are those of :class:`~airflow_kafka_failover.run_format.options.StreamOptions`;
    ``kafka_options`` here are the connection's options merged with the pair's, and may hold secrets:
    the file is written owner-only. A bad value raises :class:`ConfigError` naming the setting.
    """

    schema_version: str = Field(
        SETTINGS_SCHEMA_VERSION,
        description="The file's schema, MAJOR.MINOR; a job refuses a file of a major it does not know.",
    )
    pair: Text = Field(description="The pair's name.")
    cluster: Text = Field(description="The cluster the job reads (a name of the pair).")
    epoch: Annotated[int, Field(ge=0), BeforeValidator(_epoch)] = Field(
        description="The epoch of this run; the job stops when the fencing marker moves past it."
    )
    bootstrap_servers: Text = Field(description="The cluster's bootstrap addresses.")
    checkpoint: Text = Field(
        description="The checkpoint directory of this (cluster, epoch); never shared with another run."
    )
    sink_root: Text = Field(
        description="Where the job writes (the packaged job: one Parquet directory per epoch and batch)."
    )
    bookkeeping_group: Text = Field(description="Consumer group the job commits each batch's end offsets to.")
    fencing_marker: Text = Field(
        description="The pair's fencing folder (local path or store URI): the run stops once the marker of "
        "the next epoch exists there."
    )
    run_dir: Text = Field(description="Folder of this run's status file and stop request.")
    topics: Annotated[tuple[str, ...], BeforeValidator(_topics)] = Field(
        (),
        description="Topics to subscribe to (names on this cluster, e.g. `orders` and `A.orders`); empty "
        "when `topic_pattern` is used.",
    )
    topic_pattern: str | None = Field(
        None, description="A Java regex of topics to subscribe to instead of `topics`."
    )
    starting_offsets: Annotated[Any, BeforeValidator(_starting_offsets)] = Field(
        "earliest",
        description='Spark `startingOffsets`: `earliest`, `latest` or `{topic: {"partition": offset}}` '
        "naming every partition (-2 earliest, -1 latest).",
    )
    poll_interval_seconds: JobSeconds = Field(
        1.0, description="How often the driver checks the stop request and the fencing marker (seconds)."
    )
    switch_plan: SwitchPlan | None = Field(
        None,
        description="The plan of the switch that submitted this run: `summary` (the history entry's "
        "`plan`, with `max_duplicates`) and `gap_records`. The job does not read it; whoever commits the run "
        "(another switch run that adopted it, a retry, the keeper) records this plan. Null for a run the "
        "start DAG or an operator submitted; kept when a later submit resumes the run's checkpoint.",
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise _settings_error(exc, "job settings") from None

    @model_validator(mode="after")
    def _one_subscription(self) -> JobSettings:
        if bool(self.topics) == bool(self.topic_pattern):
            raise ValueError(
                f"job settings name topics={list(self.topics)!r} and topic_pattern={self.topic_pattern!r}: "
                "give exactly one of them"
            )
        if self.topic_pattern is not None:
            try:
                re.compile(self.topic_pattern)
            except re.error as exc:
                raise ValueError(f"topic_pattern {self.topic_pattern!r} is not a regex: {exc}") from None
        return self

    @property
    def starting_offsets_option(self) -> str:
        """The value of Spark's ``startingOffsets`` option."""
        if isinstance(self.starting_offsets, str):
            return self.starting_offsets
        return json.dumps(self.starting_offsets, sort_keys=True)

    def write(self, path: str) -> str:
        """Write the settings to ``path`` readable by the owner only (it may hold secrets)."""
        from airflow_kafka_failover.core.storage.store import replace_json

        replace_json(str(path), self.model_dump(mode="json"), private=True, indent=1)
        return str(path)

    @classmethod
    def parse(cls, data: Any, where: str = "job settings") -> JobSettings:
        """Validate a settings file's content.

        A file of another major schema version is refused; settings added by a newer minor are ignored.

        :param data: the decoded JSON.
        :param where: the file, for messages.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a JSON object, got {type(data).__name__}")
        if "schema_version" not in data:
            raise ConfigError(
                f"{where}: has no schema_version, so this provider's operators did not write it (this job "
                f"reads {SETTINGS_SCHEMA_VERSION}): submit the job through the provider's DAGs or operators"
            )
        major, minor = schema_major_minor(data["schema_version"], where)
        supported_major, supported_minor = schema_major_minor(SETTINGS_SCHEMA_VERSION, "this job")
        if major != supported_major:
            age = "a newer" if major > supported_major else "an older"
            raise ConfigError(
                f"{where}: schema_version {data['schema_version']!r} comes from {age} provider release; "
                f"this job reads {SETTINGS_SCHEMA_VERSION} (major {supported_major}): run the job from the "
                "same provider release as the operator that wrote the file"
            )
        if minor > supported_minor:
            data = {key: value for key, value in data.items() if key in cls.known_keys()}
        try:
            return cls(**{**data, "schema_version": SETTINGS_SCHEMA_VERSION})
        except _SettingsError as exc:
            raise ConfigError(f"{where}: {exc.problem}") from None

    @classmethod
    def load(cls, path: str) -> JobSettings:
        """Read the settings file the operator wrote (a local path or a store URI)."""
        from airflow_kafka_failover.core.storage.store import read_text

        try:
            data = json.loads(read_text(str(path)))
        except FileNotFoundError:
            raise ConfigError(f"cannot read job settings {path}: no such file") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"job settings {path} are not UTF-8 text: {exc.reason}") from None
        except OSError as exc:
            raise ConfigError(f"cannot read job settings {path}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"job settings {path} are not valid JSON: {exc}") from None
        return cls.parse(data, str(path))


class _SettingsError(ConfigError):
    """A bad setting; ``problem`` names it without the file, so that :meth:`JobSettings.parse` adds it."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.problem = problem


def _settings_error(error: ValidationError, where: str) -> _SettingsError:
    field, problem = problem_of(error)
    return _SettingsError(where, f"{field}: {problem}" if field else problem)


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
    """Accept a map, a JSON text of one (a plan's ``to_spark_starting_offsets()``), or earliest/latest."""
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

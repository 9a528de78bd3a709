"""The pair configuration file: which clusters form a pair, what the job reads, how replication works.

Pure parsing and validation (no network, no Airflow): DAG files load it at parse time. Every error names
the file, the pair and the field, and says what to write instead.

Example (``examples/pairs.yaml`` holds a complete one)::

    pairs:
      orders:
        clusters:
          A: {connection: kafka_a}
          B: {connection: kafka_b}
        primary: A
        topics: [orders]
        replication: {policy: default, flows: ["A->B", "B->A"], offset_syncs_location: target}
        translation: {methods: [checkpoint, offset_sync, offset_sync_reverse, timestamp]}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_kafka_failover.exceptions import ConfigError

POLICIES = ("default", "identity")
METHODS = ("checkpoint", "offset_sync", "offset_sync_reverse", "timestamp", "identity")
DEFAULT_METHODS = ("checkpoint", "offset_sync", "offset_sync_reverse", "timestamp")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class ClusterSpec:
    """One cluster of a pair.

    :param name: the cluster's name in the pair, also its default MirrorMaker 2 alias.
    :param connection: Airflow ``kafka`` connection id.
    :param alias: MirrorMaker 2 alias (``clusters`` in mm2.properties); defaults to ``name``.
    """

    name: str
    connection: str
    alias: str


@dataclass(frozen=True)
class ReplicationSpec:
    """How the pair replicates.

    :param policy: ``default`` (``orders`` on A is ``A.orders`` on B) or ``identity`` (same names).
    :param separator: the replication policy's separator (``replication.policy.separator``).
    :param flows: enabled flows as (source, target) cluster names.
    :param offset_syncs_location: MM2 ``offset-syncs.topic.location``; ``target`` keeps the syncs on the
        surviving cluster when the source dies, which failover needs.
    :param offset_preserving: the replicator keeps offsets equal (Cluster Linking, shadowing): the
        ``identity`` translation method is then proven.
    """

    policy: str = "default"
    separator: str = "."
    flows: tuple[tuple[str, str], ...] = ()
    offset_syncs_location: str = "target"
    offset_preserving: bool = False

    def has_flow(self, source: str, target: str) -> bool:
        return (source, target) in self.flows


@dataclass(frozen=True)
class TranslationSpec:
    """How positions are translated between the clusters.

    :param methods: methods to try, most preferred first.
    :param timestamp_margin_seconds: how far before the newest processed record the timestamp method starts.
    :param untracked_partitions: where partitions the job never read start: ``earliest`` (loses nothing).
    :param initial_position: where the job starts when it has no committed batch: ``earliest`` or ``latest``.
    """

    methods: tuple[str, ...] = DEFAULT_METHODS
    timestamp_margin_seconds: float = 60.0
    untracked_partitions: str = "earliest"
    initial_position: str = "earliest"


def _airflow_home() -> Path:
    import os

    return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow")


@dataclass(frozen=True)
class JobSpec:
    """The streaming job of a pair and where its files go (see ``SubmitStreamingJobOperator``).

    Paths default to folders under ``$AIRFLOW_HOME/kafka-failover/``.

    :param spark_connection: the ``spark`` connection id.
    :param sink_root: Parquet sink root.
    :param checkpoint_root: root of the per-(cluster, epoch) checkpoints.
    :param run_root: root of the run folders (settings, status, log).
    :param fencing_marker: the pair's fencing marker file.
    :param record_id_field: JSON field of the value holding the record id, or ``key``.
    :param trigger_interval_seconds: micro-batch trigger interval.
    :param max_offsets_per_trigger: cap on records per batch (None: no cap).
    :param kafka_options: Java Kafka client options overriding those from the connection.
    :param spark_conf: Spark configuration (``--conf``).
    :param jars: ``--jars`` (None: the Kafka source jars resolved by ``make setup``).
    :param packages: ``--packages`` instead of ``jars``.
    :param driver_memory: ``--driver-memory``.
    :param executor_memory: ``--executor-memory``.
    :param total_executor_cores: ``--total-executor-cores``.
    :param application: the job file (None: the packaged one).
    :param startup_timeout_seconds: time the job has to report running.
    :param stop_timeout_seconds: time a stopped job has to finish its batch before it is forced.
    :param first_batch_timeout_seconds: time the new job has to commit its first batch.
    """

    spark_connection: str = "spark_default"
    sink_root: str = ""
    checkpoint_root: str = ""
    run_root: str = ""
    fencing_marker: str = ""
    record_id_field: str = "id"
    trigger_interval_seconds: float = 5.0
    max_offsets_per_trigger: int | None = None
    kafka_options: dict[str, str] = field(default_factory=dict)
    spark_conf: dict[str, str] = field(default_factory=dict)
    jars: str | None = None
    packages: str | None = None
    driver_memory: str | None = None
    executor_memory: str | None = None
    total_executor_cores: int | None = None
    application: str | None = None
    startup_timeout_seconds: float = 180.0
    stop_timeout_seconds: float = 60.0
    first_batch_timeout_seconds: float = 300.0


@dataclass(frozen=True)
class SwitchSpec:
    """How the failover and failback DAGs behave.

    :param on_gap: what a switch does when the target lacks records the job has not processed yet:
        ``wait`` (re-plan until replication caught up, up to ``gap_wait_seconds``, then fail) or
        ``proceed`` (start anyway and record the exact loss in the history).
    :param gap_wait_seconds: how long ``wait`` waits.
    :param watch_timeout_seconds: how long one scheduled run watches before it ends (skipped) and the next
        starts; a manual trigger waits at most this long for the watching run to end.
    :param pool: the Airflow pool shared by both DAGs' switch steps (None: ``default_pool``); create it with
        one slot so that only one switch of the pair runs at a time.
    :param automatic: the switch DAGs run on their own (``@continuous``); false makes them manual only.
    """

    on_gap: str = "wait"
    gap_wait_seconds: float = 120.0
    watch_timeout_seconds: float = 600.0
    pool: str | None = None
    automatic: bool = True


@dataclass(frozen=True)
class PairConfig:
    """One pair of clusters and the job that moves between them.

    :param name: the pair's name (used in DAG ids, Variables, asset names).
    :param clusters: the two clusters by name.
    :param primary: the cluster the job normally runs on.
    :param topics: topics the job reads, by their names on their origin cluster.
    :param replication: replication settings.
    :param translation: translation settings.
    :param bookkeeping_group: consumer group the job commits its position to (so MM2 checkpoints it).
    :param health: health thresholds (see ``HealthThresholds``).
    :param job: the streaming job and its file roots.
    :param switch: how the failover and failback DAGs behave.
    :param source_file: the file it came from, for messages.
    """

    name: str
    clusters: dict[str, ClusterSpec]
    primary: str
    topics: tuple[str, ...]
    replication: ReplicationSpec
    translation: TranslationSpec
    bookkeeping_group: str
    health: dict[str, Any] = field(default_factory=dict)
    job: JobSpec = field(default_factory=JobSpec)
    switch: SwitchSpec = field(default_factory=SwitchSpec)
    source_file: str = "<memory>"

    @property
    def standby(self) -> str:
        return next(name for name in self.clusters if name != self.primary)

    def other(self, cluster: str) -> str:
        self.cluster(cluster)
        return next(name for name in self.clusters if name != cluster)

    def cluster(self, name: str) -> ClusterSpec:
        if name not in self.clusters:
            raise ConfigError(
                f"pair {self.name!r} has no cluster {name!r}; its clusters are {sorted(self.clusters)}"
            )
        return self.clusters[name]

    def topics_on(self, cluster: str) -> list[str]:
        """Return the topic names the job reads on ``cluster``: the local ones and those replicated into it."""
        from airflow_kafka_failover.translation.replication_policy import for_name

        policy = for_name(self.replication.policy, self.replication.separator)
        other = self.other(cluster)
        names = list(self.topics)
        if self.replication.policy == "default" and self.replication.has_flow(other, cluster):
            names += [policy.remote_topic(self.cluster(other).alias, topic) for topic in self.topics]
        return names


class _Reader:
    """Reads one pair's mapping, naming file, pair and field in every error."""

    def __init__(self, source: str, pair: str) -> None:
        self.where = f"{source}: pair {pair!r}"

    def fail(self, field_name: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.where}: {field_name}: {problem}")

    def mapping(self, data: Any, field_name: str) -> Mapping[str, Any]:
        if data is None:
            return {}
        if not isinstance(data, Mapping):
            raise self.fail(field_name, f"must be a mapping, got {type(data).__name__} {data!r}")
        return data

    def known_keys(self, data: Mapping[str, Any], field_name: str, known: tuple[str, ...]) -> None:
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise self.fail(field_name, f"unknown key(s) {unknown}; known keys are {list(known)}")

    def string(self, data: Mapping[str, Any], key: str, field_name: str, default: str | None = None) -> str:
        value = data.get(key, default)
        if not isinstance(value, str) or not value.strip():
            hint = "is required" if value is None else f"must be a non-empty string, got {value!r}"
            raise self.fail(field_name, hint)
        return value

    def choice(self, value: Any, field_name: str, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(field_name, f"{value!r} is not one of {list(choices)}")
        return value

    def number(self, value: Any, field_name: str, minimum: float = 0.0) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            raise self.fail(field_name, f"must be a number >= {minimum:g}, got {value!r}")
        return float(value)


def _clusters(reader: _Reader, data: Mapping[str, Any]) -> dict[str, ClusterSpec]:
    clusters_raw = reader.mapping(data.get("clusters"), "clusters")
    if len(clusters_raw) != 2:
        raise reader.fail(
            "clusters", f"a pair has exactly two clusters, got {len(clusters_raw)}: {sorted(clusters_raw)}"
        )
    clusters = {}
    for name, spec in clusters_raw.items():
        field_name = f"clusters.{name}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise reader.fail(field_name, "cluster names are letters, digits, '_', '.', '-'")
        spec = reader.mapping(spec, field_name)
        reader.known_keys(spec, field_name, ("connection", "alias"))
        connection = reader.string(spec, "connection", f"{field_name}.connection")
        alias = reader.string(spec, "alias", f"{field_name}.alias", default=name)
        clusters[name] = ClusterSpec(name=name, connection=connection, alias=alias)
    connections = [c.connection for c in clusters.values()]
    if len(set(connections)) == 1:
        raise reader.fail(
            "clusters",
            f"both clusters use connection {connections[0]!r}; the same cluster twice "
            "cannot fail over to itself",
        )
    aliases = [c.alias for c in clusters.values()]
    if len(set(aliases)) == 1:
        raise reader.fail(
            "clusters", f"both clusters have MirrorMaker 2 alias {aliases[0]!r}; aliases must differ"
        )
    return clusters


def _flows(
    reader: _Reader, raw: Any, clusters: Mapping[str, ClusterSpec], policy: str
) -> tuple[tuple[str, str], ...]:
    names = list(clusters)
    if raw is None:
        return (
            ((names[0], names[1]),) if policy == "identity" else ((names[0], names[1]), (names[1], names[0]))
        )
    if not isinstance(raw, list) or not raw:
        raise reader.fail("replication.flows", f"must be a list like ['A->B', 'B->A'], got {raw!r}")
    flows = []
    for item in raw:
        parts = str(item).split("->")
        if (
            len(parts) != 2
            or any(p.strip() not in clusters for p in parts)
            or parts[0].strip() == parts[1].strip()
        ):
            raise reader.fail("replication.flows", f"{item!r} is not '<cluster>-><other cluster>' of {names}")
        flows.append((parts[0].strip(), parts[1].strip()))
    if policy == "identity" and len(flows) > 1:
        raise reader.fail(
            "replication.flows", "identity replication cannot prevent loops: enable one flow only"
        )
    return tuple(dict.fromkeys(flows))


def _replication(
    reader: _Reader, data: Mapping[str, Any], clusters: Mapping[str, ClusterSpec]
) -> ReplicationSpec:
    raw = reader.mapping(data.get("replication"), "replication")
    reader.known_keys(
        raw, "replication", ("policy", "separator", "flows", "offset_syncs_location", "offset_preserving")
    )
    policy = reader.choice(raw.get("policy", "default"), "replication.policy", POLICIES)
    separator = reader.string(raw, "separator", "replication.separator", default=".")
    location = reader.choice(
        raw.get("offset_syncs_location", "target"), "replication.offset_syncs_location", ("source", "target")
    )
    preserving = raw.get("offset_preserving", False)
    if not isinstance(preserving, bool):
        raise reader.fail("replication.offset_preserving", f"must be true or false, got {preserving!r}")
    return ReplicationSpec(
        policy, separator, _flows(reader, raw.get("flows"), clusters, policy), location, preserving
    )


def _translation(reader: _Reader, data: Mapping[str, Any], replication: ReplicationSpec) -> TranslationSpec:
    raw = reader.mapping(data.get("translation"), "translation")
    reader.known_keys(
        raw,
        "translation",
        ("methods", "timestamp_margin_seconds", "untracked_partitions", "initial_position"),
    )
    default_methods = ("identity",) if replication.offset_preserving else DEFAULT_METHODS
    methods = raw.get("methods", list(default_methods))
    if not isinstance(methods, list) or not methods:
        raise reader.fail(
            "translation.methods", f"must be a non-empty list of {list(METHODS)}, got {methods!r}"
        )
    for method in methods:
        reader.choice(method, "translation.methods", METHODS)
    if "identity" in methods and not replication.offset_preserving:
        raise reader.fail(
            "translation.methods",
            "'identity' is only safe with an offset-preserving replicator; "
            "set replication.offset_preserving: true or remove it",
        )
    margin = reader.number(raw.get("timestamp_margin_seconds", 60.0), "translation.timestamp_margin_seconds")
    untracked = reader.choice(
        raw.get("untracked_partitions", "earliest"),
        "translation.untracked_partitions",
        ("earliest", "latest"),
    )
    initial = reader.choice(
        raw.get("initial_position", "earliest"), "translation.initial_position", ("earliest", "latest")
    )
    return TranslationSpec(tuple(dict.fromkeys(methods)), margin, untracked, initial)


def parse_pair(name: str, data: Any, source: str = "<memory>") -> PairConfig:
    """Validate one pair's mapping and return it.

    :param name: the pair's name.
    :param data: its mapping from the file.
    :param source: the file, for messages.
    """
    reader = _Reader(source, name)
    if not _NAME.match(str(name)):
        raise reader.fail("name", "pair names are letters, digits, '_', '.', '-' (they become DAG ids)")
    data = reader.mapping(data, "pair")
    reader.known_keys(
        data,
        "pair",
        (
            "clusters",
            "primary",
            "topics",
            "replication",
            "translation",
            "bookkeeping_group",
            "health",
            "job",
            "switch",
        ),
    )
    clusters = _clusters(reader, data)
    if "primary" not in data:
        raise reader.fail(
            "primary", f"is required: name the cluster the job normally runs on, one of {sorted(clusters)}"
        )
    primary = reader.choice(data["primary"], "primary", tuple(clusters))
    topics = data.get("topics")
    if not isinstance(topics, list) or not topics or not all(isinstance(t, str) and t for t in topics):
        raise reader.fail("topics", f"must be a non-empty list of topic names, got {topics!r}")
    replication = _replication(reader, data, clusters)
    translation = _translation(reader, data, replication)
    group = reader.string(
        data, "bookkeeping_group", "bookkeeping_group", default=f"airflow-kafka-failover.{name}"
    )
    health = dict(reader.mapping(data.get("health"), "health"))
    from airflow_kafka_failover.health.verdict import HealthThresholds

    try:
        HealthThresholds.from_dict(health)
    except ConfigError as exc:
        raise reader.fail("health", str(exc)) from None
    job = _job(reader, data, name, source)
    switch = _switch(reader, data)
    return PairConfig(
        name,
        clusters,
        primary,
        tuple(dict.fromkeys(topics)),
        replication,
        translation,
        group,
        health,
        job,
        switch,
        source,
    )


_JOB_TEXT = ("spark_connection", "record_id_field")
_JOB_OPTIONAL_TEXT = ("jars", "packages", "driver_memory", "executor_memory", "application")
_JOB_SECONDS = (
    "trigger_interval_seconds",
    "startup_timeout_seconds",
    "stop_timeout_seconds",
    "first_batch_timeout_seconds",
)
_JOB_PATHS = ("sink_root", "checkpoint_root", "run_root", "fencing_marker")


def _job(reader: _Reader, data: Mapping[str, Any], pair: str, source: str) -> JobSpec:
    raw = reader.mapping(data.get("job"), "job")
    known = tuple(JobSpec.__dataclass_fields__)
    reader.known_keys(raw, "job", known)
    values = _job_values(reader, raw)
    base = Path(source).resolve().parent if source != "<memory>" else Path.cwd()
    home = _airflow_home() / "kafka-failover"
    defaults = {
        "sink_root": home / "sink" / pair,
        "checkpoint_root": home / "checkpoints",
        "run_root": home / "runs",
        "fencing_marker": home / "fencing" / f"{pair}.json",
    }
    for key in _JOB_PATHS:
        given = reader.string(raw, key, f"job.{key}") if raw.get(key) is not None else None
        path = Path(given).expanduser() if given else defaults[key]
        values[key] = str(path if path.is_absolute() else base / path)
    return JobSpec(**values)


def _job_values(reader: _Reader, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The job section's non-path values, validated."""
    values: dict[str, Any] = {}
    for key in _JOB_TEXT:
        if raw.get(key) is not None:
            values[key] = reader.string(raw, key, f"job.{key}")
    for key in _JOB_OPTIONAL_TEXT:
        if raw.get(key) is not None:
            values[key] = reader.string(raw, key, f"job.{key}")
    for key in _JOB_SECONDS:
        if raw.get(key) is not None:
            values[key] = reader.number(raw[key], f"job.{key}", minimum=0.1)
    for key in ("max_offsets_per_trigger", "total_executor_cores"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise reader.fail(f"job.{key}", f"must be an integer >= 1 or left out, got {value!r}")
        values[key] = value
    for key in ("kafka_options", "spark_conf"):
        mapping = reader.mapping(raw.get(key), f"job.{key}")
        values[key] = {str(k): str(v) for k, v in mapping.items()}
    return values


def _switch(reader: _Reader, data: Mapping[str, Any]) -> SwitchSpec:
    raw = reader.mapping(data.get("switch"), "switch")
    reader.known_keys(raw, "switch", tuple(SwitchSpec.__dataclass_fields__))
    on_gap = reader.choice(raw.get("on_gap", "wait"), "switch.on_gap", ("wait", "proceed"))
    gap_wait = reader.number(raw.get("gap_wait_seconds", 120.0), "switch.gap_wait_seconds")
    watch = reader.number(
        raw.get("watch_timeout_seconds", 600.0), "switch.watch_timeout_seconds", minimum=1.0
    )
    pool = reader.string(raw, "pool", "switch.pool") if raw.get("pool") is not None else None
    automatic = raw.get("automatic", True)
    if not isinstance(automatic, bool):
        raise reader.fail("switch.automatic", f"must be true or false, got {automatic!r}")
    return SwitchSpec(on_gap, gap_wait, watch, pool, automatic)


def load_pairs(path: str | Path) -> dict[str, PairConfig]:
    """Load and validate every pair of a YAML config file.

    :param path: the file.
    """
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the pair config {path}: {exc.strerror}; check the path") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}\nfix the YAML syntax at the line shown") from None
    if (
        not isinstance(document, Mapping)
        or not isinstance(document.get("pairs"), Mapping)
        or not document["pairs"]
    ):
        raise ConfigError(f"{path}: the file must have a top-level 'pairs' mapping with at least one pair")
    return {str(name): parse_pair(str(name), pair, str(path)) for name, pair in document["pairs"].items()}


def load_pair(path: str | Path, name: str) -> PairConfig:
    """Load one pair by name, or raise naming the pairs the file has."""
    pairs = load_pairs(path)
    if name not in pairs:
        raise ConfigError(f"{path} has no pair {name!r}; it has {sorted(pairs)}")
    return pairs[name]

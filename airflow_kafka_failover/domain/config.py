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

import os
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import (
    BeforeValidator,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.schema import (
    Count,
    FieldProblem,
    Flag,
    JobSeconds,
    LongSeconds,
    Schema,
    Seconds,
    Text,
    choice,
    problem_of,
)
from airflow_kafka_failover.domain.health.verdict import HealthThresholds
from airflow_kafka_failover.domain.translation.plan import CONFIGURABLE_METHODS, TranslationMethod
from airflow_kafka_failover.run_format.options import PATH_OPTIONS, JobOptions

__all__ = [
    "ClusterSpec",
    "GapAction",
    "HealthSpec",
    "JobOptions",
    "KeeperSpec",
    "OffsetSyncsLocation",
    "PairConfig",
    "PairsFile",
    "ReplicationPolicy",
    "ReplicationSpec",
    "StartPosition",
    "SwitchSpec",
    "TranslationMethod",
    "TranslationSpec",
    "load_pair",
    "load_pairs",
    "parse_pair",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_MM2_ALIAS = re.compile(r"^[A-Za-z0-9_-]+$")


class ReplicationPolicy(StrEnum):
    """How MirrorMaker 2 names a replicated topic."""

    DEFAULT = "default"
    IDENTITY = "identity"


class OffsetSyncsLocation(StrEnum):
    """Where MirrorMaker 2 keeps its offset syncs (``offset-syncs.topic.location``)."""

    SOURCE = "source"
    TARGET = "target"


class StartPosition(StrEnum):
    """Where a partition without a known position starts."""

    EARLIEST = "earliest"
    LATEST = "latest"


class SwitchWake(StrEnum):
    """How the switch DAGs are woken when they run on their own."""

    CONTINUOUS = "continuous"
    EVENT = "event"


class StandbyMode(StrEnum):
    """Whether a driver waits ahead of a switch on the cluster the job does not read."""

    NONE = "none"
    WARM = "warm"


class GapAction(StrEnum):
    """What a switch does when the target lacks records the job has not processed yet."""

    WAIT = "wait"
    PROCEED = "proceed"


POLICIES = tuple(ReplicationPolicy)
METHODS = tuple(TranslationMethod)
DEFAULT_METHODS = (
    TranslationMethod.CHECKPOINT,
    TranslationMethod.OFFSET_SYNC,
    TranslationMethod.OFFSET_SYNC_REVERSE,
    TranslationMethod.TIMESTAMP,
)


class ClusterSpec(Schema):
    """One cluster of a pair (``clusters.<name>``)."""

    name: str = Field(exclude=True, description="The cluster's name in the pair (the key of `clusters`).")
    connection: Text = Field(description="The Airflow `kafka` connection id of the cluster.")
    alias: Text = Field(  # type: ignore[assignment]
        None,
        json_schema_extra={"x-default": "the cluster's name"},
        description="The cluster's MirrorMaker 2 alias (`clusters` in mm2.properties): letters, digits, "
        "`_`, `-`, without the replication separator; null: the cluster's name.",
    )

    @model_validator(mode="after")
    def _alias_defaults_to_the_name(self) -> ClusterSpec:
        if self.alias is None:
            object.__setattr__(self, "alias", self.name)  # frozen: filled once, while it is being built
        return self

    _null_means_default: ClassVar[tuple[str, ...]] = ("alias",)


def _parse_flow(item: Any) -> tuple[str, str]:
    parts = [part.strip() for part in str(item).split("->")]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise ValueError(f"{item!r} is not '<cluster>-><other cluster>'")
    return parts[0], parts[1]


def _flows(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be a list like ['A->B', 'B->A'], got {value!r}")
    return tuple(dict.fromkeys(item if isinstance(item, tuple) else _parse_flow(item) for item in value))


_FLOWS_IN_A_FILE = WithJsonSchema(
    {
        "anyOf": [
            {"type": "array", "items": {"type": "string", "pattern": "^.+->.+$"}, "minItems": 1},
            {"type": "null"},
        ]
    }
)
"""How a file gives the flows: ``"A->B"`` strings (the model holds them as pairs)."""


class ReplicationSpec(Schema):
    """How the pair replicates (``replication``)."""

    policy: Annotated[ReplicationPolicy, choice(ReplicationPolicy)] = Field(
        ReplicationPolicy.DEFAULT,
        description="`default` (`orders` on A is `A.orders` on B) or `identity` (same names on both).",
    )
    separator: Text = Field(
        ".", description="The replication policy's separator (`replication.policy.separator`)."
    )
    # Left out, the flows (and the methods below) are derived by the pair from its other sections.
    flows: Annotated[tuple[tuple[str, str], ...], BeforeValidator(_flows), _FLOWS_IN_A_FILE] = Field(
        None,  # type: ignore[arg-type]
        json_schema_extra={"x-default": "both ways (`default`); first cluster to second (`identity`)"},
        description="Enabled flows, e.g. `['A->B', 'B->A']`; null: both ways (`default` policy) or the "
        "first-listed cluster to the second (`identity`).",
    )
    offset_syncs_location: Annotated[OffsetSyncsLocation, choice(OffsetSyncsLocation)] = Field(
        OffsetSyncsLocation.TARGET,
        description="MirrorMaker 2 `offset-syncs.topic.location`; `target` keeps the syncs on the surviving "
        "cluster when the source dies, which failover needs.",
    )
    offset_preserving: Flag = Field(
        False,
        description="The replicator keeps offsets equal (Cluster Linking, shadowing): the `identity` "
        "translation method is then proven.",
    )

    def has_flow(self, source: str, target: str) -> bool:
        """Whether records replicate from ``source`` to ``target``."""
        return (source, target) in self.flows

    _null_means_default: ClassVar[tuple[str, ...]] = ("flows",)


def _methods(value: Any) -> Any:
    if value is None:
        return None
    names = [method.value for method in CONFIGURABLE_METHODS]
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(f"must be a non-empty list of {names}, got {value!r}")
    for method in value:
        if method not in names:
            raise ValueError(f"{method!r} is not one of {names}")
    return tuple(dict.fromkeys(TranslationMethod(method) for method in value))


class TranslationSpec(Schema):
    """How positions are translated between the clusters (``translation``)."""

    methods: Annotated[
        tuple[TranslationMethod, ...],
        BeforeValidator(_methods),
        WithJsonSchema(
            {"type": "array", "minItems": 1, "items": {"enum": [m.value for m in CONFIGURABLE_METHODS]}}
        ),
    ] = Field(
        None,  # type: ignore[arg-type]
        json_schema_extra={"x-default": "see the meaning"},
        description="Methods to try, most preferred first; null: `[identity]` with an offset-preserving "
        "replicator, else `[checkpoint, offset_sync, offset_sync_reverse, timestamp]`.",
    )
    timestamp_margin_seconds: Seconds = Field(
        60.0, description="How far before the newest processed record the timestamp method starts (seconds)."
    )
    untracked_partitions: Annotated[StartPosition, choice(StartPosition)] = Field(
        StartPosition.EARLIEST,
        description="Where partitions the job never read start: `earliest` (loses nothing) or `latest`.",
    )
    initial_position: Annotated[StartPosition, choice(StartPosition)] = Field(
        StartPosition.EARLIEST,
        description="Where the job starts when it has no committed batch: `earliest` or `latest`.",
    )

    _null_means_default: ClassVar[tuple[str, ...]] = ("methods",)


class HealthSpec(HealthThresholds):
    """How the failover and failback sensors judge a cluster (``health``): what each probe checks, and how
    much evidence "down" and "recovered" need.

    Each probe of the pair's sensors asks the watched cluster for metadata and, by default
    (`check_partitions`), judges the pair's own topics there, the ones the job reads on that cluster
    (`topics`, and under the `default` policy their copies from the other cluster): partitions the
    metadata reports without a leader count like a failed probe, and partitions whose leader does not
    answer count once they outlast `leader_failover_seconds`. A single lost broker, a rolling restart or a
    controller failover is therefore not "down" on topics replicated three times; two brokers of three lost
    are when `count_under_min_isr` is on (the survivor leads, but below `min.insync.replicas` no producer
    with `acks=all` can write). Every probe's partition evidence is logged with the verdict.

    Constraints between fields (checked when built):

    - `stability_window_seconds >= max_probe_gap`: a window shorter than the largest tolerated gap between
      probes could be "covered" by two probes on its edges and would prove nothing about stability.
    - `heartbeat_stale_seconds >= max_probe_gap`: heartbeats are observed once per probe; a staleness
      limit shorter than the gap between two looks would call live heartbeats stopped merely because
      nobody looked, which would turn a network split into a false "down".

    Both imply `probe_timeout_seconds` is below `stability_window_seconds` and `heartbeat_stale_seconds`.
    `min_down_seconds` and `failure_threshold` are independent: whichever needs longer wins.
    A bad value raises `ConfigError` naming the threshold and the value.
    """

    check_partitions: Flag = Field(
        True,
        description="Each probe judges the partitions of the pair's topics on the watched cluster (leaders "
        "present and answering); false: a probe is a metadata request only.",
    )
    count_under_min_isr: Flag = Field(
        False,
        description="Partitions of the pair's topics with fewer in-sync replicas than their "
        '`min.insync.replicas` count toward "down" like partitions without a leader (no producer with '
        "`acks=all` can write to them; the job can still read what they hold).",
    )
    canary_topic: Text | None = Field(
        None,
        description="A topic on both clusters (one partition is enough) that each probe writes one record "
        'to and reads back; a failed round trip counts toward "down" like a leader that does not '
        "answer. Null: no canary.",
    )

    def thresholds(self) -> dict[str, Any]:
        """The health thresholds alone, as the sensors' ``thresholds`` argument takes them."""
        return {name: getattr(self, name) for name in HealthThresholds.model_fields}


class SwitchSpec(Schema):
    """How the failover and failback DAGs behave (``switch``)."""

    on_gap: Annotated[GapAction, choice(GapAction)] = Field(
        GapAction.WAIT,
        description="What a switch does when the target lacks records the job has not processed yet: `wait` "
        "(re-plan until replication caught up, up to `gap_wait_seconds`, then fail; a gap before MirrorMaker "
        "2's oldest offset sync that only offsets could measure does not hold it once the replicated "
        "heartbeats show replication past the replica's end) or `proceed` (start anyway; the history records "
        "how many records the target was missing as `gap_records`).",
    )
    gap_wait_seconds: Seconds = Field(120.0, description="How long `wait` waits (seconds).")
    watch_timeout_seconds: LongSeconds = Field(
        600.0,
        description="How long one scheduled run watches before it ends (skipped) and the next starts; a "
        "manual trigger waits at most this long for the watching run to end (seconds).",
    )
    pool: Text | None = Field(
        None,
        description="The Airflow pool shared by both DAGs' switch steps (null: `default_pool`); create it "
        "with one slot so that only one switch of the pair runs at a time.",
    )
    automatic: Flag = Field(
        True, description="The switch DAGs run on their own (see `wake`); false makes them manual only."
    )
    standby: Annotated[StandbyMode, choice(StandbyMode)] = Field(
        StandbyMode.NONE,
        description="`warm`: the keeper keeps one warm standby driver of the job for the cluster the job "
        "does not read (Spark up, the Kafka source loaded, a start rehearsed, reading nothing), and a "
        "switch hands it the new run instead of starting spark-submit; `none`: every switch starts a new "
        "driver. Local and client mode (the driver runs on the Airflow host). One idle driver per pair "
        'costs memory and a little CPU: see docs/concepts.md, "Warm standby driver".',
    )
    wake: Annotated[SwitchWake, choice(SwitchWake)] = Field(
        SwitchWake.CONTINUOUS,
        description="How the switch DAGs run on their own: `continuous` (`@continuous`: one run at a time "
        "watches the primary for `watch_timeout_seconds`, then ends skipped and the next begins) or `event` "
        "(the triggerer watches the primary without end and starts a run only when the verdict becomes down "
        '(failover) or recovered (failback); no runs while the pair is quiet). See docs/concepts.md, "How '
        'the switch DAGs are woken".',
    )


class KeeperSpec(Schema):
    """How the keeper DAG watches the job of the current epoch (``keeper``).

    The keeper restarts a job that died in place (same cluster, epoch and checkpoint), finishes a switch
    that was interrupted after it moved the fence, and alerts on a stalled or lagging job.
    """

    automatic: Flag = Field(
        True,
        description="The keeper DAG runs on its own (`@continuous`, one run per `window_seconds`); false "
        "makes it manual only.",
    )
    interval_seconds: JobSeconds = Field(
        10.0, description="How often the keeper looks at the job, the fence and the active cluster (seconds)."
    )
    window_seconds: LongSeconds = Field(
        3600.0,
        description="How long one keeper run watches before it ends (success) and the next run takes over "
        "(seconds); keeps each run's log readable.",
    )
    max_restarts: Count = Field(
        3,
        description="Restarts in place of a dead job before the keeper gives up on it and fails loudly with "
        "the job's log tail; a restart counts until the restarted job commits a batch.",
    )
    restart_backoff_seconds: Seconds = Field(
        5.0,
        description="Wait before the second restart of a job; it doubles for each further restart (the first "
        "restart is immediate).",
    )
    stall_trigger_intervals: Count = Field(
        30,
        description="A running job that committed no batch for this many trigger intervals (and at least "
        "60 s) while the active cluster holds records it has not read is stalled: the keeper alerts. Until "
        "its first batch after a start or a restart in place, the job has `job.first_batch_timeout_seconds` "
        "(when longer), counted from that start.",
    )
    max_lag_records: Count | None = Field(
        None,
        description="Alert when the job is more records than this behind the end of the active cluster, "
        "summed over its partitions (null: no lag alert; the lag is still sent as a metric).",
    )
    switch_lease_seconds: LongSeconds = Field(
        60.0,
        description="How long a switch that moved the fence may go without a sign of life (each step renews "
        "it every third of this time) before the keeper takes it as interrupted and finishes it (seconds).",
    )


def _airflow_home() -> Path:
    return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow")


def _clusters(value: Any) -> Any:
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a mapping, got {type(value).__name__} {value!r}")
    if len(value) != 2:
        raise ValueError(f"a pair has exactly two clusters, got {len(value)}: {sorted(map(str, value))}")
    clusters: dict[Any, Any] = {}
    for name, spec in value.items():
        if isinstance(spec, ClusterSpec):
            clusters[name] = spec
            continue
        if not isinstance(name, str) or not _NAME.match(name):
            raise FieldProblem(str(name), "cluster names are letters, digits, '_', '.', '-'")
        if isinstance(spec, Mapping) and "name" in spec:
            raise FieldProblem(name, f"unknown key(s) ['name']; known keys are {ClusterSpec.known_keys()}")
        clusters[name] = {**spec, "name": name} if isinstance(spec, Mapping) else spec
    return clusters


def _topics(value: Any) -> Any:
    if not isinstance(value, list | tuple) or not value or not all(isinstance(t, str) and t for t in value):
        raise ValueError(f"must be a non-empty list of topic names, got {value!r}")
    return tuple(dict.fromkeys(value))


def _health(value: Any) -> HealthSpec:
    return HealthSpec.from_dict({} if value is None else value)


class PairConfig(Schema):
    """One pair of clusters and the job that moves between them (``pairs.<name>``)."""

    name: str = Field(exclude=True, description="The pair's name (used in DAG ids, Variables, asset names).")
    clusters: Annotated[dict[str, ClusterSpec], BeforeValidator(_clusters)] = Field(
        description="The two clusters of the pair, by name (letters, digits, `_`, `.`, `-`)."
    )
    primary: str = Field(description="The cluster the job normally runs on (a name of `clusters`).")
    topics: Annotated[tuple[str, ...], BeforeValidator(_topics)] = Field(
        description="Topics the job reads, by their names on their origin cluster."
    )
    replication: ReplicationSpec = Field(
        default_factory=lambda: ReplicationSpec.model_validate({}), description="Replication settings."
    )
    translation: TranslationSpec = Field(
        default_factory=lambda: TranslationSpec.model_validate({}), description="Translation settings."
    )
    bookkeeping_group: Text = Field(  # type: ignore[assignment]
        None,
        json_schema_extra={"x-default": "`airflow-kafka-failover.<pair>`"},
        description="Consumer group the job commits its position to, so that MirrorMaker 2 checkpoints it "
        "(null: `airflow-kafka-failover.<pair>`).",
    )
    health: Annotated[HealthSpec, BeforeValidator(_health)] = Field(
        default_factory=lambda: HealthSpec.model_validate({}),
        description="What the failover and failback sensors probe, and their thresholds.",
    )
    job: JobOptions = Field(
        default_factory=lambda: JobOptions.model_validate({}),
        description="The streaming job and its file roots.",
    )
    switch: SwitchSpec = Field(
        default_factory=lambda: SwitchSpec.model_validate({}),
        description="How the failover and failback DAGs behave.",
    )
    keeper: KeeperSpec = Field(
        default_factory=lambda: KeeperSpec.model_validate({}),
        description="How the keeper DAG watches, restarts and alerts.",
    )

    @model_validator(mode="before")
    @classmethod
    def _named_from_the_file(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, Mapping) and info.context and "pair" in info.context:
            if "name" in data:
                raise ValueError(f"unknown key(s) ['name']; known keys are {cls.known_keys()}")
            return {**data, "name": info.context["pair"]}
        return data

    @field_validator("primary", mode="before")
    @classmethod
    def _primary_is_a_cluster(cls, value: Any, info: ValidationInfo) -> Any:
        clusters = info.data.get("clusters")
        if clusters is not None and value not in clusters:
            raise ValueError(f"{value!r} is not one of {sorted(clusters)}")
        return value

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> PairConfig:
        self._check_clusters()
        self._complete_replication()
        self._complete_translation()
        if self.bookkeeping_group is None:
            object.__setattr__(self, "bookkeeping_group", f"airflow-kafka-failover.{self.name}")
        source = (info.context or {}).get("source", "<memory>")
        object.__setattr__(self, "job", _resolve_job_paths(self.job, self.name, source))
        return self

    def _check_clusters(self) -> None:
        connections = [c.connection for c in self.clusters.values()]
        if len(set(connections)) == 1:
            raise FieldProblem(
                "clusters",
                f"both clusters use connection {connections[0]!r}; the same cluster twice "
                "cannot fail over to itself",
            )
        aliases = [c.alias for c in self.clusters.values()]
        if len(set(aliases)) == 1:
            raise FieldProblem(
                "clusters", f"both clusters have MirrorMaker 2 alias {aliases[0]!r}; aliases must differ"
            )
        separator = self.replication.separator
        for name, cluster in self.clusters.items():
            alias = cluster.alias
            # MirrorMaker 2 reads the alias back out of remote topic names (A.orders) and config prefixes
            # (A.bootstrap.servers): an alias holding the separator would be split in the wrong place.
            if not _MM2_ALIAS.match(alias) or separator in alias:
                raise FieldProblem(
                    f"clusters.{name}.alias",
                    f"{alias!r} is not a valid MirrorMaker 2 alias: use letters, digits, '_' and '-', "
                    f"without the replication separator {separator!r}; set `alias:` (it defaults to the "
                    "cluster's name)",
                )

    def _complete_replication(self) -> None:
        replication, names = self.replication, list(self.clusters)
        if replication.flows is None:
            first, second = names
            both = ((first, second), (second, first))
            flows = both[:1] if replication.policy == ReplicationPolicy.IDENTITY else both
            object.__setattr__(self, "replication", replication.model_copy(update={"flows": flows}))
            return
        for source, target in replication.flows:
            if source not in self.clusters or target not in self.clusters:
                raise FieldProblem(
                    "replication.flows",
                    f"'{source}->{target}' is not '<cluster>-><other cluster>' of {names}",
                )
        if replication.policy == ReplicationPolicy.IDENTITY and len(replication.flows) > 1:
            raise FieldProblem(
                "replication.flows", "identity replication cannot prevent loops: enable one flow only"
            )

    def _complete_translation(self) -> None:
        translation, preserving = self.translation, self.replication.offset_preserving
        if translation.methods is None:
            methods = (TranslationMethod.IDENTITY,) if preserving else DEFAULT_METHODS
            object.__setattr__(self, "translation", translation.model_copy(update={"methods": methods}))
        elif TranslationMethod.IDENTITY in translation.methods and not preserving:
            raise FieldProblem(
                "translation.methods",
                "'identity' is only safe with an offset-preserving replicator; "
                "set replication.offset_preserving: true or remove it",
            )

    @property
    def standby(self) -> str:
        """The cluster that is not the primary."""
        return next(name for name in self.clusters if name != self.primary)

    def other(self, cluster: str) -> str:
        """The pair's other cluster than ``cluster``."""
        self.cluster(cluster)
        return next(name for name in self.clusters if name != cluster)

    def cluster(self, name: str) -> ClusterSpec:
        """The cluster ``name``, or a ConfigError naming the pair's clusters."""
        if name not in self.clusters:
            raise ConfigError(
                f"pair {self.name!r} has no cluster {name!r}; its clusters are {sorted(self.clusters)}"
            )
        return self.clusters[name]

    def topics_on(self, cluster: str) -> list[str]:
        """The topic names the job reads on ``cluster``: the local ones and those replicated into it."""
        from airflow_kafka_failover.domain.translation.replication_policy import for_name

        policy = for_name(self.replication.policy, self.replication.separator)
        other = self.other(cluster)
        names = list(self.topics)
        if self.replication.policy == ReplicationPolicy.DEFAULT and self.replication.has_flow(other, cluster):
            names += [policy.remote_topic(self.cluster(other).alias, topic) for topic in self.topics]
        return names


class PairsFile(Schema):
    """The pair config file: its only top-level key is ``pairs``."""

    pairs: dict[str, PairConfig] = Field(description="The pairs, by name (letters, digits, `_`, `.`, `-`).")


SHARED_STATE_OPTIONS = ("fencing_marker", "run_root", "checkpoint_root", "sink_root")
"""The job options every host that runs a pair's tasks must see alike (``local_root`` is per host)."""


def _default_job_paths(pair: str) -> dict[str, Path]:
    """Where the job's state goes when the config names no place: under this host's ``$AIRFLOW_HOME``."""
    home = _airflow_home() / "kafka-failover"
    return {
        "sink_root": home / "sink" / pair,
        "checkpoint_root": home / "checkpoints",
        "run_root": home / "runs",
        "fencing_marker": home / "fencing" / pair,
        "local_root": home / "local",
    }


def defaulted_state_options(pair: PairConfig) -> list[str]:
    """The :data:`SHARED_STATE_OPTIONS` of ``pair`` left at their per-host defaults under ``$AIRFLOW_HOME``.

    On a deployment whose tasks run on several hosts each host would keep its own fence, run folders and
    checkpoints there.
    """
    defaults = _default_job_paths(pair.name)
    return [key for key in SHARED_STATE_OPTIONS if getattr(pair.job, key) == str(defaults[key])]


def _resolve_job_paths(job: JobOptions, pair: str, source: str) -> JobOptions:
    """The job options with every path absolute: given local ones relative to the file, others defaulted; a
    store URI is kept as it is."""
    from airflow_kafka_failover.core.storage.locations import is_remote

    base = Path(source).resolve().parent if source != "<memory>" else Path.cwd()
    defaults = _default_job_paths(pair)
    resolved: dict[str, str] = {}
    for key in PATH_OPTIONS:
        given = getattr(job, key)
        if given and is_remote(given):
            resolved[key] = given
            continue
        if key == "local_root" and not given and not is_remote(resolved["run_root"]):
            resolved[key] = resolved["run_root"]  # beside the run folders, as before there was a local root
            continue
        path = Path(given).expanduser() if given else defaults[key]
        resolved[key] = str(path if path.is_absolute() else base / path)
    return job.model_copy(update=resolved)


def parse_pair(name: str, data: Any, source: str = "<memory>") -> PairConfig:
    """Validate one pair's mapping and return it.

    :param name: the pair's name.
    :param data: its mapping from the file.
    :param source: the file, for messages.
    """
    where = f"{source}: pair {name!r}"
    if not _NAME.match(str(name)):
        raise ConfigError(
            f"{where}: name: pair names are letters, digits, '_', '.', '-' (they become DAG ids)"
        )
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(f"{where}: pair: must be a mapping, got {type(data).__name__} {data!r}")
    data = dict(data or {})
    try:
        return PairConfig.model_validate(data, context={"pair": name, "source": source})
    except ValidationError as exc:
        field, problem = problem_of(exc)
        if field == "primary" and problem == "is required":
            problem += (
                f": name the cluster the job normally runs on, one of {sorted(data.get('clusters') or {})}"
            )
        raise ConfigError(f"{where}: {field or 'pair'}: {problem}") from None


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
    unknown = sorted(str(key) for key in document if key != "pairs")
    if unknown:
        raise ConfigError(
            f"{path}: unknown top-level key(s) {unknown}; the file has one top-level key, 'pairs' "
            "(indent a pair's settings under its name)"
        )
    return {str(name): parse_pair(str(name), pair, str(path)) for name, pair in document["pairs"].items()}


def load_pair(path: str | Path, name: str) -> PairConfig:
    """Load one pair by name, or raise naming the pairs the file has."""
    pairs = load_pairs(path)
    if name not in pairs:
        raise ConfigError(f"{path} has no pair {name!r}; it has {sorted(pairs)}")
    return pairs[name]

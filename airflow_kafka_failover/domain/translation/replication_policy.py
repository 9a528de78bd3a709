"""Topic naming of MirrorMaker 2's replication policies, mirrored from ``connect/mirror-client``.

``DefaultReplicationPolicy`` names a replicated topic ``<sourceAlias><separator><topic>``;
``IdentityReplicationPolicy`` keeps the name (except heartbeats, which still get the prefix).
The internal topic names follow ``DefaultReplicationPolicy`` with
``replication.policy.internal.topic.separator.enabled=true`` (MM2's default): the custom
separator is used in internal topic names too.
"""

from __future__ import annotations

from airflow_kafka_failover.core.exceptions import ConfigError

HEARTBEATS_TOPIC = "heartbeats"
"""The topic MM2's heartbeat connector writes on each source cluster (``heartbeats.topic.name`` default)."""

DEFAULT_SEPARATOR = "."


def _internal_separator(separator: str, internal_topic_separator_enabled: bool) -> str:
    return separator if internal_topic_separator_enabled else "."


OFFSET_SYNCS_LOCATIONS = ("source", "target")


def offset_syncs_topic(
    source_alias: str,
    target_alias: str,
    location: str = "target",
    separator: str = DEFAULT_SEPARATOR,
    internal_topic_separator_enabled: bool = True,
) -> str:
    """Name of the offset-syncs topic of the flow ``source_alias -> target_alias``.

    MM2 names the topic after the cluster that does *not* store it: with the default
    ``offset-syncs.topic.location=source`` it is ``mm2-offset-syncs.<target>.internal`` on the source;
    with ``location=target`` it is ``mm2-offset-syncs.<source>.internal`` on the target (seen on real
    MM2 4.1: flow A->B with target location writes ``mm2-offset-syncs.A.internal`` on B).

    :param source_alias: MM2 alias of the flow's source cluster.
    :param target_alias: MM2 alias of the flow's target cluster.
    :param location: ``offset-syncs.topic.location``: ``source`` or ``target``.
    :param separator: ``replication.policy.separator``.
    :param internal_topic_separator_enabled: ``replication.policy.internal.topic.separator.enabled``.
    """
    if location not in OFFSET_SYNCS_LOCATIONS:
        raise ConfigError(f"offset-syncs.topic.location must be 'source' or 'target', got {location!r}")
    named = target_alias if location == "source" else source_alias
    sep = _internal_separator(separator, internal_topic_separator_enabled)
    return f"mm2-offset-syncs{sep}{named}{sep}internal"


def offset_syncs_cluster(source_alias: str, target_alias: str, location: str = "target") -> str:
    """Alias of the cluster that stores the offset syncs of the flow ``source_alias -> target_alias``."""
    if location not in OFFSET_SYNCS_LOCATIONS:
        raise ConfigError(f"offset-syncs.topic.location must be 'source' or 'target', got {location!r}")
    return source_alias if location == "source" else target_alias


def checkpoints_topic(
    source_alias: str, separator: str = DEFAULT_SEPARATOR, internal_topic_separator_enabled: bool = True
) -> str:
    """Name of the checkpoints topic on the target for flows from ``source_alias``:
    ``<source>.checkpoints.internal``.

    :param source_alias: MM2 alias of the source cluster of the flow.
    :param separator: ``replication.policy.separator``.
    :param internal_topic_separator_enabled: ``replication.policy.internal.topic.separator.enabled``.
    """
    sep = _internal_separator(separator, internal_topic_separator_enabled)
    return f"{source_alias}{sep}checkpoints{sep}internal"


def remote_heartbeats_topic(source_alias: str, separator: str = DEFAULT_SEPARATOR) -> str:
    """Name of the replicated heartbeats topic on the target: ``<source>.heartbeats``.

    Both policies prefix heartbeats, so this holds for identity replication too.

    :param source_alias: MM2 alias of the cluster whose heartbeats were replicated.
    :param separator: ``replication.policy.separator``.
    """
    return f"{source_alias}{separator}{HEARTBEATS_TOPIC}"


def is_internal_topic(topic: str) -> bool:
    """Whether MM2 treats ``topic`` as internal and never replicates it (``isInternalTopic``).

    :param topic: a topic name.
    """
    return topic.endswith((".internal", "-internal")) or topic.startswith(("__", "."))


class DefaultReplicationPolicy:
    """MM2's default policy: ``orders`` on cluster ``A`` is ``A.orders`` on the target.

    :param separator: ``replication.policy.separator`` (non-empty).
    :param internal_topic_separator_enabled: whether internal topic names use ``separator`` too.
    """

    name = "DefaultReplicationPolicy"

    def __init__(
        self, separator: str = DEFAULT_SEPARATOR, internal_topic_separator_enabled: bool = True
    ) -> None:
        if not isinstance(separator, str) or not separator:
            raise ConfigError(
                f"replication policy separator must be a non-empty string, got {separator!r}; "
                "MM2's default is '.'"
            )
        self.separator = separator
        self.internal_topic_separator_enabled = internal_topic_separator_enabled

    def __repr__(self) -> str:
        return f"{type(self).__name__}(separator={self.separator!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(vars(self).items()))))

    def remote_topic(self, source_alias: str, topic: str) -> str:
        """Name on the target of ``topic`` replicated from the cluster aliased ``source_alias``.

        :param source_alias: MM2 alias of the cluster the topic comes from.
        :param topic: topic name on that cluster.
        """
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """Alias of the cluster ``topic`` was replicated from, or None if it is not a remote topic.

        :param topic: a topic name on the cluster being inspected.
        """
        # Java's String.split drops trailing empty parts and keeps a leading one; mirror that exactly so
        # edge names ("A.", ".x") classify the way MM2 classifies them.
        parts = topic.split(self.separator)
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) < 2:
            return None
        return parts[0]

    def upstream_topic(self, topic: str) -> str | None:
        """Name of ``topic`` on the cluster it was replicated from, or None if it is not a remote topic.

        One hop only: ``B.A.orders`` gives ``A.orders``; see :meth:`original_topic`.

        :param topic: a topic name on the cluster being inspected.
        """
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]

    def original_topic(self, topic: str) -> str:
        """Name of the topic where its records were first produced, following every hop.

        :param topic: a topic name on the cluster being inspected.
        """
        upstream = self.upstream_topic(topic)
        while upstream is not None and upstream != topic:
            topic, upstream = upstream, self.upstream_topic(upstream)
        return topic

    def offset_syncs_topic(self, source_alias: str, target_alias: str, location: str = "target") -> str:
        """Offset-syncs topic name of the flow ``source_alias -> target_alias`` with this policy's separator.

        :param source_alias: MM2 alias of the flow's source cluster.
        :param target_alias: MM2 alias of the flow's target cluster.
        :param location: ``offset-syncs.topic.location`` (``source`` or ``target``).
        """
        return offset_syncs_topic(
            source_alias, target_alias, location, self.separator, self.internal_topic_separator_enabled
        )

    def checkpoints_topic(self, source_alias: str) -> str:
        """Checkpoints topic name (on the target) for flows from ``source_alias``.

        :param source_alias: MM2 alias of the source cluster of the flow.
        """
        return checkpoints_topic(source_alias, self.separator, self.internal_topic_separator_enabled)

    def heartbeats_topic(self, source_alias: str) -> str:
        """Replicated heartbeats topic name on the target for flows from ``source_alias``.

        :param source_alias: MM2 alias of the source cluster of the flow.
        """
        return remote_heartbeats_topic(source_alias, self.separator)


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """MM2's identity policy (Kafka 3.0+): topics keep their names; heartbeats are still prefixed.

    A topic name alone cannot say where it came from, so :meth:`topic_source` returns the configured
    ``source_cluster_alias`` (MM2's ``source.cluster.alias``), None by default.

    :param separator: ``replication.policy.separator``, used for heartbeats and internal topics.
    :param internal_topic_separator_enabled: whether internal topic names use ``separator`` too.
    :param source_cluster_alias: alias reported as every non-heartbeat topic's source.
    """

    name = "IdentityReplicationPolicy"

    def __init__(
        self,
        separator: str = DEFAULT_SEPARATOR,
        internal_topic_separator_enabled: bool = True,
        source_cluster_alias: str | None = None,
    ) -> None:
        super().__init__(separator, internal_topic_separator_enabled)
        self.source_cluster_alias = source_cluster_alias

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(HEARTBEATS_TOPIC)

    def remote_topic(self, source_alias: str, topic: str) -> str:
        """Name on the target of ``topic`` from ``source_alias``: unchanged, except heartbeats.

        :param source_alias: MM2 alias of the cluster the topic comes from.
        :param topic: topic name on that cluster.
        """
        if self._looks_like_heartbeat(topic):
            return super().remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        """The configured source alias (or the heartbeat prefix for heartbeat topics).

        :param topic: a topic name on the cluster being inspected.
        """
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        """The topic itself: with identity replication any topic may be a replica of the same name.

        :param topic: a topic name on the cluster being inspected.
        """
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


_POLICIES: dict[str, type[DefaultReplicationPolicy]] = {
    "default": DefaultReplicationPolicy,
    "defaultreplicationpolicy": DefaultReplicationPolicy,
    "org.apache.kafka.connect.mirror.defaultreplicationpolicy": DefaultReplicationPolicy,
    "identity": IdentityReplicationPolicy,
    "identityreplicationpolicy": IdentityReplicationPolicy,
    "org.apache.kafka.connect.mirror.identityreplicationpolicy": IdentityReplicationPolicy,
}

ACCEPTED_POLICY_NAMES = (
    "default",
    "DefaultReplicationPolicy",
    "identity",
    "IdentityReplicationPolicy",
)


def for_name(name: str, separator: str = DEFAULT_SEPARATOR) -> DefaultReplicationPolicy:
    """Build the policy named in a pair's config (case-insensitive; MM2's full class names work too).

    :param name: ``default``, ``DefaultReplicationPolicy``, ``identity`` or ``IdentityReplicationPolicy``.
    :param separator: ``replication.policy.separator``.
    """
    policy_class = _POLICIES.get(name.strip().lower()) if isinstance(name, str) else None
    if policy_class is None:
        raise ConfigError(
            f"unknown replication policy {name!r}; accepted: {', '.join(ACCEPTED_POLICY_NAMES)} "
            "(or MM2's class name org.apache.kafka.connect.mirror.<Name>)"
        )
    return policy_class(separator=separator)

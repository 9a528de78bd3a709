"""Build a TranslationPlan: gather, per cluster, what the rules need, in a constant number of requests.

This is the I/O edge of translation. It reads MirrorMaker 2's offset syncs and checkpoints from the real
internal topics, the target's watermarks and offsets-for-times, all batched, then hands one
``PartitionRequest`` per partition to the pure rules in :mod:`rules`.

Routing. Under the default policy the job on cluster S reads local topics (``orders``) and topics
replicated into S from the other cluster (``T.orders``). A local topic maps *forward* to its replica on
the target (checkpoints, offset syncs of flow S->T); a topic replicated from the target maps *in reverse*
to its origin (offset syncs of flow T->S, read downstream -> upstream).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from airflow_kafka_failover.core.exceptions import ConfigError, TranslationError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.config import PairConfig
from airflow_kafka_failover.domain.translation.choosing import PartitionRequest, translate_partitions
from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint, OffsetSync
from airflow_kafka_failover.domain.translation.plan import TranslationPlan
from airflow_kafka_failover.domain.translation.replication_policy import (
    checkpoints_topic,
    for_name,
    offset_syncs_cluster,
    offset_syncs_topic,
)
from airflow_kafka_failover.domain.translation.rules import TimestampLookup
from airflow_kafka_failover.domain.translation.sync_history import (
    latest_checkpoints,
    sync_histories_by_partition,
)
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.io.gap_measure import (
    count_gaps_before_oldest_syncs,
    mark_replication_gaps,
    show_replication_complete,
)
from airflow_kafka_failover.io.mm2_topics import read_checkpoints, read_offset_syncs
from airflow_kafka_failover.run_format.spark_checkpoint import StreamPosition, read_checkpoint

log = logging.getLogger(__name__)


class RouteDirection(StrEnum):
    """Which way a topic's records flowed between the clusters, seen from the job's source."""

    FORWARD = "forward"
    """The source is the topic's origin; MM2 copied it to the target (checkpoints, offset syncs S->T)."""
    REVERSE = "reverse"
    """The target is the topic's origin; the job read its replica (offset syncs T->S, read backwards)."""


@dataclass(frozen=True)
class TopicRoute:
    """How one topic the job read on the source maps to the target.

    :param source_topic: its name on the source cluster.
    :param target_topic: its name on the target cluster.
    :param direction: ``forward`` (the source is its origin) or ``reverse`` (the target is).
    """

    source_topic: str
    target_topic: str
    direction: RouteDirection


def route_topics(pair: PairConfig, source: str, target: str, topics: list[str]) -> list[TopicRoute]:
    """Map the job's topics on ``source`` to their names on ``target`` (pure).

    :raises TranslationError: for a topic the pair does not read on ``source``, or without a flow.
    """
    expected = pair.topics_on(source)
    unknown = [topic for topic in topics if topic not in expected]
    if unknown:
        raise TranslationError(
            f"the position holds topics {unknown} that pair {pair.name!r} does not read on cluster {source} "
            f"(it reads {expected}); is the checkpoint from another job? Plan from this pair's own checkpoint"
        )
    policy = for_name(pair.replication.policy, pair.replication.separator)
    source_alias, target_alias = pair.cluster(source).alias, pair.cluster(target).alias
    routes = []
    for topic in topics:
        from_target = pair.replication.policy == "default" and policy.topic_source(topic) == target_alias
        if pair.replication.policy == "identity":
            from_target = not pair.replication.has_flow(source, target)
        if from_target:
            if not pair.replication.has_flow(target, source) and not pair.replication.offset_preserving:
                raise TranslationError(
                    f"{topic} on {source} came from {target}, but no flow {target}->{source} exists"
                )
            upstream = policy.upstream_topic(topic) if pair.replication.policy == "default" else topic
            assert upstream is not None  # from the target under the default policy: the name has its prefix
            routes.append(TopicRoute(topic, upstream, RouteDirection.REVERSE))
        else:
            if not pair.replication.has_flow(source, target) and not pair.replication.offset_preserving:
                raise TranslationError(f"no replication flow {source}->{target} copies {topic} to {target}")
            remote = policy.remote_topic(source_alias, topic)
            routes.append(TopicRoute(topic, remote, RouteDirection.FORWARD))
    return routes


def _read_syncs(hook: KafkaClusterHook | None, topic: str, wanted: set[str], where: str) -> list[OffsetSync]:
    if hook is None:
        log.warning(
            "Offset syncs %s live on %s, which is not reachable: no offset_sync translation", topic, where
        )
        return []
    try:
        reading = read_offset_syncs(hook, topic, where, topics=wanted)
    except Exception as exc:  # missing syncs only remove a method; the plan says so
        log.warning(
            "Cannot read offset syncs %s on %s (%s): no offset_sync translation from it",
            topic,
            where,
            f"{type(exc).__name__}: {exc}",
        )
        return []
    if reading.undecodable:
        # The plan cannot trust a topic that holds records MM2 did not write.
        raise TranslationError(reading.undecodable[0])
    return reading.decoded


def _read_checkpoints(hook: KafkaClusterHook, topic: str, group: str, where: str) -> list[Checkpoint]:
    try:
        reading = read_checkpoints(hook, topic, where, group)
    except Exception as exc:  # missing checkpoints only remove a method; the plan says so
        log.warning(
            "Cannot read checkpoints %s on %s (%s): no checkpoint translation",
            topic,
            where,
            f"{type(exc).__name__}: {exc}",
        )
        return []
    if reading.undecodable:
        raise TranslationError(reading.undecodable[0])
    return reading.decoded


def build_plan(
    pair: PairConfig,
    source: str,
    target: str,
    position: StreamPosition | None,
    hooks: Mapping[str, KafkaClusterHook | None],
) -> TranslationPlan:
    """Translate the job's position on ``source`` into start offsets on ``target``.

    :param pair: the pair's configuration.
    :param source: the cluster the job read.
    :param target: the cluster it will read.
    :param position: the job's position; None when it has no committed batch (every partition then
        starts at the pair's ``initial_position``).
    :param hooks: cluster name -> hook; the source's may be None when that cluster is down.
    """
    target_hook = hooks.get(target)
    if target_hook is None:
        raise TranslationError(f"no connection to the target cluster {target}; the plan needs it")
    translation = pair.translation
    routes = route_topics(pair, source, target, sorted(position.topics)) if position is not None else []
    target_counts = _target_topics(pair, target, target_hook, {route.target_topic for route in routes})
    if position is None:
        bound = _held_records(target_hook, target_counts) if translation.initial_position == "earliest" else 0
        log.warning(
            "No committed batch: every partition on %s starts at %s; re-delivery at most %s records (all the "
            "target holds at an earliest start: nothing proves which were read before)",
            target,
            translation.initial_position,
            "unknown" if bound is None else bound,
        )
        return TranslationPlan.create(
            source, target, [], target_counts, translation.initial_position, untracked_redelivery_bound=bound
        )

    by_source = {route.source_topic: route for route in routes}
    _check_partition_counts(position, routes, target_counts, hooks.get(source), source, target)

    target_tps = [TopicPartition(by_source[tp.topic].target_topic, tp.partition) for tp in position.offsets]
    watermarks = target_hook.watermarks(target_tps)
    forward_histories, reverse_histories, checkpoints = _mm2_evidence(pair, source, target, routes, hooks)
    lookups = _timestamp_lookups(pair, position, by_source, target_hook)

    requests = []
    for source_tp, offset in sorted(position.offsets.items()):
        route = by_source[source_tp.topic]
        target_tp = TopicPartition(route.target_topic, source_tp.partition)
        forward = route.direction is RouteDirection.FORWARD
        requests.append(
            PartitionRequest(
                source=source_tp,
                position=offset,
                target=target_tp,
                offset_syncs=forward_histories.get(source_tp) if forward else None,
                reverse_offset_syncs=None if forward else reverse_histories.get(target_tp),
                checkpoint=checkpoints.get(target_tp) if forward else None,
                timestamp_lookup=lookups.get(target_tp),
                watermarks=watermarks[target_tp],
                reverse=not forward,
            )
        )
    translations = translate_partitions(requests, list(translation.methods))
    count_gaps_before_oldest_syncs(translations, requests, list(translation.methods), hooks.get(source))
    mark_replication_gaps(translations, requests, position, hooks.get(source))
    heartbeats = for_name(pair.replication.policy, pair.replication.separator).heartbeats_topic(
        pair.cluster(source).alias
    )
    show_replication_complete(translations, requests, target_hook, heartbeats)
    return TranslationPlan.create(
        source, target, translations, target_counts, translation.untracked_partitions
    )


def _held_records(hook: KafkaClusterHook, counts: Mapping[str, int]) -> int | None:
    """Records the target holds in the given topics (high minus low watermark); None when unreadable."""
    partitions = [TopicPartition(topic, p) for topic, n in sorted(counts.items()) for p in range(n)]
    try:
        marks = hook.watermarks(partitions)
    except Exception as exc:  # the bound becomes unknown, which the plan says
        log.warning("Cannot read the watermarks of %s partitions on the target (%s)", len(partitions), exc)
        return None
    return sum(max(mark.high - mark.low, 0) for mark in marks.values())


def _target_topics(
    pair: PairConfig, target: str, hook: KafkaClusterHook, required: set[str]
) -> dict[str, int]:
    """Return partition counts of the topics the job will read on ``target``.

    Replicas of what the job read are required: without them its records are not there. The target's
    other topics (its own, not yet written to if producers never used it) are read when they exist and
    otherwise left out of the plan with a warning: the plan itself needs nothing from them, but the submit
    on the target reads every topic of :meth:`PairConfig.topics_on` and refuses to start while one is missing
    (``kafka-failover check`` names them before the first start).
    """
    wanted = list(dict.fromkeys([*pair.topics_on(target), *sorted(required)]))
    try:
        metadata = hook.describe_cluster(wanted)
    except Exception as exc:  # any failure to answer: the plan cannot be made
        raise TranslationError(
            f"the target cluster {target} ({hook.bootstrap_servers}, connection "
            f"{hook.kafka_config_id!r}) did not answer within {hook.timeout_seconds:g} s: {exc}; "
            "a plan needs the target reachable"
        ) from None
    missing = set(metadata.missing_topics)
    if missing & required:
        raise TranslationError(
            f"topics {sorted(missing & required)} do not exist on the target cluster {target}; they must "
            "hold the replicated records the job has to continue from: check the replication flow and its "
            "topic filter"
        )
    if missing == set(wanted):
        raise TranslationError(
            f"none of the topics {wanted} exist on the target cluster {target}, so the job would read "
            "nothing there; check the pair's topics and that replication has created them"
        )
    for topic in sorted(missing):
        log.warning(
            "Topic %s does not exist on %s: the job reads it there, so a submit on %s refuses to start until "
            "it exists (kafka-failover check names what each cluster lacks)",
            topic,
            target,
            target,
        )
    counts: dict[str, int] = {}
    for info in metadata.partitions:
        counts[info.topic] = counts.get(info.topic, 0) + 1
    return counts


def _check_partition_counts(position, routes, target_counts, source_hook, source, target) -> None:
    source_counts: dict[str, int] = {}
    if source_hook is not None:
        try:
            source_counts = source_hook.partition_counts([route.source_topic for route in routes])
        except Exception as exc:  # the source may be down: fall back to the position
            log.info("Source %s not reachable for partition counts (%s); using the position's", source, exc)
    for route in routes:
        on_source = source_counts.get(route.source_topic)
        if on_source is None:
            on_source = 1 + max(tp.partition for tp in position.offsets if tp.topic == route.source_topic)
        on_target = target_counts[route.target_topic]
        if on_source != on_target:
            raise TranslationError(
                f"{route.source_topic} has {on_source} partitions on {source} but {route.target_topic} has "
                f"{on_target} on {target}; MirrorMaker 2 keeps partition numbers, so the clusters must match"
            )


def _mm2_evidence(pair, source, target, routes, hooks):
    location = pair.replication.offset_syncs_location
    sep = pair.replication.separator
    s_alias, t_alias = pair.cluster(source).alias, pair.cluster(target).alias
    alias_to_name = {spec.alias: name for name, spec in pair.clusters.items()}
    forward_topics = {r.source_topic for r in routes if r.direction is RouteDirection.FORWARD}
    reverse_topics = {r.target_topic for r in routes if r.direction is RouteDirection.REVERSE}
    forward_histories, reverse_histories, checkpoints = {}, {}, {}
    if forward_topics and not pair.replication.offset_preserving:
        stored = alias_to_name[offset_syncs_cluster(s_alias, t_alias, location)]
        syncs = _read_syncs(
            hooks.get(stored), offset_syncs_topic(s_alias, t_alias, location, sep), forward_topics, stored
        )
        forward_histories = sync_histories_by_partition(syncs)
        if "checkpoint" in pair.translation.methods:
            found = _read_checkpoints(
                hooks[target], checkpoints_topic(s_alias, sep), pair.bookkeeping_group, target
            )
            checkpoints = latest_checkpoints(found, pair.bookkeeping_group)
    if reverse_topics and not pair.replication.offset_preserving:
        stored = alias_to_name[offset_syncs_cluster(t_alias, s_alias, location)]
        syncs = _read_syncs(
            hooks.get(stored), offset_syncs_topic(t_alias, s_alias, location, sep), reverse_topics, stored
        )
        reverse_histories = sync_histories_by_partition(syncs)
    return forward_histories, reverse_histories, checkpoints


def _timestamp_lookups(pair, position, by_source, target_hook) -> dict[TopicPartition, TimestampLookup]:
    if "timestamp" not in pair.translation.methods or not position.max_timestamps_ms:
        return {}
    margin_ms = int(pair.translation.timestamp_margin_seconds * 1000)
    wanted = {
        TopicPartition(by_source[tp.topic].target_topic, tp.partition): ts - margin_ms
        for tp, ts in position.max_timestamps_ms.items()
        if tp.topic in by_source
    }
    found = target_hook.offsets_for_times(wanted)
    return {tp: TimestampLookup(timestamp_ms=wanted[tp], offset=found[tp]) for tp in wanted}


def load_position(
    checkpoint: str | None = None,
    position_json: str | None = None,
    group: str | None = None,
    group_hook: KafkaClusterHook | None = None,
) -> StreamPosition | None:
    """Return the job's position from exactly one source: a Spark checkpoint, explicit JSON, or a group.

    :param checkpoint: a Spark checkpoint directory (the last committed batch).
    :param position_json: an explicit position, e.g. ``{"orders": {"0": 12}}``.
    :param group: a consumer group whose committed offsets are the position (read through ``group_hook``).
    :param group_hook: the hook of the cluster holding the group.
    :return: the position, or None when the checkpoint has no committed batch yet (logged with the reason).
    """

    given = [
        name
        for name, value in (("checkpoint", checkpoint), ("position", position_json), ("group", group))
        if value
    ]
    if len(given) != 1:
        raise ConfigError(f"give exactly one of checkpoint, position or group; got {given or 'none'}")
    if checkpoint:
        reading = read_checkpoint(checkpoint)
        if reading.position is None:
            log.warning(
                "Checkpoint %s: %s; the configured initial position applies", checkpoint, reading.reason
            )
        return reading.position
    if position_json:
        return StreamPosition.from_json(position_json)
    assert group is not None and group_hook is not None
    offsets = group_hook.committed_offsets(group)
    if not offsets:
        log.warning("Group %s has no committed offsets; the configured initial position applies", group)
        return None
    return StreamPosition(offsets=offsets)

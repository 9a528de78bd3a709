"""What each cluster of a pair must hold before the job can run there, and whence each topic comes.

A start or a switch submits the job with every topic it reads on that cluster (:meth:`PairConfig.topics_on`),
and the submit refuses a topic that does not exist there. Under the ``default`` policy with the default flows
(both ways) the job on A reads ``orders`` and MirrorMaker 2's copy ``B.orders``, so B's ``orders`` must exist
and be replicated to A before the first start. These are the rules ``kafka-failover validate`` prints from
the config alone and ``kafka-failover check`` holds against the clusters' metadata. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from airflow_kafka_failover.domain.config import PairConfig, ReplicationPolicy
from airflow_kafka_failover.domain.translation.replication_policy import for_name

__all__ = ["TopicNeed", "topic_needs", "topic_problems"]


@dataclass(frozen=True)
class TopicNeed:
    """One topic the job reads on one cluster.

    :param cluster: the cluster the job reads it on.
    :param topic: its name there.
    :param origin: the cluster whose producers write it (``cluster`` itself for a topic of its own).
    :param origin_topic: its name on ``origin``.
    """

    cluster: str
    topic: str
    origin: str
    origin_topic: str

    @property
    def replicated(self) -> bool:
        """Whether MirrorMaker 2 makes it (a copy from the other cluster), rather than the user."""
        return self.origin != self.cluster

    @property
    def made_by(self) -> str:
        """Who makes the topic, in words."""
        if self.replicated:
            flow = f"{self.origin}->{self.cluster}"
            return f"MirrorMaker 2, flow {flow} (from {self.origin_topic} on {self.origin})"
        return f"you (producers write to it while {self.cluster} is active)"


def topic_needs(pair: PairConfig) -> list[TopicNeed]:
    """Every topic the job reads on each cluster of ``pair``, in the order of its clusters and of
    :meth:`PairConfig.topics_on`.

    :param pair: the pair.
    """
    replication = pair.replication
    policy = for_name(replication.policy, replication.separator)
    needs = []
    for cluster in pair.clusters:
        other = pair.other(cluster)
        copied_here = replication.has_flow(other, cluster)
        for topic in pair.topics:
            # Under the identity policy the copy has the origin's name: the flow's target holds it as a copy.
            identity_copy = replication.policy == ReplicationPolicy.IDENTITY and copied_here
            needs.append(TopicNeed(cluster, topic, other if identity_copy else cluster, topic))
        if replication.policy == ReplicationPolicy.DEFAULT and copied_here:
            alias = pair.cluster(other).alias
            needs += [
                TopicNeed(cluster, policy.remote_topic(alias, topic), other, topic) for topic in pair.topics
            ]
    return needs


def topic_problems(pair: PairConfig, partitions: Mapping[str, Mapping[str, int]]) -> list[str]:
    """What a start or a switch of ``pair`` would refuse, given the topics each cluster holds.

    :param pair: the pair.
    :param partitions: cluster -> {topic: partition count} of the topics of :func:`topic_needs` that exist
        there (a missing topic is absent).
    :return: one sentence per problem, naming the topic, the cluster and what to do; empty when none.
    """
    problems = []
    for need in topic_needs(pair):
        held = partitions.get(need.cluster, {})
        if need.topic not in held:
            problems.append(_missing(pair, need))
            continue
        source = partitions.get(need.origin, {}).get(need.origin_topic)
        if need.replicated and source is not None and source != held[need.topic]:
            problems.append(
                f"{need.topic} has {held[need.topic]} partitions on {need.cluster} but {need.origin_topic} "
                f"has {source} on {need.origin}; MirrorMaker 2 keeps partition numbers, so a switch "
                "refuses to plan between them: give both the same number of partitions"
            )
    return problems


def _missing(pair: PairConfig, need: TopicNeed) -> str:
    reading = f"the job on {need.cluster} reads it, so a start or switch to {need.cluster} refuses to start"
    if not need.replicated:
        return (
            f"topic {need.topic} does not exist on {need.cluster} ({reading}): create it there, with as many "
            "partitions as the other cluster's"
        )
    flow = f"{need.origin}->{need.cluster}"
    return (
        f"topic {need.topic} does not exist on {need.cluster} ({reading}): it is MirrorMaker 2's copy of "
        f"{need.origin_topic} on {need.origin}, made by the flow {flow} once {need.origin_topic} exists on "
        f"{need.origin} and the flow's `topics` covers it (MirrorMaker 2 looks for new topics every "
        f"refresh.topics.interval.seconds); if nothing is to be replicated {flow}, leave it out of the "
        f"pair's replication.flows (now {_flows(pair)})"
    )


def _flows(pair: PairConfig) -> str:
    return "[" + ", ".join(f"'{source}->{target}'" for source, target in pair.replication.flows) + "]"

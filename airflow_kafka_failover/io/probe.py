"""The I/O edge of health checking: probe a cluster once and return evidence, never a bare boolean."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.health.evidence import ProbeResult, describe_exception
from airflow_kafka_failover.hooks.kafka_cluster import ClusterMetadata, KafkaClusterHook, ProbeClient

_ERROR_CHARS = 200


def _short(exc: BaseException) -> str:
    text = describe_exception(exc)
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 3] + "..."


def probe_cluster(
    hook: KafkaClusterHook,
    cluster: str,
    topics: Sequence[str],
    timeout_seconds: float,
    min_insync_replicas: Mapping[str, int] | None = None,
    canary_topic: str | None = None,
) -> ProbeResult:
    """Probe one cluster: one metadata request, a read of the configured partitions, and optionally a canary.

    With ``topics``, the probe judges the job's partitions the way the job would meet them: partitions the
    metadata reports without a leader, partitions whose leader does not give their end offset (one
    ListOffsets request per leader; metadata can name a leader that is dead, for the seconds before Kafka
    moves its partitions, or for as long as a lost controller quorum cannot), and, where
    ``min_insync_replicas`` is given, partitions below it. Without topics, a probe is a metadata request.

    :param hook: the cluster's hook.
    :param cluster: the cluster's alias, recorded in the evidence.
    :param topics: the configured topics whose partitions must have leaders that answer.
    :param timeout_seconds: seconds the cluster has to answer the metadata request, and again the leaders.
    :param min_insync_replicas: per topic, ``min.insync.replicas`` when known (fetched once by the caller);
        partitions with fewer in-sync replicas are reported.
    :param canary_topic: a topic to produce one record to and read it back; skipped when None.
    :raises ConfigError: when the connection is misconfigured (TLS files, a TLS handshake refused for a
        reason of configuration): the watch ends with that error instead of counting a failed probe.
    """
    at = time.time()
    started = time.monotonic()
    refused = every_address_refuses(hook.bootstrap_servers, timeout_seconds)
    if refused is not None:
        return ProbeResult(
            cluster=cluster, at=at, reachable=False, latency_s=None, broker_count=0, error=refused
        )
    client = hook.probe_client(timeout_seconds)  # one client: its metadata finds the leaders at once
    try:
        metadata = hook.describe_cluster(topics, timeout_seconds=timeout_seconds, client=client)
    except ConfigError:  # a misconfiguration (e.g. TLS) is no evidence of a dead cluster: the task fails
        raise
    except Exception as exc:  # every other failure to answer is evidence, not a crash
        return ProbeResult(
            cluster=cluster, at=at, reachable=False, latency_s=None, broker_count=0, error=_short(exc)
        )
    latency = time.monotonic() - started
    findings = judge_partitions(hook, metadata, timeout_seconds, min_insync_replicas, client)
    canary_ok = None
    error = None
    if canary_topic is not None and metadata.broker_ids:
        remaining = max(timeout_seconds - latency, 0.5)
        try:
            canary_ok = canary_round_trip(hook, canary_topic, remaining)
        except Exception as exc:  # a failed canary degrades the verdict
            canary_ok, error = False, f"canary: {_short(exc)}"
    return ProbeResult(
        cluster=cluster,
        at=at,
        reachable=True,
        latency_s=round(latency, 4),
        broker_count=len(metadata.broker_ids),
        canary_ok=canary_ok,
        error=error,
        **findings,
    )


def judge_partitions(
    hook: KafkaClusterHook,
    metadata: ClusterMetadata,
    timeout_seconds: float,
    min_insync_replicas: Mapping[str, int] | None = None,
    client: ProbeClient | None = None,
) -> dict[str, Any]:
    """The partition evidence of a probe, as :class:`ProbeResult` fields: what the metadata says of each
    configured partition, and whether the leaders it names answer.

    :param hook: the cluster's hook, to ask the leaders.
    :param metadata: the metadata answer for the configured topics.
    :param timeout_seconds: seconds the leaders have to answer.
    :param min_insync_replicas: per topic, ``min.insync.replicas`` where that check is on.
    :param client: the client that fetched ``metadata``, to ask the leaders on.
    """
    leaderless = [f"{p.topic}-{p.partition}" for p in metadata.partitions if p.leader < 0]
    leaderless += [f"{topic} (topic missing)" for topic in metadata.missing_topics]
    led = {TopicPartition(p.topic, p.partition): p.leader for p in metadata.partitions if p.leader >= 0}
    try:
        silent = hook.leaders_not_answering(led, timeout_seconds, client) if led else {}
    except Exception as exc:  # the whole request failed: no leader answered
        silent = dict.fromkeys(led, _short(exc))
    under_min_isr = [
        f"{p.topic}-{p.partition}"
        for p in metadata.partitions
        if min_insync_replicas
        and p.topic in min_insync_replicas
        and len(p.isrs) < min_insync_replicas[p.topic]
    ]
    return {
        "leaderless_partitions": tuple(leaderless),
        "unreadable_partitions": tuple(
            f"{tp} (leader {led[tp]}: {why})" for tp, why in sorted(silent.items())
        ),
        "under_min_isr_partitions": tuple(under_min_isr),
        "under_replicated_partitions": tuple(
            f"{p.topic}-{p.partition}" for p in metadata.partitions if len(p.isrs) < len(p.replicas)
        ),
        "partitions_checked": len(metadata.partitions),
    }


def every_address_refuses(bootstrap_servers: str, timeout_seconds: float) -> str | None:
    """Return why, when every bootstrap address actively refuses a TCP connection; else None.

    A refused connection means no process listens there: a crashed broker is known at once, instead of
    after the client library has retried for the whole probe timeout. Anything else (accepted, timed
    out, unresolvable) is left to the real metadata request to judge.
    """
    refusals = []
    for address in (part.strip() for part in bootstrap_servers.split(",") if part.strip()):
        host, _, port = address.rpartition(":")
        host = host.split("://")[-1].strip("[]")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_seconds):
                return None
        except ConnectionRefusedError:
            refusals.append(address)
        except (OSError, ValueError):
            return None
    return f"connection refused by every bootstrap address ({', '.join(refusals)})" if refusals else None


def canary_round_trip(hook: KafkaClusterHook, topic: str, timeout_seconds: float) -> bool:
    """Produce one record to ``topic`` (partition 0) and read it back; True when it came back intact."""
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    token = uuid.uuid4().hex.encode()
    delivered: list = []
    producer = hook.producer(timeout_seconds=timeout_seconds)
    producer.produce(
        topic, value=token, partition=0, on_delivery=lambda err, msg: delivered.append((err, msg))
    )
    producer.flush(timeout_seconds)
    if not delivered or delivered[0][0] is not None:
        reason = delivered[0][0] if delivered else "no delivery report"
        raise RuntimeError(f"producing to {topic} failed: {reason}")
    offset = delivered[0][1].offset()
    consumer = hook.consumer(timeout_seconds=timeout_seconds)
    try:
        consumer.assign([KafkaTopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                return msg.value() == token
        return False
    finally:
        consumer.close()

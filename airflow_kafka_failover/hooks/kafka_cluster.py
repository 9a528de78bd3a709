"""KafkaClusterHook: what the provider asks of one Kafka cluster, each call with an explicit timeout.

Built on the official Kafka provider's ``KafkaBaseHook``: the ``kafka`` connection's extra is the
confluent-kafka config dict, turned into client config there (callbacks, cloud auth). This hook only
says which clients it builds and what it asks them. Calls that concern many partitions are batched into
one request per call (per partition leader, inside the client), never one request per partition.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.types import TopicPartition, Watermarks
from airflow_kafka_failover.hooks.client_certificate import check_tls_files, tls_refusal
from airflow_kafka_failover.hooks.client_log import ClientLog
from airflow_kafka_failover.hooks.partition_reader import consume_ranges

DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class PartitionInfo:
    """Metadata of one partition: its leader (-1 when it has none) and in-sync replicas."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isrs: tuple[int, ...]


@dataclass(frozen=True)
class ClusterMetadata:
    """One metadata answer: the cluster's brokers and the partitions of the topics asked about."""

    cluster_id: str | None
    broker_ids: tuple[int, ...]
    partitions: tuple[PartitionInfo, ...]
    missing_topics: tuple[str, ...]


@dataclass(frozen=True)
class ProbeClient:
    """One AdminClient for the requests of one probe, with the errors its error callback received.

    A probe asks for metadata and then the partitions' leaders on the same client: a fresh client asked for
    offsets before it holds the topics' metadata waits for a metadata refresh of its own, and on a healthy
    cluster of three brokers 5 of 60 such ListOffsets requests for 100 partitions ran into a 2 s timeout
    (none of 120 after a metadata request on the same client).
    """

    admin: Any
    errors: list[Any]


@dataclass(frozen=True)
class CompactedRecord:
    """A record read from a (compacted) topic: enough to decode MirrorMaker 2's internal records."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


# librdkafka's informational chatter (e.g. "Purging 1 unserved events" when a short-lived client closes) stays
# out of the logs; its warnings and errors go through the connection's ClientLog, once per change (a
# connection's extra may set its own log_level).
QUIET = {"log_level": 4}


def _kafka_error_name(exc: BaseException, timeout: float) -> str:
    """A short name for why a request failed: the Kafka error code's name, or "no answer within N s"."""
    import concurrent.futures

    if isinstance(exc, concurrent.futures.TimeoutError | TimeoutError):
        return f"no answer within {timeout:g} s"
    error = exc.args[0] if exc.args else None
    name = getattr(error, "name", None)
    if callable(name):
        return str(name())
    return f"{type(exc).__name__}: {exc}"[:120]


class KafkaClusterHook(KafkaBaseHook):
    """Talk to one Kafka cluster through an Airflow ``kafka`` connection.

    :param kafka_config_id: the connection id; its extra holds the confluent-kafka config dict with at
        least ``bootstrap.servers``.
    :param timeout_seconds: default timeout for each call that does not pass its own. Every method that
        talks to the cluster takes its own ``timeout_seconds``.
    """

    hook_name = "Kafka Cluster (failover)"

    def __init__(
        self,
        kafka_config_id: str = KafkaBaseHook.default_conn_name,
        timeout_seconds: float = DEFAULT_TIMEOUT_S,
    ):
        super().__init__(kafka_config_id=kafka_config_id)
        if timeout_seconds is None or timeout_seconds <= 0:
            raise ConfigError(
                f"timeout_seconds must be greater than 0 seconds, got {timeout_seconds!r}: give the seconds "
                "each call may wait for the cluster"
            )
        self.timeout_seconds: float = timeout_seconds

    def _effective_timeout(self, timeout_seconds: float | None) -> float:
        # A method's own timeout, else the hook's default.
        return timeout_seconds or self.timeout_seconds

    # ---- configuration -----------------------------------------------------------------------------

    @cached_property
    def client_config(self) -> dict[str, Any]:
        """The confluent-kafka config of the connection, validated, with errors that name the connection."""
        from airflow_kafka_failover.version_compat import AirflowNotFoundException

        try:
            connection = self.get_connection(self.kafka_config_id)
            if connection.conn_type != "kafka":
                raise ConfigError(
                    f"Airflow connection {self.kafka_config_id!r} is of type {connection.conn_type!r}, not "
                    "'kafka': "
                    "point the task at a connection of type 'kafka' (the official Kafka provider's)"
                )
            self._check_extra(connection.extra)
            config = self._build_config()
            check_tls_files(config, f"Airflow connection {self.kafka_config_id!r}")
        except ConfigError:
            raise
        except AirflowNotFoundException:
            self._explain_unreadable_variable()
            raise ConfigError(
                f"Airflow connection {self.kafka_config_id!r} does not exist: create a connection of type "
                '\'kafka\' whose extra is the confluent-kafka config, e.g. {"bootstrap.servers": "host:9092"}'
            ) from None
        except ValueError as exc:
            if "bootstrap.servers" in str(exc):
                raise ConfigError(
                    f"Airflow connection {self.kafka_config_id!r} has no 'bootstrap.servers' in its extra: "
                    'set it to the cluster\'s bootstrap addresses, e.g. {"bootstrap.servers": "host:9092"}'
                ) from None
            raise ConfigError(f"Airflow connection {self.kafka_config_id!r}: {exc}") from None
        return config

    def _explain_unreadable_variable(self) -> None:
        """Name what is wrong with a connection Airflow found in its environment variable but did not read.

        Airflow 3.1 refuses a connection whose extra is not a JSON object while reading it, and its Task SDK
        then reports the connection as not defined; saying "does not exist" of a connection the user set
        would send them to look for the wrong fault.
        """
        import json
        import os

        variable = f"AIRFLOW_CONN_{self.kafka_config_id.upper()}"
        raw = os.environ.get(variable)
        if raw is None:
            return
        try:
            fields = json.loads(raw)
        except json.JSONDecodeError:
            fields = None  # the URI form
        if isinstance(fields, dict) and isinstance(fields.get("extra"), str):
            self._check_extra(fields["extra"])
        raise ConfigError(
            f"Airflow connection {self.kafka_config_id!r} is set in {variable}, but Airflow could not read "
            f"it: check it with 'airflow connections get {self.kafka_config_id}' and write its extra as a "
            'JSON object of confluent-kafka settings, e.g. {"bootstrap.servers": "host:9092"}'
        )

    def _check_extra(self, extra: str | None) -> None:
        """Refuse an extra that is not a JSON object with a textual bootstrap.servers (Airflow reads {})."""
        import json

        example = 'e.g. {"bootstrap.servers": "host:9092"}'
        try:
            config = json.loads(extra) if extra else {}
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"Airflow connection {self.kafka_config_id!r}: its extra is not valid JSON ({exc}); "
                f"write the confluent-kafka config as a JSON object, {example}"
            ) from None
        if not isinstance(config, dict):
            raise ConfigError(
                f"Airflow connection {self.kafka_config_id!r}: its extra must be a JSON object of "
                f"confluent-kafka settings, got {config!r}; {example}"
            )
        servers = config.get("bootstrap.servers")
        if servers is not None and (not isinstance(servers, str) or not servers.strip()):
            raise ConfigError(
                f"Airflow connection {self.kafka_config_id!r}: bootstrap.servers must be text like "
                f"'host:9092,host2:9092', got {servers!r}; {example}"
            )

    @property
    def bootstrap_servers(self) -> str:
        return str(self.client_config["bootstrap.servers"])

    def _logging(self) -> dict[str, Any]:
        """Client settings that send librdkafka's warnings and errors through the connection's ClientLog."""
        return {**QUIET, "logger": ClientLog(self.kafka_config_id)}

    def _fast_fail(self, timeout: float) -> dict[str, Any]:
        """Settings that keep librdkafka from retrying longer than the caller is willing to wait."""
        millis = max(int(timeout * 1000), 100)
        return {"socket.connection.setup.timeout.ms": millis, "socket.timeout.ms": max(millis, 10)}

    def admin(self, timeout_seconds: float | None = None, **extra: Any):
        """Return a new AdminClient for this cluster (not cached: probes must not share a stuck client).

        :param extra: more client settings, e.g. an ``error_cb``.
        """
        timeout = self._effective_timeout(timeout_seconds)
        from confluent_kafka.admin import AdminClient

        return AdminClient({**self._logging(), **self.client_config, **self._fast_fail(timeout), **extra})

    def consumer(
        self,
        group_id: str | None = None,
        timeout_seconds: float | None = None,
        **extra: Any,
    ):
        """Return a new Consumer that never commits on its own.

        :param group_id: the consumer group; a throwaway one when omitted (we only assign partitions).
        """
        timeout = self._effective_timeout(timeout_seconds)
        from confluent_kafka import Consumer

        config = {
            **self._logging(),
            **{k: v for k, v in self.client_config.items() if k != "group.id"},
            **self._fast_fail(timeout),
            "group.id": group_id or "airflow-kafka-failover-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            **extra,
        }
        return Consumer(config)

    def producer(self, timeout_seconds: float | None = None, **extra: Any):
        """Return a new idempotent Producer whose deliveries time out within ``timeout_seconds``."""
        timeout = self._effective_timeout(timeout_seconds)
        from confluent_kafka import Producer

        millis = max(int(timeout * 1000), 1000)
        return Producer(
            {**self._logging(), **self.client_config, "message.timeout.ms": millis, "linger.ms": 0, **extra}
        )

    # ---- cluster and topic metadata ----------------------------------------------------------------

    def probe_client(self, timeout_seconds: float | None = None) -> ProbeClient:
        """A new client for one probe's requests (:meth:`describe_cluster`, :meth:`leaders_not_answering`)."""
        timeout = self._effective_timeout(timeout_seconds)
        errors: list[Any] = []
        return ProbeClient(self.admin(timeout, error_cb=errors.append), errors)

    def describe_cluster(
        self,
        topics: Iterable[str] = (),
        timeout_seconds: float | None = None,
        *,
        client: ProbeClient | None = None,
    ) -> ClusterMetadata:
        """Return brokers and partition metadata of ``topics`` in one metadata request.

        Raises ``confluent_kafka.KafkaException`` when the cluster does not answer within
        ``timeout_seconds``, and :class:`ConfigError` when it did not answer because the TLS handshake was
        refused for a reason of configuration (see :mod:`~airflow_kafka_failover.hooks.client_certificate`):
        that is no evidence of a cluster being down.

        :param client: the probe's client (:meth:`probe_client`); a new one when omitted.
        """
        timeout = self._effective_timeout(timeout_seconds)
        metadata = self._list_topics(timeout, client or self.probe_client(timeout))
        wanted = list(dict.fromkeys(topics))
        partitions: list[PartitionInfo] = []
        missing: list[str] = []
        for topic in wanted:
            topic_md = metadata.topics.get(topic)
            if topic_md is None or topic_md.error is not None:
                missing.append(topic)
                continue
            for partition_id, part in sorted(topic_md.partitions.items()):
                partitions.append(
                    PartitionInfo(topic, partition_id, part.leader, tuple(part.replicas), tuple(part.isrs))
                )
        return ClusterMetadata(
            cluster_id=metadata.cluster_id,
            broker_ids=tuple(sorted(metadata.brokers)),
            partitions=tuple(partitions),
            missing_topics=tuple(missing),
        )

    def _list_topics(self, timeout: float, client: ProbeClient):
        from confluent_kafka import KafkaException

        try:
            metadata = client.admin.list_topics(timeout=timeout)
        except KafkaException:
            client.admin.poll(0.1)  # serves error_cb: the handshake's own errors say why there was no answer
            refusal = tls_refusal(client.errors)
            if refusal is None:
                raise
            raise ConfigError(
                f"Airflow connection {self.kafka_config_id!r}: the TLS handshake with "
                f"{self.bootstrap_servers} failed ({refusal}); this is a TLS misconfiguration, not a "
                "cluster failure: check that "
                "ssl.ca.location holds the CA that signed the brokers' certificates, that the client "
                "certificate is one the brokers trust, and security.protocol"
            ) from None
        ClientLog(self.kafka_config_id).answered()
        return metadata

    def partition_counts(self, topics: Iterable[str], timeout_seconds: float | None = None) -> dict[str, int]:
        """Return {topic: number of partitions}; raise naming the topics that do not exist on the cluster."""
        timeout = self._effective_timeout(timeout_seconds)
        metadata = self.describe_cluster(topics, timeout)
        if metadata.missing_topics:
            raise ConfigError(
                f"topics {', '.join(metadata.missing_topics)} do not exist on the cluster of connection "
                f"{self.kafka_config_id!r} ({self.bootstrap_servers}); create them or fix the configured "
                "topics"
            )
        counts: dict[str, int] = {}
        for info in metadata.partitions:
            counts[info.topic] = counts.get(info.topic, 0) + 1
        return counts

    def min_insync_replicas(
        self, topics: Iterable[str], timeout_seconds: float | None = None
    ) -> dict[str, int]:
        """Return each topic's ``min.insync.replicas`` (one DescribeConfigs request for all topics)."""
        timeout = self._effective_timeout(timeout_seconds)
        from confluent_kafka.admin import ConfigResource, ResourceType

        resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in dict.fromkeys(topics)]
        if not resources:
            return {}
        admin = self.admin(timeout)  # must outlive its futures: they die with the client
        futures = admin.describe_configs(resources, request_timeout=timeout)
        result = {}
        for resource, future in futures.items():
            entries = self._answer(future, timeout, f"DescribeConfigs of {resource.name}")
            result[resource.name] = int(entries["min.insync.replicas"].value)
        return result

    # ---- offsets -----------------------------------------------------------------------------------

    def watermarks(
        self,
        partitions: Iterable[TopicPartition],
        timeout_seconds: float | None = None,
    ) -> dict[TopicPartition, Watermarks]:
        """Return the low and high watermark of every partition: two batched ListOffsets requests."""
        timeout = self._effective_timeout(timeout_seconds)
        from confluent_kafka.admin import OffsetSpec

        partitions = list(dict.fromkeys(partitions))
        lows = self._list_offsets({tp: OffsetSpec.earliest() for tp in partitions}, timeout)
        highs = self._list_offsets({tp: OffsetSpec.latest() for tp in partitions}, timeout)
        return {tp: Watermarks(low=lows[tp][0], high=highs[tp][0]) for tp in partitions}

    def offsets_for_times(
        self,
        timestamps_ms: Mapping[TopicPartition, int],
        timeout_seconds: float | None = None,
    ) -> dict[TopicPartition, int | None]:
        """Return, per partition, the earliest offset whose record timestamp is >= the given time.

        None means no such record yet (the caller starts at the high watermark). One batched request.
        """
        timeout = self._effective_timeout(timeout_seconds)
        from confluent_kafka.admin import OffsetSpec

        found = self._list_offsets(
            {tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps_ms.items()}, timeout
        )
        return {tp: (offset if offset >= 0 else None) for tp, (offset, _ts) in found.items()}

    def offsets_at(
        self, partitions: Iterable[TopicPartition], latest: bool, timeout_seconds: float, admin: Any
    ) -> dict[TopicPartition, int]:
        """End (``latest``) or start offsets of ``partitions`` through a client the caller keeps.

        For a watcher that asks every few seconds (the keeper): one ListOffsets request on a client it
        holds, instead of a new client, connection and authentication per question. The caller drops the
        client after an error.

        :param partitions: the partitions.
        :param latest: the high watermarks (True) or the low ones (False).
        :param timeout_seconds: the request's timeout.
        :param admin: an AdminClient from :meth:`admin`.
        """
        from confluent_kafka.admin import OffsetSpec

        spec = OffsetSpec.latest() if latest else OffsetSpec.earliest()
        found = self._list_offsets({tp: spec for tp in partitions}, timeout_seconds, admin)
        return {tp: offset for tp, (offset, _timestamp) in found.items()}

    def _answer(self, future: Any, timeout: float | None, what: str) -> Any:
        """A request's result; a timeout raises ``TimeoutError`` naming the request and the cluster."""
        try:
            return future.result(timeout=timeout)
        except TimeoutError:  # concurrent.futures' own has no text
            raise TimeoutError(
                f"{what} on {self.bootstrap_servers} (connection {self.kafka_config_id!r}) got no answer "
                f"within {timeout} s"
            ) from None

    def _list_offsets(
        self, specs: Mapping[TopicPartition, Any], timeout: float | None, admin: Any = None
    ) -> dict:
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        if not specs:
            return {}
        request = {KafkaTopicPartition(tp.topic, tp.partition): spec for tp, spec in specs.items()}
        admin = admin or self.admin(timeout)  # must outlive its futures: they die with the client
        futures = admin.list_offsets(request, request_timeout=timeout)
        result = {}
        for ktp, future in futures.items():
            info = self._answer(future, timeout, f"ListOffsets of {ktp.topic}[{ktp.partition}]")
            result[TopicPartition(ktp.topic, ktp.partition)] = (info.offset, info.timestamp)
        return result

    def leaders_not_answering(
        self,
        partitions: Iterable[TopicPartition],
        timeout_seconds: float | None = None,
        client: ProbeClient | None = None,
    ) -> dict[TopicPartition, str]:
        """The partitions whose leader did not give their end offset within the timeout, with why.

        The first thing a consumer asks a partition's leader (ListOffsets), batched by the client into one
        request per leader: a leader that died, hangs, or no longer leads answers no offset. A partition
        absent from the answer was read.

        :param partitions: partitions whose leader the metadata names.
        :param timeout_seconds: seconds for the whole check; the hook's timeout when omitted.
        :param client: the probe's client, which already holds the partitions' metadata (see
            :class:`ProbeClient`); a new one when omitted.
        """
        timeout = self._effective_timeout(timeout_seconds)
        from confluent_kafka import TopicPartition as KafkaTopicPartition
        from confluent_kafka.admin import OffsetSpec

        request = {KafkaTopicPartition(tp.topic, tp.partition): OffsetSpec.latest() for tp in partitions}
        if not request:
            return {}
        admin = client.admin if client is not None else self.admin(timeout)  # outlives its futures
        futures = admin.list_offsets(request, request_timeout=timeout)
        deadline = time.monotonic() + timeout + 0.5
        problems: dict[TopicPartition, str] = {}
        for ktp, future in futures.items():
            tp = TopicPartition(ktp.topic, ktp.partition)
            try:
                info = future.result(timeout=max(deadline - time.monotonic(), 0.01))
            except Exception as exc:  # each partition's own error is the evidence
                problems[tp] = _kafka_error_name(exc, timeout)
                continue
            if info.offset < 0:  # what the client reports for a request that timed out
                problems[tp] = f"no answer within {timeout:g} s"
        return problems

    def committed_offsets(
        self, group_id: str, timeout_seconds: float | None = None
    ) -> dict[TopicPartition, int]:
        """Return a consumer group's committed offsets (partitions without a commit are left out)."""
        timeout = self._effective_timeout(timeout_seconds)
        from confluent_kafka import ConsumerGroupTopicPartitions

        admin = self.admin(timeout)  # must outlive its futures: they die with the client
        futures = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=timeout
        )
        answer = self._answer(futures[group_id], timeout, f"the committed offsets of group {group_id!r}")
        return {
            TopicPartition(tp.topic, tp.partition): tp.offset
            for tp in answer.topic_partitions
            if tp.offset >= 0 and tp.error is None
        }

    def alter_committed_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        timeout_seconds: float | None = None,
    ) -> None:
        """Set a consumer group's committed offsets (the group must have no active members)."""
        timeout = self._effective_timeout(timeout_seconds)
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        bad = {str(tp): offset for tp, offset in offsets.items() if not isinstance(offset, int) or offset < 0}
        if bad:
            raise ConfigError(f"committed offsets must be integers >= 0; got {bad} for group {group_id!r}")
        request = ConsumerGroupTopicPartitions(
            group_id, [KafkaTopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
        )
        admin = self.admin(timeout)  # must outlive its futures: they die with the client
        futures = admin.alter_consumer_group_offsets([request], request_timeout=timeout)
        self._answer(futures[group_id], timeout, f"altering the offsets of group {group_id!r}")

    # ---- reading -----------------------------------------------------------------------------------

    def read_topic_to_end(
        self, topic: str, timeout_seconds: float | None = None
    ) -> Iterator[CompactedRecord]:
        """Yield every record of ``topic`` from its low to its current high watermark, all partitions.

        Meant for MirrorMaker 2's compacted internal topics (checkpoints, offset syncs): reading stops at
        the high watermark taken at the start, so it ends even while MM2 keeps writing.
        """
        timeout = self._effective_timeout(timeout_seconds)
        counts = self.partition_counts([topic], timeout)
        ends = self.watermarks([TopicPartition(topic, p) for p in range(counts[topic])], timeout)
        ranges = {tp.partition: (marks.low, marks.high) for tp, marks in ends.items()}
        consumer = self.consumer(timeout_seconds=timeout)
        try:
            for msg in consume_ranges(consumer, topic, ranges, timeout, self.bootstrap_servers):
                yield CompactedRecord(
                    msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]
                )
        finally:
            consumer.close()

    def count_records(
        self, ranges: Mapping[TopicPartition, tuple[int, int]], timeout_seconds: float | None = None
    ) -> dict[TopicPartition, int]:
        """Count the committed records in ``[start, end)`` of each partition (read-committed, like the job).

        Transaction markers and aborted records take offsets but are not records, so they are not counted.

        :param ranges: partition -> (start offset, end offset).
        :param timeout_seconds: seconds for the whole read; the hook's timeout when omitted.
        :raises TimeoutError: naming the partitions that did not reach their end.
        """
        timeout = self._effective_timeout(timeout_seconds)
        counts = dict.fromkeys(ranges, 0)
        by_topic: dict[str, dict[int, tuple[int, int]]] = {}
        for tp, span in ranges.items():
            by_topic.setdefault(tp.topic, {})[tp.partition] = span
        for topic, spans in sorted(by_topic.items()):
            read_committed: dict[str, Any] = {"isolation.level": "read_committed"}
            consumer = self.consumer(timeout_seconds=timeout, **read_committed)
            try:
                for msg in consume_ranges(consumer, topic, spans, timeout, self.bootstrap_servers):
                    counts[TopicPartition(topic, msg.partition())] += 1
            finally:
                consumer.close()
        return counts

    def newest_record_timestamps(
        self, partitions: Iterable[TopicPartition], timeout_seconds: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """Return the timestamp (ms) of the record at each partition's last offset, in one read per topic.

        None for a partition that is empty, or whose last offset holds no record (a transaction marker).

        :param partitions: the partitions.
        :param timeout_seconds: seconds for the watermarks and for each topic's read; the hook's timeout when
            omitted.
        :raises TimeoutError: naming the partitions whose last offset could not be read in time.
        """
        timeout = self._effective_timeout(timeout_seconds)
        marks = self.watermarks(partitions, timeout)
        newest: dict[TopicPartition, int | None] = dict.fromkeys(marks)
        by_topic: dict[str, dict[int, tuple[int, int]]] = {}
        for tp, mark in marks.items():
            if mark.high > mark.low:
                by_topic.setdefault(tp.topic, {})[tp.partition] = (mark.high - 1, mark.high)
        for topic, last in sorted(by_topic.items()):
            consumer = self.consumer(timeout_seconds=timeout)
            try:
                for msg in consume_ranges(consumer, topic, last, timeout, self.bootstrap_servers):
                    newest[TopicPartition(topic, msg.partition())] = msg.timestamp()[1]
            finally:
                consumer.close()
        return newest

    def newest_record_timestamp(
        self,
        topic: str,
        partition: int = 0,
        timeout_seconds: float | None = None,
    ) -> int | None:
        """Return the timestamp (ms) of the last record in a partition, or None when it is empty."""
        timeout = self._effective_timeout(timeout_seconds)
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        marks = self.watermarks([TopicPartition(topic, partition)], timeout)[TopicPartition(topic, partition)]
        if marks.high <= marks.low:
            return None
        consumer = self.consumer(timeout_seconds=timeout)
        try:
            consumer.assign([KafkaTopicPartition(topic, partition, marks.high - 1)])
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    return msg.timestamp()[1]
            raise TimeoutError(
                f"reading the last record of {topic}[{partition}] took longer than {timeout:.0f} s"
            )
        finally:
            consumer.close()

"""Watching a cluster over time: probes on a fixed cadence, their history, and the decision they support.

A watch is what the sensors (poke and reschedule modes) and ``ClusterHealthTrigger`` (deferrable mode)
share. Its ``observe()`` does blocking I/O and is safe to run in worker threads; several observations may
be in flight at once, because a hung cluster makes every probe run into its timeout and the cadence must
not stretch while that happens (or detecting a hang would take ``failure_threshold`` x timeout).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.health.data_loss import find_data_loss
from airflow_kafka_failover.domain.health.down_decision import DownDecision, decide_down
from airflow_kafka_failover.domain.health.evidence import ProbeResult, describe_exception
from airflow_kafka_failover.domain.health.heartbeats import HeartbeatTrail
from airflow_kafka_failover.domain.health.recovery_decision import RecoveryDecision, decide_recovered
from airflow_kafka_failover.domain.health.verdict import HealthThresholds, recent_history
from airflow_kafka_failover.domain.replication_lag import lag_by_timestamps, replication_lag
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.io.mm2_topics import read_offset_syncs
from airflow_kafka_failover.io.probe import probe_cluster

log = logging.getLogger(__name__)

Decision = DownDecision | RecoveryDecision


@dataclass
class ClusterWatch:
    """State shared by both watches: the probe history of the watched cluster.

    :param cluster: alias of the watched cluster.
    :param kafka_config_id: its Airflow connection id.
    :param topics: topics on the watched cluster whose partitions must have leaders that answer.
    :param thresholds: validated health thresholds.
    :param canary_topic: optional topic for a produce/read-back round trip per probe.
    :param history: earlier probes (e.g. from the sensor's check before deferring).
    :param count_under_min_isr: also report partitions of ``topics`` with fewer in-sync replicas than
        their ``min.insync.replicas`` (read once, when the cluster first answers), which then count toward
        "down" like partitions without a leader.
    """

    cluster: str
    kafka_config_id: str
    topics: Sequence[str]
    thresholds: HealthThresholds
    canary_topic: str | None = None
    history: list[ProbeResult] = field(default_factory=list)
    count_under_min_isr: bool = False

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._min_isr: dict[str, int] | None = None
        self.hook = KafkaClusterHook(
            self.kafka_config_id, timeout_seconds=self.thresholds.probe_timeout_seconds
        )

    def min_insync_replicas(self) -> dict[str, int] | None:
        """Each topic's ``min.insync.replicas`` when that check is on, read once; None until it could be."""
        if not self.count_under_min_isr or not self.topics:
            return None
        if self._min_isr is None:
            try:
                self._min_isr = self.hook.min_insync_replicas(
                    self.topics, self.thresholds.probe_timeout_seconds
                )
            except Exception as exc:  # the cluster does not answer (or lacks a topic): ask again next time
                log.info("could not read min.insync.replicas of %s yet: %s", list(self.topics), exc)
        return self._min_isr

    def probe(self, at: float | None = None) -> ProbeResult:
        result = probe_cluster(
            self.hook,
            self.cluster,
            self.topics,
            self.thresholds.probe_timeout_seconds,
            min_insync_replicas=self.min_insync_replicas(),
            canary_topic=self.canary_topic,
        )
        if at is not None:
            result = result.model_copy(update={"at": at})
        with self._lock:
            self.history.append(result)
            self.history.sort(key=lambda probe: probe.at)
            self.history[:] = recent_history(self.history, self.thresholds, time.time())
        return result

    def observe(self, at: float | None = None) -> None:
        """Take one observation (a probe, plus what the concrete watch needs).

        :param at: the cadence tick this observation belongs to (unix seconds); probes are recorded at
            their tick, so that spans between them are exact multiples of the probe interval.
        """
        self.probe(at)

    def decide(self, now: float | None = None) -> Decision:
        raise NotImplementedError

    def conclusive(self, decision: Decision) -> bool:
        """Say whether the decision ends the wait (success, or an error such as data loss)."""
        raise NotImplementedError

    def state(self) -> dict[str, Any]:
        """Return what a trigger must carry across serialization to continue this watch."""
        with self._lock:
            return {"history": [probe.model_dump(mode="json") for probe in self.history]}


@dataclass
class DownWatch(ClusterWatch):
    """Watch a cluster for "down", corroborated by its MM2 heartbeats replicated to a peer cluster.

    :param peer_kafka_config_id: connection of the other cluster, where the heartbeats arrive; None when
        the pair has no MirrorMaker 2 (then ``require_corroboration`` must be False).
    :param heartbeats_topic: the replicated heartbeats topic on the peer, e.g. ``A.heartbeats``.
    :param require_corroboration: without heartbeat evidence, never decide "down".
    :param heartbeat_looks: earlier ``(observed_at, newest heartbeat timestamp ms)`` pairs.
    """

    peer_kafka_config_id: str | None = None
    heartbeats_topic: str | None = None
    require_corroboration: bool = True
    heartbeat_looks: list[tuple[float, int]] = field(default_factory=list)
    heartbeat_problem: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.peer = (
            KafkaClusterHook(self.peer_kafka_config_id, timeout_seconds=self.thresholds.probe_timeout_seconds)
            if self.peer_kafka_config_id
            else None
        )

    def observe(self, at: float | None = None) -> None:
        # Look at the heartbeats first: a failing probe takes its whole timeout, and seeing the last
        # heartbeat that late would hold "stopped" back by that much.
        at = time.time() if at is None else at
        self._look_at_heartbeats()
        self.probe(at)

    def _look_at_heartbeats(self) -> None:
        if self.peer is None or not self.heartbeats_topic:
            return
        observed_at = time.time()
        try:
            newest = self.peer.newest_record_timestamp(
                self.heartbeats_topic, 0, self.thresholds.probe_timeout_seconds
            )
        except Exception as exc:  # the peer's trouble is reported, not raised
            with self._lock:
                self.heartbeat_problem = f"cannot read {self.heartbeats_topic} on the peer cluster: {exc!r}"
            return
        with self._lock:
            self.heartbeat_problem = None if newest is not None else f"{self.heartbeats_topic} is empty"
            if newest is not None:
                self.heartbeat_looks.append((observed_at, newest))
                horizon = observed_at - self.thresholds.history_horizon
                self.heartbeat_looks[:] = [look for look in self.heartbeat_looks if look[0] >= horizon]

    def decide(self, now: float | None = None) -> DownDecision:
        now = time.time() if now is None else now
        with self._lock:
            trail = None
            if self.peer is not None:
                trail = HeartbeatTrail.from_pairs(
                    self.heartbeat_looks, unavailable_reason=self.heartbeat_problem
                )
            return decide_down(self.history, trail, self.thresholds, now, self.require_corroboration)

    def conclusive(self, decision: Decision) -> bool:
        return bool(getattr(decision, "is_down", False))

    def state(self) -> dict[str, Any]:
        state = super().state()
        with self._lock:
            state["heartbeat_looks"] = [list(look) for look in self.heartbeat_looks]
        return state


@dataclass
class RecoveryWatch(ClusterWatch):
    """Watch a recovering cluster: stable, caught up with the active cluster, and without data loss.

    :param active_kafka_config_id: connection of the cluster that is active now.
    :param replicated_topics: active-cluster topic -> its name on the watched cluster.
    :param offset_syncs_topic: MM2 offset-syncs topic of the flow active -> watched.
    :param offset_syncs_on_watched: whether that topic is stored on the watched cluster (MM2
        ``offset-syncs.topic.location=target``) or on the active one.
    :param recorded_high_watermarks: ``"topic-partition"`` -> high watermark the watched cluster had
        while it was last active; lower ones now mean it lost data.
    """

    active_kafka_config_id: str = ""
    replicated_topics: Mapping[str, str] = field(default_factory=dict)
    offset_syncs_topic: str = ""
    offset_syncs_on_watched: bool = True
    recorded_high_watermarks: Mapping[str, int] = field(default_factory=dict)
    lags: dict[str, int | None] = field(default_factory=dict)
    data_loss: dict[str, int] = field(default_factory=dict)
    measure_problem: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.active = KafkaClusterHook(
            self.active_kafka_config_id, timeout_seconds=self.thresholds.probe_timeout_seconds
        )

    def observe(self, at: float | None = None) -> None:
        probe = self.probe(at)
        if probe.failed:
            return
        try:
            lags, loss = self._measure()
        except Exception as exc:  # reported as "not caught up yet", with the reason
            with self._lock:
                self.measure_problem = f"could not measure replication lag: {describe_exception(exc)}"
                self.lags = {}
            return
        with self._lock:
            self.lags, self.data_loss, self.measure_problem = lags, loss, None

    def _measure(self) -> tuple[dict[str, int | None], dict[str, int]]:

        timeout = self.thresholds.probe_timeout_seconds
        counts = self.active.partition_counts(self.replicated_topics, timeout)
        sources = [TopicPartition(topic, p) for topic, n in counts.items() for p in range(n)]
        source_marks = self.active.watermarks(sources, timeout)
        remote_names = {tp: TopicPartition(self.replicated_topics[tp.topic], tp.partition) for tp in sources}
        present = self.hook.describe_cluster(set(self.replicated_topics.values()), timeout)
        existing = {(p.topic, p.partition) for p in present.partitions}
        remote_marks = self.hook.watermarks(
            [r for r in remote_names.values() if (r.topic, r.partition) in existing], timeout
        )
        syncs_hook = self.hook if self.offset_syncs_on_watched else self.active
        newest_sync: dict[tuple[str, int], tuple[int, int]] = {}
        if self.offset_syncs_topic in {
            p.topic for p in syncs_hook.describe_cluster([self.offset_syncs_topic]).partitions
        }:
            reading = read_offset_syncs(
                syncs_hook,
                self.offset_syncs_topic,
                syncs_hook.kafka_config_id,
                topics=self.replicated_topics,
                timeout=max(timeout, 10.0),
            )
            if reading.undecodable:
                # One stray record must not hide every other sync: measure with the ones that decode.
                log.warning(
                    "skipping %s undecodable record(s) of %s: %s",
                    len(reading.undecodable),
                    self.offset_syncs_topic,
                    reading.undecodable[0],
                )
            for sync in reading.decoded:
                newest_sync[(sync.topic, sync.partition)] = (sync.upstream_offset, sync.downstream_offset)
        lags: dict[str, int | None] = {}
        for tp in sources:
            remote = remote_marks.get(remote_names[tp])
            lags[str(tp)] = replication_lag(
                source_marks[tp].high,
                source_marks[tp].low,
                newest_sync.get((tp.topic, tp.partition)),
                remote.high if remote else 0,
            )
            if lags[str(tp)] is None and remote is not None and (tp.topic, tp.partition) not in newest_sync:
                lags[str(tp)] = self._lag_by_timestamps(tp, remote_names[tp], timeout)
        loss = self._data_loss(timeout)
        return lags, loss

    def _lag_by_timestamps(self, source, replica, timeout: float) -> int | None:
        """No offset sync to measure with: compare the newest record timestamps of source and replica."""
        try:
            return lag_by_timestamps(
                self.active.newest_record_timestamp(source.topic, source.partition, timeout),
                self.hook.newest_record_timestamp(replica.topic, replica.partition, timeout),
            )
        except Exception:  # a transaction marker at the end, or a slow read: stay unknown
            return None

    def _data_loss(self, timeout: float) -> dict[str, int]:

        if not self.recorded_high_watermarks:
            return {}
        topics = {key.rsplit("-", 1)[0] for key in self.recorded_high_watermarks}
        present = self.hook.describe_cluster(topics, timeout)
        partitions = [TopicPartition(p.topic, p.partition) for p in present.partitions]
        current = {str(tp): marks.high for tp, marks in self.hook.watermarks(partitions, timeout).items()}
        return find_data_loss(self.recorded_high_watermarks, current)

    def decide(self, now: float | None = None) -> RecoveryDecision:
        now = time.time() if now is None else now
        with self._lock:
            return decide_recovered(
                self.history,
                self.thresholds,
                now,
                dict(self.lags),
                self.data_loss,
                self.measure_problem,
                mirrored_topics=self.mirror_copies(),
            )

    def mirror_copies(self) -> set[str]:
        """The watched cluster's topics that are only MirrorMaker 2's copies of the active cluster's.

        Under an identity policy the copy has the topic's own name, which the watched cluster also wrote
        to while it was active: such a topic is not only a copy, so it is not counted as one.
        """
        return {copy for topic, copy in self.replicated_topics.items() if copy != topic}

    def conclusive(self, decision: Decision) -> bool:
        return bool(getattr(decision, "is_recovered", False) or getattr(decision, "data_loss", None))


OBSERVERS = 8
"""Observations of one watch that may run at once: a hung cluster holds each for its probe timeout while a
new one starts every probe interval."""


async def observe_until(
    watch: ClusterWatch,
    deadline: float | None,
    on_decision=None,
    until: Callable[[Decision], bool] | None = None,
) -> Decision:
    """Observe on a fixed cadence until the decision is conclusive or ``deadline`` (unix seconds) passes.

    The one implementation of the cadence, shared by the triggers (in the triggerer's event loop) and by
    :func:`watch_until` (poke mode, tests, benchmarks). Observations run in worker threads and overlap
    when the cluster is slow to answer, so the cadence holds during a hang; each is stamped with its tick.
    The threads are the watch's own (at most :data:`OBSERVERS`): once the decision is made, the observations
    still in flight (a probe of a dead cluster waiting out its timeout) end in the background instead of
    holding up the decision (``asyncio.run``, as in poke mode, would first wait for the event loop's shared
    threads to finish), and a hung cluster's probes never take the threads of the other triggers in the
    same triggerer.

    :param watch: the watch to drive.
    :param deadline: when to give up and return the last (inconclusive) decision; None waits forever.
    :param on_decision: called with each new decision, e.g. to log progress.
    :param until: ends the watch instead of ``watch.conclusive``, e.g. to wait until a verdict no longer
        holds (the event trigger of ``ClusterVerdictTrigger``).
    """
    ends = watch.conclusive if until is None else until

    observers = ThreadPoolExecutor(OBSERVERS, thread_name_prefix=f"akf-watch-{watch.cluster}")
    observe = sync_to_async(watch.observe, thread_sensitive=False, executor=observers)
    interval = watch.thresholds.probe_interval_seconds
    in_flight: set[asyncio.Future] = set()
    next_start = time.monotonic()
    tick = time.time()
    decision = watch.decide()
    try:
        while deadline is None or time.time() < deadline:
            if time.monotonic() >= next_start:
                in_flight.add(asyncio.ensure_future(observe(tick)))
                next_start += interval
                tick += interval
            wait = max(next_start - time.monotonic(), 0.01)
            if not in_flight:
                await asyncio.sleep(wait)
                continue
            done, in_flight = await asyncio.wait(in_flight, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                future.result()
            if not done:
                continue
            decision = watch.decide()
            if on_decision is not None:
                on_decision(decision)
            if ends(decision):
                return decision
        return decision
    finally:
        for future in in_flight:
            future.cancel()
        observers.shutdown(wait=False, cancel_futures=True)


def watch_until(watch: ClusterWatch, deadline: float, on_probe=None) -> Decision:
    """Blocking form of :func:`observe_until`, for poke mode, tests and benchmarks."""

    return asyncio.run(observe_until(watch, deadline, on_probe))

"""One health watch per cluster: the verdict triggers of a fleet's switch DAGs, shared by pairs alike.

Under ``switch.wake: event`` each switch DAG is scheduled on a verdict asset whose ``AssetWatcher`` runs
``ClusterVerdictTrigger`` in the triggerer. Pairs whose primary is the same cluster, watched the same way
(connection, alias, thresholds, canary, in-sync-replica rule, MirrorMaker 2 heartbeats and, for the
recovered watch, the same active cluster and offset-syncs topic), share one asset and one trigger: the
triggerer runs one watch for them, and its verdict wakes all their DAGs at once. Pairs that differ in any
of those (other thresholds, say) get a watch of their own: grouped by threshold set, never refused.

The shared watch judges the union of its pairs' topics (the down watch: their partitions on the primary;
the recovered watch: their replication lag), so it wakes a pair whose own topics are fine when another
pair's are not. What is the pair's own is checked in the run it wakes: its verdict sensor confirms the
verdict with one probe of the pair's own topics (and watches anew when that probe disagrees), the recovered
sensor checks the pair's recorded watermarks for data loss, and the gate, the fence and the plan are the
pair's.

The asset's name holds a digest of what the pairs share, not of their topics, so adding a pair to a
cluster changes the trigger's arguments (Airflow replaces the trigger) but not the asset the DAGs follow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

PER_PAIR_KEYS = ("topics", "replicated_topics")
"""Watch arguments that are the pair's own: merged over the pairs of a shared watch."""
WATCH_OF_SWITCH = {"failover": "down", "failback": "recovered"}
"""The verdict that wakes each switch DAG."""


@dataclass
class SharedWatch:
    """One verdict watch of the triggerer and the pairs whose ``kind`` DAGs it wakes.

    :param kind: ``failover`` or ``failback``.
    :param shared_kwargs: the watch arguments every pair of it has in common (no topics).
    :param thresholds: the health thresholds of every pair of it.
    :param digest: names the asset: the hash of ``kind``, ``shared_kwargs`` and ``thresholds``.
    """

    kind: str
    shared_kwargs: dict[str, Any]
    thresholds: dict[str, Any]
    digest: str
    pairs: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    replicated_topics: dict[str, str] = field(default_factory=dict)

    @property
    def connection(self) -> str:
        return str(self.shared_kwargs.get("kafka_config_id"))

    @property
    def asset_name(self) -> str:
        return f"kafka_failover.cluster.{self.connection}.{WATCH_OF_SWITCH[self.kind]}_verdict.{self.digest}"

    @property
    def asset_uri(self) -> str:
        return (
            f"x-kafka-failover://cluster/{self.connection}/{WATCH_OF_SWITCH[self.kind]}-verdict/{self.digest}"
        )

    @property
    def watcher_name(self) -> str:
        return self.asset_name.replace(".", "_")

    def watch_kwargs(self) -> dict[str, Any]:
        """The trigger's watch arguments: the shared ones and the union of the pairs' topics, in a stable
        order (the triggerer knows a trigger by the hash of its arguments)."""
        merged = dict(self.shared_kwargs)
        if "topics" in merged:
            merged["topics"] = sorted(self.topics)
        if "replicated_topics" in merged:
            merged["replicated_topics"] = dict(sorted(self.replicated_topics.items()))
        return merged

    def accepts(self, kwargs: Mapping[str, Any]) -> bool:
        """Say whether a pair with these watch arguments can join without renaming a topic already here."""
        theirs = kwargs.get("replicated_topics") or {}
        return all(self.replicated_topics.get(topic, copy) == copy for topic, copy in theirs.items())

    def add(self, pair: str, kwargs: Mapping[str, Any]) -> None:
        self.pairs.append(pair)
        self.topics = sorted(set(self.topics) | set(kwargs.get("topics") or ()))
        self.replicated_topics.update(kwargs.get("replicated_topics") or {})


def _shared_part(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: ([] if key == "topics" else {}) if key in PER_PAIR_KEYS else value
        for key, value in kwargs.items()
    }


def _digest(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def share_watches(
    watches: Iterable[tuple[str, str, Mapping[str, Any], Mapping[str, Any]]],
) -> dict[tuple[str, str], SharedWatch]:
    """Group the verdict watches of switch DAGs into shared ones.

    :param watches: ``(pair, kind, watch_kwargs, thresholds)`` of each switch DAG woken by events.
    :return: ``(pair, kind)`` -> the shared watch that wakes that DAG.
    """
    groups: dict[str, list[SharedWatch]] = {}
    of_dag: dict[tuple[str, str], SharedWatch] = {}
    for pair, kind, kwargs, thresholds in watches:
        shared = _shared_part(kwargs)
        key = _digest(kind, shared, dict(thresholds))
        candidates = groups.setdefault(key, [])
        watch = next((group for group in candidates if group.accepts(kwargs)), None)
        if watch is None:  # the same topic copied under another name: a watch of its own
            digest = key if not candidates else _digest(key, pair)
            watch = SharedWatch(kind, shared, dict(thresholds), digest)
            candidates.append(watch)
        watch.add(pair, kwargs)
        of_dag[(pair, kind)] = watch
    return of_dag

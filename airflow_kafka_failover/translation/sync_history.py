"""MirrorMaker 2 offset-sync histories and checkpoints, rebuilt from their topics: pure, no I/O.

- :class:`OffsetSyncHistory` holds the offset syncs of one upstream partition, sorted and searchable
  with bisect in both directions; :meth:`OffsetSyncHistory.from_syncs` drops syncs made stale by an
  MM2 restart or a log truncation.
- :func:`sync_histories_by_partition` groups decoded offset-sync records into one history per
  upstream partition; :func:`latest_checkpoints` keeps the last checkpoint per target partition.

The translation rules that use them are in :mod:`airflow_kafka_failover.translation.rules` (one per method).
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable, Sequence

from airflow_kafka_failover.exceptions import TranslationError
from airflow_kafka_failover.translation.mm2_records import Checkpoint, OffsetSync
from airflow_kafka_failover.types import TopicPartition


class OffsetSyncHistory:
    """The offset syncs of one upstream partition, sorted, searchable with bisect.

    Upstream and downstream offsets are both strictly increasing, which is what makes
    both forward and reverse lookups a binary search.
    """

    __slots__ = ("upstream", "downstream", "resets")

    def __init__(self, upstream: Sequence[int], downstream: Sequence[int], resets: int = 0) -> None:
        """Wrap already-sorted parallel lists; use :meth:`from_syncs` for syncs in topic order.

        :param upstream: strictly increasing upstream offsets.
        :param downstream: strictly increasing downstream offsets, same length.
        :param resets: how many times older syncs were discarded while building this history.
        """
        if len(upstream) != len(downstream):
            raise TranslationError(
                f"offset sync history needs as many upstream ({len(upstream)}) as downstream "
                f"({len(downstream)}) offsets"
            )
        for i in range(1, len(upstream)):
            if upstream[i] <= upstream[i - 1] or downstream[i] <= downstream[i - 1]:
                raise TranslationError(
                    f"offset sync history must be strictly increasing on both sides, but sync {i} "
                    f"({upstream[i]}, {downstream[i]}) follows ({upstream[i - 1]}, {downstream[i - 1]}); "
                    "build it with OffsetSyncHistory.from_syncs"
                )
        self.upstream = list(upstream)
        self.downstream = list(downstream)
        self.resets = resets

    @classmethod
    def from_syncs(cls, syncs: Iterable[tuple[int, int]]) -> OffsetSyncHistory:
        """Build from ``(upstream, downstream)`` pairs in the order they were written to the topic.

        When either side goes backwards, MM2 restarted from an older position or a log was
        truncated; the older syncs no longer describe the current logs (one of them could place a
        record later than it now sits), so they are dropped, as MM2's ``OffsetSyncStore`` does on an
        upstream rewind. A repeated upstream offset with a larger downstream one (a re-replication)
        replaces the older sync.

        :param syncs: ``(upstream_offset, downstream_offset)`` pairs in topic order.
        """
        pairs = syncs if isinstance(syncs, list) else list(syncs)
        upstream = [up for up, _ in pairs]
        downstream = [down for _, down in pairs]
        # Fast path for the usual case (no restarts, no duplicates): C-level comparisons over whole lists.
        if (
            not pairs
            or min(upstream) >= 0
            and min(downstream) >= 0
            and all(map(operator.lt, upstream, upstream[1:]))
            and all(map(operator.lt, downstream, downstream[1:]))
        ):
            return cls._from_checked_lists(upstream, downstream, 0)
        return cls._from_checked_lists(*_replay_syncs(pairs))

    @classmethod
    def _from_checked_lists(
        cls, upstream: list[int], downstream: list[int], resets: int
    ) -> OffsetSyncHistory:
        # from_syncs already guarantees the invariants; skipping the O(n) re-check keeps bulk builds cheap.
        history = cls.__new__(cls)
        history.upstream, history.downstream, history.resets = upstream, downstream, resets
        return history

    def __len__(self) -> int:
        return len(self.upstream)

    def __repr__(self) -> str:
        return f"OffsetSyncHistory({list(zip(self.upstream, self.downstream, strict=True))!r})"

    def floor_by_upstream(self, offset: int) -> int | None:
        """Index of the sync with the greatest upstream offset <= ``offset``, or None.

        :param offset: an upstream offset.
        """
        index = bisect.bisect_right(self.upstream, offset) - 1
        return index if index >= 0 else None

    def ceiling_by_upstream(self, offset: int) -> int | None:
        """Index of the sync with the least upstream offset >= ``offset``, or None.

        :param offset: an upstream offset.
        """
        index = bisect.bisect_left(self.upstream, offset)
        return index if index < len(self.upstream) else None

    def floor_by_downstream(self, offset: int) -> int | None:
        """Index of the sync with the greatest downstream offset <= ``offset``, or None.

        :param offset: a downstream offset.
        """
        index = bisect.bisect_right(self.downstream, offset) - 1
        return index if index >= 0 else None

    def ceiling_by_downstream(self, offset: int) -> int | None:
        """Index of the sync with the least downstream offset >= ``offset``, or None.

        :param offset: a downstream offset.
        """
        index = bisect.bisect_left(self.downstream, offset)
        return index if index < len(self.downstream) else None


def _replay_syncs(pairs: list[tuple[int, int]]) -> tuple[list[int], list[int], int]:
    """Apply syncs in topic order, dropping older ones whenever a side goes backwards (see ``from_syncs``)."""
    upstream: list[int] = []
    downstream: list[int] = []
    resets = 0
    for up, down in pairs:
        if up < 0 or down < 0:
            raise TranslationError(f"offset sync ({up}, {down}) has a negative offset")
        if not upstream or (up > upstream[-1] and down > downstream[-1]):
            upstream.append(up)
            downstream.append(down)
        elif up == upstream[-1] and down >= downstream[-1]:
            downstream[-1] = down
        else:
            upstream, downstream = [up], [down]
            resets += 1
    return upstream, downstream, resets


def sync_histories_by_partition(syncs: Iterable[OffsetSync]) -> dict[TopicPartition, OffsetSyncHistory]:
    """Group decoded offset-sync records (in topic order) into one history per upstream partition.

    :param syncs: records of one offset-syncs topic, in the order they were read.
    """
    pairs: dict[TopicPartition, list[tuple[int, int]]] = {}
    for sync in syncs:
        pairs.setdefault(TopicPartition(sync.topic, sync.partition), []).append(
            (sync.upstream_offset, sync.downstream_offset)
        )
    return {tp: OffsetSyncHistory.from_syncs(history) for tp, history in pairs.items()}


def latest_checkpoints(checkpoints: Iterable[Checkpoint], group: str) -> dict[TopicPartition, Checkpoint]:
    """Keep the last checkpoint per target partition of one group, as ``RemoteClusterUtils`` does.

    :param checkpoints: records of one checkpoints topic, in the order they were read.
    :param group: the bookkeeping consumer group of the job.
    """
    latest: dict[TopicPartition, Checkpoint] = {}
    for checkpoint in checkpoints:
        if checkpoint.group == group:
            latest[TopicPartition(checkpoint.topic, checkpoint.partition)] = checkpoint
    return latest

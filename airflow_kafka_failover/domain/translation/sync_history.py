"""MirrorMaker 2 offset-sync histories and checkpoints, rebuilt from their topics: pure, no I/O.

- :class:`OffsetSyncHistory` holds the offset syncs of one upstream partition, sorted and searchable
  with bisect in both directions; :meth:`OffsetSyncHistory.from_syncs` splits them into *copies* where
  MM2 restarted from an older upstream offset (it copied those records again), and drops syncs made
  stale by a truncation of the downstream log.
- :func:`sync_histories_by_partition` groups decoded offset-sync records into one history per
  upstream partition; :func:`latest_checkpoints` keeps the last checkpoint per target partition.

The translation rules that use them are in ``domain/translation/rules.py`` (one per method).
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Iterable, Sequence

from airflow_kafka_failover.core.exceptions import TranslationError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint, OffsetSync


class OffsetSyncHistory:
    """The offset syncs of one upstream partition, sorted, searchable with bisect.

    Upstream and downstream offsets are both strictly increasing, which is what makes
    both forward and reverse lookups a binary search. They describe the newest *copy*: the records MM2
    copied since it last restarted from an older upstream offset. The copies made before that restart
    stay in :attr:`earlier` (oldest first); their downstream offsets all lie below this copy's, because the
    downstream log only grows.
    """

    __slots__ = ("upstream", "downstream", "resets", "earlier", "_excess")

    def __init__(
        self,
        upstream: Sequence[int],
        downstream: Sequence[int],
        resets: int = 0,
        earlier: Sequence[OffsetSyncHistory] = (),
    ) -> None:
        """Wrap already-sorted parallel lists; use :meth:`from_syncs` for syncs in topic order.

        :param upstream: strictly increasing upstream offsets.
        :param downstream: strictly increasing downstream offsets, same length.
        :param resets: how many times the syncs went backwards while building this history.
        :param earlier: earlier copies of the same upstream records (oldest first), each below this one
            downstream.
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
        self.earlier = tuple(earlier)
        self._excess: list[tuple[int, int]] | None = None
        for older, newer in itertools.pairwise([*self.earlier, self]):
            if not older.downstream or (newer.downstream and older.downstream[-1] >= newer.downstream[0]):
                raise TranslationError(
                    "earlier copies in an offset sync history must be non-empty and lie below the newer "
                    "ones downstream; build it with OffsetSyncHistory.from_syncs"
                )

    @classmethod
    def from_syncs(cls, syncs: Iterable[tuple[int, int]]) -> OffsetSyncHistory:
        """Build from ``(upstream, downstream)`` pairs in the order they were written to the topic.

        When the upstream side goes backwards while the downstream side still grows, MM2 restarted
        from an older upstream offset and is copying those records again after the first copies: the
        syncs so far describe an earlier copy, kept in :attr:`earlier` (a search in the newest copy alone
        could place a record later than its newest copy sits). When the downstream side goes backwards,
        the downstream log was truncated or recreated: the older syncs describe records that are gone, so
        they are dropped with every earlier copy. A repeated upstream offset with a larger downstream one
        is a record copied again: it starts a new copy too.

        :param syncs: ``(upstream_offset, downstream_offset)`` pairs in topic order.
        """
        pairs = syncs if isinstance(syncs, list) else list(syncs)
        upstream, downstream = (list(side) for side in zip(*pairs, strict=True)) if pairs else ([], [])
        # Fast path for the usual case (no restarts, no duplicates): C-level comparisons over whole lists.
        if (
            not pairs
            or min(upstream) >= 0
            and min(downstream) >= 0
            and all(map(operator.lt, upstream, upstream[1:]))
            and all(map(operator.lt, downstream, downstream[1:]))
        ):
            return cls._from_checked_lists(upstream, downstream, 0)
        copies, resets = _replay_syncs(pairs)
        earlier = tuple(cls._from_checked_lists(up, down, 0) for up, down in copies[:-1])
        return cls._from_checked_lists(*copies[-1], resets, earlier)

    @classmethod
    def _from_checked_lists(
        cls,
        upstream: list[int],
        downstream: list[int],
        resets: int,
        earlier: tuple[OffsetSyncHistory, ...] = (),
    ) -> OffsetSyncHistory:
        # from_syncs already guarantees the invariants; skipping the O(n) re-check keeps bulk builds cheap.
        history = cls.__new__(cls)
        history.upstream, history.downstream, history.resets = upstream, downstream, resets
        history.earlier = earlier
        history._excess = None
        return history

    @property
    def copies(self) -> list[OffsetSyncHistory]:
        """Every copy, oldest first: :attr:`earlier` then this one (without its own ``earlier``)."""
        newest = OffsetSyncHistory._from_checked_lists(self.upstream, self.downstream, 0)
        return [*self.earlier, newest]

    def __len__(self) -> int:
        return len(self.upstream)

    def __repr__(self) -> str:
        newest = list(zip(self.upstream, self.downstream, strict=True))
        if not self.earlier:
            return f"OffsetSyncHistory({newest!r})"
        return f"OffsetSyncHistory({newest!r}, earlier={list(self.earlier)!r})"

    def excess(self) -> list[tuple[int, int]]:
        """``(index, n)`` for each sync whose step from the previous one is longer downstream than upstream.

        Between two syncs ``(u1, d1)`` and ``(u2, d2)`` of one copy, each upstream offset is copied at most
        once, so ``d2 - d1 <= u2 - u1``, unless the downstream log holds ``n = (d2 - d1) - (u2 - u1)`` more
        records: records copied twice because MM2 restarted from an offset after its last sync (the restart
        is then invisible in the syncs: sync ``(u2, d2)`` opens the new run, and the first copies of the
        records from ``u2`` on lie just before ``d2``), or transaction markers MM2 wrote downstream.
        Computed once, on first use.
        """
        if self._excess is None:
            up, down = self.upstream, self.downstream
            # The step differences at C speed; the usual history (no excess anywhere) ends after one max().
            steps = list(map(operator.sub, map(operator.sub, down[1:], down), map(operator.sub, up[1:], up)))
            if not steps or max(steps) <= 0:
                self._excess = []
            else:
                self._excess = [(i, n) for i, n in enumerate(steps, start=1) if n > 0]
        return self._excess

    def records_below_first_sync(self) -> int:
        """``d0`` when the downstream log holds more offsets below the first sync ``(u0, d0)`` than the
        upstream log has (``d0 > u0``), else 0.

        Copied once, the records below ``d0`` are copies of at most ``u0`` upstream offsets. More show that
        MM2 copied records more than once before the first sync it kept (a run whose every sync was lost:
        MM2 replaces a pending sync, and a run that stops loses the one it had not sent), or wrote
        transaction markers there; any of the ``d0`` records may then be a copy of any upstream offset.
        """
        if not self.upstream or self.downstream[0] <= self.upstream[0]:
            return 0
        return self.downstream[0]

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


def _replay_syncs(pairs: list[tuple[int, int]]) -> tuple[list[tuple[list[int], list[int]]], int]:
    """Apply syncs in topic order, splitting copies and dropping truncated ones (see ``from_syncs``).

    :return: the copies oldest first, each as ``(upstream, downstream)`` lists, and the number of resets.
    """
    copies: list[tuple[list[int], list[int]]] = []
    upstream: list[int] = []
    downstream: list[int] = []
    resets = 0
    for up, down in pairs:
        if up < 0 or down < 0:
            raise TranslationError(f"offset sync ({up}, {down}) has a negative offset")
        if not upstream or (up > upstream[-1] and down > downstream[-1]):
            upstream.append(up)
            downstream.append(down)
        elif up == upstream[-1] and down == downstream[-1]:
            continue  # the same sync again
        else:
            resets += 1
            if down > downstream[-1]:
                copies.append((upstream, downstream))  # copied again from an older upstream offset
            else:
                copies = []  # the downstream log was truncated: its older records are gone
            upstream, downstream = [up], [down]
    copies.append((upstream, downstream))
    return copies, resets


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

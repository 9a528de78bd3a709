"""The fence: create-only epoch markers in the pair's fencing folder, and no lock anywhere.

A switch advances the epoch *before* it stops the old job and starts the new one. Every job run knows the
epoch it was started for and looks, before each micro-batch and between batches, for the marker of the next
epoch; once it exists the run stops on its own, without writing that batch. That closes the window in which
an old job that could not be reached (its cluster manager gone) keeps consuming next to the new one.

Layout (``<fencing folder>`` is the pair's ``job.fencing_marker``; a local path or a store URI)::

    <fencing folder>/epoch-0000000007.json         {"pair", "epoch", "cluster", "written_at"}  create-only
    <fencing folder>/epoch-0000000007.record.json  the active record committed at that epoch (record_store)
    <fencing folder>/switch-lease.json             who works on the switch to the newest epoch (switch_lease)

**Why it is safe without a lock.** Moving the fence from ``n`` to ``n + 1`` is the creation of
``epoch-(n+1)``, which a store grants to exactly one writer (``link`` locally, a rename without overwrite on
HDFS, ``If-None-Match: *`` on S3). Of two switches that race from epoch ``n``, the second finds the marker
made: it joins the switch when it goes to the same cluster (the same run of the job, see
``record_store.same_run``) and is fenced when not. Markers are only ever created, never rewritten, so the
epochs a reader can see are those below a contiguous top: the next epoch's marker is the whole answer to "am I
fenced?" (one read, no listing, so a store whose listings lag its reads cannot hide a newer epoch). The
current epoch is read by listing, only to show it and to find where a reader stands; every decision that
moves something re-checks a single marker by name.

Each marker is a small JSON object, readable by everyone (the job runs as another user on a cluster); it holds
no secret.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import create_json, open_store

EPOCH_MARKER = re.compile(r"epoch-([0-9]{10})\.json")
"""The name of an epoch's marker; ten digits keep the names in epoch order in every listing."""


class FencedError(FailoverError):
    """The epoch a run or a switch was made for is no longer the pair's current epoch."""


@dataclass(frozen=True)
class FenceState:
    """What an epoch's marker says.

    :param pair: the pair it belongs to.
    :param epoch: the epoch.
    :param cluster: the cluster that epoch's job reads.
    :param written_at: when it was created (ISO 8601).
    """

    pair: str
    epoch: int
    cluster: str
    written_at: str = ""


def epoch_marker_name(epoch: int) -> str:
    """The file name of ``epoch``'s marker."""
    return f"epoch-{epoch:010d}.json"


@dataclass(frozen=True)
class FencingMarker:
    """The fencing folder of one pair.

    :param path: the folder (a local path or a store URI; the pair's ``job.fencing_marker``).
    :param pair: the pair's name (checked against every marker read).
    """

    path: str
    pair: str

    def marker(self, epoch: int) -> str:
        """The location of ``epoch``'s marker."""
        return locations.join(str(self.path), epoch_marker_name(epoch))

    def epochs(self) -> list[int]:
        """The epochs with a marker, in order (a listing of the folder)."""
        self._refuse_a_file()
        found = (EPOCH_MARKER.fullmatch(name) for name in open_store(str(self.path)).names(str(self.path)))
        return sorted(int(match.group(1)) for match in found if match)

    def read(self) -> FenceState | None:
        """The newest epoch's marker; None when the folder holds none yet. :raises ConfigError: corrupt."""
        epochs = self.epochs()
        if not epochs:
            return None
        newest = self.read_epoch(epochs[-1])
        if newest is None:  # deleted between the listing and the read: only by hand
            raise ConfigError(f"fencing marker {self.marker(epochs[-1])} vanished while it was read; retry")
        return newest

    def read_epoch(self, epoch: int) -> FenceState | None:
        """The marker of ``epoch``; None when it does not exist."""
        where = self.marker(epoch)
        try:
            text = open_store(where).read(where).decode("utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            raise ConfigError(f"fencing marker {where} is not UTF-8 text; remove it") from None
        state = parse_fence(text, where, self.pair)
        if state.epoch != epoch:
            raise ConfigError(
                f"fencing marker {where} says epoch {state.epoch}; its name says {epoch}: it was edited or "
                "copied by hand; restore it"
            )
        return state

    def newer_than(self, epoch: int) -> FenceState | None:
        """The marker of ``epoch + 1`` when a switch moved the fence past ``epoch`` (one read, no listing)."""
        return self.read_epoch(epoch + 1)

    def _refuse_a_file(self) -> None:
        """A local fencing path that is a file cannot hold the epoch markers: say so, naming it."""
        path = str(self.path)
        if not locations.is_remote(path) and Path(path).is_file():
            raise ConfigError(
                f"fencing folder {path} of pair {self.pair!r} is a file, not a folder: job.fencing_marker "
                "names the folder of the pair's epoch markers; point it at a folder (an empty one for a new "
                "pair)"
            )

    def advance(self, expected_epoch: int | None, new_epoch: int, cluster: str) -> FenceState:
        """Move the fence to ``new_epoch`` for ``cluster`` by creating its marker; idempotent for the same
        (epoch, cluster).

        :param expected_epoch: the epoch the caller read (None: none yet); ``new_epoch`` must be greater.
        :param new_epoch: the epoch to create.
        :param cluster: the cluster the new epoch's job reads.
        :raises FencedError: another switch created ``new_epoch`` for another cluster, or the fence is already
            past ``new_epoch``.
        """
        if expected_epoch is not None and new_epoch <= expected_epoch:
            raise ConfigError(
                f"a fence only moves forward: {expected_epoch} -> {new_epoch} is not an advance"
            )
        self._refuse_a_file()
        state = FenceState(self.pair, new_epoch, cluster, datetime.now(UTC).isoformat(timespec="seconds"))
        if not create_json(self.marker(new_epoch), state.__dict__):
            existing = self.read_epoch(new_epoch)
            if existing is None:
                raise ConfigError(f"fencing marker {self.marker(new_epoch)} exists but cannot be read; retry")
            if existing.cluster != cluster:
                raise FencedError(
                    f"fencing folder {self.path} of pair {self.pair!r} is at epoch {new_epoch} for cluster "
                    f"{existing.cluster!r}, not {cluster!r}: another switch moved it; re-read the active "
                    "record"
                )
            state = existing
        newer = self.newer_than(new_epoch)
        if newer is not None:
            raise FencedError(
                f"fencing folder {self.path} of pair {self.pair!r} is already at epoch {newer.epoch} "
                f"(cluster {newer.cluster!r}), past {new_epoch}: a newer switch moved it; re-read the active "
                "record"
            )
        return state


def parse_fence(text: str, where: str, pair: str | None = None) -> FenceState:
    """Parse a marker's text, naming ``where`` in errors."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"fencing marker {where} is not valid JSON ({exc.msg}); it was damaged by hand: restore it"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"fencing marker {where} must hold a JSON object, got {data!r}")
    epoch = data.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ConfigError(f"fencing marker {where} has an invalid epoch {epoch!r}")
    if pair is not None and data.get("pair") != pair:
        raise ConfigError(
            f"fencing marker {where} belongs to pair {data.get('pair')!r}, not {pair!r}; "
            "each pair needs its own fencing folder (job.fencing_marker)"
        )
    return FenceState(
        str(data.get("pair")), epoch, str(data.get("cluster", "")), str(data.get("written_at", ""))
    )

"""The fencing marker: a small file holding a pair's current epoch.

A switch advances the epoch *before* it stops the old job and starts the new one. Every job run knows
the epoch it was started for and reads the marker before each micro-batch and between batches; once the
marker names a newer epoch the run stops on its own, without writing that batch. That closes the window
in which an old job that could not be reached (its cluster manager gone) keeps consuming next to the new
one: it stops at its next read of the marker.

Format: JSON ``{"pair": "orders", "epoch": 3, "cluster": "B", "written_at": "..."}``, replaced atomically
(``atomic_file``: a temporary file renamed over it) so a reader never sees half a marker. Mode 0644: it
holds no secret, and a job running as another user (a cluster's driver) must be able to read it.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_kafka_failover.atomic_file import READABLE_BY_ALL, write_json_atomically
from airflow_kafka_failover.exceptions import ConfigError, FailoverError

MARKER_MODE = READABLE_BY_ALL


class FencedError(FailoverError):
    """The epoch a run or a switch was made for is no longer the pair's current epoch."""


@dataclass(frozen=True)
class FenceState:
    """What the marker says.

    :param pair: the pair it belongs to.
    :param epoch: the pair's current epoch.
    :param cluster: the cluster that epoch's job reads.
    :param written_at: when it was written (ISO 8601).
    """

    pair: str
    epoch: int
    cluster: str
    written_at: str = ""


@dataclass(frozen=True)
class FencingMarker:
    """The marker file of one pair.

    :param path: the marker file.
    :param pair: the pair's name (checked against the file's content).
    """

    path: Path
    pair: str

    def read(self) -> FenceState | None:
        """Return the marker's state, None when there is no marker yet; raise on a corrupt marker."""
        try:
            text = Path(self.path).read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"fencing marker {self.path} cannot be read: {exc.strerror}") from None
        return parse_fence(text, str(self.path), self.pair)

    def write(self, epoch: int, cluster: str) -> FenceState:
        """Replace the marker atomically with ``epoch`` (no check; see :meth:`advance`)."""
        state = FenceState(self.pair, epoch, cluster, datetime.now(UTC).isoformat(timespec="seconds"))
        write_json_atomically(self.path, state.__dict__, MARKER_MODE)
        return state

    def advance(self, expected_epoch: int | None, new_epoch: int, cluster: str) -> FenceState:
        """Move the marker from ``expected_epoch`` to ``new_epoch``; idempotent when it is there already.

        :param expected_epoch: the epoch the caller read (None: no marker yet).
        :param new_epoch: the epoch to move to (greater than ``expected_epoch``).
        :param cluster: the cluster the new epoch's job will read.
        :raises FencedError: when the marker holds neither epoch (another switch moved it).
        """
        if expected_epoch is not None and new_epoch <= expected_epoch:
            raise ConfigError(
                f"a fence only moves forward: {expected_epoch} -> {new_epoch} is not an advance"
            )
        with self.locked():
            current = self.read()
            current_epoch = None if current is None else current.epoch
            if current is not None and current.epoch == new_epoch and current.cluster == cluster:
                return current
            if current_epoch != expected_epoch:
                raise FencedError(
                    f"fencing marker {self.path} of pair {self.pair!r} holds epoch {current_epoch}, not the "
                    f"expected {expected_epoch}: another switch moved it; re-read the active record"
                )
            return self.write(new_epoch, cluster)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the marker's lock (an exclusive ``flock`` on ``<marker>.lock`` beside it).

        :meth:`advance` holds it while it compares and writes; the active record's commit holds it too, so a
        read-then-write of the record and a move of the fence never interleave.
        """
        lock_path = Path(self.path).with_name(Path(self.path).name + ".lock")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def parse_fence(text: str, where: str, pair: str | None = None) -> FenceState:
    """Parse a marker's text, naming ``where`` in errors."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"fencing marker {where} is not valid JSON ({exc.msg}); restore it from the "
            "active record or remove it"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"fencing marker {where} must hold a JSON object, got {data!r}")
    epoch = data.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ConfigError(f"fencing marker {where} has an invalid epoch {epoch!r}")
    if pair is not None and data.get("pair") != pair:
        raise ConfigError(
            f"fencing marker {where} belongs to pair {data.get('pair')!r}, not {pair!r}; "
            "each pair needs its own marker path"
        )
    return FenceState(
        str(data.get("pair")), epoch, str(data.get("cluster", "")), str(data.get("written_at", ""))
    )

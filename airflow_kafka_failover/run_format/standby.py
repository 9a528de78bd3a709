"""A warm standby driver's side of the handoff: wait, with the SparkSession up, until a switch names a run.

A warm driver is the job's own application started ahead of a switch with ``--standby <slot>`` instead of
``--settings <file>``. It builds its SparkSession, loads the Kafka source's classes, and then consumes
nothing: it waits until a switch writes the *handoff* into its slot, naming the settings file of the run it
is to become (the same file, fence and run folder a submitted driver would get). From there on it is that
run: the fence and checkpoint checks of a start apply unchanged, so a warm driver handed an epoch the fence
has left behind refuses (``refused`` in the run's status) and never reads a record.

One slot per pair and cluster, on the host that runs the drivers (local and client mode)::

    <local_root>/<pair>/<cluster>/standby/slot.lock      held (``flock``) by the warm driver while it lives
    <local_root>/<pair>/<cluster>/standby/state.json     starting / waiting / taken / refused, with its pid
    <local_root>/<pair>/<cluster>/standby/handoff.json   written by the switch: settings file and epoch
    <local_root>/<pair>/<cluster>/standby/stop-request   asks an idle warm driver to exit
    <local_root>/<pair>/<cluster>/standby/rehearsal.json the settings of a run on the cluster (owner-only),
                                                         on which the driver rehearses a start while idle

The lock makes a second warm driver of the same slot refuse at once (before its SparkSession starts); the
kernel drops it when the holder's process ends, however it ends. A handoff is taken by renaming it, so it is
used once. No Airflow import here: this runs on the driver.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from airflow_kafka_failover.core.atomic_file import write_atomically
from airflow_kafka_failover.core.exceptions import ConfigError

STANDBY_FOLDER = "standby"
CLAIM_TRIES = 10
"""Tries of the slot's lock, 50 ms apart, before a claim says another warm driver holds it."""
POLL_INTERVAL_S = 0.1
"""How often an idle warm driver looks for its handoff: the switch's wait for it is at most this long."""


class SlotBusy(ConfigError):
    """Another warm driver holds the slot."""


class StandbyStopped(Exception):
    """An idle warm driver was asked to exit (its stop request) before any handoff."""


def standby_dir(local_root: str, pair: str, cluster: str) -> Path:
    """The slot of the warm driver of ``pair`` on ``cluster`` under the host-local root."""
    return Path(local_root) / pair / cluster / STANDBY_FOLDER


@dataclass(frozen=True)
class Handoff:
    """What a switch hands a warm driver: the run it becomes.

    :param settings: the run's settings file (the one spark-submit would have been given).
    :param epoch: the run's epoch, as the switch wrote it (checked against the settings and the fence).
    :param written_at: unix seconds of the handoff.
    """

    settings: str
    epoch: int
    written_at: float

    @classmethod
    def parse(cls, text: str, where: Path) -> Handoff:
        try:
            data = json.loads(text)
            return cls(str(data["settings"]), int(data["epoch"]), float(data.get("written_at", 0.0)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"handoff file {where} is not a handoff ({exc!r}): it must hold settings and epoch; the "
                "switch writes it, never edit it by hand"
            ) from None


class StandbySlot:
    """The slot of one warm driver (see the module).

    :param folder: the slot's folder (:func:`standby_dir`).
    """

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)
        self._lock: IO[bytes] | None = None

    @property
    def handoff_file(self) -> Path:
        return self.folder / "handoff.json"

    @property
    def state_file(self) -> Path:
        return self.folder / "state.json"

    @property
    def stop_file(self) -> Path:
        return self.folder / "stop-request"

    @property
    def rehearsal_file(self) -> Path:
        return self.folder / "rehearsal.json"

    # ---- the warm driver's side ------------------------------------------------------------------------

    def claim(self) -> None:
        """Hold the slot for this process's life.

        :raises SlotBusy: another warm driver holds it (naming its pid when it wrote one).
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        handle = open(self.folder / "slot.lock", "ab")  # held open until the process ends
        # held() elsewhere takes the lock for an instant to test it: a few tries tell that from a holder.
        for attempt in range(CLAIM_TRIES):
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt < CLAIM_TRIES - 1:
                    time.sleep(0.05)
        else:
            handle.close()
            holder = self.state().get("pid")
            raise SlotBusy(
                f"standby slot {self.folder} is held by another warm driver (pid {holder}); one warm driver "
                "per pair and cluster: stop that one first (its stop-request file) or leave it be"
            ) from None
        self._lock = handle
        self.stop_file.unlink(missing_ok=True)
        # A handoff is written only to a driver that holds the slot: one found now was for a holder that
        # died before it took it, and its run has been submitted otherwise since. Never start it.
        self.handoff_file.unlink(missing_ok=True)

    def release(self) -> None:
        """Let the slot go (after a handoff: this process is a run now; the next warm driver may come)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def write_state(self, state: str, **fields: Any) -> None:
        """Record the warm driver's state (``starting``, ``waiting``, ``taken``, ``refused``) with its pid."""
        record = {"state": state, "pid": os.getpid(), "written_at": time.time(), **fields}
        write_atomically(self.state_file, json.dumps(record).encode())

    def wait_for_handoff(
        self, poll_s: float = POLL_INTERVAL_S, keep_waiting: Callable[[], bool] = lambda: True
    ) -> Handoff:
        """Block until a handoff is written, take it (it is used once) and return it.

        :param keep_waiting: called between looks; False ends the wait with :class:`StandbyStopped`.
        :raises StandbyStopped: the slot's stop request, or ``keep_waiting``.
        :raises ConfigError: a handoff file that is not one (it is moved aside, not used).
        """
        while True:
            if self.stop_file.exists() or not keep_waiting():
                raise StandbyStopped(f"the warm driver of {self.folder} was asked to stop before a handoff")
            taken = self.folder / f"handoff.taken-{os.getpid()}.json"
            try:
                os.rename(self.handoff_file, taken)
            except FileNotFoundError:
                time.sleep(poll_s)
                continue
            return Handoff.parse(taken.read_text(), self.handoff_file)

    # ---- the switch's side ------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The warm driver's last state record (``{}``: none, or unreadable)."""
        try:
            data = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def held(self) -> bool:
        """Whether a live process holds the slot (a lock nobody holds is free, whatever state.json says)."""
        lock = self.folder / "slot.lock"
        if not lock.exists():
            return False
        with open(lock, "ab") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            return False

    def starting(self) -> bool:
        """A warm driver holds the slot and is still starting (its Spark, its rehearsal), or has not written
        its first state yet (a new start clears the last driver's)."""
        return self.held() and self.state().get("state") in (None, "starting")

    def waiting(self) -> bool:
        """A warm driver holds the slot and waits for a handoff (none is pending)."""
        return self.held() and self.state().get("state") == "waiting" and not self.handoff_file.exists()

    def hand_off(self, settings_path: str, epoch: int) -> Handoff:
        """Write the handoff naming the run the warm driver becomes.

        :raises ConfigError: a handoff is already pending (an earlier switch's that no driver took).
        """
        if self.handoff_file.exists():
            raise ConfigError(
                f"a handoff is already pending in {self.handoff_file}; the warm driver did not take it. "
                "Remove it after checking that no warm driver runs in the slot"
            )
        handoff = Handoff(settings_path, epoch, time.time())
        write_atomically(
            self.handoff_file,
            json.dumps(
                {"settings": handoff.settings, "epoch": epoch, "written_at": handoff.written_at}
            ).encode(),
        )
        return handoff

    def request_stop(self) -> None:
        """Ask an idle warm driver to exit (it looks every ``POLL_INTERVAL_S``)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.stop_file.write_bytes(b"")

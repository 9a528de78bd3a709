"""The launching side of a warm standby driver (``run_format/standby.py``): start one, and hand it a run.

A warm driver is started with the run's own spark-submit command line, except ``--standby <slot>`` for
``--settings <file>`` and its ``--name``; its process record and log live in the slot
(``pids/standby.json``, ``logs/standby.log``) with ``launch.json``, the fingerprint of what it was started
with. A submission uses it only when the fingerprint of the command it would run is the same (same
application file content, jars, packages, Spark settings, master, store settings): a warm driver started
before the pair's job options changed is stopped and the run submitted as usual.

Handing it a run moves its process record and its log into the run's local folder (``pids/job.json``,
``logs/job.log``): from then on it is tracked, stopped and killed exactly as a driver spark-submit started
there, and the slot is free for the next warm driver. Then the handoff file names the run's settings file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

from airflow_kafka_failover.core.atomic_file import write_atomically
from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.run_format.layout import PROCESS_NAME
from airflow_kafka_failover.run_format.settings import JobSettings
from airflow_kafka_failover.run_format.standby import StandbySlot

log = logging.getLogger(__name__)

STANDBY_PROCESS = "standby"
"""The warm driver's process name in its slot (``pids/standby.json``, ``logs/standby.log``)."""
STARTING_WAIT_S = 20.0
"""How long a submission waits for a warm driver that is still starting before it starts its own driver
(a new spark-submit takes about 10 s on the 2-core machine; a warm driver that started earlier is ready
sooner)."""
EXITING_WAIT_S = 10.0
"""How long a warm driver that let its slot go (refused, stopped) is given to exit, on SIGTERM, before it is
killed and a new one started."""
PER_RUN_OPTIONS = ("--name", "--settings", "--standby", "--properties-file")
"""spark-submit options whose value differs between runs of the same launch (left out of the fingerprint;
the properties file's content is in it)."""


def launch_fingerprint(command: list[str], files: list[str]) -> str:
    """A digest of a spark-submit command line without its per-run values, and of ``files``' content (the
    application, the store properties): equal for a warm driver and a run it may become."""
    digest = hashlib.sha256()
    skip = False
    for part in command:
        if skip:
            skip = False
            continue
        if part in PER_RUN_OPTIONS:
            skip = True
            continue
        digest.update(part.encode() + b"\0")
    for name in files:
        try:
            digest.update(Path(name).read_bytes())
        except OSError:
            digest.update(b"(missing)" + name.encode())
    return digest.hexdigest()


def option_value(command: list[str], option: str) -> str | None:
    """The value after ``option`` in ``command`` (None: not there)."""
    if option in command[:-1]:
        return command[command.index(option) + 1]
    return None


def standby_process(slot: StandbySlot) -> ManagedProcess:
    return ManagedProcess(STANDBY_PROCESS, slot.folder)


def start_standby(
    slot: StandbySlot, command: list[str], env: dict[str, str], fingerprint: str, rehearsal: JobSettings
) -> int | None:
    """Start a warm driver in ``slot`` unless one holds it or is still on its way to its lock (its recorded
    process lives and no driver has written a state since the start); return its pid (None: one was there
    already). One that let the slot go (its state says refused or stopped) but whose process still lives is
    stopped first.

    :param rehearsal: the settings of a run on the slot's cluster, on which the driver rehearses a start.
    """
    if slot.held():
        log.info("a warm standby driver already holds %s; not starting another", slot.folder)
        return None
    process = standby_process(slot)
    if (pid := process.pid()) is not None:
        last = slot.state().get("state")
        if last is None:
            # Started earlier and still on its way to the slot's lock (spark-submit starts the JVM, which
            # starts the Python driver that takes it: more than 30 s on a loaded machine). Its pid file and
            # log are its own; replaced, it would run on untracked (no stop reaches it) beside a second one.
            log.info(
                "a warm standby driver (pid %s) is starting in %s; not starting another", pid, slot.folder
            )
            return None
        # It held the slot and let go (its last state says why): its spark-submit is on its way out.
        log.info(
            "the last warm standby driver of %s (pid %s, last state %r) let the slot go and is still "
            "exiting; stopping it before starting another",
            slot.folder,
            pid,
            last,
        )
        process.stop(timeout=EXITING_WAIT_S)
    process.pid_file.unlink(missing_ok=True)  # a dead one's record
    if process.log_file.exists():  # a dead one's log, kept beside
        os.replace(
            process.log_file, process.log_file.with_name(f"standby.{time.strftime('%Y%m%dT%H%M%S')}.log")
        )
    slot.folder.mkdir(parents=True, exist_ok=True)
    # A dead driver's last word: until the new one writes its own, the slot must not look "waiting".
    slot.state_file.unlink(missing_ok=True)
    write_atomically(slot.folder / "launch.json", json.dumps({"fingerprint": fingerprint}))
    rehearsal.write(str(slot.rehearsal_file))
    pid = process.start(command, env=env, inherit_env=False)
    log.info("started a warm standby driver in %s: pid %s, log %s", slot.folder, pid, process.log_file)
    return pid


def waiting_standby(slot: StandbySlot, fingerprint: str, starting_wait: float = STARTING_WAIT_S) -> bool:
    """Whether ``slot`` holds a warm driver that waits and was started with the same launch. One still
    starting is given up to ``starting_wait`` seconds (it is ready sooner than a new spark-submit), then
    asked to stop; so is one that waits with another launch (the job's options changed since)."""
    if slot.starting():
        log.info(
            "the warm standby driver of %s is starting; waiting up to %.0f s for it",
            slot.folder,
            starting_wait,
        )
        deadline = time.monotonic() + starting_wait
        while slot.starting() and time.monotonic() < deadline:
            time.sleep(0.2)
        if slot.starting():
            log.warning(
                "the warm standby driver of %s did not get ready within %.0f s: asking it to stop and "
                "submitting the run as usual (its log: %s)",
                slot.folder,
                starting_wait,
                standby_process(slot).log_file,
            )
            slot.request_stop()
            return False
    if not slot.waiting():
        if slot.folder.exists():
            log.info(
                "no warm standby driver waits in %s (last state %r): submitting the run as usual",
                slot.folder,
                slot.state().get("state"),
            )
        return False
    try:
        started_with = json.loads((slot.folder / "launch.json").read_text()).get("fingerprint")
    except (OSError, ValueError):
        started_with = None
    if started_with != fingerprint:
        log.warning(
            "the warm standby driver in %s was started with another launch (the job's application, jars or "
            "Spark settings changed since): asking it to stop and submitting the run as usual",
            slot.folder,
        )
        slot.request_stop()
        return False
    return standby_process(slot).is_running()


def hand_over(slot: StandbySlot, local_dir: str, settings_path: str, epoch: int) -> int | None:
    """Make the waiting warm driver of ``slot`` the run of ``local_dir``; return its pid (None: it ended
    meanwhile, nothing was handed over).

    Its process record and log move to the run's folder (an earlier log of the run is kept beside, with
    the time in its name), then the handoff names the settings file.
    """
    warm = standby_process(slot)
    pid = warm.pid()
    if pid is None:
        log.warning(
            "the warm standby driver of %s ended before the handoff; submitting as usual", slot.folder
        )
        return None
    run = ManagedProcess(PROCESS_NAME, Path(local_dir))
    run.pid_file.parent.mkdir(parents=True, exist_ok=True)
    run.log_file.parent.mkdir(parents=True, exist_ok=True)
    if run.log_file.exists():
        os.replace(
            run.log_file, run.log_file.with_name(f"{run.log_file.name}.{time.strftime('%Y%m%dT%H%M%S')}")
        )
    os.replace(warm.log_file, run.log_file)  # the driver keeps writing to it: same file
    os.replace(warm.pid_file, run.pid_file)
    slot.hand_off(settings_path, epoch)
    log.info(
        "handed epoch %s to the warm standby driver (pid %s) of %s; its log is now %s",
        epoch,
        pid,
        slot.folder,
        run.log_file,
    )
    return pid

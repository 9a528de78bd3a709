"""Background processes (sandbox brokers, MirrorMaker 2, detached Spark jobs), each in its own process group.

The pid file records the process's start time as the kernel reports it, so a pid that the system has
since given to an unrelated process is never signalled. Everything here works across Python processes:
``akf-dev sandbox up`` starts a process and a later ``sandbox down`` stops it from its pid file.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


def _start_ticks(pid: int) -> int | None:
    """Return the process start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces or parentheses; fields after it follow the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def _state(pid: int) -> str | None:
    """Return the one-letter process state (R, S, T, Z, ...) or None when the pid does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[0]


@dataclass
class ManagedProcess:
    """A background process (a broker, MirrorMaker 2, a Spark job) known by its name and its pid file.

    :param name: short name, used for the pid and log file names (``broker-A``, ``mirrormaker``).
    :param run_dir: the run directory holding ``pids/`` and ``logs/``.
    """

    name: str
    run_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.run_dir / "pids" / f"{self.name}.json"

    @property
    def log_file(self) -> Path:
        return self.run_dir / "logs" / f"{self.name}.log"

    def start(self, argv: list[str], env: dict[str, str] | None = None, inherit_env: bool = True) -> int:
        """Start ``argv`` detached in a new session (its own process group), output appended to the log.

        :param env: environment variables on top of this process's (or, without ``inherit_env``, the whole
            environment).
        :param inherit_env: start from this process's environment.
        """
        if self.pid() is not None:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid()}); stop it first")
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log_handle:
            log_handle.write(f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting {self.name}\n".encode())
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_handle,
                stderr=subprocess.STDOUT,
                env={**(os.environ if inherit_env else {}), **(env or {})},
                start_new_session=True,
                close_fds=True,
            )
        record = {"pid": proc.pid, "start_ticks": _start_ticks(proc.pid), "argv0": argv[0]}
        self.pid_file.write_text(json.dumps(record))
        # Kept only so that pid() can reap the child if it exits while this Python process lives;
        # the process itself outlives us (its own session) and is found again through the pid file.
        self._popen = proc
        return proc.pid

    def pid(self) -> int | None:
        """Return the pid if the recorded process still exists (and is not a zombie), else None."""
        try:
            record = json.loads(self.pid_file.read_text())
        except (OSError, ValueError):
            return None
        pid = int(record["pid"])
        popen = getattr(self, "_popen", None)
        if popen is not None and popen.pid == pid:
            popen.poll()  # reap our own child if it exited
        if _start_ticks(pid) != record.get("start_ticks") or _state(pid) in (None, "Z", "X"):
            return None
        return pid

    def is_running(self) -> bool:
        return self.pid() is not None

    def is_stopped(self) -> bool:
        """Say whether the process is frozen by SIGSTOP (a hung cluster)."""
        pid = self.pid()
        return pid is not None and _state(pid) == "T"

    def signal_group(self, signum: int) -> bool:
        """Send ``signum`` to the whole process group; return False when the process is gone."""
        pid = self.pid()
        if pid is None:
            return False
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:
            return False
        return True

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the process group: SIGCONT (in case it is frozen), SIGTERM, then SIGKILL after ``timeout``."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return
        self.signal_group(signal.SIGCONT)
        self.signal_group(signal.SIGTERM)
        if not self._wait_gone(timeout):
            log.warning("%s (pid %s) ignored SIGTERM for %.0f s; killing it", self.name, pid, timeout)
            self.signal_group(signal.SIGKILL)
            self._wait_gone(5.0)
        self.pid_file.unlink(missing_ok=True)

    def kill(self) -> None:
        """SIGKILL the process group at once (a crash), and wait until it is gone."""
        if self.signal_group(signal.SIGKILL):
            self._wait_gone(5.0)
        self.pid_file.unlink(missing_ok=True)

    def _wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid() is None:
                return True
            time.sleep(0.05)
        return self.pid() is None

    def log_tail(self, lines: int = 30) -> str:
        """Return the last ``lines`` lines of the process log (for error messages)."""
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return f"(no log at {self.log_file})"
        return "\n".join(text.splitlines()[-lines:])

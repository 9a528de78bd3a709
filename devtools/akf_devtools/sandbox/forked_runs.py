"""DAG runs forked from a warm Python process instead of each starting an interpreter (the tests' runs).

Every ``dag.test()`` run of a story is a process of its own. Before its first task it imports Airflow, its
Task Execution API and the provider: about 5 s of CPU on the quiet 2-core machine and twice that while the
suite loads it, for each of the suite's hundred-odd runs. A :class:`RunForker` imports all that once, then
forks a child per run, as Airflow's own executors fork their task processes from a loaded parent. The child
takes the run's environment, working folder and log file, and runs the DAG file as ``python <file>`` would;
the DAG, ``dag.test()`` and everything the run does are the same.

What a forked child cannot have is an environment of its own in ``/proc/<pid>/environ`` (the kernel shows
its parent's, whatever the child's ``os.environ`` holds), so a test that reads a run's environment from
outside starts its runs the usual way (``Story.fork_runs``). Only what Airflow reads once at import is
fixed in the warm process: the forker serves the runs whose ``AIRFLOW_HOME`` and ``AIRFLOW__*`` settings
(and ``TMPDIR``, ``HOME``, ``PYTHONPATH``) are its own (:func:`forker_for` keeps one per set).
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

WARM_IMPORTS = (
    "airflow.sdk",
    "airflow.api_fastapi.execution_api.app",
    "airflow.sdk.execution_time.supervisor",
    "airflow.sdk.execution_time.task_runner",
    "airflow_kafka_failover.workflows.factory",
    "airflow.providers.apache.spark.hooks.spark_submit",
)
"""What the warm process imports before it forks its first run."""
FORKED_ENV = "AKF_FORK_DAG_RUNS"
"""Set to 1 (as ``tests/conftest.py`` does) to fork the stories' DAG runs; the demo and the benchmarks start
them the usual way."""


def _environment_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """What the warm process fixed at import: the Airflow home and every Airflow setting, and the folders
    Python and Airflow take their temporary and home paths from."""
    kept = ("AIRFLOW_HOME", "TMPDIR", "HOME", "PYTHONPATH")
    return tuple(sorted((k, v) for k, v in env.items() if k in kept or k.startswith("AIRFLOW__")))


class ForkedRun:
    """A forked run, with the parts of ``subprocess.Popen`` a ``RunningDag`` uses."""

    def __init__(self, pid: int, exit_file: Path, forker: RunForker) -> None:
        self.pid, self.exit_file, self.forker = pid, exit_file, forker
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self.exit_file.is_file():
            text = self.exit_file.read_text().strip()
            if text:
                self.returncode = int(text)
        if self.returncode is None and not self.forker.alive() and not _exists(self.pid):
            self.returncode = -signal.SIGKILL  # the warm process went with its reaper: the run is gone
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"forked DAG run {self.pid}", timeout or 0)
            time.sleep(0.1)
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunForker:
    """A warm process that forks DAG runs (see the module); ``start`` it, ``fork`` runs, ``close`` it."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.process: subprocess.Popen[str] | None = None
        self._asking = threading.Lock()  # one request and its answer at a time, whichever thread forks

    @property
    def log_path(self) -> Path:
        """The warm process's own output: ``forked-runs.log`` in the Airflow home."""
        return Path(self.env.get("AIRFLOW_HOME", ".")) / "forked-runs.log"

    def start(self) -> RunForker:
        """Start the warm process (its output goes to :attr:`log_path`)."""
        with open(self.log_path, "a") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__],
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=output,
                text=True,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # READY once warm; empty if it died importing
        if line.strip() != "READY":
            self.close()
            raise RuntimeError(
                f"the warm DAG-run process did not start (it said {line!r}; see {self.log_path})"
            )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def fork(self, dag_file: Path, env: dict[str, str], cwd: Path | None, log_path: Path) -> ForkedRun:
        """Run ``dag_file`` in a forked child with ``env`` in ``cwd``, its output appended to ``log_path``."""
        if not self.alive():
            raise RuntimeError("the warm DAG-run process is not running")
        assert self.process is not None and self.process.stdin is not None and self.process.stdout is not None
        exit_file = log_path.with_name(log_path.name + ".exit")
        exit_file.unlink(missing_ok=True)
        request = {
            "dag_file": str(dag_file),
            "env": env,
            "cwd": str(cwd) if cwd else None,
            "log": str(log_path),
            "exit_file": str(exit_file),
        }
        with self._asking:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(
                f"the warm DAG-run process ended before it forked the run; its output is in {self.log_path}"
            )
        return ForkedRun(json.loads(line)["pid"], exit_file, self)

    def close(self) -> None:
        if self.process is None:
            return
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


_forkers: dict[tuple[tuple[str, str], ...], RunForker] = {}


def forker_for(env: dict[str, str]) -> RunForker:
    """The warm process for runs with ``env``'s Airflow settings, started on first use (about 5 s)."""
    key = _environment_key(env)
    forker = _forkers.get(key)
    if forker is None or not forker.alive():
        forker = _forkers[key] = RunForker(env).start()
    return forker


@atexit.register
def close_all() -> None:
    """Close every warm process this process started (at exit, or at the end of a test session)."""
    for forker in _forkers.values():
        forker.close()
    _forkers.clear()


def _run_child(request: dict[str, Any], answers: Any) -> None:
    """In the forked child: become the run's process, run the DAG file as ``__main__``, exit.

    :param answers: the warm process's channel to its caller, closed here (the caller must see it end when
        the warm process does, whatever runs are still going).
    """
    import runpy
    import tempfile
    import traceback

    code = 1
    try:
        answers.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        if request["cwd"]:
            os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None
        dag_file = request["dag_file"]
        sys.argv = [dag_file]
        sys.path.insert(0, str(Path(dag_file).parent))
        runpy.run_path(dag_file, run_name="__main__")
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # the run's own error, in its log, as the interpreter would print it
        traceback.print_exc()
    finally:
        try:
            import logging

            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> None:
    """The warm process: import :data:`WARM_IMPORTS`, say READY, then fork a run per request on stdin.

    Its answers go to the caller on the stdout it was started with; what Airflow prints goes to stderr.
    """
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    from akf_devtools.sandbox.dag_test import serve_only_the_sdk_api_version

    for name in WARM_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:  # a run that needs it imports it and reports the error in its own log
            pass
    serve_only_the_sdk_api_version()
    exit_files: dict[int, str] = {}

    def reap(_signum: int, _frame: Any) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            path = exit_files.pop(pid, None)
            if path is not None:
                Path(path).write_text(str(os.waitstatus_to_exitcode(status)))

    signal.signal(signal.SIGCHLD, reap)
    print("READY", file=answers, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        signal.pthread_sigmask(
            signal.SIG_BLOCK, [signal.SIGCHLD]
        )  # the child's pid is known before it is reaped
        pid = os.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
            _run_child(request, answers)
        exit_files[pid] = request["exit_file"]
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
        print(json.dumps({"pid": pid}), file=answers, flush=True)
    # stdin closed: the caller is done; runs still going finish on their own


if __name__ == "__main__":
    serve()

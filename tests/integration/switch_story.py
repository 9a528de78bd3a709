"""The end-to-end story of one pair for the tests: the demo's engine plus assertions and printed figures."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from akf_devtools.demo.story import QUICK_HEALTH, RunningDag, switch_figures
from akf_devtools.demo.story import Story as _Story
from akf_devtools.sandbox.kafka_io import end_offsets

from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import StoreUnavailable
from airflow_kafka_failover.run_format.layout import PROCESS_NAME, SETTINGS_FILE
from airflow_kafka_failover.run_format.settings import JobSettings

TEST_HEALTH = QUICK_HEALTH

STORY_TRIGGER_INTERVAL_S = 5
"""The trigger interval of the tests' story jobs, the product's default (the demo's is 1 s). A steady job's
driver costs about the same CPU per batch whatever the batch holds at the stories' 40 records/s, and a chain
keeps one running through most of its steps, so the trigger sets its cost (``benchmarks/bench_job_steady.py
--rate 40 --local-spark-conf --trigger-interval 2`` or ``5``, on 2026-12-04):

- the packaged job: 5.72 CPU s a minute at 2 s (0.19 per batch) against 3.05 at 5 (0.25), with
  ``--warmup 40 --seconds 60``; 12.2 at 1 s on 2026-12-02;
- the Delta MERGE example (``--application examples/jobs/orders_to_delta/job.py``, ``--warmup 60
  --seconds 120``): 34.9 at 2 s (1.18 per batch: two Spark jobs and a commit to the table's log) against
  18.5 at 5 (1.54). It runs through the whole chain of ``test_switch_dags.py`` and of the compatibility
  lane's story.

A switch's first batch starts with its query, so the detection and RTO figures do not wait for it; the
duplicates' bounds come from the plans, not from the trigger."""

__all__ = [
    "STORY_TRIGGER_INTERVAL_S",
    "TEST_HEALTH",
    "JobCensus",
    "RunningDag",
    "Story",
    "assert_one_job",
    "job_logs",
    "kill_strays",
    "new_pair_story",
    "run_chain",
    "spark_versions",
    "timed",
]


class Story(_Story):
    def __post_init__(self) -> None:
        super().__post_init__()
        self.job_options = {"trigger_interval_seconds": STORY_TRIGGER_INTERVAL_S, **self.job_options}

    def run(
        self, kind: str, timeout: float = 420, env: dict[str, str] | None = None, **conf: Any
    ) -> tuple[str, str]:
        running = self.start_run(kind, env, **conf)
        state, output = running.wait(timeout)
        print(f"{kind} run: {state}; log {running.log_path}")
        return state, output

    @contextmanager
    def job_application(self, application: str | Path) -> Iterator[None]:
        """The pair's ``job.application`` is ``application`` for the DAG runs started inside the block.

        Every run reads the pair config anew, so the file is edited in place and put back on the way out;
        the rest of it (what earlier steps wrote) is kept.
        """
        original = self.config_path.read_text()
        config = yaml.safe_load(original)
        config["pairs"][self.pair]["job"]["application"] = str(application)
        self.config_path.write_text(yaml.safe_dump(config))
        try:
            yield
        finally:
            self.config_path.write_text(original)

    def check_no_loss(self, timeout: float = 120) -> dict[str, int]:
        """Wait until every id acknowledged so far is in the sink; fail naming the count, where the missing
        ones were written and how far each copy of the topic reached otherwise."""
        assert self.producer is not None
        acked = self.producer.acked_ids
        counts = self.wait_for_sink(timeout)
        if counts["lost"]:
            try:
                lost = acked - self.read_sink().record_ids
                report = f"{self.producer.where(lost)}\n{self.replication_report()}"
            except Exception as exc:  # the count must reach the failure even when the report cannot be made
                report = f"(where they are could not be told: {exc!r})"
            pytest.fail(
                f"{counts['lost']} acknowledged ids missing from the sink after {timeout} s:\n{report}"
            )
        return counts

    def replication_report(self) -> str:
        """How far each copy of the pair's topic reaches now (a replica behind its origin: MirrorMaker 2 has
        not copied the rest yet), the record, and where each run of the pair started."""
        ends = []
        for cluster, other in (("A", "B"), ("B", "A")):
            for where, topic in ((cluster, self.topic), (other, f"{cluster}.{self.topic}")):
                found = end_offsets(self.sandbox.client_config(where), topic)
                ends.append(f"{topic} on {where}: end offsets {found if found is not None else 'unreadable'}")
        starts = []
        for settings in sorted((self.root / "runs" / self.pair).glob("*/epoch-*/settings.json")):
            starting = json.loads(settings.read_text()).get("starting_offsets")
            starts.append(
                f"run {settings.parent.parent.name}/{settings.parent.name} started at {json.dumps(starting)}"
            )
        record = self.record()
        return "\n".join(
            [*ends, f"the record: active {record.get('active')} at epoch {record.get('epoch')}", *starts]
        )


def timed(story: Story, label: str, fault_at: float, cluster: str, epoch: int, output: str) -> dict[str, Any]:
    """Detection time and RTO of a switch, kept in the story's figures and printed."""
    figure = switch_figures(story, label, fault_at, cluster, epoch, output)
    print(f"{label}: {figure}")
    return figure


@contextmanager
def new_pair_story(
    sandbox: Any, airflow_home: Path, root: Path, prefix: str, rate: float = 40.0, **story_fields: Any
) -> Iterator[Story]:
    """The story of a fresh pair ``<prefix><random>`` on ``sandbox``.

    Its config is written, its topic created and a steady producer running; on the way out the producer and
    every job run of the pair are stopped.

    :param story_fields: more fields of the story (``job_options``, a ``sink_reader``).
    """
    pair = f"{prefix}{uuid.uuid4().hex[:6]}"
    story = Story(sandbox, airflow_home, root, pair, f"orders-{pair}", **story_fields)
    try:
        story.write_config()
        story.create_topics()
        story.start_producer(rate=rate)
        yield story
    finally:
        if story.producer is not None:
            story.producer.stop()
        story.stop_job()
        kill_strays(root)


def stray_processes(root: Path) -> list[tuple[int, str]]:
    """The processes (pid, command line) other than this one whose command line names ``root``: what a
    story left running after it stopped every job and warm driver it knows of."""
    found, inside = [], f"{root}/"
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # it ended meanwhile
            continue
        if int(entry.name) != os.getpid() and any(arg == str(root) or inside in arg for arg in args):
            found.append((int(entry.name), " ".join(args).strip()))
    return found


def kill_strays(root: Path) -> list[tuple[int, str]]:
    """Kill the process groups of :func:`stray_processes` and warn naming them (a leak for the tests to
    mend: one left behind keeps a core busy for the rest of the suite); return what was found."""
    strays = stray_processes(root)
    for pid, _ in strays:
        try:
            group = os.getpgid(pid)
            if group == os.getpgrp():
                os.kill(pid, signal.SIGKILL)
            else:
                os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            continue
    if strays:
        named = "; ".join(f"pid {pid}: {command[:200]}" for pid, command in strays)
        warnings.warn(f"the story in {root} left processes running, killed now: {named}", stacklevel=2)
    return strays


def job_logs(root: Path) -> str:
    """The text of every job log (``job.log``) under ``root``, the drivers' own words."""
    return "".join(log.read_text(errors="replace") for log in sorted(root.rglob("job.log")))


def spark_versions(logs: str) -> set[str]:
    """The Spark versions drivers logged in ``logs`` (``Running Spark version ...``)."""
    return set(re.findall(r"Running Spark version (\S+)", logs))


def run_chain(
    steps: list[Callable[..., None]], story: Story, outcomes: dict[str, str], step: Callable[..., None]
) -> None:
    """Run every step of ``steps`` up to and including ``step`` that has not run yet on this story.

    A chained module's tests each call this, so a test run alone (``-k``) first runs the steps before it,
    and in file order every test runs only its own step.

    :param steps: the module's chain, in order.
    :param story: the module's pair story.
    :param outcomes: the module's ``steps_run`` fixture (name -> "passed" or "failed"), updated here.
    :param step: the last step to run.
    """
    for earlier in steps[: steps.index(step) + 1]:
        name = earlier.__name__
        if outcomes.get(name) == "failed":
            pytest.fail(f"{name} failed earlier on this sandbox; the later steps cannot run (see its test)")
        if name in outcomes:
            continue
        outcomes[name] = "failed"
        earlier(story)
        outcomes[name] = "passed"


class JobCensus:
    """Sample the pair's live job runs every ``interval`` s; remember the worst moment."""

    def __init__(self, story: Story, interval: float = 0.5) -> None:
        self.story, self.interval = story, interval
        self.max_alive = 0
        self.max_current = 0
        self.violations: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def alive(self) -> list[tuple[str, int]]:
        runs = []
        for local_dir in (self.story.local_root or self.story.root / "runs").glob("*/*/epoch-*"):
            if ManagedProcess(PROCESS_NAME, local_dir).is_running():
                runs.append((local_dir.parent.name, int(local_dir.name.split("-", 1)[1])))
        return sorted(runs)

    def _fence_epoch(self) -> int | None:
        """The fence's epoch; None while it is unreadable (absent, or its store frozen by a test)."""
        try:
            return json.loads(self.story.fence())["epoch"]
        except (ValueError, KeyError, StoreUnavailable):
            return None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            runs, epoch = self.alive(), self._fence_epoch()
            current = [run for run in runs if run[1] == epoch]
            self.max_alive = max(self.max_alive, len(runs))
            self.max_current = max(self.max_current, len(current))
            if len(current) > 1:
                self.violations.append(f"{time.strftime('%H:%M:%S')}: {current} at fence epoch {epoch}")

    def start(self) -> JobCensus:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def assert_one_job(story: Story, cluster: str, epoch: int, within: float = 60) -> None:
    """The record and the fence name ``cluster`` at ``epoch``, and the record's job is the pair's only live
    job (a fenced or stopped old job ends within ``within`` seconds). Needs ``story.census``."""
    record = story.record()
    assert (record["active"], record["epoch"], record["job"]["cluster"]) == (cluster, epoch, cluster)
    assert json.loads(story.fence())["epoch"] == epoch
    deadline = time.monotonic() + within
    while story.census.alive() != [(cluster, epoch)] and time.monotonic() < deadline:
        time.sleep(1)
    assert story.census.alive() == [(cluster, epoch)]
    assert story.census.violations == []


def assert_history_holds_the_plan_the_job_started_from(story: Story) -> None:
    """The last switch's history entry holds the plan of the switch run that submitted the recorded job
    (kept in its settings), whichever run or keeper committed it: its bound is the job's."""
    record = story.record()
    started = JobSettings.load(locations.join(record["job"]["run_dir"], SETTINGS_FILE)).switch_plan
    assert started is not None, f"the job of epoch {record['epoch']} was started without its switch's plan"
    assert record["history"][-1]["plan"] == started.summary, (record["history"][-1], started)

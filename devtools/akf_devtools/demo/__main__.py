"""``make demo``: a Kafka cluster dies and comes back while a streaming job keeps consuming, end to end.

The sandbox's clusters A and B run with MirrorMaker 2 between them; a producer writes records with unique ids
at a steady rate. The pair's real DAGs do the rest, each run with ``dag.test()``: the start DAG runs the
PySpark job on A while the failover DAG starts watching A (as a deployed failover DAG watches all the time); A
is crashed, the failover sensor decides A is down and the run moves the job to B; the failback DAG starts
watching A while A is restarted, its sensor decides A has recovered and caught up, and it moves the job back.
With ``--standby warm`` (the default) a warm standby driver waits for each switch's run, as the keeper keeps
one with ``switch.standby: warm``. Steps that do not depend on each other overlap (the sandbox and the Airflow
home, a DAG run's start-up and the step before its fault), so the demo takes little more than its switches.

The report (timeline, detection and RTO of both switches, records produced, consumed, duplicated and lost,
and a plot) goes to a results folder whose path is printed at the end.

Every process started here is stopped on success, on failure and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from airflow_kafka_failover.core.exceptions import FailoverError

PAIR = "demo"
TOPIC = "orders"


class DemoFailed(FailoverError):
    """A step of the demo did not end as it should; the message says which and where its log is."""


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Demo:
    """The demo's steps and the state they share (for the report and for cleanup)."""

    def __init__(
        self, run_dir: Path, results: Path, rate: float, partitions: int, standby: str = "warm"
    ) -> None:
        from akf_devtools.demo.report import Timeline
        from akf_devtools.sandbox.sandbox import Sandbox

        self.run_dir, self.results, self.rate, self.partitions = run_dir, results, rate, partitions
        self.warm = standby == "warm"
        self.timeline = Timeline(time.time())
        self.sandbox = Sandbox(run_dir / "sandbox")
        self.story: Any = None
        self.live: Any = None
        self.in_flight: list[Any] = []  # the DAG runs in progress, killed on Ctrl-C

    # ---- steps ---------------------------------------------------------------------------------------

    def bring_up(self) -> None:
        from akf_devtools.demo.live import LiveStatus
        from akf_devtools.demo.story import Story
        from akf_devtools.sandbox.airflow_env import prepare_airflow_home

        home, pair_root = self.run_dir / "airflow", self.run_dir / "pair"
        say(
            f"starting Kafka clusters A and B (KRaft) and MirrorMaker 2 under {self.sandbox.run_dir}, "
            "and preparing a local Airflow home (SQLite metadata DB) meanwhile ..."
        )
        failures: list[BaseException] = []

        def prepare() -> None:
            try:
                prepare_airflow_home(home)
                _forget_previous_run(home, pair_root)
            except BaseException as exc:  # raised in the main thread below
                failures.append(exc)

        preparing = threading.Thread(target=prepare, name="demo-airflow-home")
        preparing.start()
        try:
            info = self.sandbox.up()
        finally:
            preparing.join()
        if failures:
            raise failures[0]
        self.note(
            "info",
            f"sandbox up: A {info['clusters']['A']['bootstrap']}, B {info['clusters']['B']['bootstrap']}",
        )
        self.story = Story(self.sandbox, home, pair_root, PAIR, TOPIC, spark_conn="spark_demo")
        self.story.write_config(standby="warm" if self.warm else "none")
        self.story.create_topics(self.partitions)
        self.story.start_producer(self.rate, self.partitions)
        self.note("info", f"producer writing {self.rate:g} records/s with unique ids to {TOPIC} on A")
        self.live = LiveStatus(self.story, say).start()

    def start_job(self) -> Any:
        """Run the start DAG; return the failover DAG's run, started beside it, whose sensor watches A."""
        from akf_devtools.demo.story import FIRST_TASK, WATCHING_WITHIN_S

        self.live.clear("start")
        say(f"start DAG: running the PySpark job on A (pair config {self.story.config_path}) ...")
        start = self.launch("start")
        # One dag.test() at a time writes its DAG and assets to the metadata DB: two at once insert the same
        # asset into a new DB and one of them fails. The start run has written its own by its first task.
        with contextlib.suppress(RuntimeError):  # it ended early: finish() below says how
            start.wait_for_text(FIRST_TASK, WATCHING_WITHIN_S)
        say("failover DAG: started beside it; its down sensor will watch A ...")
        failover = self.launch("failover")
        self.finish(start, expect="success")
        first = self.story.first_batch_time("A", 0)
        self.note("info", "job on A committed its first batch (epoch 0)", at=first)
        if self.warm:
            say("warm standby: starting a driver for B that waits, Spark up, for the failover's run ...")
            started = time.time()
            self.story.start_warm_standby("B", 0)
            self.note("info", f"warm standby driver waits for B ({time.time() - started:.0f} s to start)")
        return failover

    def fail_over(self, failover: Any) -> None:
        from akf_devtools.demo.story import WATCHING, WATCHING_WITHIN_S, switch_figures

        self.live.clear("failover armed")
        failover.wait_for_text(WATCHING, WATCHING_WITHIN_S)
        say("failover DAG: its down sensor is watching A")
        self.settle(2, "failover armed")
        fault_at = time.time()
        self.sandbox.fault("crash", "A")
        self.story.active_for_producer = "B"
        self.live.fault("A crashed, failover")
        self.note("fault", "A crashed (kill -9); producers move to B", at=fault_at)
        say("A crashed (kill -9 of its broker). Producers now write to B. Waiting for the failover DAG ...")
        output = self.finish(failover, expect="success")
        figure = switch_figures(self.story, "failover A -> B (crash)", fault_at, "B", 1, output)
        self.note_verdict(output, "down verdict on A")
        self.note(
            "info", "job on B committed its first batch (epoch 1)", at=self.story.first_batch_time("B", 1)
        )
        say(f"failed over to B: detection {figure.get('detection_s')} s, RTO {figure['rto_s']} s")

    def fail_back(self) -> None:
        from akf_devtools.demo.story import switch_figures

        self.live.clear("job running on B")
        say("failback DAG: started; its recovered sensor will watch A. Restarting A meanwhile ...")
        failback = self.launch("failback")
        back_at = time.time()
        # In dedicated mode a flow into a cluster that was down can stay stopped until MirrorMaker 2
        # restarts, so operators restart it after an outage (README, "MirrorMaker 2 after an outage"), once
        # A answers: stopped before, it could not write down how far it copied (see Sandbox.bring_back).
        self.sandbox.fault("restart", "A")
        if self.warm:  # A answers: its warm driver starts while MirrorMaker 2 does (as the keeper would)
            self.story.start_warm_standby("A", 1, wait=False)
        self.sandbox.restart_mirrormaker()
        self.live.fault("A back, failback")
        self.note("recovery", "A restarted with its data; MirrorMaker 2 restarted", at=back_at)
        say("A restarted (data kept) and MirrorMaker 2 restarted. Waiting for the failback DAG ...")
        output = self.finish(failback, expect="success")
        self.story.active_for_producer = "A"
        figure = switch_figures(self.story, "failback B -> A (restart)", back_at, "A", 2, output)
        self.note_verdict(output, "recovered verdict on A (stable, caught up)")
        self.note(
            "info", "job on A committed its first batch (epoch 2)", at=self.story.first_batch_time("A", 2)
        )
        say(
            f"failed back to A: detection {figure.get('detection_s')} s, RTO {figure['rto_s']} s; "
            "producers on A"
        )

    def drain(self) -> dict[str, int]:
        self.live.clear("draining")
        self.story.producer.stop()
        self.note("info", "producer stopped")
        say("producer stopped; waiting until every acknowledged record is in the sink ...")
        counts = self.story.wait_for_sink(120)
        self.note("info", f"sink holds {counts['unique']} of {counts['produced']} acknowledged ids")
        return counts

    def report(self, counts: dict[str, int]) -> int:
        from akf_devtools.demo import report

        record = self.story.record()
        for event in report.history_events(record):
            self.timeline.add(*event)
        progress = self.story.progress_lines()
        consumed = report.consumed_per_cluster(progress)
        text = report.render(self.story.figures, counts, consumed, self.timeline)
        title = (
            f"airflow-kafka-failover demo: {counts['produced']} records, {counts['lost']} lost, "
            f"{counts['duplicates']} re-delivered"
        )
        png = report.plot(
            report.consumption_series(progress, self.timeline.started_at),
            self.timeline,
            self.results / "consumption.png",
            title,
        )
        report.write(
            self.results,
            text,
            {
                "figures": self.story.figures,
                "counts": counts,
                "consumed": consumed,
                "timeline": self.timeline.events,
                "record": record,
            },
        )
        print("\n" + text + "\n", flush=True)
        say(f"report: {self.results / 'report.txt'} (and report.json); plot: {png}")
        if counts["lost"]:
            say(f"FAILED: {counts['lost']} acknowledged records never reached the sink")
            return 1
        return 0

    # ---- helpers -------------------------------------------------------------------------------------

    def launch(self, kind: str) -> Any:
        """Start a ``dag.test()`` run of the pair's ``kind`` DAG (it runs until :meth:`finish`)."""
        running = self.story.start_run(kind)
        self.in_flight.append(running)
        return running

    def finish(self, running: Any, expect: str) -> str:
        """Wait for ``running`` to end; return its output, or raise unless it ended ``expect``."""
        state, output = running.wait(timeout=420)
        self.in_flight.remove(running)
        if state != expect:
            raise DemoFailed(
                f"the {running.kind} DAG run ended {state!r}, expected {expect!r}; "
                f"its log: {running.log_path}"
            )
        return output

    def settle(self, seconds: float, phase: str) -> None:
        self.live.clear(phase)
        time.sleep(seconds)

    def note(self, kind: str, text: str, at: float | None = None) -> None:
        self.timeline.add(at if at is not None else time.time(), kind, text)

    def note_verdict(self, output: str, text: str) -> None:
        from akf_devtools.demo.story import verdict_time

        at = verdict_time(output)
        if at is not None:
            self.note("verdict", text, at=at)

    def clean_up(self) -> None:
        """Stop everything this demo started, whatever state it is in."""
        if self.live is not None:
            self.live.stop()
        for running in self.in_flight:
            running.kill()
        if self.story is not None:
            if self.story.producer is not None:
                self.story.producer.stop(flush_timeout=2)
            say("stopping the streaming job ...")
            self.story.stop_job()
        say("stopping the sandbox ...")
        self.sandbox.down()


def _forget_previous_run(home: Path, pair_root: Path) -> None:
    """Start the pair afresh: stop a job a previous demo left, delete its files and its active record."""
    from airflow_kafka_failover.core.process_group import ManagedProcess
    from airflow_kafka_failover.run_format.layout import PROCESS_NAME
    from akf_devtools.demo.story import stop_warm_standbys
    from akf_devtools.sandbox.airflow_env import delete_variable

    for run_dir in pair_root.glob("runs/*/*/epoch-*"):
        ManagedProcess(PROCESS_NAME, run_dir).stop(timeout=10)
    stop_warm_standbys(pair_root / "runs")
    shutil.rmtree(pair_root, ignore_errors=True)
    delete_variable(home, f"kafka_failover.{PAIR}.active_record")


def run(run_dir: Path, results: Path, rate: float, partitions: int, standby: str = "warm") -> int:
    """Run the whole demo; return the process exit code."""
    demo = Demo(run_dir, results, rate, partitions, standby)
    started = time.monotonic()
    try:
        demo.bring_up()
        demo.fail_over(demo.start_job())
        demo.fail_back()
        counts = demo.drain()
        code = demo.report(counts)
    finally:
        demo.clean_up()
    say(f"demo finished in {time.monotonic() - started:.0f} s")
    return code


def _sigterm(_signum, _frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    from akf_devtools.sandbox.jars import project_root

    parser = argparse.ArgumentParser(
        prog="python -m akf_devtools.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=project_root() / ".run" / "demo",
        help="where the sandbox, the Airflow home and the pair's files go (default: .run/demo)",
    )
    parser.add_argument(
        "--results", type=Path, default=None, help="report folder (default: results/demo-<date>-<time>)"
    )
    parser.add_argument("--rate", type=float, default=50.0, help="records per second produced (default: 50)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the topic (default: 2)")
    parser.add_argument(
        "--standby",
        choices=("warm", "none"),
        default="warm",
        help="warm (default): a warm standby driver waits for each switch's run (switch.standby: warm); "
        "none: each switch starts spark-submit",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.rate <= 5000:
        parser.error(f"--rate must be between 1 and 5000 records per second, got {args.rate:g}")
    if not 1 <= args.partitions <= 64:
        parser.error(f"--partitions must be between 1 and 64, got {args.partitions}")
    from akf_devtools.sandbox.jars import use_job_jars

    use_job_jars(delta=False)  # the demo's pair runs the packaged Parquet job: no Delta (make setup's sets)
    results = args.results or project_root() / "results" / time.strftime("demo-%Y%m%d-%H%M%S")
    signal.signal(signal.SIGTERM, _sigterm)
    # Explicitly, because Python keeps SIGINT ignored when it starts with it ignored (as background jobs of
    # scripts do): a `kill -INT` must still stop everything the demo started.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return run(args.run_dir.resolve(), results.resolve(), args.rate, args.partitions, args.standby)
    except FailoverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; every process the demo started was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

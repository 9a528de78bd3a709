"""RTO benchmark: detection time and recovery time of failover after a crash and failback after a restart,
through the pair's real DAGs, over several rounds.

One sandbox (two KRaft clusters, MirrorMaker 2), one pair driven by the demo's engine
(``akf_devtools.demo.story``): each DAG run is ``dag.test()`` in its own process, a steady producer
writes records with unique ids, and the PySpark job runs in local mode. The start DAG runs the job on A;
then each round is:

1. **failover**: the failover DAG's down sensor watches A; A is crashed (kill -9) and the producer moves to
   B; the DAG stops the old job, plans, and starts the job on B.
2. **failback**: the failback DAG's recovered sensor watches A; A is restarted with its data and MirrorMaker
   2 restarted (as operators do after an outage, README "MirrorMaker 2 after an outage"); the DAG moves
   the job back to A, and the producer follows.

Rounds continue the same pair (epochs 1, 2, 3, ...), as a pair lives through repeated outages. Per switch:
detection = fault to the verdict sensor's success (from the run's log), RTO = fault to the first batch the new
run committed (its progress entries), and the seconds of each step after the verdict (``check_target`` to
``commit``, from the run's task start and end lines; medians in the summary as ``<kind>_<step>_median_s``).
For failback the clock starts when A is restarted, so both figures include the start-up of A's broker and of
MirrorMaker 2; its detection is broken down into ``broker_start`` (A answers again), ``mm2_start``
(MirrorMaker 2 restarted and replicating both ways) and ``recovered_wait`` (the rest until the recovered
verdict: replication toward A catching up and the stability window); when the verdict comes before MirrorMaker
2's last flow shows a heartbeat (the sensor needs only the flow toward A), ``mm2_start`` ends at the verdict
and ``verdict_before_mm2_s`` says by how much. Catch-up = fault to the new run's first batch whose newest
record was at most two trigger intervals old when the batch committed (``catch_up``; the job is then back to
its steady lag). Median, min and max over the rounds; at the end the sink is checked against every
acknowledged id (lost, duplicates): the check waits while the job still writes rows (up to 15 minutes), ids
missing once the sink stopped growing for 30 s are ``lost``, ids the job was still on its way to at the
limit are ``unread`` (not lost: not read yet), and each switch gets the rows its new run wrote again
(``duplicates``) beside its plan's bound (``max_duplicates``); ``duplicates_above_bound`` counts the
switches above it.

``--standby warm`` sets the pair's ``switch.standby: warm`` and does what the keeper would (no keeper runs
here): a warm standby driver for B is started and waited for before each failover, and one for A is
started as soon as A answers again in each failback; the first one's idle cost while it waits (CPU seconds
per minute and resident memory of its process group, over 60 s) is ``warm_standby_idle``.

Health thresholds: ``--health quick`` (default; the demo's: 3 failed probes 1 s apart, 6 s stability) or
``--health default`` (the provider's defaults: 6 s down span, 30 s stability). The job's trigger interval
is the demo's 1 s.

    .venv/bin/python benchmarks/bench_rto.py [--rounds 3] [--health quick|default] [--rate 40]
        [--partitions 2] [--max-offsets-per-trigger N] [--standby none|warm] [--keep-run-dir]

Progress goes to stderr; the last line on stdout is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from akf_devtools.demo.story import (  # noqa: E402
    QUICK_HEALTH,
    SWITCH_STEPS,
    TRIGGER_INTERVAL_S,
    WATCHING,
    RunningDag,
    Story,
    switch_figures,
)
from akf_devtools.sandbox.airflow_env import prepare_airflow_home  # noqa: E402
from akf_devtools.sandbox.sandbox import Sandbox  # noqa: E402

from airflow_kafka_failover.domain.health.verdict import HealthThresholds  # noqa: E402
from benchmarks.json_output import json_line_output  # noqa: E402
from benchmarks.process_usage import idle_cost  # noqa: E402

PAIR = "benchrto"
TOPIC = "orders"
SETTLE_S = 6.0
IDLE_SAMPLE_S = 60.0
"""How long the first waiting warm driver is watched for its idle cost."""
CAUGHT_UP_WITHIN_S = 2 * TRIGGER_INTERVAL_S
"""A batch is caught up when its newest record is at most this old at its commit: a record waits up to one
trigger interval for its batch, and the batch takes up to one more."""


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Rounds:
    """The pair's story and the DAG run in progress (killed on interrupt)."""

    def __init__(self, story: Story, warm: bool = False) -> None:
        self.story = story
        self.current: RunningDag | None = None
        self.warm = warm
        self.idle_cost: dict[str, float] | None = None

    def start_warm(self, cluster: str, epoch: int, wait: bool) -> None:
        """Start the pair's warm standby driver for ``cluster`` (what the keeper does; no keeper runs here);
        with ``wait``, until it waits, and the first time measure what it costs while it waits."""
        from airflow_kafka_failover.cluster_managers.standby_handover import standby_process

        started = time.monotonic()
        slot = self.story.start_warm_standby(cluster, epoch, wait=wait)
        if not wait:
            return
        say(f"  warm standby driver for {cluster} waits ({time.monotonic() - started:.1f} s after its start)")
        pid = standby_process(slot).pid()
        if self.idle_cost is None and pid is not None:
            self.idle_cost = idle_cost(os.getpgid(pid), IDLE_SAMPLE_S)
            say(f"  an idle warm driver costs {self.idle_cost}")

    def run_start(self) -> None:
        self.current = self.story.start_run("start")
        self._finish("start")
        say("start DAG: the job runs on A")

    def switch(self, kind: str, fault: str, epoch: int) -> dict[str, Any]:
        """Arm the ``kind`` DAG, inject ``fault`` on A once its sensor watches, wait; return its figures.

        A failback's figures also break its wait before the verdict down (``back``): A's brokers answering
        again (``broker_start``), MirrorMaker 2 restarted and replicating both ways (``mm2_start``), and the
        rest until the recovered verdict (``recovered_wait``: the replication toward A catching up and the
        stability window).
        """
        if self.warm and kind == "failover":
            self.start_warm("B", epoch - 1, wait=True)
        self.current = self.story.start_run(kind)
        self.current.wait_for_text(WATCHING, 180)
        fault_at = time.time()
        sandbox = self.story.sandbox
        sandbox.fault(fault, "A")
        back: dict[str, float] = {}
        if fault == "crash":
            self.story.active_for_producer = "B"
        else:
            broker_up = time.time()
            if self.warm:  # A answers again: the keeper would start its warm driver now (no wait here)
                self.start_warm("A", epoch - 1, wait=False)
            sandbox.restart_mirrormaker()
            replicating = time.time()
            back = {"broker_start": broker_up - fault_at, "mm2_start": replicating - broker_up}
        output = self._finish(kind)
        cluster = "B" if kind == "failover" else "A"
        self.story.active_for_producer = cluster
        figure = switch_figures(self.story, f"{kind} ({fault})", fault_at, cluster, epoch, output)
        if back and "detection_s" in figure:
            # Parts of one timeline up to the verdict: the recovered sensor may pass before MirrorMaker 2's
            # last flow shows a heartbeat (it needs only the flow toward A), so mm2_start ends at the verdict
            # at the latest and the rest is never negative.
            verdict_in = figure["detection_s"] - back["broker_start"]
            if back["mm2_start"] > verdict_in:
                back["verdict_before_mm2_s"] = back["mm2_start"] - verdict_in
                back["mm2_start"] = verdict_in
            back["recovered_wait"] = verdict_in - back["mm2_start"]
            figure["back"] = {part: round(seconds, 1) for part, seconds in back.items()}
        time.sleep(SETTLE_S)  # the new run works a while before the next fault
        caught_up = self.story.caught_up_time(cluster, epoch, CAUGHT_UP_WITHIN_S)
        if caught_up is not None:
            figure["catch_up_s"] = round(caught_up - fault_at, 1)
        steps = ", ".join(f"{step} {took} s" for step, took in figure["steps"].items())
        before = ", ".join(f"{part} {took} s" for part, took in figure.get("back", {}).items())
        say(
            f"  {kind} to {cluster} (epoch {epoch}): detection {figure.get('detection_s')} s"
            + (f" ({before})" if before else "")
            + f", RTO {figure['rto_s']} s ({steps}), "
            + f"caught up {figure.get('catch_up_s', 'not within the settle')} s"
        )
        return figure

    def _finish(self, kind: str) -> str:
        running, self.current = self.current, None
        assert running is not None
        state, output = running.wait(timeout=600)
        if state != "success":
            raise RuntimeError(f"the {kind} DAG run ended {state!r}; its log: {running.log_path}")
        return output

    def stop(self) -> None:
        if self.current is not None:
            self.current.kill()
        if self.story.producer is not None:
            self.story.producer.stop(flush_timeout=2)
        self.story.stop_job()


def stats(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
    }


def summarize(
    args: argparse.Namespace, figures: list[dict[str, Any]], counts: dict[str, int], machine: str
) -> dict[str, Any]:
    """Flat ``<switch>_<figure>_<stat>_s`` keys for tables, every switch's figures under ``switches``."""
    summary: dict[str, Any] = {
        "rounds": args.rounds,
        "health": args.health,
        "rate": args.rate,
        "partitions": args.partitions,
        "max_offsets_per_trigger": args.max_offsets_per_trigger,
        "standby": args.standby,
    }
    for kind in ("failover", "failback"):
        mine = [f for f in figures if f["switch"].startswith(kind)]
        for figure in ("detection", "rto", "catch_up"):
            values = [f[f"{figure}_s"] for f in mine if f"{figure}_s" in f]
            for stat, value in (stats(values) if values else {}).items():
                summary[f"{kind}_{figure}_{stat}_s"] = value
        for step in SWITCH_STEPS:
            values = [f["steps"][step] for f in mine if step in f.get("steps", {})]
            if values:
                summary[f"{kind}_{step}_median_s"] = round(statistics.median(values), 1)
        for part in ("broker_start", "mm2_start", "recovered_wait"):
            values = [f["back"][part] for f in mine if part in f.get("back", {})]
            if values:
                summary[f"{kind}_{part}_median_s"] = round(statistics.median(values), 1)
    summary.update({key: counts[key] for key in ("produced", "lost", "unread", "duplicates")})
    summary["duplicates_above_bound"] = sum(
        1
        for f in figures
        if f.get("max_duplicates") is not None and f.get("duplicates", 0) > f["max_duplicates"]
    )
    summary.update({"switches": figures, "machine": machine})
    return summary


def health_settings(name: str) -> dict[str, Any]:
    return dict(QUICK_HEALTH) if name == "quick" else HealthThresholds().model_dump()


def make_story(sandbox: Sandbox, root: Path, args: argparse.Namespace) -> Story:
    """The pair on the running sandbox: its config, topics and the steady producer."""
    story = Story(
        sandbox,
        prepare_airflow_home(root / "airflow"),
        root / "pair",
        PAIR,
        TOPIC,
        spark_conn="spark_bench_rto",
    )
    if args.max_offsets_per_trigger is not None:
        story.job_options["max_offsets_per_trigger"] = args.max_offsets_per_trigger
    story.write_config(health=health_settings(args.health), standby=args.standby)
    story.create_topics(args.partitions)
    story.start_producer(args.rate, args.partitions)
    return story


def measure(args: argparse.Namespace, bench: Rounds) -> tuple[list[dict], dict[str, int]]:
    """The start DAG, then ``args.rounds`` rounds of failover and failback; return figures and sink counts."""
    bench.run_start()
    figures = []
    for round_no in range(args.rounds):
        say(f"round {round_no + 1} of {args.rounds}")
        figures.append(bench.switch("failover", "crash", 2 * round_no + 1))
        figures.append(bench.switch("failback", "restart", 2 * round_no + 2))
    story = bench.story
    story.producer.stop()
    counts = settle_sink(story)
    say(
        f"sink: {counts['unique']} of {counts['produced']} acknowledged ids, {counts['lost']} lost, "
        f"{counts['unread']} not read yet, {counts['duplicates']} duplicates"
    )
    attribute_duplicates(story, figures)
    return figures, counts


def settle_sink(story: Story, quiet_s: float = 30.0, limit_s: float = 900.0) -> dict[str, int]:
    """Wait until every acknowledged id is in the sink, or the sink stops growing; return the counts.

    The job may still be reading the backlog of the last outage when the rounds end (a first-batch cap slows
    its catch-up), so an id missing at some moment is not lost yet. Ids missing once no row was added for
    ``quiet_s`` seconds are ``lost``; ids still missing at ``limit_s`` while rows keep arriving are
    ``unread`` (the job had not read them yet), and ``lost`` is then 0.
    """
    started = time.monotonic()
    counts = story.sink_counts()
    grew_at, rows = started, counts["rows"]
    while counts["lost"]:
        now = time.monotonic()
        if now - grew_at >= quiet_s:
            return {**counts, "unread": 0}
        if now - started >= limit_s:
            say(f"the job was still writing after {limit_s:.0f} s: the ids not in the sink are not read yet")
            return {**counts, "unread": counts["lost"], "lost": 0}
        time.sleep(2.0)
        counts = story.sink_counts()
        if counts["rows"] > rows:
            grew_at, rows = time.monotonic(), counts["rows"]
            if counts["lost"]:
                say(f"  sink: {counts['lost']} acknowledged ids not in it yet; the job is still writing")
    return {**counts, "unread": 0}


def attribute_duplicates(story: Story, figures: list[dict[str, Any]]) -> None:
    """Give each switch the rows its new run wrote again (``duplicates``: rows of its epoch whose id an
    earlier row has) beside its plan's bound from the pair's history (``max_duplicates``; None: unbounded)."""
    by_epoch = story.read_sink().duplicates_by_epoch
    bounds = {
        entry["epoch"]: (entry.get("plan") or {}).get("max_duplicates") for entry in story.record()["history"]
    }
    for epoch, figure in enumerate(figures, start=1):
        figure["duplicates"], figure["max_duplicates"] = by_epoch.get(epoch, 0), bounds.get(epoch)
        within = figure["max_duplicates"] is None or figure["duplicates"] <= figure["max_duplicates"]
        say(
            f"  {figure['switch']} (epoch {epoch}): {figure['duplicates']} rows written again, plan's bound "
            f"{figure['max_duplicates']}" + ("" if within else "  ABOVE THE BOUND")
        )
    if by_epoch.get(0):
        say(f"  the start run (epoch 0): {by_epoch[0]} rows written again (not a switch's)")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of failover + failback (3)")
    parser.add_argument(
        "--health",
        choices=("quick", "default"),
        default="quick",
        help="health thresholds: the demo's quick ones (default) or the provider's defaults",
    )
    parser.add_argument("--rate", type=float, default=40.0, help="records per second produced (40)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the topic (2)")
    parser.add_argument(
        "--standby",
        choices=("none", "warm"),
        default="none",
        help="warm: the pair's switch.standby; a warm driver is started before each switch (none)",
    )
    parser.add_argument(
        "--keep-run-dir",
        action="store_true",
        help="keep the run directory (every DAG run's log, the plans) after a run that finished",
    )
    parser.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=None,
        help="the job's max_offsets_per_trigger: a cap on each batch, so the first batch after an outage "
        "is bounded and the backlog is read by the batches after it (default: none)",
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    json_out = json_line_output()  # stdout keeps only the final JSON line
    machine = f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}"
    say(f"machine: {machine}")
    root = REPO / ".run" / f"bench-rto-{os.getpid()}"
    sandbox = Sandbox(root / "sandbox")
    bench: Rounds | None = None
    result = None
    try:
        say(f"starting the sandbox under {root} ...")
        sandbox.up()
        bench = Rounds(make_story(sandbox, root, args), warm=args.standby == "warm")
        result = measure(args, bench)
    finally:
        if bench is not None:
            bench.stop()
        sandbox.down()
        if result is not None and not args.keep_run_dir:
            shutil.rmtree(root, ignore_errors=True)
        else:
            say(f"run directory kept (logs of every DAG run): {root}")
    summary = summarize(args, *result, machine)
    if bench is not None and bench.idle_cost is not None:
        summary["warm_standby_idle"] = bench.idle_cost
    for kind in ("failover", "failback"):
        say(
            f"{kind}: detection median {summary.get(f'{kind}_detection_median_s')} s, RTO median "
            f"{summary.get(f'{kind}_rto_median_s')} s (min {summary.get(f'{kind}_rto_min_s')}, "
            f"max {summary.get(f'{kind}_rto_max_s')}), "
            f"caught up median {summary.get(f'{kind}_catch_up_median_s')} s; "
            "step medians: "
            + ", ".join(
                f"{step} {summary[f'{kind}_{step}_median_s']} s"
                for step in ("broker_start", "mm2_start", "recovered_wait", *SWITCH_STEPS)
                if f"{kind}_{step}_median_s" in summary
            )
        )
    json_out.write(json.dumps(summary) + "\n")
    json_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

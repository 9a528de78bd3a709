"""The ``kafka-failover`` command line.

Subcommands:
    sandbox up|down|status|fault|mirrormaker   the local two-cluster Kafka sandbox with MirrorMaker 2
    plan                                       translate a job's position to start offsets on the other cluster
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time

from airflow_kafka_failover.exceptions import ConfigError, FailoverError

log = logging.getLogger("airflow_kafka_failover.cli")


def _add_sandbox_commands(subparsers: argparse._SubParsersAction) -> None:
    sandbox = subparsers.add_parser(
        "sandbox", help="run Kafka clusters A and B with MirrorMaker 2 on loopback"
    )
    sandbox.add_argument(
        "--run-dir",
        help="directory for state, logs and data (default: .run/sandbox in the checkout, or $AKF_SANDBOX_DIR)",
    )
    actions = sandbox.add_subparsers(dest="action", required=True, metavar="ACTION")

    up = actions.add_parser("up", help="start both clusters and MirrorMaker 2; return when all are ready")
    up.add_argument("--json", action="store_true", help="print bootstrap addresses and the run dir as JSON")
    up.add_argument(
        "--policy",
        choices=("default", "identity"),
        default="default",
        help="default: A->B and B->A with prefixed names (orders -> A.orders); identity: one A->B flow, same names",
    )
    up.add_argument("--topics", default=".*", help="regex of topics MirrorMaker 2 replicates (default: .*)")
    up.add_argument(
        "--groups", default=".*", help="regex of consumer groups MirrorMaker 2 checkpoints (default: .*)"
    )
    up.add_argument("--timeout", type=_positive_float, default=90.0, help="seconds to wait for readiness")

    actions.add_parser("down", help="stop MirrorMaker 2 and both clusters")
    status = actions.add_parser("status", help="report each process and whether it answers")
    status.add_argument("--json", action="store_true", help="print the status as JSON")

    fault = actions.add_parser("fault", help="inject a whole-cluster fault")
    fault.add_argument("kind", choices=("crash", "hang", "resume", "restart", "wipe"))
    fault.add_argument("--cluster", required=True, help="the cluster's name, e.g. A")

    mm2 = actions.add_parser("mirrormaker", help="stop or start MirrorMaker 2 alone")
    mm2.add_argument("mm2_action", choices=("stop", "start"))


def _add_plan_command(subparsers: argparse._SubParsersAction) -> None:
    plan = subparsers.add_parser(
        "plan",
        help="translate a job's position on one cluster into start offsets on the other",
        description="Print the translation plan: per partition, the start offset on the target, the method "
        "that found it, the bound on re-delivered records, and gaps. Changes nothing.",
    )
    plan.add_argument("--config", required=True, help="the pair config file (YAML)")
    plan.add_argument("--pair", required=True, help="the pair's name in the config")
    plan.add_argument("--from", dest="source", required=True, help="the cluster the job read")
    plan.add_argument("--to", dest="target", required=True, help="the cluster it will read")
    where = plan.add_mutually_exclusive_group(required=True)
    where.add_argument("--checkpoint", help="the job's Spark checkpoint directory")
    where.add_argument("--position", help='an explicit position as JSON, e.g. \'{"orders": {"0": 12}}\'')
    where.add_argument(
        "--group", help="a consumer group on the source cluster whose commits are the position"
    )
    plan.add_argument("--json", action="store_true", help="print the plan as JSON instead of a table")


def _run_plan(args: argparse.Namespace) -> int:
    from airflow_kafka_failover.config import load_pair

    pair = load_pair(args.config, args.pair)
    for name in (args.source, args.target):
        pair.cluster(name)  # raises naming the pair's clusters
    if args.source == args.target:
        raise ConfigError(
            f"--from and --to are both {args.source!r}; name the two different clusters of the pair"
        )
    # Airflow's loggers print to stdout; only the plan itself may go there (``--json`` is parsed by tools).
    with _stdout_to_stderr() as real_stdout:
        from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook  # imports Airflow, which logs
        from airflow_kafka_failover.translation.planner import build_plan, load_position

        hooks = {name: KafkaClusterHook(spec.connection) for name, spec in pair.clusters.items()}
        for hook in hooks.values():
            _ = hook.client_config  # name a bad connection before any network call
        position = load_position(args.checkpoint, args.position, args.group, hooks[args.source])
        plan = build_plan(pair, args.source, args.target, position, hooks)
        print(plan.to_json() if args.json else plan.to_table(), file=real_stdout)
    return 0


@contextlib.contextmanager
def _stdout_to_stderr():
    """Send everything written to file descriptor 1 to stderr; yield a file on the real stdout.

    Done at the descriptor level because Airflow's structlog keeps its own reference to stdout.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    real = os.fdopen(os.dup(saved), "w")
    try:
        yield real
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        real.flush()
        real.close()


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def _sandbox_up(args: argparse.Namespace) -> int:
    from airflow_kafka_failover.sandbox.mirrormaker import ReplicationSettings
    from airflow_kafka_failover.sandbox.sandbox import Sandbox

    settings = ReplicationSettings(policy=args.policy, topics=args.topics, groups=args.groups)
    started = time.monotonic()
    info = Sandbox(args.run_dir, settings=settings).up(timeout=args.timeout)
    if args.json:
        print(json.dumps(info))
        return 0
    print(f"sandbox up in {time.monotonic() - started:.1f} s (run dir {info['run_dir']})")
    for name, cluster in info["clusters"].items():
        print(f"  cluster {name}: {cluster['bootstrap']}")
    print(f"  MirrorMaker 2: {', '.join(info['replication']['flows'])} ({settings.policy} policy)")
    return 0


def _sandbox_status(sandbox, as_json: bool) -> int:
    status = sandbox.status()
    if as_json:
        print(json.dumps(status))
    else:
        print(f"run dir {status['run_dir']}")
        if not status["processes"]:
            print("  no sandbox has been started here")
        for name, proc in status["processes"].items():
            state = "frozen" if proc["frozen"] else "running" if proc["running"] else "stopped"
            answers = "" if "answers" not in proc else (" answers" if proc["answers"] else " does not answer")
            print(f"  {name:<12} {state:<8} pid {proc['pid'] or '-'}{answers}")
    return 0 if sandbox.brokers and all(p["running"] for p in status["processes"].values()) else 3


def _run_sandbox(args: argparse.Namespace) -> int:
    from airflow_kafka_failover.sandbox.sandbox import Sandbox

    if args.action == "up":
        return _sandbox_up(args)
    sandbox = Sandbox(args.run_dir)
    if args.action == "status":
        return _sandbox_status(sandbox, args.json)
    if args.action == "down":
        started = time.monotonic()
        sandbox.down()
        print(f"sandbox down in {time.monotonic() - started:.1f} s")
    elif args.action == "fault":
        sandbox.fault(args.kind, args.cluster)
        print(f"{args.kind} injected on cluster {args.cluster}")
    elif args.mm2_action == "stop":
        sandbox.stop_mirrormaker()
        print("MirrorMaker 2 stopped")
    else:
        sandbox.start_mirrormaker()
        print("MirrorMaker 2 started")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-failover",
        description="Move Kafka stream consumers between clusters safely (airflow-kafka-failover).",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and decisions")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_sandbox_commands(subparsers)
    _add_plan_command(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        if args.command == "sandbox":
            return _run_sandbox(args)
        if args.command == "plan":
            return _run_plan(args)
    except FailoverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

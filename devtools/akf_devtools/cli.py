"""The ``akf-dev`` command line of the development tools.

Subcommands:
    sandbox up|down|status|fault|mirrormaker   the local two-cluster Kafka sandbox with MirrorMaker 2

``python -m akf_devtools`` runs the same command.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from airflow_kafka_failover.core.exceptions import FailoverError
from akf_devtools.errors import SandboxError

FAULTS = ("crash", "hang", "resume", "restart", "wipe", "lose-quorum", "rolling-restart")
"""The sandbox's fault kinds (``akf_devtools.sandbox.sandbox.FAULTS``, kept here so that ``--help`` imports
no Kafka client)."""


def _add_sandbox_commands(subparsers: argparse._SubParsersAction) -> None:
    sandbox = subparsers.add_parser(
        "sandbox", help="run Kafka clusters A and B with MirrorMaker 2 on loopback"
    )
    sandbox.add_argument(
        "--run-dir",
        help="directory for state, logs and data (default: .run/sandbox in the checkout, or "
        "$AKF_SANDBOX_DIR)",
    )
    actions = sandbox.add_subparsers(dest="action", required=True, metavar="ACTION")

    up = actions.add_parser("up", help="start both clusters and MirrorMaker 2; return when all are ready")
    up.add_argument("--json", action="store_true", help="print bootstrap addresses and the run dir as JSON")
    up.add_argument(
        "--policy",
        choices=("default", "identity"),
        default="default",
        help="default: A->B and B->A with prefixed names (orders -> A.orders); identity: one A->B flow, "
        "same names",
    )
    up.add_argument("--topics", default=".*", help="regex of topics MirrorMaker 2 replicates (default: .*)")
    up.add_argument(
        "--groups", default=".*", help="regex of consumer groups MirrorMaker 2 checkpoints (default: .*)"
    )
    up.add_argument("--timeout", type=_positive_float, default=90.0, help="seconds to wait for readiness")
    up.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="brokers per cluster (default 1: one node that is broker and controller; 3: three brokers, a "
        "quorum of three controllers, replication factor 3, min.insync.replicas 2)",
    )

    actions.add_parser("down", help="stop MirrorMaker 2 and both clusters")
    status = actions.add_parser("status", help="report each process and whether it answers")
    status.add_argument("--json", action="store_true", help="print the status as JSON")

    fault = actions.add_parser(
        "fault", help="inject a fault into a cluster, or one of its brokers or controllers"
    )
    fault.add_argument("kind", choices=FAULTS)
    fault.add_argument("--cluster", required=True, help="the cluster's name, e.g. A")
    node = fault.add_mutually_exclusive_group()
    node.add_argument(
        "--broker", type=int, help="hit this broker only (1-based; crash, hang, resume, restart)"
    )
    node.add_argument(
        "--controller", type=int, help="hit this controller only (1-based; crash, hang, resume, restart)"
    )

    mm2 = actions.add_parser("mirrormaker", help="stop or start MirrorMaker 2 alone")
    mm2.add_argument("mm2_action", choices=("stop", "start"))


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def _sandbox_up(args: argparse.Namespace) -> int:
    from akf_devtools.sandbox.mirrormaker import ReplicationSettings
    from akf_devtools.sandbox.sandbox import Sandbox

    settings = ReplicationSettings(policy=args.policy, topics=args.topics, groups=args.groups)
    started = time.monotonic()
    timeout = args.timeout if args.brokers == 1 else max(args.timeout, 180.0)
    info = Sandbox(args.run_dir, settings=settings, brokers=args.brokers).up(timeout=timeout)
    if args.json:
        print(json.dumps(info))
        return 0
    print(f"sandbox up in {time.monotonic() - started:.1f} s (run dir {info['run_dir']})")
    for name, cluster in info["clusters"].items():
        size = "" if cluster["brokers"] == 1 else f" ({cluster['brokers']} brokers, 3 controllers)"
        print(f"  cluster {name}: {cluster['bootstrap']}{size}")
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
            print(f"  {name:<14} {state:<8} pid {proc['pid'] or '-'}{answers}")
    return 0 if sandbox.clusters and all(p["running"] for p in status["processes"].values()) else 3


def _run_sandbox(args: argparse.Namespace) -> int:
    from akf_devtools.sandbox.sandbox import Sandbox

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
        sandbox.fault(args.kind, args.cluster, broker=args.broker, controller=args.controller)
        where = (
            f"broker {args.broker} of cluster {args.cluster}"
            if args.broker is not None
            else f"controller {args.controller} of cluster {args.cluster}"
            if args.controller is not None
            else f"cluster {args.cluster}"
        )
        print(f"{args.kind} injected on {where}")
    elif args.mm2_action == "stop":
        sandbox.stop_mirrormaker()
        print("MirrorMaker 2 stopped")
    else:
        sandbox.start_mirrormaker()
        print("MirrorMaker 2 started")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="akf-dev",
        description="Development tools of airflow-kafka-failover: the local Kafka sandbox.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and decisions")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_sandbox_commands(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        return _run_sandbox(args)
    except (SandboxError, FailoverError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

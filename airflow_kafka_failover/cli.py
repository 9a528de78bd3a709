"""The ``kafka-failover`` command line.

Subcommands:
    plan    translate a job's position to start offsets on the other cluster

Exit codes: 0 success; 1 an error (named on stderr); 2 bad arguments; 3 (``plan``) the plan was printed,
but some partitions have no start offset, so a switch with it would be refused; 130 interrupted.

The local Kafka sandbox is a development tool of the repository (``akf-dev sandbox``), not part of the
provider.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys

from airflow_kafka_failover.exceptions import ConfigError, FailoverError

log = logging.getLogger("airflow_kafka_failover.cli")

EXIT_INCOMPLETE_PLAN = 3
"""``plan`` printed a plan in which some partitions have no start offset."""


def _add_plan_command(subparsers: argparse._SubParsersAction) -> None:
    plan = subparsers.add_parser(
        "plan",
        help="translate a job's position on one cluster into start offsets on the other",
        description="Print the translation plan: per partition, the start offset on the target, the method "
        "that found it, the bound on re-delivered records, and gaps. Changes nothing. Exits 3 when some "
        "partitions have no start offset (the plan is printed, and stderr names them and why).",
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
    missing = plan.without_start
    if missing:
        for translation in missing:
            print(
                f"error: no start offset for {translation.target} (from {translation.source} at "
                f"{translation.source_offset}): {'; '.join(translation.warnings)}",
                file=sys.stderr,
            )
        print(
            f"error: {len(missing)} partition(s) have no start offset; a switch with this plan is refused",
            file=sys.stderr,
        )
        return EXIT_INCOMPLETE_PLAN
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-failover",
        description="Move Kafka stream consumers between clusters safely (airflow-kafka-failover).",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and decisions")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
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

"""The ``kafka-failover`` command line.

Subcommands:
    plan     translate a job's position to start offsets on the other cluster
    status   the operator's view of each pair: record, fence, job, lag, replication, last switches (over
             several pairs, first a table of all of them, the ones in trouble first)
    history  the switch history of a pair's active record

Exit codes: 0 success; 1 an error (named on stderr); 2 bad arguments; 3 (``plan``) the plan was printed,
but some partitions have no start offset, so a switch with it would be refused; 4 (``status``) some pair
needs a person (an interrupted switch, a fence that disagrees with the record, no running job); 5
(``status``) something could not be read (e.g. a cluster that does not answer), and nothing needs a person
as far as could be seen; 130 interrupted. ``status`` and ``history`` change nothing.

The local Kafka sandbox is a development tool of the repository (``akf-dev sandbox``), not part of the
provider.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError
from airflow_kafka_failover.domain.config import load_pair, load_pairs
from airflow_kafka_failover.domain.status.assembly import EXIT_ACT, EXIT_UNREAD, assemble, exit_code
from airflow_kafka_failover.domain.status.model import PairHistory
from airflow_kafka_failover.domain.status.text import (
    fleet_to_text,
    history_to_text,
    statuses_to_json,
    to_text,
)
from airflow_kafka_failover.hooks.storage import use_job_storage

if TYPE_CHECKING:
    from typing import TextIO

    from airflow_kafka_failover.domain.config import PairConfig

# The modules that read clusters and stores import Airflow, whose loggers print to stdout from that first
# import on (e.g. "Unit test configuration loaded"). They are imported inside the commands, after ``main``
# has sent file descriptor 1 to stderr, so that stdout holds only a command's result (``--json`` is parsed).

log = logging.getLogger("airflow_kafka_failover.cli")

EXIT_INCOMPLETE_PLAN = 3
"""``plan`` printed a plan in which some partitions have no start offset."""
EXIT_STATUS_ACT = EXIT_ACT
"""``status``: some pair needs a person."""
EXIT_STATUS_UNREAD = EXIT_UNREAD
"""``status``: something could not be read; nothing seen needs a person."""
STATUS_READERS = 8
"""``status``: how many pairs are read at the same time."""


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


def _run_plan(args: argparse.Namespace, out: TextIO) -> int:
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
    from airflow_kafka_failover.io.planner import build_plan, load_position

    pair = load_pair(args.config, args.pair)
    use_job_storage(pair.job)
    for name in (args.source, args.target):
        pair.cluster(name)  # raises naming the pair's clusters
    if args.source == args.target:
        raise ConfigError(
            f"--from and --to are both {args.source!r}; name the two different clusters of the pair"
        )
    hooks = {name: KafkaClusterHook(spec.connection) for name, spec in pair.clusters.items()}
    for hook in hooks.values():
        _ = hook.client_config  # name a bad connection before any network call
    position = load_position(args.checkpoint, args.position, args.group, hooks[args.source])
    plan = build_plan(pair, args.source, args.target, position, hooks)
    print(plan.to_json() if args.json else plan.to_table(), file=out, flush=True)
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


def _add_status_command(subparsers: argparse._SubParsersAction) -> None:
    status = subparsers.add_parser(
        "status",
        help="show each pair: active cluster, epoch, fence, job, lag, replication, last switches",
        description="Show, per pair, the active record and the fencing marker (and whether they agree), the "
        "job's state and last committed batch, its lag per partition on the active cluster, MirrorMaker 2's "
        "replication lag and heartbeat age on the standby, and the last switches. Over several pairs, a "
        "table of them all comes first (the ones that need a person first, then those not fully read, "
        "then those with warnings; the furthest behind first within each), then the full status of each "
        "pair in trouble. Changes nothing. Exits 0 "
        f"when all is read and well, {EXIT_ACT} when a pair needs a person (interrupted switch, fence and "
        f"record disagree, no running job), {EXIT_UNREAD} when something could not be read.",
    )
    status.add_argument("--config", required=True, help="the pair config file (YAML)")
    status.add_argument("--pair", help="one pair's name in the config (default: every pair)")
    status.add_argument("--json", action="store_true", help="print JSON instead of text")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of switches >= 1")
    return value


def _add_history_command(subparsers: argparse._SubParsersAction) -> None:
    history = subparsers.add_parser(
        "history",
        help="show the switch history of a pair's active record",
        description="Print the switches of the pair's active record, oldest first: time, kind, from -> to, "
        "epoch, forced, gap_records, the plan's max_duplicates, who triggered it and why. Changes nothing.",
    )
    history.add_argument("--config", required=True, help="the pair config file (YAML)")
    history.add_argument("--pair", required=True, help="the pair's name in the config")
    history.add_argument("--limit", type=_positive_int, help="show only the last N switches (default: all)")
    history.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _chosen_pairs(config: str, name: str | None, hint: str) -> list[PairConfig]:
    """The pair named ``name`` of ``config`` (every pair when None), with a hint in the error for a bad name.

    :param config: the pair config file.
    :param name: the --pair value.
    :param hint: how the command takes --pair, appended to the error.
    """

    pairs = load_pairs(config)
    for pair in pairs.values():
        use_job_storage(pair.job)
    if name is None:
        return list(pairs.values())
    if name not in pairs:
        raise ConfigError(
            f"{config} has no pair {name!r}; it has {sorted(pairs)}: pass one of them with --pair ({hint})"
        )
    return [pairs[name]]


def _run_status(args: argparse.Namespace, out: TextIO) -> int:
    from airflow_kafka_failover.io.status_readers import read_pair

    pairs = _chosen_pairs(args.config, args.pair, "or leave --pair out to see every pair")
    # Each pair's reads wait on clusters and stores: a fleet's are read side by side, in the config's order.
    with ThreadPoolExecutor(max_workers=min(STATUS_READERS, len(pairs)), thread_name_prefix="status") as pool:
        statuses = [assemble(readings) for readings in pool.map(read_pair, pairs)]
    if args.json:
        text = statuses_to_json(statuses)
    elif len(statuses) == 1:
        text = to_text(statuses[0])
    else:
        text = fleet_to_text(statuses, args.config)
    print(text, file=out, flush=True)
    return exit_code(statuses)


def _run_history(args: argparse.Namespace, out: TextIO) -> int:
    from airflow_kafka_failover.io.status_readers import read_history_record

    (pair,) = _chosen_pairs(args.config, args.pair, "one pair at a time")
    record, stored = read_history_record(pair)
    history = PairHistory.of(record, stored, args.limit)
    if args.json:
        print(json.dumps(history.model_dump(mode="json"), indent=2), file=out, flush=True)
    else:
        print(history_to_text(history), file=out, flush=True)
    return 0


COMMANDS = {"plan": _run_plan, "status": _run_status, "history": _run_history}


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
    _add_status_command(subparsers)
    _add_history_command(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    with _stdout_to_stderr() as out:
        from airflow_kafka_failover.version_compat import airflow_cli_context

        try:
            with airflow_cli_context():
                return COMMANDS[args.command](args, out)
        except FailoverError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())

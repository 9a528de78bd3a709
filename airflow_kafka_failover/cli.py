"""The ``kafka-failover`` command line.

Subcommands:
    validate the pair config file alone, offline: each pair and the topics its job reads on each cluster
    check    ask both clusters of each pair whether they hold every topic a start or a switch needs
    plan     translate a job's position to start offsets on the other cluster
    status   the operator's view of each pair: record, fence, job, lag, replication, last switches (over
             several pairs, first a table of all of them, the ones in trouble first)
    history  the switch history of a pair's active record

Exit codes: 0 success; 1 an error (named on stderr); 2 bad arguments; 3 (``plan``) the plan was printed,
but some partitions have no start offset, so a switch with it would be refused, or (``check``) the report
was printed, but a cluster lacks a topic the job reads there (or a copy's partitions differ from its
origin's), so a start or switch there would be refused; 4 (``status``) some pair needs a person (an
interrupted switch, a fence that disagrees with the record, no running job); 5 (``status``) something could
not be read (e.g. a cluster that does not answer), and nothing needs a person as far as could be seen; 130
interrupted. No command changes anything.

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
from typing import TYPE_CHECKING, Any

from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError
from airflow_kafka_failover.domain.config import defaulted_state_options, load_pair, load_pairs
from airflow_kafka_failover.domain.status.assembly import EXIT_ACT, EXIT_UNREAD, assemble, exit_code
from airflow_kafka_failover.domain.status.model import PairHistory
from airflow_kafka_failover.domain.status.text import (
    fleet_to_text,
    history_to_text,
    statuses_to_json,
    to_text,
)
from airflow_kafka_failover.domain.topic_needs import topic_needs, topic_problems
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
EXIT_CHECK_REFUSED = 3
"""``check`` printed its report, and a cluster lacks a topic (or its partitions) a start or switch needs."""
EXIT_STATUS_ACT = EXIT_ACT
"""``status``: some pair needs a person."""
EXIT_STATUS_UNREAD = EXIT_UNREAD
"""``status``: something could not be read; nothing seen needs a person."""
STATUS_READERS = 8
"""``status``: how many pairs are read at the same time."""


def _add_validate_command(subparsers: argparse._SubParsersAction) -> None:
    validate = subparsers.add_parser(
        "validate",
        help="check the pair config file alone, offline, and show what each cluster must hold",
        description="Load the pair config file as the DAG file does, without Airflow's database or any "
        "cluster, and print each pair: its clusters and connections, its replication flows, the topics the "
        "job reads on each cluster and who makes each (you, or a MirrorMaker 2 flow), and the job paths left "
        "at this host's defaults. Exits 1 naming the file, the pair and the field of the first problem.",
    )
    validate.add_argument("--config", required=True, help="the pair config file (YAML)")
    validate.add_argument("--pair", help="one pair's name in the config (default: every pair)")


def _run_validate(args: argparse.Namespace, out: TextIO) -> int:
    pairs = _chosen_pairs(args.config, args.pair, "or leave --pair out to validate every pair", storage=False)
    lines = [f"{args.config}: valid, {len(pairs)} pair(s)"]
    for pair in pairs:
        clusters = ", ".join(f"{name} (connection {spec.connection})" for name, spec in pair.clusters.items())
        flows = ", ".join(f"{source}->{target}" for source, target in pair.replication.flows)
        lines += [
            f"pair {pair.name}: clusters {clusters}; primary {pair.primary}; "
            f"policy {pair.replication.policy.value}, flows {flows}",
        ]
        for cluster in pair.clusters:
            needs = [need for need in topic_needs(pair) if need.cluster == cluster]
            refused = f"a start or switch to {cluster} refuses without them"
            lines.append(f"  on {cluster} the job reads ({refused}):")
            lines += [f"    {need.topic}: made by {need.made_by}" for need in needs]
        defaulted = defaulted_state_options(pair)
        if defaulted:
            lines.append(
                f"  note: {', '.join(defaulted)} left at this host's defaults under $AIRFLOW_HOME: right "
                "only when every task runs on one host (LocalExecutor); the DAG file refuses them under "
                "executors that run tasks on other hosts"
            )
    print("\n".join(lines), file=out, flush=True)
    return 0


def _add_check_command(subparsers: argparse._SubParsersAction) -> None:
    check = subparsers.add_parser(
        "check",
        help="ask both clusters whether they hold every topic a start or a switch needs",
        description="Ask each cluster of the pair for the topics the job reads there (its own topics and, "
        "under the default policy, MirrorMaker 2's copies from the other cluster), within the job's "
        "check_timeout_seconds, and print them with their partitions. Changes nothing. Exits 3 when a "
        "cluster lacks one (a start or switch there would refuse to start) or a copy's partitions differ "
        "from its origin's, naming each on stderr with what to do; 1 when a cluster does not answer.",
    )
    check.add_argument("--config", required=True, help="the pair config file (YAML)")
    check.add_argument("--pair", help="one pair's name in the config (default: every pair)")
    check.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _held_topics(pair: PairConfig) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Per cluster of ``pair``, the partition count of each topic the job reads there that exists; and one
    sentence per cluster that did not answer."""
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook

    held: dict[str, dict[str, int]] = {}
    unread = []
    timeout = pair.job.check_timeout_seconds
    for cluster, spec in pair.clusters.items():
        hook = KafkaClusterHook(spec.connection, timeout_seconds=timeout)
        _ = hook.client_config  # name a bad connection before any network call
        wanted = [need.topic for need in topic_needs(pair) if need.cluster == cluster]
        try:
            metadata = hook.describe_cluster(wanted)
        except ConfigError:
            raise
        except Exception as exc:
            unread.append(
                f"cluster {cluster} (connection {spec.connection!r}, {hook.bootstrap_servers}) did not "
                f"answer within {timeout:g} s: {exc}; check the bootstrap servers and that the cluster is up"
            )
            continue
        counts = held.setdefault(cluster, {})
        for info in metadata.partitions:
            counts[info.topic] = counts.get(info.topic, 0) + 1
    return held, unread


def _run_check(args: argparse.Namespace, out: TextIO) -> int:
    pairs = _chosen_pairs(args.config, args.pair, "or leave --pair out to check every pair")
    report, problems, unread = [], [], []
    for pair in pairs:
        held, pair_unread = _held_topics(pair)
        unread += pair_unread
        found = topic_problems(pair, held) if not pair_unread else []
        problems += [f"pair {pair.name}: {problem}" for problem in found]
        for need in topic_needs(pair):
            partitions = held.get(need.cluster, {}).get(need.topic)
            report.append(
                {
                    "pair": pair.name,
                    "cluster": need.cluster,
                    "topic": need.topic,
                    "partitions": partitions,
                    "state": _state(need.cluster in held, partitions),
                    "made_by": need.made_by,
                }
            )
    if args.json:
        document = {"topics": report, "problems": problems, "unread": unread}
        print(json.dumps(document, indent=2), file=out, flush=True)
    else:
        print(_check_table(report), file=out, flush=True)
    for sentence in unread + problems:
        print(f"error: {sentence}", file=sys.stderr)
    if unread:
        return 1
    if problems:
        print(
            f"error: {len(problems)} problem(s): a start or switch that needs them refuses to start",
            file=sys.stderr,
        )
        return EXIT_CHECK_REFUSED
    return 0


def _state(answered: bool, partitions: int | None) -> str:
    if not answered:
        return "unread"
    return "missing" if partitions is None else "held"


def _check_table(report: list[dict[str, Any]]) -> str:
    rows = [("pair", "cluster", "topic", "partitions", "made by")]
    for row in report:
        shown = str(row["partitions"]) if row["state"] == "held" else row["state"]
        rows.append((row["pair"], row["cluster"], row["topic"], shown, row["made_by"]))
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    return "\n".join(
        "  ".join(
            [*(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)), row[4]]
        ).rstrip()
        for row in rows
    )


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


def _chosen_pairs(config: str, name: str | None, hint: str, storage: bool = True) -> list[PairConfig]:
    """The pair named ``name`` of ``config`` (every pair when None), with a hint in the error for a bad name.

    :param config: the pair config file.
    :param name: the --pair value.
    :param hint: how the command takes --pair, appended to the error.
    :param storage: set up the pairs' job storage (the commands that read the state); False for a command
        that reads nothing but the file.
    """

    pairs = load_pairs(config)
    for pair in pairs.values() if storage else ():
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


COMMANDS = {
    "validate": _run_validate,
    "check": _run_check,
    "plan": _run_plan,
    "status": _run_status,
    "history": _run_history,
}


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
    _add_validate_command(subparsers)
    _add_check_command(subparsers)
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

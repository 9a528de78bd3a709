"""docs/getting-started.md is what a new user runs: its pair config loads, its DAG file builds the four DAGs
from that config (also under an executor that spreads tasks over hosts, since its paths are named), its
MirrorMaker 2 settings and topic creation give each cluster every topic the job reads there (what a start
or switch refuses to go without), it checks them before the start, and its ``airflow`` command lines parse
against Airflow's own command-line parser. Its ``kafka-failover`` lines are checked with every other doc's
in test_documented_commands.py. Every shell line is of a kind the walk
(tests/integration/test_getting_started_walk.py) knows how to take."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from airflow_kafka_failover.domain.config import PairConfig, load_pairs
from airflow_kafka_failover.domain.topic_needs import topic_needs
from airflow_kafka_failover.domain.translation.replication_policy import for_name
from tests.getting_started_page import (
    PAGE,
    blocks,
    page_mm2_settings,
    regex_covers,
    shell_lines,
    step_kind,
    words,
)


@pytest.fixture
def config(tmp_path) -> Path:
    (block,) = blocks("yaml")
    path = tmp_path / "pairs.yaml"
    path.write_text(block)
    return path


@pytest.fixture
def pair(config) -> PairConfig:
    return load_pairs(str(config))["orders"]


def test_the_pair_config_of_the_page_loads(pair):
    assert pair.switch.pool == "kafka_failover_orders"
    assert pair.job.packages == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"
    assert pair.job.fencing_marker == "/shared/kafka-failover/fencing/orders"


def test_the_dag_file_of_the_page_builds_the_four_dags(config, monkeypatch):
    (dag_file,) = blocks("python")
    monkeypatch.setenv("AKF_PAIRS_CONFIG", str(config))
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "CeleryExecutor")  # its paths are named: taken as shared
    namespace: dict = {}
    exec(compile(dag_file, str(PAGE), "exec"), namespace)
    built = sorted(name for name in namespace if name.startswith("kafka_failover_"))
    assert built == [f"kafka_failover_orders_{kind}" for kind in ("failback", "failover", "keeper", "start")]


def test_every_shell_line_of_the_page_is_a_step_the_walk_knows():
    kinds = [step_kind(line) for line in shell_lines()]
    assert {"kafka-topics", "kafka-failover", "trigger", "airflow"} <= set(kinds), kinds
    with pytest.raises(
        ValueError, match="a step tests/integration/test_getting_started_walk.py does not know"
    ):
        step_kind("kafka-configs.sh --bootstrap-server a1:9092 --alter")


def test_the_mirrormaker_settings_replicate_what_the_pair_reads(pair):
    """Both flows of the pair (its default: both ways), its policy, offset-syncs location, topics and
    bookkeeping group, as topologies.md's table asks."""
    mm2 = page_mm2_settings()
    assert [alias.strip() for alias in mm2["clusters"].split(",")] == [
        c.alias for c in pair.clusters.values()
    ]
    assert pair.replication.flows == (("A", "B"), ("B", "A"))
    enabled = {(s, t) for s in pair.clusters for t in pair.clusters if mm2.get(f"{s}->{t}.enabled") == "true"}
    assert enabled == set(pair.replication.flows)
    assert for_name(mm2["replication.policy.class"]).name == for_name(pair.replication.policy).name
    assert mm2["offset-syncs.topic.location"] == pair.replication.offset_syncs_location.value
    assert all(regex_covers(mm2["topics"], topic) for topic in pair.topics)
    assert regex_covers(mm2["groups"], pair.bookkeeping_group)
    assert mm2["emit.checkpoints.enabled"] == "true" and mm2["sync.group.offsets.enabled"] == "false"


def _created_topics(pair: PairConfig) -> dict[str, set[str]]:
    """cluster -> the topics the page's ``kafka-topics.sh --create`` lines create there, found by the
    bootstrap servers of the page's connections."""
    servers = {}
    for line in shell_lines():
        argv = words(line)
        if argv[:3] == ["airflow", "connections", "add"] and "--conn-extra" in argv:
            extra = json.loads(argv[argv.index("--conn-extra") + 1])
            servers[extra["bootstrap.servers"]] = argv[3]
    by_connection = {spec.connection: name for name, spec in pair.clusters.items()}
    created: dict[str, set[str]] = {name: set() for name in pair.clusters}
    for line in shell_lines():
        argv = words(line)
        if step_kind(line) == "kafka-topics" and "--create" in argv:
            cluster = by_connection[servers[argv[argv.index("--bootstrap-server") + 1]]]
            created[cluster].add(argv[argv.index("--topic") + 1])
    return created


def test_each_cluster_ends_up_with_every_topic_the_job_reads_there(pair):
    """What the page creates, plus MirrorMaker 2's copies of it through the flows its settings enable, is
    every topic a start or a switch submits the job with on each cluster."""
    created, mm2 = _created_topics(pair), page_mm2_settings()
    for need in topic_needs(pair):
        if need.replicated:
            assert mm2.get(f"{need.origin}->{need.cluster}.enabled") == "true", need
            assert need.origin_topic in created[need.origin], (
                f"nothing creates {need.origin_topic} on {need.origin}"
            )
        else:
            assert need.topic in created[need.cluster], f"the page creates no {need.topic} on {need.cluster}"


def test_the_page_checks_the_clusters_before_the_start_and_the_drill():
    lines = shell_lines()
    check = next(n for n, line in enumerate(lines) if line.startswith("kafka-failover check "))
    trigger = next(n for n, line in enumerate(lines) if step_kind(line) == "trigger")
    created = [n for n, line in enumerate(lines) if step_kind(line) == "kafka-topics"]
    assert created and max(created) < check < trigger
    assert words(lines[check])[2:] == ["--config", "pairs.yaml", "--pair", "orders"]


def test_the_page_says_how_long_a_drill_waits_and_that_the_failback_follows(pair):
    text = " ".join(PAGE.read_text().split())
    assert f"`switch.watch_timeout_seconds` ({pair.switch.watch_timeout_seconds:.0f} s)" in text
    assert f"`health.stability_window_seconds` ({pair.health.stability_window_seconds:.0f} s)" in text
    assert "about a minute after the failover" in text
    assert "airflow dags pause kafka_failover_orders_failback" in shell_lines()


def airflow_command_lines() -> list[str]:
    return [line.split(" | ")[0] for line in shell_lines() if line.startswith("airflow ")]


def test_the_page_shows_the_airflow_commands_a_first_failover_needs():
    verbs = {" ".join(shlex.split(line)[1:3]) for line in airflow_command_lines()}
    assert {"connections add", "pools set", "dags trigger", "dags pause", "providers list"} <= verbs, verbs


@pytest.mark.parametrize("line", airflow_command_lines())
def test_an_airflow_command_line_of_the_page_parses(line, capsys):
    from airflow.cli.cli_parser import get_parser

    try:
        args = get_parser().parse_args(shlex.split(line)[1:])
    except SystemExit:
        pytest.fail(f"`{line}` does not parse: {capsys.readouterr().err.strip().splitlines()[-1:]}")
    assert callable(args.func)

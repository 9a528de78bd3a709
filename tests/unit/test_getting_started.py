"""docs/getting-started.md is what a new user runs: its pair config loads, its DAG file builds the four DAGs
from that config (also under an executor that spreads tasks over hosts, since its paths are named), and
its ``airflow`` command lines parse against Airflow's own command-line parser. Its ``kafka-failover``
lines are checked with every other doc's in test_documented_commands.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from airflow_kafka_failover.domain.config import load_pairs

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(PAGE.read_text()) if lang == language]


@pytest.fixture
def config(tmp_path) -> Path:
    (block,) = blocks("yaml")
    path = tmp_path / "pairs.yaml"
    path.write_text(block)
    return path


def test_the_pair_config_of_the_page_loads(config):
    pair = load_pairs(str(config))["orders"]
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


def airflow_command_lines() -> list[str]:
    lines = []
    for block in blocks("bash"):
        for line in block.splitlines():
            command = line.split(" | ")[0].strip()
            if command.startswith("airflow "):
                lines.append(command)
    return lines


def test_the_page_shows_the_airflow_commands_a_first_failover_needs():
    verbs = {" ".join(shlex.split(line)[1:3]) for line in airflow_command_lines()}
    assert {"connections add", "pools set", "dags trigger", "providers list"} <= verbs, verbs


@pytest.mark.parametrize("line", airflow_command_lines())
def test_an_airflow_command_line_of_the_page_parses(line, capsys):
    from airflow.cli.cli_parser import get_parser

    try:
        args = get_parser().parse_args(shlex.split(line)[1:])
    except SystemExit:
        pytest.fail(f"`{line}` does not parse: {capsys.readouterr().err.strip().splitlines()[-1:]}")
    assert callable(args.func)

"""``kafka-failover status`` and ``history`` end to end in one process: exit codes, bad input, clean stdout.

Clusters are connections to loopback ports where nothing listens. The active record is read the way the
command reads it (Airflow's ``Variable`` model), from an ``AIRFLOW_VAR_`` environment variable, or replaced
where a test needs a database that fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from akf_devtools.demo.story import QUICK_HEALTH
from packaging.version import Version

from airflow_kafka_failover import cli
from airflow_kafka_failover.io import status_readers as readers
from airflow_kafka_failover.io.record_store import variable_key
from airflow_kafka_failover.run_format.fencing import FencingMarker
from airflow_kafka_failover.version_compat import AIRFLOW_VERSION
from tests.builders import closed_port


@pytest.fixture
def config(tmp_path, monkeypatch) -> Path:
    for name in ("a", "b"):
        conn = {"conn_type": "kafka", "extra": {"bootstrap.servers": f"127.0.0.1:{closed_port()}"}}
        monkeypatch.setenv(f"AIRFLOW_CONN_CLI_STATUS_{name.upper()}", json.dumps(conn))
    pair = {
        "clusters": {"A": {"connection": "cli_status_a"}, "B": {"connection": "cli_status_b"}},
        "primary": "A",
        "topics": ["orders"],
        "health": QUICK_HEALTH,
        "job": {
            "sink_root": str(tmp_path / "sink"),
            "checkpoint_root": str(tmp_path / "checkpoints"),
            "run_root": str(tmp_path / "runs"),
            "fencing_marker": str(tmp_path / "fence"),
        },
    }
    path = tmp_path / "pairs.yaml"
    path.write_text(yaml.safe_dump({"pairs": {"orders": pair}}))
    return path


def store_record(monkeypatch, record: dict) -> None:
    """Put the record where Airflow's Variable model finds it first: its environment variable."""
    monkeypatch.setenv(f"AIRFLOW_VAR_{variable_key('orders').upper()}", json.dumps(record))


SWITCHED = {
    "schema_version": 1,
    "pair": "orders",
    "active": "B",
    "epoch": 1,
    "job": None,
    "history": [
        {
            "at": "2026-11-23T10:00:00+00:00",
            "kind": "failover",
            "from": "A",
            "to": "B",
            "epoch": 1,
            "reason": "A is down",
            "triggered_by": "manual__1",
            "forced": True,
            "plan": {"max_duplicates": 4},
            "gap_records": 2,
        }
    ],
}


def test_history_reads_the_stored_record(config, monkeypatch, capfd):
    store_record(monkeypatch, SWITCHED)
    assert cli.main(["history", "--config", str(config), "--pair", "orders"]) == 0
    out = capfd.readouterr().out.splitlines()
    assert out[0] == "pair orders: active B at epoch 1; 1 switch(es):"
    assert out[2].split()[:11] == [
        "2026-11-23T10:00:00+00:00",
        "failover",
        "A",
        "->",
        "B",
        "1",
        "yes",
        "2",
        "4",
        "-",
        "manual__1",
    ]
    assert out[2].endswith("A is down")


def test_history_json_is_the_only_thing_on_stdout(config, monkeypatch, capfd):
    store_record(monkeypatch, SWITCHED)
    assert cli.main(["history", "--config", str(config), "--pair", "orders", "--json", "--limit", "5"]) == 0
    document = json.loads(capfd.readouterr().out)
    assert document["switches_total"] == 1
    assert document["switches"][0]["from"] == "A"
    assert document["switches"][0]["max_duplicates"] == 4


def test_stdout_of_a_fresh_process_holds_only_the_result(config, monkeypatch):
    """Airflow logs to stdout from its first import on (here its unit-test configuration notice): in a fresh
    interpreter, as a user runs the command, nothing but the JSON may reach stdout."""
    store_record(monkeypatch, SWITCHED)
    argv = [sys.executable, "-m", "airflow_kafka_failover.cli", "history", "--config", str(config)]
    env = {**os.environ, "AIRFLOW__CORE__UNIT_TEST_MODE": "True"}
    done = subprocess.run(
        [*argv, "--pair", "orders", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["switches_total"] == 1, done.stdout
    assert "Unit test configuration loaded" not in done.stdout
    if AIRFLOW_VERSION >= Version("3.3"):  # 3.1 prints no such notice
        assert "Unit test configuration loaded" in done.stderr, "Airflow's notice should go to stderr"


def test_history_of_a_pair_that_never_switched(config, monkeypatch, capfd):
    monkeypatch.setattr(readers, "read_stored_record", lambda pair: None)
    assert cli.main(["history", "--config", str(config), "--pair", "orders"]) == 0
    assert (
        capfd.readouterr().out == "pair orders: active A at epoch 0; no switches yet (no record stored yet)\n"
    )


def test_history_when_the_database_cannot_be_read_exits_1(config, monkeypatch, capfd):
    def broken(pair):
        raise RuntimeError("database is locked\n[SQL: SELECT ...]")

    monkeypatch.setattr(readers, "read_stored_record", broken)
    assert cli.main(["history", "--config", str(config), "--pair", "orders"]) == 1
    err = capfd.readouterr().err
    assert (
        "error: cannot read the active record of pair 'orders': RuntimeError: database is locked; run" in err
    )


@pytest.mark.parametrize("limit", ["0", "-3", "many"])
def test_history_limit_must_be_a_positive_number(config, capfd, limit):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["history", "--config", str(config), "--pair", "orders", "--limit", limit])
    assert exit_info.value.code == 2
    assert f"{limit!r} is not a whole number of switches >= 1" in capfd.readouterr().err


@pytest.mark.parametrize("command", [["status"], ["history"]])
def test_an_unknown_pair_is_named_with_what_to_do(config, capfd, command):
    assert cli.main([*command, "--config", str(config), "--pair", "payments"]) == 1
    err = capfd.readouterr().err
    assert f"error: {config} has no pair 'payments'; it has ['orders']: pass one of them with --pair" in err


def test_history_needs_a_pair(config, capfd):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["history", "--config", str(config)])
    assert exit_info.value.code == 2


@pytest.mark.parametrize("command", ["status", "history"])
def test_a_config_that_cannot_be_read_is_named(tmp_path, capfd, command):
    missing = tmp_path / "nowhere.yaml"
    assert cli.main([command, "--config", str(missing), "--pair", "orders"]) == 1
    assert f"error: cannot read the pair config {missing}: No such file or directory; check the path" in (
        capfd.readouterr().err
    )


def test_status_with_clusters_that_do_not_answer_still_prints_everything_else(
    config, monkeypatch, tmp_path, capfd
):
    store_record(monkeypatch, {**SWITCHED, "job": None})
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, 1, "B")
    # no job is recorded, so the pair needs a person too: that decides the exit code
    assert cli.main(["status", "--config", str(config)]) == cli.EXIT_STATUS_ACT
    out = capfd.readouterr().out
    assert out.startswith("pair orders: active B at epoch 1")
    assert "could not read: active cluster B: does not answer: connection refused" in out
    assert "could not read: standby cluster A: does not answer: connection refused" in out
    assert "ACTION NEEDED: no job is recorded for epoch 1" in out


def test_status_exits_5_when_only_reading_failed(config, monkeypatch, tmp_path, capfd):
    job = {
        "pair": "orders",
        "cluster": "B",
        "epoch": 1,
        "deploy_mode": "cluster",
        "master": "yarn",
        "run_dir": str(tmp_path / "runs" / "orders" / "B" / "epoch-1"),
        "checkpoint": str(tmp_path / "checkpoints" / "orders" / "B" / "epoch-1"),
        "sink_root": str(tmp_path / "sink"),
        "application_id": "application_1_0001",
    }
    Path(job["run_dir"]).mkdir(parents=True)
    (Path(job["run_dir"]) / "status.json").write_text(json.dumps({"state": "running"}))
    store_record(monkeypatch, {**SWITCHED, "job": job, "checkpoint": job["checkpoint"]})
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, 1, "B")
    assert (
        cli.main(["status", "--config", str(config), "--pair", "orders", "--json"]) == cli.EXIT_STATUS_UNREAD
    )
    document = json.loads(capfd.readouterr().out)
    (pair,) = document["pairs"]
    assert document["exit_code"] == cli.EXIT_STATUS_UNREAD
    assert (pair["job"]["state"], pair["job"]["where"]) == ("running", "application_1_0001")
    assert pair["fence_agreement"] == "settled"
    assert pair["problems"] == []
    assert len(pair["unread"]) == 2


def test_status_of_several_pairs_is_one_table_with_the_pairs_in_trouble_first(
    config, monkeypatch, tmp_path, capfd
):
    pairs = yaml.safe_load(config.read_text())["pairs"]
    for name in ("payments", "clicks"):
        pairs[name] = {**pairs["orders"], "topics": [name]}
    config.write_text(yaml.safe_dump({"pairs": pairs}))
    store_record(monkeypatch, SWITCHED)
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, 2, "A")  # interrupted: needs a person
    assert cli.main(["status", "--config", str(config)]) == cli.EXIT_STATUS_ACT
    out = capfd.readouterr().out
    lines = out.splitlines()
    # the two others have no stored record, and this test has no metadata DB to read it from
    assert lines[0] == "3 pairs: 1 ACTION NEEDED, 2 could not read"
    assert lines[1].split()[:2] == ["pair", "active"]
    assert [line.split()[0] for line in lines[2:5]] == ["orders", "clicks", "payments"]
    assert "pair orders: active B at epoch 1" in out and "!! INTERRUPTED SWITCH" in out
    assert lines[-1] == f"one pair in full: kafka-failover status --config {config} --pair NAME"
    assert cli.main(["status", "--config", str(config), "--json"]) == cli.EXIT_STATUS_ACT
    document = json.loads(capfd.readouterr().out)
    assert [status["pair"] for status in document["pairs"]] == ["clicks", "orders", "payments"]  # the file's
    assert [row["pair"] for row in document["fleet"]] == ["orders", "clicks", "payments"]


def test_status_exits_4_on_an_interrupted_switch(config, monkeypatch, tmp_path, capfd):
    store_record(monkeypatch, SWITCHED)
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, 2, "A")
    assert cli.main(["status", "--config", str(config), "--pair", "orders"]) == cli.EXIT_STATUS_ACT
    out = capfd.readouterr().out
    assert "!! INTERRUPTED SWITCH: the fence (epoch 2, A) is ahead of the record (epoch 1, B)" in out


def test_status_and_history_change_nothing(config, monkeypatch, tmp_path, capfd):
    store_record(monkeypatch, SWITCHED)
    before = sorted(str(path) for path in tmp_path.rglob("*"))
    cli.main(["status", "--config", str(config)])
    cli.main(["history", "--config", str(config), "--pair", "orders"])
    assert sorted(str(path) for path in tmp_path.rglob("*")) == before


@pytest.mark.slow  # migrates a metadata DB and runs the Airflow CLI (about 20 s on two cores)
def test_the_cli_sees_a_connection_made_with_airflow_connections_add(tmp_path):
    """A connection that exists only in the metadata database (made in the UI or with ``airflow connections
    add``) is found by ``kafka-failover``, as by Airflow's own command line."""
    from akf_devtools.sandbox.airflow_env import airflow_env, prepare_airflow_home

    home = prepare_airflow_home(tmp_path / "home")
    env = {k: v for k, v in airflow_env(home).items() if not k.startswith("AIRFLOW_CONN_CLI_DB")}
    airflow = Path(sys.executable).with_name("airflow")
    for name in ("a", "b"):
        extra = json.dumps({"bootstrap.servers": f"127.0.0.1:{closed_port()}"})
        added = subprocess.run(
            [
                str(airflow),
                "connections",
                "add",
                f"cli_db_{name}",
                "--conn-type",
                "kafka",
                "--conn-extra",
                extra,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert added.returncode == 0, added.stdout + added.stderr
    pair = {
        "clusters": {"A": {"connection": "cli_db_a"}, "B": {"connection": "cli_db_b"}},
        "primary": "A",
        "topics": ["orders"],
        "health": QUICK_HEALTH,
        "job": {name: str(tmp_path / name) for name in ("sink_root", "checkpoint_root", "run_root")}
        | {"fencing_marker": str(tmp_path / "fence")},
    }
    config = tmp_path / "pairs.yaml"
    config.write_text(yaml.safe_dump({"pairs": {"orders": pair}}))
    argv = [sys.executable, "-m", "airflow_kafka_failover.cli", "status", "--config", str(config), "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180, check=False)
    assert "isn't defined" not in done.stdout + done.stderr, done.stdout + done.stderr[-3000:]
    # Both clusters are closed ports and no job runs: the status reads the connections and finds that the
    # clusters do not answer (on the code before, each connection "isn't defined").
    (status,) = json.loads(done.stdout)["pairs"]
    assert [line.split(": connection")[0] for line in status["unread"]] == [
        "active cluster A: does not answer",
        "standby cluster B: does not answer",
    ], status["unread"]
    assert done.returncode == cli.EXIT_STATUS_ACT, done.stderr[-3000:]

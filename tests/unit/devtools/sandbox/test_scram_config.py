"""The SCRAM sandbox's configuration: broker and MirrorMaker 2 settings, secret files, connections.

No process is started.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox import kafka_io
from akf_devtools.sandbox.airflow_env import register_kafka_connections
from akf_devtools.sandbox.broker import KafkaBroker
from akf_devtools.sandbox.mirrormaker import MirrorMaker, ReplicationSettings
from akf_devtools.sandbox.sandbox import Sandbox
from akf_devtools.sandbox.scram import ScramLogin, java_argfile_argv, write_private

from airflow_kafka_failover.domain.kafka_options import java_client_options

LOGIN = ScramLogin("akf-sandbox", "s3cr3t-hex")


def _props(text: str) -> dict[str, str]:
    return dict(
        line.split(" = ", 1) if " = " in line else line.split("=", 1) for line in text.splitlines() if line
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_scram_broker_authenticates_every_client_listener_but_not_the_controller(tmp_path: Path):
    broker = KafkaBroker(
        "A",
        tmp_path,
        port=9001,
        controller_port=9002,
        cluster_id="x",
        login=LOGIN,
        extra_listeners={"PROXIED": (9003, "127.0.0.1:9100")},
    )
    props = _props(broker.properties())
    assert props["listeners"] == (
        "SASL_PLAINTEXT://127.0.0.1:9001,CONTROLLER://127.0.0.1:9002,PROXIED://127.0.0.1:9003"
    )
    assert props["listener.security.protocol.map"] == (
        "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT,PROXIED:SASL_PLAINTEXT"
    )
    assert props["inter.broker.listener.name"] == "SASL_PLAINTEXT"
    assert (
        props["sasl.enabled.mechanisms"] == props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    )
    for listener in ("sasl_plaintext", "proxied"):
        assert props[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] == (
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="akf-sandbox" '
            'password="s3cr3t-hex";'
        )
    assert broker.client_security() == LOGIN.client_config()


def test_plain_broker_has_no_sasl(tmp_path: Path):
    broker = KafkaBroker("A", tmp_path, port=9001, controller_port=9002, cluster_id="x")
    assert not any(key.startswith("sasl") or "jaas" in key for key in _props(broker.properties()))
    assert broker.client_security() == {}


def test_mirrormaker_logs_in_to_both_clusters(tmp_path: Path):
    mm2 = MirrorMaker(tmp_path, {"A": "h:1", "B": "h:2"}, ReplicationSettings(), login=LOGIN)
    props = _props(mm2.properties())
    for alias in ("A", "B"):
        assert props[f"{alias}.security.protocol"] == "SASL_PLAINTEXT"
        assert props[f"{alias}.sasl.mechanism"] == "SCRAM-SHA-512"
        assert 'password="s3cr3t-hex"' in props[f"{alias}.sasl.jaas.config"]
    plain = _props(MirrorMaker(tmp_path, {"A": "h:1", "B": "h:2"}, ReplicationSettings()).properties())
    assert not any("sasl" in key or "security" in key for key in plain)


def test_login_maps_to_the_same_java_options_as_a_connection_extra():
    """MirrorMaker 2 and the Spark job get equal Java settings from the same login."""
    assert java_client_options(LOGIN.client_config()) == LOGIN.java_options()


def test_password_stays_out_of_repr():
    assert "s3cr3t" not in repr(LOGIN) and "s3cr3t" not in str(LOGIN)
    assert len(ScramLogin.generate().password) == 32


def test_credentials_round_trip_in_an_owner_only_file(tmp_path: Path):
    path = LOGIN.save(tmp_path)
    assert _mode(path) == 0o600
    assert ScramLogin.load(tmp_path) == LOGIN
    path.write_text("{}")
    with pytest.raises(SandboxError, match="SCRAM credentials .* unreadable"):
        ScramLogin.load(tmp_path)


def test_write_private_narrows_an_existing_wider_file(tmp_path: Path):
    path = tmp_path / "mm2.properties"
    path.write_text("old")
    os.chmod(path, 0o666)
    write_private(path, "new")
    assert (path.read_text(), _mode(path)) == ("new", 0o600)


def test_argfile_keeps_the_main_class_and_arguments_off_the_command_line(tmp_path: Path):
    argv = [
        "java",
        "-Xmx1m",
        "-cp",
        "x.jar",
        "kafka.tools.StorageTool",
        "format",
        f"--add-scram={LOGIN.storage_argument()}",
    ]
    hidden = java_argfile_argv(argv, 4, tmp_path / "format.args")
    assert hidden == ["java", "-Xmx1m", "-cp", "x.jar", f"@{tmp_path / 'format.args'}"]
    assert "s3cr3t-hex" not in " ".join(hidden)
    assert (tmp_path / "format.args").read_text().splitlines() == [
        '"kafka.tools.StorageTool"',
        '"format"',
        '"--add-scram=SCRAM-SHA-512=[name=akf-sandbox,password=s3cr3t-hex]"',
    ]
    assert _mode(tmp_path / "format.args") == 0o600


def _scram_sandbox(tmp_path: Path) -> Sandbox:
    """A sandbox object as ``up`` leaves it, without starting anything."""
    sandbox = Sandbox(tmp_path, security="scram")
    sandbox.login = LOGIN
    sandbox.security = "scram"
    sandbox.brokers = {
        name: KafkaBroker(name, tmp_path, port, port + 1, "x", login=LOGIN)
        for name, port in (("A", 9001), ("B", 9011))
    }
    return sandbox


def test_sandbox_client_config_and_connections_carry_the_login(tmp_path: Path, monkeypatch):
    sandbox = _scram_sandbox(tmp_path)
    assert sandbox.client_config("B") == {"bootstrap.servers": "127.0.0.1:9011", **LOGIN.client_config()}
    ids = register_kafka_connections(sandbox, "unitscram", overrides={"A": "127.0.0.1:7000"})
    conn_a = json.loads(os.environ.pop(f"AIRFLOW_CONN_{ids['A'].upper()}"))
    conn_b = json.loads(os.environ.pop(f"AIRFLOW_CONN_{ids['B'].upper()}"))
    assert conn_a["extra"] == {**LOGIN.client_config(), "bootstrap.servers": "127.0.0.1:7000"}
    assert conn_b["extra"]["sasl.password"] == "s3cr3t-hex"
    info = sandbox.info()
    assert info["security"]["username"] == "akf-sandbox" and "s3cr3t" not in json.dumps(info)


def test_sandbox_state_restores_the_login(tmp_path: Path):
    sandbox = _scram_sandbox(tmp_path)
    LOGIN.save(tmp_path)
    sandbox._save_state()
    assert "s3cr3t" not in (tmp_path / "sandbox.json").read_text()
    loaded = Sandbox(tmp_path)
    assert loaded.security == "scram" and loaded.login == LOGIN
    assert loaded.broker("A").login == LOGIN and loaded.mirrormaker.login == LOGIN


def test_unknown_security_is_refused(tmp_path: Path):
    with pytest.raises(SandboxError, match="unknown sandbox security 'kerberos'"):
        Sandbox(tmp_path, security="kerberos")


def test_kafka_io_takes_a_config_and_names_only_the_address():
    config = {"bootstrap.servers": "h:1", **LOGIN.client_config()}
    assert kafka_io.client_config(config) == config and kafka_io.client_config("h:1") == {
        "bootstrap.servers": "h:1"
    }
    assert kafka_io.address(config) == "h:1" == kafka_io.address("h:1")

"""TLS files are checked before any connection, and a TLS refusal is a configuration error, not "down"."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from akf_devtools.sandbox.tls import certificate_pem, issue_certificate, key_and_chain_pem
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.hooks.client_certificate import check_tls_files, tls_refusal
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.io.probe import probe_cluster

CONN = "Airflow connection 'kafka_a'"
NOW = dt.datetime.now(dt.UTC)


def _key():
    return ec.generate_private_key(ec.SECP256R1())  # fast; the checks do not depend on the key type


@pytest.fixture(scope="module")
def ca():
    key = _key()
    return issue_certificate("test-ca", key, is_ca=True), key


@pytest.fixture
def pem_client(tmp_path, ca):
    """A valid PEM client config: CA file, and one file with the key and its certificate."""
    key = _key()
    (tmp_path / "ca.pem").write_text(certificate_pem(ca[0]))
    (tmp_path / "client.pem").write_text(key_and_chain_pem(key, issue_certificate("client", key, ca), None))
    return {
        "bootstrap.servers": "127.0.0.1:9",
        "security.protocol": "SSL",
        "ssl.ca.location": str(tmp_path / "ca.pem"),
        "ssl.certificate.location": str(tmp_path / "client.pem"),
        "ssl.key.location": str(tmp_path / "client.pem"),
    }


def _write_key(path: Path, key, password: bytes | None = None) -> str:
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    )
    return str(path)


def test_a_valid_pem_client_certificate_passes(pem_client):
    check_tls_files(pem_client, CONN)


def test_ca_location_probe_means_the_system_store_and_is_not_a_file():
    check_tls_files({"ssl.ca.location": "probe"}, CONN)


@pytest.mark.parametrize("option", ["ssl.key.location", "ssl.certificate.location", "ssl.ca.location"])
def test_a_missing_file_is_named_with_its_option(pem_client, tmp_path, option):
    missing = tmp_path / "gone.pem"
    with pytest.raises(ConfigError, match=rf"kafka_a'.*{option} {missing} does not exist; point {option}"):
        check_tls_files({**pem_client, option: str(missing)}, CONN)


def test_a_certificate_that_does_not_match_its_key_is_refused(pem_client, tmp_path):
    other = _write_key(tmp_path / "other.key", _key())
    with pytest.raises(ConfigError, match=rf"client.pem does not match the private key in {other}"):
        check_tls_files({**pem_client, "ssl.key.location": other}, CONN)


def test_an_expired_client_certificate_is_refused_with_its_date(tmp_path, ca, pem_client):
    key = _key()
    start = NOW - dt.timedelta(days=10)
    expired = issue_certificate(
        "old-client", key, ca, not_before=start, not_after=start + dt.timedelta(days=1)
    )
    (tmp_path / "old.pem").write_text(key_and_chain_pem(key, expired, None))
    config = {**pem_client, "ssl.certificate.location": str(tmp_path / "old.pem")}
    config["ssl.key.location"] = config["ssl.certificate.location"]
    with pytest.raises(
        ConfigError, match=r"'CN=old-client' in ssl.certificate.location .*old.pem expired on"
    ):
        check_tls_files(config, CONN)


def test_a_certificate_not_yet_valid_is_refused(pem_client):
    with pytest.raises(ConfigError, match="is not valid before"):
        check_tls_files(pem_client, CONN, now=NOW - dt.timedelta(days=2))


def test_an_expired_ca_is_refused(pem_client):
    with pytest.raises(ConfigError, match=r"'CN=test-ca' in ssl.ca.location .* expired on"):
        check_tls_files(pem_client, CONN, now=NOW + dt.timedelta(days=400))


def test_encrypted_key_needs_the_right_password(pem_client, tmp_path):
    key = _key()
    certificate = issue_certificate("client", key, None)
    (tmp_path / "c.pem").write_text(certificate_pem(certificate))
    path = _write_key(tmp_path / "enc.key", key, b"right")
    config = {**pem_client, "ssl.certificate.location": str(tmp_path / "c.pem"), "ssl.key.location": path}
    check_tls_files({**config, "ssl.key.password": "right"}, CONN)
    with pytest.raises(ConfigError, match="cannot be decrypted with ssl.key.password"):
        check_tls_files({**config, "ssl.key.password": "wrong"}, CONN)
    with pytest.raises(ConfigError, match="is encrypted but ssl.key.password is not set"):
        check_tls_files(config, CONN)


def test_a_wrong_password_is_named_whatever_the_error_says(pem_client, tmp_path, monkeypatch):
    """About one wrong password in 400 decrypts to bytes with valid padding, and cryptography then says the
    key data does not deserialize (seen in CI): the PEM's label still shows the key is encrypted."""
    key = _key()
    (tmp_path / "c.pem").write_text(certificate_pem(issue_certificate("client", key, None)))
    path = _write_key(tmp_path / "enc.key", key, b"right")
    config = {**pem_client, "ssl.certificate.location": str(tmp_path / "c.pem"), "ssl.key.location": path}

    def garbled(data, password):
        raise ValueError("Could not deserialize key data. The data may be in an incorrect format")

    monkeypatch.setattr(serialization, "load_pem_private_key", garbled)
    with pytest.raises(ConfigError, match="cannot be decrypted with ssl.key.password"):
        check_tls_files({**config, "ssl.key.password": "wrong"}, CONN)
    plain = _write_key(tmp_path / "plain.key", key)
    with pytest.raises(ConfigError, match="holds no readable PEM private key"):
        check_tls_files({**config, "ssl.key.location": plain, "ssl.key.password": "wrong"}, CONN)


def test_a_certificate_without_its_key_is_refused(pem_client):
    config = {k: v for k, v in pem_client.items() if k != "ssl.key.location"}
    with pytest.raises(ConfigError, match="ssl.certificate.location is set but ssl.key.location is not"):
        check_tls_files(config, CONN)


def test_a_file_that_is_no_certificate_is_refused(pem_client, tmp_path):
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"ssl.ca.location .*junk.pem holds no PEM certificate"):
        check_tls_files({**pem_client, "ssl.ca.location": str(tmp_path / "junk.pem")}, CONN)


def test_pkcs12_keystore_is_opened_with_its_password(tmp_path, ca):
    key = _key()
    blob = pkcs12.serialize_key_and_certificates(
        b"client",
        key,
        issue_certificate("client", key, ca),
        None,
        serialization.BestAvailableEncryption(b"s"),
    )
    (tmp_path / "client.p12").write_bytes(blob)
    config = {"ssl.keystore.location": str(tmp_path / "client.p12"), "ssl.keystore.password": "s"}
    check_tls_files(config, CONN)
    with pytest.raises(ConfigError, match="is not a PKCS#12 key store that ssl.keystore.password opens"):
        check_tls_files({**config, "ssl.keystore.password": "wrong"}, CONN)


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        (
            "ssl://127.0.0.1:1/bootstrap: SSL handshake failed: error:0A000086:SSL routines::"
            "certificate verify failed: broker certificate could not be verified",
            True,
        ),
        (
            "Receive failed: error:0A000412:SSL routines::ssl/tls alert bad certificate: SSL alert number 42",
            True,
        ),
        ("SSL handshake failed: ... sslv3 alert certificate expired", True),
        ("ssl://127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused", False),
        ("sasl_ssl://127.0.0.1:1/1: Disconnected: SSL connection closed by peer", False),
        ("1/1 brokers are down", False),
    ],
)
def test_tls_refusals_are_told_apart_from_a_dead_cluster(text, refused):
    assert (tls_refusal([text]) is not None) is refused


def test_the_probe_raises_a_tls_misconfiguration_instead_of_reporting_the_cluster_down(
    monkeypatch, pem_client
):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_A", json.dumps({"conn_type": "kafka", "extra": pem_client}))
    hook = KafkaClusterHook("kafka_a", timeout_seconds=1.0)
    assert hook.client_config["ssl.ca.location"] == pem_client["ssl.ca.location"]

    def refused(*args, **kwargs):
        raise ConfigError("Airflow connection 'kafka_a': the TLS handshake with 127.0.0.1:9 failed (...)")

    monkeypatch.setattr(hook, "describe_cluster", refused)
    monkeypatch.setattr("airflow_kafka_failover.io.probe.every_address_refuses", lambda *a: None)
    with pytest.raises(ConfigError, match="TLS handshake"):
        probe_cluster(hook, "A", ["orders"], 1.0)


def test_the_hook_refuses_a_connection_whose_key_file_is_missing(monkeypatch, pem_client, tmp_path):
    extra = {**pem_client, "ssl.key.location": str(tmp_path / "nope.key")}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_A", json.dumps({"conn_type": "kafka", "extra": extra}))
    with pytest.raises(
        ConfigError, match=r"Airflow connection 'kafka_a': ssl.key.location .*nope.key does not"
    ):
        _ = KafkaClusterHook("kafka_a").client_config


def test_a_password_for_an_unencrypted_key_is_refused(pem_client):
    """The job's Java client refuses a password for a key that has none; say so before it starts."""
    with pytest.raises(ConfigError, match=r"is not encrypted, but ssl.key.password is set \(remove it\)"):
        check_tls_files({**pem_client, "ssl.key.password": "extra"}, CONN)

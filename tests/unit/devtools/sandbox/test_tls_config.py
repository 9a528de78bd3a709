"""The TLS sandbox's configuration: key material, broker and MirrorMaker 2 settings, client configs.

Certificates are made (with ``cryptography`` and ``openssl``); no Kafka process is started.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from akf_devtools.sandbox.broker import KafkaBroker
from akf_devtools.sandbox.mirrormaker import MirrorMaker, ReplicationSettings
from akf_devtools.sandbox.scram import ScramLogin
from akf_devtools.sandbox.tls import TlsMaterial, security_protocol

from airflow_kafka_failover.domain.kafka_options import java_client_options
from airflow_kafka_failover.hooks.client_certificate import check_tls_files

LOGIN = ScramLogin("akf-sandbox", "s3cr3t-hex")


@pytest.fixture(scope="module")
def material(tmp_path_factory) -> TlsMaterial:
    return TlsMaterial.generate(tmp_path_factory.mktemp("tls-run"))


def _props(text: str) -> dict[str, str]:
    return dict(
        line.split(" = ", 1) if " = " in line else line.split("=", 1) for line in text.splitlines() if line
    )


@pytest.mark.parametrize(
    ("sasl", "tls", "protocol"),
    [
        (False, False, "PLAINTEXT"),
        (True, False, "SASL_PLAINTEXT"),
        (False, True, "SSL"),
        (True, True, "SASL_SSL"),
    ],
)
def test_security_protocol(sasl, tls, protocol):
    assert security_protocol(sasl, tls) == protocol


def test_material_files_are_owner_only_and_the_password_is_only_in_its_file(material):
    assert stat.S_IMODE(material.directory.stat().st_mode) == 0o700
    for path in material.directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        if path.name != "key-password":
            assert material.key_password not in path.read_text(), path
    assert "ENCRYPTED PRIVATE KEY" in material.client_file.read_text()
    assert material.key_password not in repr(material)
    assert TlsMaterial.load(material.directory.parent) == material


def test_sandbox_certificates_pass_the_providers_own_checks(material):
    """The client file is one PEM with the (encrypted) key and its certificate, as the checks expect."""
    check_tls_files({**material.client_config(), "security.protocol": "SSL"}, "sandbox client")
    broker = {**material.client_config(), "ssl.certificate.location": str(material.broker_file)}
    broker["ssl.key.location"] = broker["ssl.certificate.location"]
    check_tls_files(broker, "sandbox broker")


def test_broker_certificate_names_loopback_for_host_name_verification(material):
    from cryptography import x509

    certificate = x509.load_pem_x509_certificates(material.broker_file.read_bytes())[0]
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]


def test_tls_broker_requires_client_certificates_on_every_client_listener(tmp_path: Path, material):
    broker = KafkaBroker(
        "A",
        tmp_path,
        port=9001,
        controller_port=9002,
        cluster_id="x",
        login=LOGIN,
        tls=material,
        extra_listeners={"PROXIED": (9003, "127.0.0.1:9100")},
    )
    props = _props(broker.properties())
    assert (
        props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT,PROXIED:SASL_SSL"
    )
    assert props["inter.broker.listener.name"] == "SASL_SSL"
    # KIP-684: on SASL_SSL listeners only the listener-prefixed setting requires client certificates.
    assert props["listener.name.sasl_ssl.ssl.client.auth"] == "required"
    assert props["listener.name.proxied.ssl.client.auth"] == "required"
    assert props["ssl.keystore.type"] == props["ssl.truststore.type"] == "PEM"
    assert props["ssl.keystore.location"] == str(material.broker_file)
    assert props["ssl.key.password"] == material.key_password
    assert broker.client_security()["security.protocol"] == "SASL_SSL"
    assert broker.client_security()["ssl.certificate.location"] == str(material.client_file)


def test_mirrormaker_presents_the_client_certificate_to_both_clusters(tmp_path: Path, material):
    mm2 = MirrorMaker(
        tmp_path, {"A": "127.0.0.1:1", "B": "127.0.0.1:2"}, ReplicationSettings(), login=None, tls=material
    )
    props = _props(mm2.properties())
    for alias in ("A", "B"):
        assert props[f"{alias}.security.protocol"] == "SSL"
        assert props[f"{alias}.ssl.keystore.location"] == str(material.client_file)
        assert props[f"{alias}.ssl.truststore.location"] == str(material.ca_file)
        assert props[f"{alias}.ssl.key.password"] == material.key_password


def test_the_clients_connection_extra_maps_to_what_mirrormaker_uses(material):
    """The job's Java options (from the connection extra) equal MM2's: one form, tested on real brokers."""
    extra = {**material.client_config(), "security.protocol": "SSL"}
    assert java_client_options(extra) == {**material.java_options(), "security.protocol": "SSL"}

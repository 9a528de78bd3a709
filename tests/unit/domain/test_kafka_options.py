from __future__ import annotations

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.domain.kafka_options import (
    NOT_FOR_THE_JOB,
    SAME_IN_BOTH,
    java_client_options,
)

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def test_empty_config_gives_no_options():
    assert java_client_options({}) == {}


def test_sasl_plain_gives_plain_login_module():
    options = java_client_options(
        {
            "bootstrap.servers": "a:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "s3cret",
        }
    )
    assert options == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" password="s3cret";',
    }


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "scram-sha-512"])
def test_scram_gives_scram_login_module(mechanism):
    options = java_client_options(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": "bob",
            "sasl.password": "pw",
        }
    )
    assert options == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism.upper(),
        "sasl.jaas.config": f'{SCRAM_MODULE} required username="bob" password="pw";',
    }


def test_username_and_password_are_quoted_and_escaped():
    options = java_client_options(
        {
            "sasl.mechanism": "PLAIN",
            "sasl.username": 'we"ird user',
            "sasl.password": 'p\\a"ss;word',
        }
    )
    assert options["sasl.jaas.config"] == (
        PLAIN_MODULE + r' required username="we\"ird user" password="p\\a\"ss;word";'
    )


def test_sasl_mechanisms_is_an_alias():
    options = java_client_options(
        {
            "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": "u",
            "sasl.password": "p",
        }
    )
    assert options == {
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": f'{SCRAM_MODULE} required username="u" password="p";',
    }


def test_sasl_mechanism_wins_over_alias_and_alias_is_not_reported_unknown():
    options = java_client_options({"sasl.mechanism": "PLAIN", "sasl.mechanisms": "SCRAM-SHA-512"})
    assert options == {"sasl.mechanism": "PLAIN"}


@pytest.mark.parametrize(
    ("given", "expected"), [("sasl_ssl", "SASL_SSL"), ("Ssl", "SSL"), ("PLAINTEXT", "PLAINTEXT")]
)
def test_security_protocol_is_upper_cased(given, expected):
    assert java_client_options({"security.protocol": given}) == {"security.protocol": expected}


def test_ca_location_becomes_a_pem_truststore():
    options = java_client_options({"security.protocol": "ssl", "ssl.ca.location": "/etc/kafka/ca.pem"})
    assert options == {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
    }


@pytest.mark.parametrize(("given", "expected"), [("none", ""), ("https", "https")])
def test_endpoint_identification(given, expected):
    assert java_client_options({"ssl.endpoint.identification.algorithm": given}) == {
        "ssl.endpoint.identification.algorithm": expected,
    }


@pytest.mark.parametrize("key", sorted(NOT_FOR_THE_JOB))
def test_options_not_for_the_job_are_dropped(key):
    assert java_client_options({key: "x"}) == {}


def test_options_same_in_both_are_copied_as_strings():
    options = java_client_options({"client.id": "failover", "request.timeout.ms": 30000, "client.rack": "r1"})
    assert options == {"client.id": "failover", "request.timeout.ms": "30000", "client.rack": "r1"}
    assert all(key in SAME_IN_BOTH for key in options)


def test_unknown_options_are_refused_by_name():
    with pytest.raises(ConfigError) as err:
        java_client_options(
            {"ssl.crl.location": "/c.pem", "client.id": "x", "sasl.oauthbearer.config": "a=b", "acks": "1"},
            connection="kafka_a",
        )
    message = str(err.value)
    assert message.startswith(
        "kafka_a: cannot map librdkafka option(s) ['sasl.oauthbearer.config', 'ssl.crl.location'] "
        "to the Java client Spark uses"
    )
    assert "client.id" not in message and "acks" not in message


@pytest.mark.parametrize(
    "config",
    [
        {"sasl.mechanism": "PLAIN", "sasl.username": "u"},
        {"sasl.mechanism": "SCRAM-SHA-256", "sasl.password": "p"},
    ],
)
def test_username_and_password_come_together(config):
    with pytest.raises(ConfigError) as err:
        java_client_options(config, connection="kafka_b")
    assert str(err.value).startswith(
        "kafka_b: sasl.username/sasl.password need sasl.mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 "
        f"and both values (got mechanism {config['sasl.mechanism']!r})"
    )


def test_username_with_other_mechanism_is_refused():
    with pytest.raises(ConfigError, match=r"\(got mechanism 'OAUTHBEARER'\).*give 'sasl.jaas.config'"):
        java_client_options({"sasl.mechanism": "oauthbearer", "sasl.username": "u", "sasl.password": "p"})


def test_error_names_the_default_connection():
    with pytest.raises(ConfigError, match=r"^the connection: cannot map librdkafka option\(s\) \['foo'\]"):
        java_client_options({"foo": "bar"})


def test_input_is_not_modified():
    config = {"security.protocol": "ssl", "sasl.username": "u", "sasl.password": "p", "group.id": "g"}
    java_client_options(dict(config))
    snapshot = dict(config)
    java_client_options(config)
    assert config == snapshot


def test_username_without_mechanism_means_plain_as_in_librdkafka():
    options = java_client_options({"sasl.username": "u", "sasl.password": "p"})
    assert options["sasl.mechanism"] == "PLAIN"
    assert options["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule")


@pytest.mark.parametrize("given", ["None", "NONE"])
def test_endpoint_identification_none_in_any_case(given):
    assert java_client_options({"ssl.endpoint.identification.algorithm": given}) == {
        "ssl.endpoint.identification.algorithm": ""
    }


# ---- TLS client certificates -------------------------------------------------------------------------------

PEM_CLIENT = {
    "security.protocol": "ssl",
    "ssl.ca.location": "/etc/kafka/ca.pem",
    "ssl.certificate.location": "/etc/kafka/client.pem",
    "ssl.key.location": "/etc/kafka/client.pem",
    "ssl.key.password": "key-secret",
}


def test_pem_client_certificate_in_one_file_becomes_a_pem_keystore():
    assert java_client_options(PEM_CLIENT) == {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/etc/kafka/client.pem",
        "ssl.key.password": "key-secret",
    }


def test_unencrypted_pem_key_maps_without_a_password():
    config = {k: v for k, v in PEM_CLIENT.items() if k != "ssl.key.password"}
    assert "ssl.key.password" not in java_client_options(config)


def test_pem_certificate_and_key_in_separate_files_are_refused_naming_both():
    config = {**PEM_CLIENT, "ssl.key.location": "/etc/kafka/client.key"}
    with pytest.raises(ConfigError, match=r"/etc/kafka/client.pem.*/etc/kafka/client.key.*one file"):
        java_client_options(config, "connection 'kafka_a'")


@pytest.mark.parametrize("missing", ["ssl.certificate.location", "ssl.key.location"])
def test_half_a_pem_client_certificate_is_refused(missing):
    config = {k: v for k, v in PEM_CLIENT.items() if k != missing}
    with pytest.raises(ConfigError, match="None"):
        java_client_options(config)


def test_key_password_without_a_key_is_refused():
    with pytest.raises(ConfigError, match="ssl.key.password is set without ssl.key.location"):
        java_client_options({"ssl.key.password": "x"})


def test_pkcs12_keystore_keeps_location_and_password():
    options = java_client_options(
        {"ssl.keystore.location": "/etc/kafka/client.p12", "ssl.keystore.password": "store-secret"}
    )
    assert options == {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": "/etc/kafka/client.p12",
        "ssl.keystore.password": "store-secret",
    }


def test_pkcs12_and_pem_client_certificates_together_are_refused():
    with pytest.raises(ConfigError, match="either ssl.keystore.location"):
        java_client_options({**PEM_CLIENT, "ssl.keystore.location": "/etc/kafka/client.p12"})


def test_job_keystore_replaces_the_connections_separate_pem_files():
    """Separate PEM files serve Airflow's clients; the job's kafka_options give Java its own key store."""
    config = {**PEM_CLIENT, "ssl.key.location": "/etc/kafka/client.key"}
    overrides = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/etc/kafka/client.p12"}
    options = java_client_options(config, overrides=overrides)
    assert not any(key.startswith("ssl.keystore") or key == "ssl.key.password" for key in options)
    assert options["ssl.truststore.location"] == "/etc/kafka/ca.pem"


def test_job_truststore_replaces_the_connections_ca():
    options = java_client_options(PEM_CLIENT, overrides={"ssl.truststore.location": "/etc/kafka/trust.jks"})
    assert "ssl.truststore.type" not in options and "ssl.truststore.location" not in options
    assert options["ssl.keystore.location"] == "/etc/kafka/client.pem"


def test_inline_pem_is_refused_by_name():
    with pytest.raises(ConfigError, match="ssl.key.pem"):
        java_client_options({"ssl.key.pem": "-----BEGIN PRIVATE KEY-----"})

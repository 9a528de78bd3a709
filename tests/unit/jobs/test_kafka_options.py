from __future__ import annotations

import pytest

from airflow_kafka_failover.exceptions import ConfigError
from airflow_kafka_failover.jobs.kafka_options import NOT_FOR_THE_JOB, SAME_IN_BOTH, java_client_options

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
            {"ssl.key.location": "/k.pem", "client.id": "x", "sasl.oauthbearer.config": "a=b", "acks": "all"},
            connection="kafka_a",
        )
    message = str(err.value)
    assert message.startswith(
        "kafka_a: cannot map librdkafka option(s) ['sasl.oauthbearer.config', 'ssl.key.location'] "
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

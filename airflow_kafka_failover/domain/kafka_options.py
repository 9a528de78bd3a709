"""Turn a ``kafka`` connection's confluent-kafka (librdkafka) config into Java client options for Spark.

The Airflow connection's extra is a librdkafka config, while Spark's Kafka source uses the Java client,
whose names differ for security settings. This module maps them; a key it cannot map safely is refused
by name: remove it from the connection's extra and give the Java option in the job's ``kafka_options``
(which is merged after this mapping). A client certificate the job's ``kafka_options`` already give
(``ssl.keystore.*``) or a truststore they give (``ssl.truststore.*``) replaces the connection's, whose
librdkafka form is then not mapped (and not refused): Airflow's clients keep using it.

TLS files travel by path: the job reads the same files as Airflow's clients, on the same host (local and
client deploy mode). The mapping (librdkafka -> Java):

- ``ssl.ca.location`` -> ``ssl.truststore.type=PEM`` and ``ssl.truststore.location``;
- ``ssl.certificate.location`` and ``ssl.key.location`` naming one file (the private key, PKCS#8, and its
  certificate chain) -> ``ssl.keystore.type=PEM`` and ``ssl.keystore.location``; ``ssl.key.password`` ->
  ``ssl.key.password``. Java reads a PEM key store from one file only, so separate files are refused;
- ``ssl.keystore.location``/``ssl.keystore.password`` (librdkafka's PKCS#12) -> ``ssl.keystore.type=PKCS12``
  with the same location and password.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_kafka_failover.core.exceptions import ConfigError

SAME_IN_BOTH = frozenset(
    {
        "client.id",
        "client.rack",
        "metadata.max.age.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "sasl.kerberos.service.name",
        "request.timeout.ms",
        "socket.connection.setup.timeout.ms",
    }
)
"""Options with the same name and meaning in librdkafka and the Java client."""

NOT_FOR_THE_JOB = frozenset(
    {
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
        "auto.offset.reset",
        "enable.partition.eof",
        "debug",
        "log_level",
        "log.connection.close",
        "socket.timeout.ms",
        "socket.keepalive.enable",
        "api.version.request",
        "broker.version.fallback",
        "statistics.interval.ms",
        "session.timeout.ms",
        "message.timeout.ms",
        "linger.ms",
        "acks",
        "enable.idempotence",
        "queue.buffering.max.ms",
        "topic.metadata.refresh.interval.ms",
        "allow.auto.create.topics",
        "isolation.level",
    }
)
"""Client tuning that Spark's Kafka source sets itself or that only applies to Airflow's own clients.

``bootstrap.servers`` is passed separately; ``isolation.level`` is set by the job (read_committed)."""

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _sasl_login(rest: dict[str, Any], options: dict[str, str], connection: str) -> None:
    """Turn librdkafka's sasl.username/sasl.password into the Java client's ``sasl.jaas.config``."""
    username, password = rest.pop("sasl.username", None), rest.pop("sasl.password", None)
    if username is None and password is None:
        return
    options.setdefault("sasl.mechanism", "PLAIN")  # librdkafka's default; Java's would be GSSAPI
    module = _LOGIN_MODULES.get(options["sasl.mechanism"])
    if module is None or username is None or password is None:
        raise ConfigError(
            f"{connection}: sasl.username/sasl.password need sasl.mechanism PLAIN, SCRAM-SHA-256 or "
            f"SCRAM-SHA-512 and both values (got mechanism {options.get('sasl.mechanism')!r}); for other "
            "mechanisms remove sasl.username/sasl.password from the connection's extra and give "
            "'sasl.jaas.config' in the job's kafka_options"
        )
    options["sasl.jaas.config"] = (
        f"{module} required username={_jaas_quote(str(username))} password={_jaas_quote(str(password))};"
    )


KEYSTORE_KEYS = ("ssl.certificate.location", "ssl.key.location", "ssl.key.password")
PKCS12_KEYS = ("ssl.keystore.location", "ssl.keystore.password")
TRUSTSTORE_KEYS = ("ssl.ca.location",)


def _client_certificate(rest: dict[str, Any], options: dict[str, str], connection: str) -> None:
    """Map librdkafka's client certificate (PEM files or a PKCS#12 key store) to the Java key store."""
    certificate, key = rest.pop("ssl.certificate.location", None), rest.pop("ssl.key.location", None)
    key_password = rest.pop("ssl.key.password", None)
    keystore, keystore_password = (
        rest.pop("ssl.keystore.location", None),
        rest.pop("ssl.keystore.password", None),
    )
    if keystore is not None:
        if certificate is not None or key is not None:
            raise ConfigError(
                f"{connection}: give the client certificate once, either ssl.keystore.location (PKCS#12) "
                "or ssl.certificate.location with ssl.key.location (PEM), not both"
            )
        options.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore)})
        if keystore_password is not None:
            options["ssl.keystore.password"] = str(keystore_password)
        return
    if certificate is None and key is None:
        if key_password is not None:
            raise ConfigError(f"{connection}: ssl.key.password is set without ssl.key.location; remove it")
        return
    if certificate is None or key is None or str(certificate) != str(key):
        raise ConfigError(
            f"{connection}: the job's Java client reads a PEM client certificate from one file holding the "
            f"private key (PKCS#8) and its certificate chain, got ssl.certificate.location={certificate!r} "
            f"and ssl.key.location={key!r}: concatenate key and chain into one file and point both options "
            "at it, or give the Java key store in the job's kafka_options (ssl.keystore.type, "
            "ssl.keystore.location, ...)"
        )
    options.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certificate)})
    if key_password is not None:
        options["ssl.key.password"] = str(key_password)


def _without_overridden(rest: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Drop the connection's client certificate or CA when the job's Java options give their own."""
    if any(str(key).startswith("ssl.keystore.") for key in overrides):
        rest = {k: v for k, v in rest.items() if k not in (*KEYSTORE_KEYS, *PKCS12_KEYS)}
    if any(str(key).startswith("ssl.truststore.") for key in overrides):
        rest = {k: v for k, v in rest.items() if k not in TRUSTSTORE_KEYS}
    return rest


def _truststore(rest: dict[str, Any], options: dict[str, str]) -> None:
    ca_location = rest.pop("ssl.ca.location", None)
    if ca_location is not None:
        options["ssl.truststore.type"] = "PEM"
        options["ssl.truststore.location"] = str(ca_location)


def java_client_options(
    confluent: Mapping[str, Any],
    connection: str = "the connection",
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Map a librdkafka config to Java client options (without Spark's ``kafka.`` prefix).

    :param confluent: the connection's config dict.
    :param connection: the connection id, named in errors.
    :param overrides: the job's ``kafka_options`` (Java options merged after this mapping, by the caller):
        when they give a key store (``ssl.keystore.*``) or a truststore (``ssl.truststore.*``), the
        connection's librdkafka client certificate or CA is left unmapped.
    """
    options: dict[str, str] = {}
    rest = _without_overridden({str(k): v for k, v in confluent.items()}, overrides or {})
    protocol = rest.pop("security.protocol", None)
    if protocol is not None:
        options["security.protocol"] = str(protocol).upper()
    mechanism = rest.pop("sasl.mechanism", None) or rest.pop("sasl.mechanisms", None)
    rest.pop("sasl.mechanisms", None)
    if mechanism is not None:
        options["sasl.mechanism"] = str(mechanism).upper()
    _sasl_login(rest, options, connection)
    _client_certificate(rest, options, connection)
    _truststore(rest, options)
    identification = rest.pop("ssl.endpoint.identification.algorithm", None)
    if identification is not None:
        options["ssl.endpoint.identification.algorithm"] = (
            "" if str(identification).lower() == "none" else str(identification)
        )
    unmapped = []
    for key, value in rest.items():
        if key in SAME_IN_BOTH:
            options[key] = str(value)
        elif key not in NOT_FOR_THE_JOB:
            unmapped.append(key)
    if unmapped:
        raise ConfigError(
            f"{connection}: cannot map librdkafka option(s) {sorted(unmapped)} to the Java client "
            "Spark uses; remove them from the connection's extra and give the Java equivalents in the job's "
            "kafka_options (the connection is mapped before kafka_options is merged)"
        )
    return options

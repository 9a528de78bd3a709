"""Turn a ``kafka`` connection's confluent-kafka (librdkafka) config into Java client options for Spark.

The Airflow connection's extra is a librdkafka config, while Spark's Kafka source uses the Java client,
whose names differ for security settings. This module maps them; a key it cannot map safely is refused
by name: remove it from the connection's extra and give the Java option in the job's ``kafka_options``
(which is merged after this mapping).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_kafka_failover.exceptions import ConfigError

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


def java_client_options(confluent: Mapping[str, Any], connection: str = "the connection") -> dict[str, str]:
    """Map a librdkafka config to Java client options (without Spark's ``kafka.`` prefix).

    :param confluent: the connection's config dict.
    :param connection: the connection id, named in errors.
    """
    options: dict[str, str] = {}
    rest = {str(k): v for k, v in confluent.items()}
    protocol = rest.pop("security.protocol", None)
    if protocol is not None:
        options["security.protocol"] = str(protocol).upper()
    mechanism = rest.pop("sasl.mechanism", None) or rest.pop("sasl.mechanisms", None)
    rest.pop("sasl.mechanisms", None)
    if mechanism is not None:
        options["sasl.mechanism"] = str(mechanism).upper()
    _sasl_login(rest, options, connection)
    ca_location = rest.pop("ssl.ca.location", None)
    if ca_location is not None:
        options["ssl.truststore.type"] = "PEM"
        options["ssl.truststore.location"] = str(ca_location)
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

"""Check a connection's TLS files before connecting, and tell TLS refusals apart from a cluster that is down.

A TLS misconfiguration (a missing key file, a certificate that does not match its key, an expired
certificate, a CA that did not sign the broker's certificate) makes every connection fail, exactly like a
dead cluster would. A health probe must not read it as "down": that would fail a healthy cluster over.
The file problems are caught here, before any connection, from the files alone (``cryptography``); the
one only a connection can reveal (the broker's certificate is not signed by ``ssl.ca.location``'s CA, or
the broker refuses the client's certificate) is recognised in the client's error text.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from airflow_kafka_failover.core.exceptions import ConfigError

FILE_OPTIONS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.keystore.location")
"""librdkafka options that name a file (``ssl.ca.location`` may also be ``probe``: the system's CA store,
which is not checked)."""

TLS_REFUSAL = re.compile(
    r"certificate verify failed|alert (bad certificate|certificate expired|unknown ca|certificate unknown|"
    r"certificate revoked|unsupported certificate|handshake failure)|wrong version number",
    re.IGNORECASE,
)
"""librdkafka error texts of a TLS handshake refused for a reason of configuration, on either side.

A broker that dies during a handshake gives ``Disconnected`` or ``Connection refused``, never these."""


def check_tls_files(config: Mapping[str, Any], connection: str, now: dt.datetime | None = None) -> None:
    """Refuse a client config whose TLS files are missing, unreadable, mismatched or expired.

    :param config: the confluent-kafka config (the connection's extra).
    :param connection: names the connection in errors, e.g. ``Airflow connection 'kafka_a'``.
    :param now: the time certificates must be valid at (default: now).
    :raises ConfigError: naming the option, the file and the problem.
    """
    moment = now or dt.datetime.now(dt.UTC)
    files = {
        option: Path(str(config[option]))
        for option in FILE_OPTIONS
        if config.get(option) and not (option == "ssl.ca.location" and config[option] == "probe")
    }
    contents = {option: _read(path, option, connection) for option, path in files.items()}
    if "ssl.ca.location" in contents:
        certificates = _certificates(contents["ssl.ca.location"], "ssl.ca.location", files, connection)
        _check_validity(certificates, "ssl.ca.location", files["ssl.ca.location"], connection, moment)
    if "ssl.keystore.location" in contents:
        key, certificates = _pkcs12(contents["ssl.keystore.location"], config, files, connection)
        _check_pair(key, certificates, "ssl.keystore.location", files, connection, moment)
    if "ssl.certificate.location" in contents or "ssl.key.location" in contents:
        if not ("ssl.certificate.location" in contents and "ssl.key.location" in contents):
            given = (
                "ssl.certificate.location" if "ssl.certificate.location" in contents else "ssl.key.location"
            )
            missing = (
                "ssl.key.location" if given == "ssl.certificate.location" else "ssl.certificate.location"
            )
            raise ConfigError(
                f"{connection}: {given} is set but {missing} is not; a client certificate needs both "
                "(they may name the same file holding the key and the certificate)"
            )
        certificates = _certificates(
            contents["ssl.certificate.location"], "ssl.certificate.location", files, connection
        )
        key = _pem_key(contents["ssl.key.location"], config.get("ssl.key.password"), files, connection)
        _check_pair(key, certificates, "ssl.certificate.location", files, connection, moment)


def tls_refusal(errors: Iterable[Any]) -> str | None:
    """Return the first client error that is a TLS handshake refused for configuration, or None.

    :param errors: ``KafkaError`` objects (or texts) the client reported.
    """
    for error in errors:
        text = error.str() if hasattr(error, "str") else str(error)
        if TLS_REFUSAL.search(text):
            return " ".join(text.split())
    return None


def _read(path: Path, option: str, connection: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        problem = "does not exist"
    except IsADirectoryError:
        problem = "is a directory, not a file"
    except PermissionError:
        problem = "is not readable by this user"
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror})"
    raise ConfigError(f"{connection}: {option} {path} {problem}; point {option} at the right file")


def _certificates(data: bytes, option: str, files: Mapping[str, Path], connection: str) -> list[Any]:
    from cryptography import x509

    try:
        return list(x509.load_pem_x509_certificates(data))
    except ValueError:
        raise ConfigError(
            f"{connection}: {option} {files[option]} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        ) from None


def _pem_key(data: bytes, password: Any, files: Mapping[str, Path], connection: str) -> Any:
    from cryptography.hazmat.primitives import serialization

    path = files["ssl.key.location"]
    secret = str(password).encode() if password else None
    try:
        return serialization.load_pem_private_key(data, secret)
    except TypeError:
        problem = (
            "is encrypted but ssl.key.password is not set"
            if secret is None
            else "is not encrypted, but ssl.key.password is set (remove it)"
        )
    except ValueError:
        # A wrong password is told by the PEM's own label, not by the error's wording: about one wrong
        # password in 400 decrypts to bytes with valid padding, and the error then names the key data.
        problem = (
            "cannot be decrypted with ssl.key.password"
            if secret is not None and _is_encrypted_pem(data)
            else "holds no readable PEM private key"
        )
    except Exception as exc:  # unsupported key types and encryptions surface as various errors
        problem = f"cannot be read as a private key ({type(exc).__name__})"
    raise ConfigError(f"{connection}: the private key in ssl.key.location {path} {problem}")


def _is_encrypted_pem(data: bytes) -> bool:
    """Whether the PEM holds an encrypted key: PKCS#8 (``ENCRYPTED PRIVATE KEY``) or OpenSSL's traditional
    form (``Proc-Type: 4,ENCRYPTED``)."""
    return b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in data or b"Proc-Type: 4,ENCRYPTED" in data


def _pkcs12(data: bytes, config: Mapping[str, Any], files: Mapping[str, Path], connection: str):
    from cryptography.hazmat.primitives.serialization import pkcs12

    password = config.get("ssl.keystore.password")
    try:
        key, certificate, chain = pkcs12.load_key_and_certificates(
            data, str(password).encode() if password else None
        )
    except Exception:  # a wrong password and a corrupt file look alike to the parser
        raise ConfigError(
            f"{connection}: ssl.keystore.location {files['ssl.keystore.location']} is not a PKCS#12 key "
            "store that ssl.keystore.password opens"
        ) from None
    if key is None or certificate is None:
        raise ConfigError(
            f"{connection}: ssl.keystore.location {files['ssl.keystore.location']} holds no private key "
            "with its certificate"
        )
    return key, [certificate, *chain]


def _public_der(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(
        key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def _check_pair(
    key: Any,
    certificates: list[Any],
    option: str,
    files: Mapping[str, Path],
    connection: str,
    now: dt.datetime,
) -> None:
    """The first certificate is the client's: it must belong to the key; all must be valid now."""
    if _public_der(certificates[0].public_key()) != _public_der(key.public_key()):
        key_file = files.get("ssl.key.location", files[option])
        raise ConfigError(
            f"{connection}: the client certificate in {option} {files[option]} does not match the private "
            f"key in {key_file} (different public keys); give the certificate issued for this key"
        )
    _check_validity(certificates, option, files[option], connection, now)


def _check_validity(
    certificates: list[Any], option: str, path: Path, connection: str, now: dt.datetime
) -> None:
    for certificate in certificates:
        subject = certificate.subject.rfc4514_string()
        if now > certificate.not_valid_after_utc:
            raise ConfigError(
                f"{connection}: the certificate {subject!r} in {option} {path} expired on "
                f"{certificate.not_valid_after_utc:%Y-%m-%d %H:%M} UTC; renew it"
            )
        if now < certificate.not_valid_before_utc:
            raise ConfigError(
                f"{connection}: the certificate {subject!r} in {option} {path} is not valid before "
                f"{certificate.not_valid_before_utc:%Y-%m-%d %H:%M} UTC; check the clock or the certificate"
            )

"""The sandbox's TLS material: a CA, one broker certificate and one client certificate, made at ``up``.

Everything is made locally with Python's ``cryptography`` (nothing downloaded, no ``keytool``) into
``<run_dir>/tls/`` (mode 0700). Brokers, MirrorMaker 2, the provider's clients and the Spark job read the
same PEM files by path:

- ``ca.pem``: the sandbox CA's certificate (the truststore of everyone: ``ssl.ca.location`` for
  librdkafka, ``ssl.truststore.type=PEM`` for Java).
- ``broker.pem``/``client.pem``: a private key (PKCS#8, encrypted with the key password) followed by its
  certificate, one file each. One file holding key and chain is the one PEM form both clients take by
  path: librdkafka reads ``ssl.key.location`` and ``ssl.certificate.location`` from it, the Java client
  reads it as ``ssl.keystore.type=PEM`` with ``ssl.keystore.location``. PEM by path rather than PKCS12
  because the Airflow side (librdkafka) and the job (Java) then share one file and one key password; rather
  than Java's inline ``ssl.keystore.key``, because a path in a config file can be shown in a log, a key
  cannot.
- ``ca-key.pem``: the CA's private key (encrypted with the key password), kept so that tests can issue
  more certificates (an expired one, say) that the brokers trust.
- ``key-password``: the key password (0600). Broker ``server.properties`` and ``mm2.properties``
  (both 0600) hold it too; it is never on a command line.

The broker certificate names 127.0.0.1 and localhost, so clients verify the host name (librdkafka's and
Java's default ``https`` identification) as they would against a real cluster.
"""

from __future__ import annotations

import datetime as dt
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.scram import write_private

TLS_DIR = "tls"
CREDENTIALS_FILE = "key-password"
VALIDITY = dt.timedelta(days=30)


def _key():
    """An EC P-256 key: made in microseconds, and its handshakes cost the brokers' interpreted-mode JVMs
    (``-XX:TieredStopAtLevel=1``) less than RSA's; librdkafka and Java's PEM key stores both read it."""
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def issue_certificate(
    subject_name: str,
    key: Any,
    issuer: tuple[Any, Any] | None = None,
    not_before: dt.datetime | None = None,
    not_after: dt.datetime | None = None,
    server: bool = False,
    is_ca: bool = False,
) -> Any:
    """Make an X.509 certificate for ``key``, signed by ``issuer`` (its certificate and key) or by itself.

    :param subject_name: the subject's common name.
    :param key: the subject's private key.
    :param issuer: ``(certificate, key)`` of the signing CA; None for a self-signed certificate.
    :param not_before: start of validity (default: an hour ago, to tolerate clock skew).
    :param not_after: end of validity (default: ``not_before`` plus 30 days).
    :param server: name 127.0.0.1 and localhost, and allow server as well as client authentication.
    :param is_ca: make a CA certificate (may sign others).
    """
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_name)])
    start = not_before or dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    issuer_cert, issuer_key = issuer if issuer is not None else (None, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_cert.subject if issuer_cert is not None else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(not_after or start + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if is_ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def key_and_chain_pem(key: Any, certificate: Any, password_file: Path | None) -> str:
    """One PEM text: the private key (PKCS#8, encrypted with ``password_file``), then the certificate.

    The key is encrypted with PBE-SHA1-3DES (PKCS#5 v1.5/PKCS#12 scheme), not the PBES2 that
    ``cryptography`` and ``openssl`` choose by default: the Java 17 Kafka client cannot read PBES2-encrypted
    PEM keys ("PBES2 SecretKeyFactory not available"). ``cryptography`` writes PKCS#8 only with PBES2, so
    ``openssl pkcs8`` encrypts it, reading the key on stdin and the password from the owner-only file (never
    from its command line).

    :param key: the private key.
    :param certificate: its certificate.
    :param password_file: the owner-only file holding the key password, or None for an unencrypted key.
    """
    from cryptography.hazmat.primitives import serialization

    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    if password_file is not None:
        key_pem = _encrypt_for_java(key_pem, password_file)
    return key_pem + certificate_pem(certificate)


def _encrypt_for_java(key_pem: str, password_file: Path) -> str:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise SandboxError("openssl is not on PATH: the TLS sandbox needs it to encrypt its keys")
    result = subprocess.run(
        [openssl, "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-passout", f"file:{password_file}"],
        input=key_pem,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0 or "ENCRYPTED PRIVATE KEY" not in result.stdout:
        raise SandboxError(f"openssl could not encrypt a sandbox key: {result.stderr.strip()[-500:]}")
    return result.stdout


def _encrypted_key_pem(key: Any, password: str) -> str:
    from cryptography.hazmat.primitives import serialization

    encryption = serialization.BestAvailableEncryption(password.encode())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    ).decode()


def certificate_pem(certificate: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    return certificate.public_bytes(serialization.Encoding.PEM).decode()


@dataclass(frozen=True)
class TlsMaterial:
    """The sandbox's CA, broker and client key material, as files of ``<run_dir>/tls``.

    :param directory: the folder holding the PEM files.
    :param key_password: the password of both private keys; kept out of ``repr``.
    """

    directory: Path
    key_password: str = field(repr=False)

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def broker_file(self) -> Path:
        return self.directory / "broker.pem"

    @property
    def client_file(self) -> Path:
        return self.directory / "client.pem"

    @property
    def ca_key_file(self) -> Path:
        return self.directory / "ca-key.pem"

    @classmethod
    def generate(cls, run_dir: Path) -> TlsMaterial:
        """Make a CA, a broker and a client certificate with a fresh random key password; write them."""
        directory = Path(run_dir) / TLS_DIR
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        material = cls(directory, secrets.token_hex(16))
        ca_key = _key()
        ca = issue_certificate("akf-sandbox-ca", ca_key, is_ca=True)
        broker_key, client_key = _key(), _key()
        broker = issue_certificate("akf-sandbox-broker", broker_key, (ca, ca_key), server=True)
        client = issue_certificate("akf-sandbox-client", client_key, (ca, ca_key))
        password_file = write_private(directory / CREDENTIALS_FILE, material.key_password)
        write_private(material.ca_file, certificate_pem(ca))
        write_private(material.ca_key_file, _encrypted_key_pem(ca_key, material.key_password))
        write_private(material.broker_file, key_and_chain_pem(broker_key, broker, password_file))
        write_private(material.client_file, key_and_chain_pem(client_key, client, password_file))
        return material

    @classmethod
    def load(cls, run_dir: Path) -> TlsMaterial:
        """Read the material of a sandbox started with TLS."""
        directory = Path(run_dir) / TLS_DIR
        path = directory / CREDENTIALS_FILE
        try:
            password = path.read_text().strip()
            if not password:
                raise ValueError("empty")
            return cls(directory, password)
        except (OSError, ValueError) as exc:
            raise SandboxError(
                f"the TLS material of the sandbox in {run_dir} is unreadable ({type(exc).__name__} on "
                f"{path}); run `akf-dev sandbox down` and up again"
            ) from None

    def issue_client(
        self, name: str, not_before: dt.datetime | None = None, not_after: dt.datetime | None = None
    ) -> tuple[Any, Any]:
        """Issue a client certificate signed by the sandbox CA; return ``(key, certificate)``.

        :param name: the certificate's common name.
        :param not_before: start of validity (default: an hour ago).
        :param not_after: end of validity (default: 30 days after the start).
        """
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        ca_key = serialization.load_pem_private_key(self.ca_key_file.read_bytes(), self.key_password.encode())
        ca = x509.load_pem_x509_certificate(self.ca_file.read_bytes())
        key = _key()
        return key, issue_certificate(name, key, (ca, ca_key), not_before=not_before, not_after=not_after)

    def client_config(self) -> dict[str, str]:
        """The confluent-kafka (librdkafka) settings of a client with the sandbox's client certificate."""
        return {
            "ssl.ca.location": str(self.ca_file),
            "ssl.certificate.location": str(self.client_file),
            "ssl.key.location": str(self.client_file),
            "ssl.key.password": self.key_password,
        }

    def java_options(self, keystore: Path | None = None) -> dict[str, str]:
        """The Java client's TLS settings (PEM files by path): the client certificate unless ``keystore``.

        :param keystore: another key-and-chain file, e.g. the broker's for a broker's own connections.
        """
        return {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore or self.client_file),
            "ssl.key.password": self.key_password,
        }

    def broker_settings(self) -> dict[str, str]:
        """server.properties settings of a TLS broker that requires client certificates (mutual TLS)."""
        return {**self.java_options(self.broker_file), "ssl.client.auth": "required"}


def security_protocol(sasl: bool, tls: bool) -> str:
    """Kafka's ``security.protocol`` for a listener with or without SASL and TLS."""
    if sasl:
        return "SASL_SSL" if tls else "SASL_PLAINTEXT"
    return "SSL" if tls else "PLAINTEXT"

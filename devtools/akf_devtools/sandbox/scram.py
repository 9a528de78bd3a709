"""The sandbox's SCRAM-SHA-512 login: one user per sandbox, shared by brokers, MirrorMaker 2 and clients.

The password is random per sandbox and lives only in owner-only files of the run directory (the
credentials file, server.properties, mm2.properties and, while formatting, a Java argument file), never on
a command line: ``ps`` shows every process's arguments to every user of the machine.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_kafka_failover.core.atomic_file import OWNER_ONLY, write_atomically
from akf_devtools.errors import SandboxError

MECHANISM = "SCRAM-SHA-512"
PROTOCOL = "SASL_PLAINTEXT"
LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CREDENTIALS_FILE = "scram-credentials.json"


def write_private(path: Path, text: str) -> Path:
    """Replace ``path`` with ``text``, readable and writable by the owner only (it may hold a secret).

    :param path: the file to replace.
    :param text: its new content.
    """
    return write_atomically(path, text, OWNER_ONLY)


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class ScramLogin:
    """A SCRAM-SHA-512 user of the sandbox's clusters.

    :param username: the user name.
    :param password: the password; kept out of ``repr`` so that logging the object cannot leak it.
    """

    username: str
    password: str = field(repr=False)

    @classmethod
    def generate(cls, username: str = "akf-sandbox") -> ScramLogin:
        """A login with a fresh random password (hex: nothing to quote in JAAS or ``--add-scram``)."""
        return cls(username, secrets.token_hex(16))

    def client_config(self) -> dict[str, str]:
        """The confluent-kafka (librdkafka) settings that authenticate as this user."""
        return {
            "security.protocol": PROTOCOL,
            "sasl.mechanism": MECHANISM,
            "sasl.username": self.username,
            "sasl.password": self.password,
        }

    def jaas_config(self) -> str:
        """The Java client's ``sasl.jaas.config`` value for this user."""
        user, password = _jaas_quote(self.username), _jaas_quote(self.password)
        return f"{LOGIN_MODULE} required username={user} password={password};"

    def java_options(self) -> dict[str, str]:
        """The Java client's settings that authenticate as this user (MirrorMaker 2, the broker itself)."""
        return {
            "security.protocol": PROTOCOL,
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": self.jaas_config(),
        }

    def storage_argument(self) -> str:
        """The ``kafka-storage format --add-scram`` value that creates this user in the metadata log."""
        return f"{MECHANISM}=[name={self.username},password={self.password}]"

    def save(self, run_dir: Path) -> Path:
        """Write the credentials file (owner-only) into the run directory."""
        return write_private(
            credentials_file(run_dir),
            json.dumps({"mechanism": MECHANISM, "username": self.username, "password": self.password}),
        )

    @classmethod
    def load(cls, run_dir: Path) -> ScramLogin:
        """Read the credentials file of a sandbox started with SCRAM."""
        path = credentials_file(run_dir)
        try:
            data: Any = json.loads(path.read_text())
            return cls(str(data["username"]), str(data["password"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SandboxError(
                f"the SCRAM credentials of the sandbox in {run_dir} are unreadable "
                f"({type(exc).__name__} on {path}); run `akf-dev sandbox down` and "
                "up again"
            ) from None


def credentials_file(run_dir: Path) -> Path:
    return Path(run_dir) / CREDENTIALS_FILE


def java_argfile_argv(argv: list[str], first_hidden: int, argfile: Path) -> list[str]:
    """Move ``argv[first_hidden:]`` (main class and arguments) into a Java ``@argfile`` written owner-only.

    The java launcher reads the file and runs the same command, but ``ps`` shows only ``@<argfile>``.
    The caller deletes the file once the process has started or ended.
    """
    lines = ['"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"' for arg in argv[first_hidden:]]
    write_private(argfile, "\n".join(lines) + "\n")
    return [*argv[:first_hidden], f"@{argfile}"]

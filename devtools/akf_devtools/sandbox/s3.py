"""An S3-compatible server on loopback for the storage tests: moto's server mode (``moto[server]`` from PyPI).

moto implements the conditional writes the create-only fence markers rely on: a ``PutObject`` or a multipart
completion with ``If-None-Match: *`` on an existing key fails with 412 PreconditionFailed, and ``If-Match``
is honoured (``tests/integration/test_stores.py`` checks it). It accepts any access key and secret; the
server still gets a random pair, kept with the port in owner-only files of ``<run dir>/s3/`` (mode 0700) and
never on a command line, so that the tests pass credentials the way a real deployment must.

moto keeps every bucket and object in memory: :meth:`S3Server.stop` and :meth:`S3Server.restart` lose them
all (``start`` creates the bucket again, empty). To make the store unreachable and bring it back *with* its
data, :meth:`S3Server.freeze` stops the process with SIGSTOP and :meth:`S3Server.thaw` resumes it: the
kernel still accepts TCP connections on its port, but no request is answered, which is what a hung or
partitioned store looks like to a client: it waits for its timeout (:data:`FAIL_FAST_S3A`).

Devtools only: the provider never imports this module.
"""

from __future__ import annotations

import json
import secrets
import signal
import string
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_kafka_failover.core.process_group import ManagedProcess
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.loopback import PORT_RELEASE_WAIT_S, free_ports, port_in_use, wait_until
from akf_devtools.sandbox.scram import write_private

DEFAULT_BUCKET = "akf-test"
REGION = "us-east-1"
CREDENTIALS_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"

FAIL_FAST_S3A = {
    # One attempt by the AWS SDK, no retry by S3A: a call to an unreachable store fails after one 15 s
    # timeout instead of many minutes (defaults: 5 SDK attempts under 7 S3A retries, 200 s socket timeout).
    # Each S3A retry adds another 15 s.
    "fs.s3a.attempts.maximum": "0",
    "fs.s3a.retry.limit": "0",
    "fs.s3a.retry.interval": "200ms",
    "fs.s3a.retry.throttle.limit": "1",
    "fs.s3a.retry.throttle.interval": "200ms",
    # Hadoop 3.4.1 raises every network timeout below 15 s to 15 s (with a warning): 15 s is the floor.
    "fs.s3a.connection.establish.timeout": "15s",
    "fs.s3a.connection.timeout": "15s",
    "fs.s3a.connection.request.timeout": "15s",
    "fs.s3a.connection.acquisition.timeout": "15s",
}
"""S3A settings that make an unreachable store fail in seconds (measured by test_stores.py)."""


@dataclass(frozen=True)
class S3Credentials:
    """An access key and its secret (kept out of ``repr``, so that logging the object cannot leak it)."""

    access_key: str
    secret_key: str = field(repr=False)

    @classmethod
    def generate(cls) -> S3Credentials:
        """A random pair shaped like AWS's (20 upper-case letters and digits; 40 characters)."""
        alphabet = string.ascii_uppercase + string.digits
        return cls(
            "AKIA" + "".join(secrets.choice(alphabet) for _ in range(16)),
            secrets.token_urlsafe(30),
        )


@dataclass
class S3Server:
    """One moto server under ``<run_dir>/s3``, with one bucket.

    :param run_dir: folder for the pid file, the log and the owner-only ``s3/`` folder (port, credentials).
    :param bucket: the bucket :meth:`start` creates.
    :param region: the region clients sign for (moto accepts any).
    """

    run_dir: Path
    bucket: str = DEFAULT_BUCKET
    region: str = REGION

    @property
    def process(self) -> ManagedProcess:
        return ManagedProcess("s3-server", self.run_dir)

    @property
    def folder(self) -> Path:
        return self.run_dir / "s3"

    @property
    def credentials_file(self) -> Path:
        return self.folder / "credentials.json"

    @property
    def port_file(self) -> Path:
        return self.folder / "server.json"

    @property
    def port(self) -> int:
        """The server's port (chosen at the first start and kept by restarts)."""
        try:
            return int(json.loads(self.port_file.read_text())["port"])
        except (OSError, ValueError, KeyError, TypeError):
            raise SandboxError(
                f"the S3 server in {self.run_dir} was never started; call start() first"
            ) from None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def credentials(self) -> S3Credentials:
        """The access key and secret of this server's clients (created at the first start)."""
        try:
            data: Any = json.loads(self.credentials_file.read_text())
            return S3Credentials(str(data["access_key"]), str(data["secret_key"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SandboxError(
                f"the S3 credentials in {self.credentials_file} are unreadable ({type(exc).__name__}); "
                "call start() first"
            ) from None

    def uri(self, *parts: str) -> str:
        """``s3a://<bucket>/<parts joined by />``, e.g. ``uri("ckpt", "orders")``."""
        return "/".join([f"s3a://{self.bucket}", *(part.strip("/") for part in parts)])

    def start(self, timeout: float = 30.0) -> float:
        """Start the server (same port and credentials as before, if any), create the bucket; return seconds.

        :param timeout: seconds to wait for the server to answer.
        :raises SandboxError: it did not answer in time, exited, or its port is taken by another process.
        """
        started = time.monotonic()
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        if not self.credentials_file.is_file():
            pair = S3Credentials.generate()
            write_private(
                self.credentials_file,
                json.dumps({"access_key": pair.access_key, "secret_key": pair.secret_key}),
            )
        if not self.port_file.is_file():
            write_private(self.port_file, json.dumps({"port": free_ports(1)[0]}))
        port = self.port
        if self.process.is_running():
            raise SandboxError(
                f"the S3 server in {self.run_dir} is already running (port {port}); stop it first"
            )
        if not wait_until(lambda: not port_in_use(port), PORT_RELEASE_WAIT_S, 0.25):
            raise SandboxError(f"port {port} of the S3 server in {self.run_dir} is taken by another process")
        self.process.start([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)])
        if not wait_until(lambda: self._answers() or not self.process.is_running(), timeout, interval=0.2):
            tail = self.process.log_tail(20)
            self.stop()
            raise SandboxError(
                f"the S3 server (moto) did not answer on port {port} within {timeout:.0f} s:\n{tail}"
            )
        if not self.process.is_running():
            raise SandboxError(f"the S3 server (moto) exited during start-up:\n{self.process.log_tail(20)}")
        self.client().create_bucket(Bucket=self.bucket)
        return time.monotonic() - started

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=1) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (thawing it first if frozen). moto keeps its data in memory: all of it is lost."""
        self.process.stop(timeout=timeout)

    def restart(self, timeout: float = 30.0) -> float:
        """Stop and start on the same port with the same credentials; every object is lost, the bucket is
        created again, empty. Return the seconds the start took."""
        self.stop()
        return self.start(timeout=timeout)

    def freeze(self) -> None:
        """Make the store unreachable without losing its data (SIGSTOP): connections open, nothing answers."""
        if not self.process.signal_group(signal.SIGSTOP):
            raise SandboxError(f"the S3 server in {self.run_dir} is not running")

    def thaw(self) -> None:
        """Resume a frozen server (SIGCONT); its data is all there."""
        if not self.process.signal_group(signal.SIGCONT):
            raise SandboxError(f"the S3 server in {self.run_dir} is not running")

    def client_config(self) -> dict[str, str]:
        """The keyword arguments of ``boto3.client("s3", ...)`` (also what an Airflow ``aws`` connection
        holds: login = access key, password = secret, extra ``endpoint_url`` and ``region_name``)."""
        pair = self.credentials()
        return {
            "endpoint_url": self.endpoint_url,
            "aws_access_key_id": pair.access_key,
            "aws_secret_access_key": pair.secret_key,
            "region_name": self.region,
        }

    def client(self, fail_fast: bool = True) -> Any:
        """A boto3 S3 client of this server (path-style addressing).

        :param fail_fast: 2 s connect and read timeouts, one attempt: a frozen server fails a call in 2 to
            3 s instead of botocore's 60 s timeouts times its retries.
        """
        import boto3  # deferred: only the storage tests need it
        from botocore.config import Config

        options: dict[str, Any] = {"s3": {"addressing_style": "path"}}
        if fail_fast:
            options.update(
                connect_timeout=2, read_timeout=2, retries={"mode": "standard", "total_max_attempts": 1}
            )
        return boto3.client("s3", config=Config(**options), **self.client_config())

    def hadoop_properties(self, fail_fast: bool = True) -> dict[str, str]:
        """The Hadoop configuration with which S3A (hadoop-aws 3.4.1) reaches this server.

        :param fail_fast: add :data:`FAIL_FAST_S3A` (a call to an unreachable store fails in about 15 s).
        """
        pair = self.credentials()
        properties = {
            "fs.s3a.endpoint": self.endpoint_url,
            "fs.s3a.endpoint.region": self.region,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.aws.credentials.provider": CREDENTIALS_PROVIDER,
            "fs.s3a.access.key": pair.access_key,
            "fs.s3a.secret.key": pair.secret_key,
            # A missing bucket is an error when the file system is created, not at its first write.
            "fs.s3a.bucket.probe": "2",
            # Uploads are buffered in memory, not in fs.s3a.buffer.dir (default /tmp/hadoop-<user>/s3a), so
            # that a job writes nothing to local disk outside Spark's scratch folder.
            "fs.s3a.fast.upload.buffer": "bytebuffer",
        }
        if fail_fast:
            properties.update(FAIL_FAST_S3A)
        return properties

    def spark_properties(self, fail_fast: bool = True) -> dict[str, str]:
        """:meth:`hadoop_properties` as Spark properties (``spark.hadoop.`` prefix)."""
        return {f"spark.hadoop.{key}": value for key, value in self.hadoop_properties(fail_fast).items()}

    def write_spark_properties(self, path: Path, extra: dict[str, str] | None = None) -> Path:
        """Write :meth:`spark_properties` (and ``extra``) to an owner-only file for ``spark-submit
        --properties-file``: the secret stays off every command line and environment.
        """
        properties = {**self.spark_properties(), **(extra or {})}
        return write_private(path, "".join(f"{key} {value}\n" for key, value in sorted(properties.items())))


def main() -> None:
    """Run a server in the foreground until Ctrl-C (for trying things by hand)."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="An S3-compatible server (moto) on loopback")
    parser.add_argument("--run-dir", type=Path, default=None)
    args = parser.parse_args()
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="akf-s3-"))
    server = S3Server(run_dir)
    took = server.start()
    print(f"up in {took:.1f} s: {server.endpoint_url}, bucket {server.bucket}")
    print(f"credentials (owner-only): {server.credentials_file}")
    try:
        while server.process.is_running():
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()

"""One Apache Kafka broker in KRaft mode (combined broker and controller) on loopback ports."""

from __future__ import annotations

import base64
import logging
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from airflow_kafka_failover.process_group import ManagedProcess
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.jars import kafka_classpath
from akf_devtools.sandbox.loopback import accepts_connections, wait_until
from akf_devtools.sandbox.scram import ScramLogin, java_argfile_argv, write_private
from akf_devtools.sandbox.tls import TlsMaterial, security_protocol

log = logging.getLogger(__name__)

# Heaps are capped so that two brokers, MirrorMaker 2, a Spark driver and Airflow fit in 8 GiB together.
BROKER_HEAP = "384m"

LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.coordinator.name = org.apache.kafka.coordinator
logger.coordinator.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


def java_argv(main_class: str, args: list[str], heap: str, run_dir: Path) -> list[str]:
    """Return the java command line for a Kafka main class with the sandbox's classpath and logging.

    :param main_class: fully qualified class with a ``main``.
    :param args: program arguments.
    :param heap: maximum heap, e.g. ``384m``.
    :param run_dir: the sandbox run directory (holds the shared log4j2 configuration).
    """
    java = shutil.which("java")
    if java is None:
        raise SandboxError(
            "java is not on PATH: install a Java 17 JDK, e.g. `apt-get install openjdk-17-jdk`"
        )
    log4j = run_dir / "log4j2.properties"
    if not log4j.exists():
        log4j.write_text(LOG4J2_PROPERTIES)
    return [
        java,
        f"-Xmx{heap}",
        "-Xms64m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        kafka_classpath(),
        main_class,
        *args,
    ]


def client_security(login: ScramLogin | None, tls: TlsMaterial | None) -> dict[str, str]:
    """The confluent-kafka settings of a sandbox client besides ``bootstrap.servers`` ({} without security).

    :param login: the SCRAM login, if the sandbox uses one.
    :param tls: the TLS material, if the sandbox uses TLS (then the client presents its certificate).
    """
    config: dict[str, str] = {}
    if login is not None:
        config.update(login.client_config())
    if tls is not None:
        config.update(tls.client_config())
    if login is not None or tls is not None:
        config["security.protocol"] = security_protocol(login is not None, tls is not None)
    return config


def new_cluster_id() -> str:
    """Return a fresh KRaft cluster id (a base64url-encoded UUID without padding, like kafka-storage).

    Like Kafka's ``Uuid.randomUuid``, never one starting with ``-``, which command lines take for an option.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass
class KafkaBroker:
    """A single-node Kafka cluster: one process that is both broker and KRaft controller.

    :param name: the cluster name in the sandbox (``A`` or ``B``), also its MirrorMaker 2 alias.
    :param run_dir: the sandbox run directory; the broker keeps ``<run_dir>/<name>/`` for itself.
    :param port: the client (PLAINTEXT) listener port on 127.0.0.1.
    :param controller_port: the KRaft controller listener port on 127.0.0.1.
    :param cluster_id: the KRaft cluster id used when formatting the data folder.
    :param extra_listeners: more listeners as ``{name: (port, advertised "host:port")}``, e.g. one whose
        advertised address is a proxy, to cut a single client's path to the cluster.
    :param login: with a SCRAM login, every client listener (``port`` and the extra ones) is
        SASL_PLAINTEXT with SCRAM-SHA-512 and the broker talks to itself as that user too; the controller
        listener stays PLAINTEXT (it serves only the KRaft quorum, on loopback). Without one, all listeners
        are PLAINTEXT.
    :param tls: with TLS material, every client listener is SSL (or SASL_SSL with a login) and requires a
        client certificate signed by the sandbox CA (``ssl.client.auth=required``); the broker's own
        connections present the broker certificate. The controller listener stays PLAINTEXT.
    """

    name: str
    run_dir: Path
    port: int
    controller_port: int
    cluster_id: str
    extra_listeners: dict[str, tuple[int, str]] = field(default_factory=dict)
    login: ScramLogin | None = None
    tls: TlsMaterial | None = None

    @property
    def home(self) -> Path:
        return self.run_dir / self.name

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def process(self) -> ManagedProcess:
        return ManagedProcess(f"broker-{self.name}", self.run_dir)

    @property
    def client_listener(self) -> str:
        """The name (and security protocol) of the listener on ``port``."""
        return security_protocol(self.login is not None, self.tls is not None)

    def client_security(self) -> dict[str, str]:
        """The confluent-kafka settings a client needs besides ``bootstrap.servers`` ({} without security)."""
        return client_security(self.login, self.tls)

    def properties(self) -> str:
        """Return the broker's server.properties (it holds the SCRAM password when there is a login)."""
        client, protocol = self.client_listener, self.client_listener
        listeners = [f"{client}://127.0.0.1:{self.port}", f"CONTROLLER://127.0.0.1:{self.controller_port}"]
        advertised = [f"{client}://127.0.0.1:{self.port}"]
        protocol_map = [f"{client}:{protocol}", "CONTROLLER:PLAINTEXT"]
        for listener, (port, advertised_address) in self.extra_listeners.items():
            listeners.append(f"{listener}://127.0.0.1:{port}")
            advertised.append(f"{listener}://{advertised_address}")
            protocol_map.append(f"{listener}:{protocol}")
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": client,
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocol_map),
            **self._sasl_settings(),
            **self._tls_settings(),
            "log.dirs": str(self.data_dir),
            # Topics are created on purpose (tests and MirrorMaker 2 create theirs), never by a typo.
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "5",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.segment.bytes": str(64 * 1024 * 1024),
            # Small segments of the compacted MM2 topics get cleaned quickly enough for tests.
            "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def _sasl_settings(self) -> dict[str, str]:
        """SCRAM-SHA-512 on every client listener; the broker's own connections log in as the sandbox user."""
        if self.login is None:
            return {}
        names = [self.client_listener, *self.extra_listeners]
        return {
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            **{
                f"listener.name.{name.lower()}.scram-sha-512.sasl.jaas.config": self.login.jaas_config()
                for name in names
            },
        }

    def _tls_settings(self) -> dict[str, str]:
        """The broker's key material, and client certificates required on every client listener.

        Kafka applies the broker-wide ``ssl.client.auth`` to SSL listeners only; a SASL_SSL listener
        requires client certificates only with the listener-prefixed setting (KIP-684), so both are set.
        """
        if self.tls is None:
            return {}
        names = [self.client_listener, *self.extra_listeners]
        return {
            **self.tls.broker_settings(),
            **{f"listener.name.{name.lower()}.ssl.client.auth": "required" for name in names},
        }

    def format_storage(self) -> None:
        """Write server.properties and format the data folder unless it already holds a formatted log.

        With a login, formatting also creates its SCRAM user in the metadata log (``--add-scram``), so the
        broker can authenticate its own inter-broker connection at its first start. That argument holds the
        password, so it travels in an owner-only Java argument file, never on the command line.
        """
        self.home.mkdir(parents=True, exist_ok=True)
        config = write_private(self.home / "server.properties", self.properties())
        if (self.data_dir / "meta.properties").exists():
            return
        args = ["format", f"--cluster-id={self.cluster_id}", f"--config={config}"]
        if self.login is not None:
            args.append(f"--add-scram={self.login.storage_argument()}")
        argv = java_argv("kafka.tools.StorageTool", args, heap="256m", run_dir=self.run_dir)
        argfile = self.home / "format.args"
        if self.login is not None:
            argv = java_argfile_argv(argv, argv.index("kafka.tools.StorageTool"), argfile)
        try:
            result = subprocess.run(argv, capture_output=True, text=True, check=False)
        finally:
            argfile.unlink(missing_ok=True)
        if result.returncode != 0:
            output = result.stdout + result.stderr
            if self.login is not None:  # a tool may echo a bad argument; errors must not carry the password
                output = output.replace(self.login.password, "<password>")
            raise SandboxError(
                f"formatting the data folder of cluster {self.name} ({self.data_dir}) failed:\n"
                + "\n".join(output.splitlines()[-15:])
            )

    def start(self) -> None:
        """Start the broker process in the background (formatting its storage on first start)."""
        self.format_storage()
        self.process.start(
            java_argv(
                "kafka.Kafka", [str(self.home / "server.properties")], heap=BROKER_HEAP, run_dir=self.run_dir
            )
        )

    def wait_ready(self, timeout: float) -> None:
        """Wait until the broker answers a metadata request, or raise with the tail of its log."""

        def answers() -> bool:
            if not self.process.is_running():
                raise SandboxError(
                    f"broker of cluster {self.name} exited during start:\n{self.process.log_tail()}"
                )
            return accepts_connections(self.port) and self.serves_all_partitions(timeout=2.0)

        if not wait_until(answers, timeout, interval=0.3):
            raise SandboxError(
                f"broker of cluster {self.name} did not answer on {self.bootstrap} within {timeout:.0f} s; "
                f"log {self.process.log_file}:\n{self.process.log_tail()}"
            )

    def _metadata(self, timeout: float):
        """Return the broker's cluster metadata, or None when it does not answer within ``timeout``."""
        from confluent_kafka.admin import AdminClient  # deferred: not needed to write configs

        admin = AdminClient(
            {
                "bootstrap.servers": self.bootstrap,
                "socket.connection.setup.timeout.ms": 1000,
                **self.client_security(),
            }
        )
        try:
            return admin.list_topics(timeout=timeout)
        except Exception:  # any failure means "does not answer"
            return None

    def answers_metadata(self, timeout: float = 2.0) -> bool:
        """Say whether the broker returns cluster metadata with at least one broker within ``timeout``."""
        metadata = self._metadata(timeout)
        return metadata is not None and bool(metadata.brokers)

    def serves_all_partitions(self, timeout: float = 2.0) -> bool:
        """Say whether the broker answers and every partition it hosts has a leader.

        After a restart the broker answers metadata requests before log recovery has finished and its
        partitions have leaders again; clients would see NOT_LEADER errors until then.
        """
        metadata = self._metadata(timeout)
        return (
            metadata is not None
            and bool(metadata.brokers)
            and all(
                part.leader >= 0 and part.error is None
                for topic in metadata.topics.values()
                for part in topic.partitions.values()
            )
        )

    def wipe(self) -> None:
        """Delete the data folder; the next start formats an empty one under a new cluster id."""
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.cluster_id = new_cluster_id()

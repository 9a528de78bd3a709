"""One Apache Kafka process in KRaft mode on loopback ports: a combined broker and controller (a cluster of
one), a broker, or a controller (see :mod:`akf_devtools.sandbox.cluster` for clusters of several)."""

from __future__ import annotations

import base64
import logging
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from airflow_kafka_failover.core.process_group import ManagedProcess
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.jars import kafka_classpath
from akf_devtools.sandbox.kafka_class_sharing import java_options as kafka_java_options
from akf_devtools.sandbox.loopback import accepts_connections, wait_until
from akf_devtools.sandbox.scram import ScramLogin, java_argfile_argv, write_private
from akf_devtools.sandbox.tls import TlsMaterial, security_protocol

log = logging.getLogger(__name__)

# Heaps are capped so that two brokers, MirrorMaker 2, a Spark driver and Airflow fit in 8 GiB together.
BROKER_HEAP = "384m"
# In a cluster of several brokers each broker carries a third of the load, and a dedicated controller only
# holds the metadata log of a few hundred partitions: 2 x (3 brokers + 3 controllers) stay under 4 GiB.
CLUSTER_BROKER_HEAP = "256m"
CONTROLLER_HEAP = "96m"
CONTROLLER_ID_BASE = 100
"""Node ids of dedicated controllers start above it (brokers are 1..N), so a log line names its role."""
COMBINED_NODE_LIVENESS = {"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000"}
"""How soon the controller of a single combined node takes its broker for gone (Kafka's defaults: 9 s,
heartbeats every 2 s).

A combined node restarted after a crash replays a registration of its old self that its new controller
holds alive for a whole session: the broker's new registration is refused (``DuplicateBrokerRegistration``)
until it expires, and every failback of the tests waited those 9 s for A. Four seconds still ride out a
busy 2-core machine's pauses. Clusters of several brokers keep Kafka's defaults: their tests show that a
lost broker's 9 s without a readable leader is not taken for an outage."""
ROLES = ("combined", "broker", "controller")

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
        *kafka_java_options(main_class),  # the class-sharing archive of a broker or MirrorMaker 2, if built
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        kafka_classpath(main_class),
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
    """One Kafka process: by default a single-node cluster, one process that is both broker and controller.

    :param name: the cluster name in the sandbox (``A`` or ``B``), also its MirrorMaker 2 alias.
    :param run_dir: the sandbox run directory; a combined node keeps ``<run_dir>/<name>/`` for itself, a
        node of a larger cluster ``<run_dir>/<name>/<broker|controller>-<number>/``.
    :param port: the client listener port on 127.0.0.1 (0 for a dedicated controller, which has none).
    :param controller_port: the KRaft controller listener port on 127.0.0.1 (0 for a broker-only node).
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
    :param role: ``combined`` (broker and sole controller of its cluster), ``broker`` or ``controller``.
    :param node_id: the KRaft node id (1 for a combined node; 1..N for brokers; above
        :data:`CONTROLLER_ID_BASE` for controllers).
    :param voters: ``controller.quorum.voters`` of the cluster; empty for a combined node (itself alone).
    :param replication_factor: the default replication factor of topics (also of Kafka's internal ones).
    :param min_insync_replicas: the default ``min.insync.replicas`` of topics.
    """

    name: str
    run_dir: Path
    port: int
    controller_port: int
    cluster_id: str
    extra_listeners: dict[str, tuple[int, str]] = field(default_factory=dict)
    login: ScramLogin | None = None
    tls: TlsMaterial | None = None
    role: str = "combined"
    node_id: int = 1
    voters: str = ""
    replication_factor: int = 1
    min_insync_replicas: int = 1

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise SandboxError(f"unknown Kafka node role {self.role!r}: use one of {', '.join(ROLES)}")

    @property
    def number(self) -> int:
        """The node's number within its role: broker 1..N, controller 1..3 (1 for a combined node)."""
        return self.node_id - CONTROLLER_ID_BASE if self.role == "controller" else self.node_id

    @property
    def label(self) -> str:
        """The node's name in logs, pid files and status: ``broker-A`` (combined), ``broker-A2``,
        ``controller-A1``."""
        if self.role == "combined":
            return f"broker-{self.name}"
        return f"{self.role}-{self.name}{self.number}"

    @property
    def is_broker(self) -> bool:
        """Whether the node serves clients (a combined node or a broker)."""
        return self.role != "controller"

    @property
    def is_controller(self) -> bool:
        """Whether the node is a voter of the KRaft quorum (a combined node or a controller)."""
        return self.role != "broker"

    @property
    def home(self) -> Path:
        if self.role == "combined":
            return self.run_dir / self.name
        return self.run_dir / self.name / f"{self.role}-{self.number}"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def process(self) -> ManagedProcess:
        return ManagedProcess(self.label, self.run_dir)

    @property
    def heap(self) -> str:
        if self.role == "combined":
            return BROKER_HEAP
        return CONTROLLER_HEAP if self.role == "controller" else CLUSTER_BROKER_HEAP

    @property
    def client_listener(self) -> str:
        """The name (and security protocol) of the listener on ``port``."""
        return security_protocol(self.login is not None, self.tls is not None)

    def client_security(self) -> dict[str, str]:
        """The confluent-kafka settings a client needs besides ``bootstrap.servers`` ({} without security)."""
        return client_security(self.login, self.tls)

    def properties(self) -> str:
        """Return the node's server.properties (it holds the SCRAM password when there is a login)."""
        if self.role == "controller":
            settings = self._controller_settings()
        else:
            settings = self._broker_settings()
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def _controller_settings(self) -> dict[str, str]:
        return {
            "process.roles": "controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            # The controller creates topics, so the topic defaults are its settings, not the brokers'.
            **self._topic_defaults(),
            "num.network.threads": "1",
            "num.io.threads": "2",
        }

    def _topic_defaults(self) -> dict[str, str]:
        replicas, min_isr = str(self.replication_factor), str(self.min_insync_replicas)
        return {
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            "default.replication.factor": replicas,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": "5",
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min_isr,
        }

    def _broker_settings(self) -> dict[str, str]:
        client, protocol = self.client_listener, self.client_listener
        listeners = [f"{client}://127.0.0.1:{self.port}"]
        if self.role == "combined":
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_port}")
        advertised = [f"{client}://127.0.0.1:{self.port}"]
        protocol_map = [f"{client}:{protocol}", "CONTROLLER:PLAINTEXT"]
        for listener, (port, advertised_address) in self.extra_listeners.items():
            listeners.append(f"{listener}://127.0.0.1:{port}")
            advertised.append(f"{listener}://{advertised_address}")
            protocol_map.append(f"{listener}:{protocol}")
        return {
            "process.roles": "broker,controller" if self.role == "combined" else "broker",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters or f"{self.node_id}@127.0.0.1:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": client,
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocol_map),
            **self._sasl_settings(),
            **self._tls_settings(),
            "log.dirs": str(self.data_dir),
            # Topics are created on purpose (tests and MirrorMaker 2 create theirs), never by a typo.
            **self._topic_defaults(),
            **(COMBINED_NODE_LIVENESS if self.role == "combined" else {}),
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.segment.bytes": str(64 * 1024 * 1024),
            # Small segments of the compacted MM2 topics get cleaned quickly enough for tests.
            "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        }

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
        if self.formatted:
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
                f"formatting the data folder of {self.label} ({self.data_dir}) failed:\n"
                + "\n".join(output.splitlines()[-15:])
            )

    @property
    def formatted(self) -> bool:
        """Whether the data folder holds a formatted log."""
        return (self.data_dir / "meta.properties").exists()

    def format_like(self, formatted: KafkaBroker) -> None:
        """Format the data folder as ``formatted``'s, a node of the same cluster and role that StorageTool
        formatted.

        StorageTool writes ``meta.properties`` (the cluster id, the node id and a directory id of its own)
        and the cluster's initial metadata (its metadata version and feature levels, the same on every node
        of a role): up to Kafka 4.3 ``bootstrap.checkpoint`` on every node; from 4.4 a snapshot in a
        controller's metadata log (``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint``) and
        nothing on a broker. This copies whatever it wrote besides ``meta.properties`` and writes that file.
        Doing so costs no JVM start per node, which on two cores is most of the time a cluster of six nodes
        takes to start.
        """
        if self.formatted:
            return
        if formatted.role != self.role:
            raise SandboxError(
                f"{self.label} cannot be formatted like {formatted.label}, a node of another role"
            )
        self.home.mkdir(parents=True, exist_ok=True)
        write_private(self.home / "server.properties", self.properties())
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for written in sorted(formatted.data_dir.rglob("*")):
            if written.is_file() and written.name != "meta.properties":
                copy = self.data_dir / written.relative_to(formatted.data_dir)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(written, copy)
        (self.data_dir / "meta.properties").write_text(
            f"node.id={self.node_id}\ndirectory.id={new_cluster_id()}\nversion=1\n"
            f"cluster.id={self.cluster_id}\n"
        )

    def start(self) -> None:
        """Start the node's process in the background (formatting its storage on first start)."""
        self.format_storage()
        self.process.start(
            java_argv(
                "kafka.Kafka", [str(self.home / "server.properties")], heap=self.heap, run_dir=self.run_dir
            )
        )

    def wait_ready(self, timeout: float) -> None:
        """Wait until the broker answers a metadata request, or raise with the tail of its log."""

        def answers() -> bool:
            if not self.process.is_running():
                raise SandboxError(f"{self.label} exited during start:\n{self.process.log_tail()}")
            return accepts_connections(self.port) and self.serves_all_partitions(timeout=2.0)

        if not wait_until(answers, timeout, interval=0.3):
            raise SandboxError(
                f"{self.label} of cluster {self.name} did not answer on {self.bootstrap} within "
                f"{timeout:.0f} s; "
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

    def wipe(self, cluster_id: str | None = None) -> None:
        """Delete the data folder; the next start formats an empty one under a new cluster id.

        :param cluster_id: the new id (every node of a cluster must share it); a fresh one when None.
        """
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.cluster_id = cluster_id or new_cluster_id()

"""One sandbox cluster: a single combined KRaft node, or N brokers beside a quorum of three controllers.

**Why dedicated controllers for clusters of several brokers.** Kafka documents combined nodes (one process
that is broker and controller) as fit for development and small setups, not for critical deployments;
production clusters run the KRaft quorum on nodes of its own. The sandbox of N brokers follows production
because the failures the provider must judge only come apart that way:

- with combined nodes, losing two brokers of three also loses two voters of three, so the quorum is gone
  whenever two brokers are: "two brokers lost" (leaders move to the survivor, which falls below
  ``min.insync.replicas``) could never happen, only "quorum lost" (nothing moves, metadata goes stale);
- with combined nodes the quorum cannot be lost while every broker still serves, the control-plane-only
  outage whose right verdict is "not down" (docs/concepts.md, "A lost controller quorum");
- with dedicated controllers both exist, and so does their combination (quorum lost, then brokers lost:
  the survivors answer metadata that names dead leaders), each a fault of its own here.

The price is three more JVMs per cluster. Controllers hold the metadata log of a few hundred partitions
and run with a 96 MiB heap, brokers with 256 MiB; a cluster of one keeps today's single combined node
(384 MiB). Kafka's own timing stays at its defaults (``broker.session.timeout.ms`` 9 s), so the time a
lost broker's partitions take to get a new leader is the one production clusters have.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.broker import CONTROLLER_ID_BASE, KafkaBroker, client_security
from akf_devtools.sandbox.loopback import (
    PORT_RELEASE_WAIT_S,
    accepts_connections,
    in_parallel,
    port_in_use,
    wait_until,
)
from akf_devtools.sandbox.scram import ScramLogin
from akf_devtools.sandbox.tls import TlsMaterial

log = logging.getLogger(__name__)

CONTROLLERS = 3
"""Voters of the KRaft quorum of a cluster of several brokers: it survives the loss of one."""
MAX_BROKERS = 5
QUORUM_PROBE_TOPIC = "akf-sandbox-quorum-probe"


def replication_factor(brokers: int) -> int:
    """The default replication factor of a cluster of ``brokers`` brokers: 3, or fewer on smaller ones."""
    return min(brokers, 3)


def min_insync_replicas(brokers: int) -> int:
    """The default ``min.insync.replicas``: one below the replication factor (2 of 3), at least 1."""
    return max(replication_factor(brokers) - 1, 1)


@dataclass
class KafkaCluster:
    """The nodes of one cluster and what the sandbox asks of it as a whole.

    :param name: the cluster's name, also its MirrorMaker 2 alias.
    :param nodes: its processes: one combined node, or the controllers and the brokers.
    """

    name: str
    nodes: list[KafkaBroker]

    # ---- building ----------------------------------------------------------------------------------

    @classmethod
    def plan(
        cls,
        name: str,
        run_dir: Path,
        brokers: int,
        ports: Iterator[int],
        cluster_id: str,
        extra_listeners: dict[str, int] | None = None,
        login: ScramLogin | None = None,
        tls: TlsMaterial | None = None,
    ) -> KafkaCluster:
        """Lay out a cluster of ``brokers`` brokers on ports taken from ``ports`` (nothing is started).

        :param extra_listeners: ``{listener: advertised port}``, for a cluster of one broker only.
        """
        if brokers == 1:
            port, controller_port = next(ports), next(ports)
            extra = {
                listener: (next(ports), f"127.0.0.1:{advertised}")
                for listener, advertised in (extra_listeners or {}).items()
            }
            node = KafkaBroker(name, run_dir, port, controller_port, cluster_id, extra, login, tls)
            return cls(name, [node])
        if extra_listeners:
            raise SandboxError(
                f"extra listeners (here {sorted(extra_listeners)}) need a cluster of one broker; cluster "
                f"{name} has {brokers}"
            )
        controller_ports = [next(ports) for _ in range(CONTROLLERS)]
        voters = ",".join(
            f"{CONTROLLER_ID_BASE + number}@127.0.0.1:{port}"
            for number, port in enumerate(controller_ports, start=1)
        )
        common: dict[str, Any] = dict(
            cluster_id=cluster_id,
            login=login,
            tls=tls,
            voters=voters,
            replication_factor=replication_factor(brokers),
            min_insync_replicas=min_insync_replicas(brokers),
        )
        controllers = [
            KafkaBroker(
                name, run_dir, 0, port, role="controller", node_id=CONTROLLER_ID_BASE + number, **common
            )
            for number, port in enumerate(controller_ports, start=1)
        ]
        members = [
            KafkaBroker(name, run_dir, next(ports), 0, role="broker", node_id=number, **common)
            for number in range(1, brokers + 1)
        ]
        return cls(name, controllers + members)

    @staticmethod
    def ports_needed(brokers: int, extra_listeners: int = 0) -> int:
        """How many free ports :meth:`plan` takes for a cluster of ``brokers`` brokers."""
        return 2 + extra_listeners if brokers == 1 else brokers + CONTROLLERS

    def state(self) -> dict[str, Any]:
        """The cluster as ``sandbox.json`` keeps it (a cluster of one in the layout of earlier releases)."""
        if len(self.nodes) == 1:
            node = self.nodes[0]
            return {
                "port": node.port,
                "controller_port": node.controller_port,
                "cluster_id": node.cluster_id,
                "extra_listeners": {k: list(v) for k, v in node.extra_listeners.items()},
            }
        return {
            "cluster_id": self.nodes[0].cluster_id,
            "voters": self.nodes[0].voters,
            "nodes": [
                {"role": n.role, "node_id": n.node_id, "port": n.port, "controller_port": n.controller_port}
                for n in self.nodes
            ],
        }

    @classmethod
    def from_state(
        cls,
        name: str,
        run_dir: Path,
        state: dict[str, Any],
        login: ScramLogin | None,
        tls: TlsMaterial | None,
    ) -> KafkaCluster:
        """Rebuild a cluster from :meth:`state`."""
        if "nodes" not in state:
            node = KafkaBroker(
                name=name,
                run_dir=run_dir,
                port=state["port"],
                controller_port=state["controller_port"],
                cluster_id=state["cluster_id"],
                extra_listeners={k: (v[0], v[1]) for k, v in state.get("extra_listeners", {}).items()},
                login=login,
                tls=tls,
            )
            return cls(name, [node])
        size = sum(1 for node in state["nodes"] if node["role"] == "broker")
        return cls(
            name,
            [
                KafkaBroker(
                    name,
                    run_dir,
                    node["port"],
                    node["controller_port"],
                    state["cluster_id"],
                    login=login,
                    tls=tls,
                    role=node["role"],
                    node_id=node["node_id"],
                    voters=state["voters"],
                    replication_factor=replication_factor(size),
                    min_insync_replicas=min_insync_replicas(size),
                )
                for node in state["nodes"]
            ],
        )

    # ---- members -----------------------------------------------------------------------------------

    @property
    def brokers(self) -> list[KafkaBroker]:
        """The nodes that serve clients, in broker-number order."""
        return [node for node in self.nodes if node.is_broker]

    @property
    def controllers(self) -> list[KafkaBroker]:
        """The voters of the KRaft quorum."""
        return [node for node in self.nodes if node.is_controller]

    @property
    def size(self) -> int:
        """The number of brokers."""
        return len(self.brokers)

    @property
    def combined(self) -> bool:
        """Whether the cluster is one node that is broker and controller."""
        return self.nodes[0].role == "combined"

    @property
    def bootstrap(self) -> str:
        """Every broker's address, comma-separated (what a client of the cluster is given)."""
        return ",".join(node.bootstrap for node in self.brokers)

    @property
    def cluster_id(self) -> str:
        return self.nodes[0].cluster_id

    def broker(self, number: int) -> KafkaBroker:
        """Return broker ``number`` (1-based), or raise naming the cluster's brokers."""
        return self._member(self.brokers, "broker", number)

    def controller(self, number: int) -> KafkaBroker:
        """Return controller ``number`` (1-based), or raise naming the cluster's controllers."""
        if self.combined:
            raise SandboxError(
                f"cluster {self.name} is a single combined node without controllers of its own; start the "
                "sandbox with several brokers (--brokers 3) for controller faults"
            )
        return self._member(self.controllers, "controller", number)

    def _member(self, members: list[KafkaBroker], role: str, number: int) -> KafkaBroker:
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= len(members):
            raise SandboxError(
                f"cluster {self.name} has no {role} {number!r}: its {role}s are 1..{len(members)}"
            )
        return members[number - 1]

    # ---- asking the cluster ------------------------------------------------------------------------

    def client_config(self) -> dict[str, Any]:
        node = self.nodes[0]
        return {"bootstrap.servers": self.bootstrap, **client_security(node.login, node.tls)}

    def metadata(self, timeout: float = 2.0):
        """Return the cluster's metadata as any live broker answers it, or None when none answers."""
        from confluent_kafka.admin import AdminClient  # deferred: not needed to write configs

        admin = AdminClient({**self.client_config(), "socket.connection.setup.timeout.ms": 1000})
        try:
            return admin.list_topics(timeout=timeout)
        except Exception:  # any failure means "does not answer"
            return None

    def answers_metadata(self, timeout: float = 2.0) -> bool:
        """Say whether some broker of the cluster returns metadata listing at least one broker."""
        metadata = self.metadata(timeout)
        return metadata is not None and bool(metadata.brokers)

    def serves_all_partitions(
        self, timeout: float = 2.0, fully_replicated: bool = False, brokers: list[KafkaBroker] | None = None
    ) -> bool:
        """Say whether the brokers are registered and every partition has a leader among them.

        :param fully_replicated: also require every partition's in-sync replicas to be all its replicas (a
            rolling restart goes on to the next broker only then, as operators do).
        :param brokers: the brokers that must be registered; all of the cluster's when None.
        """
        if self.combined:
            return self.nodes[0].serves_all_partitions(timeout)
        metadata = self.metadata(timeout)
        if metadata is None:
            return False
        wanted = {node.node_id for node in (self.brokers if brokers is None else brokers)}
        if not wanted <= set(metadata.brokers):
            return False
        for topic in metadata.topics.values():
            for part in topic.partitions.values():
                if part.leader not in metadata.brokers or part.error is not None:
                    return False
                if fully_replicated and len(part.isrs) < len(part.replicas):
                    return False
        return True

    def has_quorum(self, timeout: float = 3.0) -> bool:
        """Say whether the KRaft quorum has a leader: a validate-only topic creation (which the brokers
        forward to the active controller) succeeds within ``timeout``."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({**self.client_config(), "socket.connection.setup.timeout.ms": 1000})
        try:
            futures = admin.create_topics(
                [NewTopic(QUORUM_PROBE_TOPIC, num_partitions=1, replication_factor=1)],
                validate_only=True,
                operation_timeout=timeout,
                request_timeout=timeout,
            )
            futures[QUORUM_PROBE_TOPIC].result(timeout=timeout + 1)
            return True
        except Exception:  # no controller answered: no quorum
            return False

    def active_controller(self) -> KafkaBroker | None:
        """The controller that leads the quorum now, as the running voters last wrote it down.

        Each voter keeps ``__cluster_metadata-0/quorum-state`` (JSON: ``leaderId``, ``leaderEpoch``); the
        newest epoch among running voters names the leader. None when no running voter knows one.
        """
        newest: tuple[int, int] | None = None
        for node in self.controllers:
            if not node.process.is_running():
                continue
            try:
                state = json.loads((node.data_dir / "__cluster_metadata-0" / "quorum-state").read_text())
            except (OSError, ValueError):
                continue
            epoch, leader = int(state.get("leaderEpoch", -1)), int(state.get("leaderId", -1))
            if leader >= 0 and (newest is None or epoch > newest[0]):
                newest = (epoch, leader)
        if newest is None:
            return None
        return next((node for node in self.controllers if node.node_id == newest[1]), None)

    # ---- processes ---------------------------------------------------------------------------------

    def running(self) -> list[KafkaBroker]:
        """The nodes whose process runs (frozen ones included)."""
        return [node for node in self.nodes if node.process.is_running()]

    def start(self, nodes: list[KafkaBroker], timeout: float, fully_replicated: bool = False) -> None:
        """Start ``nodes`` in parallel (JVM start-up dominates), then wait until the cluster serves again.

        Serving means: a combined node answers with every partition led; in a cluster of several brokers,
        every broker is registered and every partition led (all in sync with ``fully_replicated``), and
        when controllers were started, the quorum has a leader.
        """
        for node in nodes:
            _wait_ports_released(node)
        self._format(nodes)

        def start(node: KafkaBroker) -> None:
            node.start()
            if node.role == "combined":
                node.wait_ready(timeout)

        in_parallel(functools.partial(start, node) for node in nodes)
        if not self.combined:
            quorum = any(node.is_controller for node in nodes)
            self.wait_serving(timeout, fully_replicated, quorum=quorum, started=nodes)

    def _format(self, nodes: list[KafkaBroker]) -> None:
        """Format the data folders not formatted yet: one StorageTool run per role, copied to the other nodes
        of that role (Kafka 4.4 writes a controller's bootstrap metadata in its metadata log and none on a
        broker, where 4.3 and 3.7 wrote one file on every node)."""
        if self.combined:
            return
        for role in ("controller", "broker"):
            unformatted = [node for node in nodes if not node.formatted and node.role == role]
            if unformatted:
                unformatted[0].format_storage()
                for node in unformatted[1:]:
                    node.format_like(unformatted[0])

    def wait_serving(
        self,
        timeout: float,
        fully_replicated: bool = False,
        quorum: bool = False,
        started: list[KafkaBroker] | None = None,
    ) -> None:
        """Wait until the brokers are registered and every partition led, or raise with the logs' tails.

        :param fully_replicated: also wait until every partition is fully in sync.
        :param quorum: also wait until the quorum has a leader.
        :param started: nodes just started: those that are brokers must be registered, and one that exits
            meanwhile fails the wait at once; None: every broker of the cluster must be registered.
        """

        def serving() -> bool:
            for node in started or []:
                if not node.process.is_running():
                    raise SandboxError(f"{node.label} exited during start:\n{node.process.log_tail()}")
                if node.role == "controller" and not accepts_connections(node.controller_port):
                    return False
            brokers = [node for node in started if node.is_broker] if started is not None else None
            return self.serves_all_partitions(2.0, fully_replicated, brokers) and (
                not quorum or self.has_quorum()
            )

        if not wait_until(serving, timeout, interval=0.5):
            what = ", ".join(node.label for node in (started or self.brokers))
            tails = "\n".join(
                f"--- {node.label} ({node.process.log_file}):\n{node.process.log_tail(8)}"
                for node in (started or self.brokers)
            )
            raise SandboxError(
                f"cluster {self.name} did not serve every partition (with {what}) within {timeout:.0f} s:\n"
                f"{tails}"
            )

    def stop(self, timeout: float = 8.0) -> None:
        """Stop every node (frozen ones too), in parallel: brokers first, so that none waits for a
        controller that is already gone during its controlled shutdown."""
        groups = [self.nodes] if self.combined else [self.brokers, self.controllers]
        for group in groups:
            threads = [
                threading.Thread(target=node.process.stop, kwargs={"timeout": timeout}) for node in group
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

    def rolling_restart(self, timeout: float) -> list[dict[str, float]]:
        """Restart every broker in turn, gracefully (controlled shutdown), as operators roll a cluster.

        Each broker is stopped with SIGTERM (it hands its leaderships over before it exits), started again,
        and the next one waits until the cluster serves every partition fully in sync.

        :return: per broker, seconds to stop it, for it to register again, and for every partition to be
            fully in sync after that.
        """
        if self.combined:
            raise SandboxError(
                f"cluster {self.name} has a single broker: a rolling restart needs several (--brokers 3)"
            )
        took = []
        for node in self.brokers:
            began = time.monotonic()
            node.process.stop(timeout=30.0)
            stopped = time.monotonic()
            self.start([node], timeout)
            registered = time.monotonic()
            self.wait_serving(timeout, fully_replicated=True, started=[node])
            figures = {
                "stop_s": round(stopped - began, 1),
                "register_s": round(registered - stopped, 1),
                "in_sync_s": round(time.monotonic() - registered, 1),
            }
            took.append(figures)
            log.info("Rolling restart of cluster %s: %s back and in sync: %s", self.name, node.label, figures)
        return took


def _wait_ports_released(node: KafkaBroker) -> None:
    """Wait until the node's ports are free: connections of a just-killed node can hold one for seconds."""
    for port in (node.port, node.controller_port):
        if port and not wait_until(lambda port=port: not port_in_use(port), PORT_RELEASE_WAIT_S, 0.25):
            raise SandboxError(
                f"port {port} of cluster {node.name} is taken by another process ({node.label} needs it); "
                "run `akf-dev sandbox down` and `up` again to pick new free ports"
            )

"""MirrorMaker 2 in dedicated mode (``org.apache.kafka.connect.mirror.MirrorMaker``) between the clusters."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from airflow_kafka_failover.core.process_group import ManagedProcess
from akf_devtools.sandbox.broker import java_argv
from akf_devtools.sandbox.jars import MIRRORMAKER_MAIN
from akf_devtools.sandbox.scram import ScramLogin, write_private
from akf_devtools.sandbox.tls import TlsMaterial, security_protocol

log = logging.getLogger(__name__)

MM2_HEAP = "384m"
IDENTITY_POLICY_CLASS = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
DEFAULT_POLICY_CLASS = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"


@dataclass(frozen=True)
class ReplicationSettings:
    """How MirrorMaker 2 replicates in the sandbox.

    :param policy: ``default`` (``orders`` on A appears as ``A.orders`` on B, flows both ways) or
        ``identity`` (same names, a single A->B flow because identity naming cannot prevent loops).
    :param topics: regex of the topics to replicate (MM2's ``topics``).
    :param groups: regex of the consumer groups to checkpoint (MM2's ``groups``).
    :param checkpoint_interval_s: ``emit.checkpoints.interval.seconds``.
    :param refresh_interval_s: how often MM2 looks for new topics and groups.
    """

    policy: str = "default"
    topics: str = ".*"
    groups: str = ".*"
    checkpoint_interval_s: int = 5
    refresh_interval_s: int = 2

    def __post_init__(self) -> None:
        if self.policy not in ("default", "identity"):
            raise ValueError(f"unknown replication policy {self.policy!r}: use 'default' or 'identity'")

    def flows(self, primary: str, standby: str) -> list[tuple[str, str]]:
        """Return the (source, target) pairs that replicate data."""
        if self.policy == "identity":
            return [(primary, standby)]
        return [(primary, standby), (standby, primary)]

    def heartbeat_only_flows(self, primary: str, standby: str) -> list[tuple[str, str]]:
        """Return flows enabled only so that each cluster receives heartbeats written on the other.

        In dedicated mode the heartbeat connector of flow X->Y writes ``heartbeats`` on Y, and the flow
        Y->X copies it to ``Y.heartbeats`` on X (identity naming keeps the prefix for heartbeats). A fresh
        ``A.heartbeats`` on B therefore proves A was alive and read recently. With the identity policy the
        reverse flow carries no data topics and emits no checkpoints, only these heartbeats.
        """
        if self.policy == "identity":
            return [(standby, primary)]
        return []


@dataclass
class MirrorMaker:
    """The MirrorMaker 2 process replicating between two sandbox clusters.

    :param run_dir: the sandbox run directory.
    :param bootstraps: cluster alias -> bootstrap address, primary first.
    :param settings: replication settings.
    :param login: the SCRAM login of both clusters, or None when they take PLAINTEXT clients. MirrorMaker 2
        applies ``<alias>.security.protocol``/``sasl.*`` to every client of that cluster (its connectors'
        and its Connect worker's internal topics alike).
    :param tls: the sandbox's TLS material, or None: MirrorMaker 2 then connects to both clusters with TLS
        and presents the client certificate (PEM files by path; the key password in mm2.properties, 0600).
    :param replication_factor: replicas of every topic MirrorMaker 2 creates (its copies and its internal
        topics): 1 on single-broker clusters, 3 on clusters of three brokers.
    """

    run_dir: Path
    bootstraps: dict[str, str]
    settings: ReplicationSettings
    login: ScramLogin | None = None
    tls: TlsMaterial | None = None
    replication_factor: int = 1

    @property
    def process(self) -> ManagedProcess:
        return ManagedProcess("mirrormaker", self.run_dir)

    @property
    def config_path(self) -> Path:
        return self.run_dir / "mm2.properties"

    def flows(self) -> list[tuple[str, str]]:
        primary, standby = list(self.bootstraps)
        return self.settings.flows(primary, standby)

    def heartbeat_flows(self) -> list[tuple[str, str]]:
        """Return every enabled flow, data or heartbeat-only: each one replicates heartbeats."""
        primary, standby = list(self.bootstraps)
        return self.settings.flows(primary, standby) + self.settings.heartbeat_only_flows(primary, standby)

    def properties(self) -> str:
        """Return the mm2.properties for the dedicated MirrorMaker driver."""
        aliases = list(self.bootstraps)
        policy_class = IDENTITY_POLICY_CLASS if self.settings.policy == "identity" else DEFAULT_POLICY_CLASS
        lines = [
            f"clusters = {', '.join(aliases)}",
            *(f"{alias}.bootstrap.servers = {address}" for alias, address in self.bootstraps.items()),
            *self._security_lines(aliases),
            f"replication.policy.class = {policy_class}",
            # Disable every flow first, then enable the ones we want: MM2 enables none by default,
            # but being explicit documents the topology in the file.
            *(f"{src}->{dst}.enabled = false" for src in aliases for dst in aliases if src != dst),
            *(f"{src}->{dst}.enabled = true" for src, dst in self.heartbeat_flows()),
            *(
                line
                for src, dst in self.heartbeat_flows()
                if (src, dst) not in self.flows()
                for line in (
                    f"{src}->{dst}.topics = ^$",
                    f"{src}->{dst}.groups = ^$",
                    f"{src}->{dst}.emit.checkpoints.enabled = false",
                )
            ),
            f"topics = {self.settings.topics}",
            f"groups = {self.settings.groups}",
            # MM2's consumers read uncommitted records by default: records of aborted transactions would be
            # copied as plain records, which the job, reading committed records, would then process on the
            # other cluster. Transactional topics need this on every source cluster.
            *(f"{alias}.consumer.isolation.level = read_committed" for alias in aliases),
            # Our translation needs the offset syncs after the source is gone, so they live on the target.
            "offset-syncs.topic.location = target",
            f"emit.checkpoints.interval.seconds = {self.settings.checkpoint_interval_s}",
            "emit.checkpoints.enabled = true",
            "emit.heartbeats.enabled = true",
            "emit.heartbeats.interval.seconds = 1",
            # The provider positions the job itself; MM2 must not write into __consumer_offsets.
            "sync.group.offsets.enabled = false",
            f"refresh.topics.interval.seconds = {self.settings.refresh_interval_s}",
            f"refresh.groups.interval.seconds = {self.settings.refresh_interval_s}",
            "tasks.max = 2",
            # An idle consumer's fetch waits this long on the broker for a record (one arriving answers it at
            # once). This line reaches the worker's own consumers (configs, offsets, statuses), not the
            # replication's (`<alias>.consumer.fetch.max.wait.ms`). With both at 3 s instead of 500 ms the
            # idle sandbox used about 17% less CPU (two clusters and MM2: 11.2 CPU s against 13.5 in 90 s,
            # side by side on 2026-12-03); the replication's went back to Kafka's 500 ms after the fleet
            # test's failover met a one-record gap in the first run with them, which was not proven to be
            # their doing.
            *(f"{alias}.fetch.max.wait.ms = 3000" for alias in aliases),
            "offset.flush.interval.ms = 5000",
            # MM2's own connectors ship ServiceLoader manifests: the default discovery also scans the whole
            # classpath by reflection, once per flow, which costs seconds on a quiet machine and over a
            # minute on a loaded one at every start.
            "plugin.discovery = service_load",
            *(f"{alias}.plugin.discovery = service_load" for alias in aliases),
            # Every topic MM2 creates has the clusters' replication factor (one replica on single brokers).
            *(
                f"{name} = {self.replication_factor}"
                for name in (
                    "replication.factor",
                    "checkpoints.topic.replication.factor",
                    "heartbeats.topic.replication.factor",
                    "offset-syncs.topic.replication.factor",
                    "offset.storage.replication.factor",
                    "status.storage.replication.factor",
                    "config.storage.replication.factor",
                )
            ),
        ]
        return "\n".join(lines) + "\n"

    def _security_lines(self, aliases: list[str]) -> list[str]:
        if self.login is None and self.tls is None:
            return []
        options = {
            **(self.login.java_options() if self.login else {}),
            **(self.tls.java_options() if self.tls else {}),
            "security.protocol": security_protocol(self.login is not None, self.tls is not None),
        }
        return [f"{alias}.{key} = {value}" for alias in aliases for key, value in options.items()]

    def start(self) -> None:
        """Write mm2.properties (owner-only: it may hold the SCRAM or the key password) and start MM2."""
        write_private(self.config_path, self.properties())
        self.process.start(
            java_argv(
                MIRRORMAKER_MAIN,
                [str(self.config_path)],
                heap=MM2_HEAP,
                run_dir=self.run_dir,
            )
        )

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM, and SIGKILL after ``grace`` seconds. A stop that kills MM2 loses what its flows copied
        since they last wrote down their offsets (every 5 s), which the next MM2 copies again: a restart after
        an outage gives it longer (``Sandbox.restart_mirrormaker``)."""
        self.process.stop(timeout=grace)

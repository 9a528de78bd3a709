"""The two-cluster sandbox: Kafka clusters A and B on loopback with real MirrorMaker 2 between them.

State lives in the run directory (``sandbox.json``, pid files, logs, data folders), so one Python process
can bring the sandbox up and another can inspect, fault or stop it. A marker file says the directory
belongs to a sandbox; a directory without it is never cleaned or reused.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path

from airflow_kafka_failover.atomic_file import write_json_atomically
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.broker import KafkaBroker, client_security, new_cluster_id
from akf_devtools.sandbox.jars import kafka_classpath
from akf_devtools.sandbox.loopback import free_ports, port_in_use, wait_until
from akf_devtools.sandbox.mirrormaker import MirrorMaker, ReplicationSettings
from akf_devtools.sandbox.scram import ScramLogin, credentials_file
from akf_devtools.sandbox.tls import TlsMaterial, security_protocol

log = logging.getLogger(__name__)

MARKER = ".airflow-kafka-failover-sandbox"
STATE = "sandbox.json"
FAULTS = ("crash", "hang", "resume", "restart", "wipe")
SECURITY_MODES = ("none", "scram", "tls", "scram-tls")
PORT_RELEASE_WAIT_S = 15.0


def default_run_dir() -> Path:
    """Return the run directory used when none is given (``AKF_SANDBOX_DIR`` overrides)."""
    override = os.environ.get("AKF_SANDBOX_DIR")
    if override:
        return Path(override)
    from akf_devtools.sandbox.jars import project_root

    return project_root() / ".run" / "sandbox"


class Sandbox:
    """Two single-broker KRaft clusters and MirrorMaker 2, managed through a run directory.

    :param run_dir: where state, logs and data live; created if missing.
    :param settings: MirrorMaker 2 replication settings (used by ``up``; ``load`` restores them).
    :param clusters: the cluster names, primary first; they are also the MirrorMaker 2 aliases.
    :param security: for ``up``: ``none`` (PLAINTEXT clients) or ``scram``: every client, MirrorMaker 2 and
        the brokers themselves authenticate with SASL/SCRAM-SHA-512 as one user whose random password is
        made at ``up`` and kept in ``<run_dir>/scram-credentials.json`` (mode 0600); ``tls``: every
        client listener is SSL and requires a client certificate (mutual TLS) signed by a CA made at ``up``
        (files in ``<run_dir>/tls``, see :mod:`akf_devtools.sandbox.tls`); ``scram-tls``: both, SASL_SSL
        with client certificates required. The KRaft controller listener stays PLAINTEXT on loopback in
        every mode. None (the default): what the run directory's sandbox uses, ``none`` for a new one.
    """

    def __init__(
        self,
        run_dir: Path | str | None = None,
        settings: ReplicationSettings | None = None,
        clusters: tuple[str, str] = ("A", "B"),
        security: str | None = None,
    ) -> None:
        self.run_dir = Path(run_dir) if run_dir else default_run_dir()
        self.settings = settings or ReplicationSettings()
        if len(set(clusters)) != 2:
            raise SandboxError(f"the sandbox needs two distinct cluster names, got {clusters!r}")
        if security is not None and security not in SECURITY_MODES:
            raise SandboxError(
                f"unknown sandbox security {security!r}: use one of {', '.join(SECURITY_MODES)}"
            )
        self.cluster_names = clusters
        self.requested_security = security
        self.security = security or "none"
        self.login: ScramLogin | None = None
        self.tls: TlsMaterial | None = None
        self.brokers: dict[str, KafkaBroker] = {}
        self.faults_injected: list[tuple[str, str]] = []
        """``(kind, cluster)`` of every fault this object injected, oldest first."""
        self._load_state()

    # ---- state -------------------------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.run_dir / STATE

    def _load_state(self) -> None:
        if not self.state_file.exists():
            return
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError) as exc:
            raise SandboxError(
                f"{self.state_file} is unreadable ({exc}); run `akf-dev sandbox down`"
            ) from exc
        self.settings = ReplicationSettings(**state["replication"])
        self.cluster_names = tuple(state["clusters"])  # type: ignore[assignment]
        self.security = state.get("security", "none")
        self.login = ScramLogin.load(self.run_dir) if _uses_scram(self.security) else None
        self.tls = TlsMaterial.load(self.run_dir) if _uses_tls(self.security) else None
        self.brokers = {
            name: _broker_from_state(name, self.run_dir, cluster, self.login, self.tls)
            for name, cluster in state["clusters"].items()
        }

    def _save_state(self) -> None:
        state = {
            "clusters": {
                name: {
                    "port": broker.port,
                    "controller_port": broker.controller_port,
                    "cluster_id": broker.cluster_id,
                    "extra_listeners": {k: list(v) for k, v in broker.extra_listeners.items()},
                }
                for name, broker in self.brokers.items()
            },
            "replication": asdict(self.settings),
            "security": self.security,
        }
        # Unsorted: the order of the clusters is the order of the sandbox's cluster names.
        write_json_atomically(self.state_file, state, indent=1, sort_keys=False)

    @property
    def mirrormaker(self) -> MirrorMaker:
        return MirrorMaker(
            run_dir=self.run_dir,
            bootstraps={name: self.brokers[name].bootstrap for name in self.cluster_names},
            settings=self.settings,
            login=self.login,
            tls=self.tls,
        )

    def broker(self, cluster: str) -> KafkaBroker:
        """Return the broker of ``cluster``, or raise naming the known clusters."""
        if cluster not in self.brokers:
            known = ", ".join(self.cluster_names)
            raise SandboxError(f"unknown cluster {cluster!r}: this sandbox has clusters {known}")
        return self.brokers[cluster]

    def bootstrap(self, cluster: str) -> str:
        return self.broker(cluster).bootstrap

    def security_config(self) -> dict[str, str]:
        """The confluent-kafka settings every client of this sandbox needs besides ``bootstrap.servers``.

        ``{}`` without security; with SCRAM: ``security.protocol``, ``sasl.mechanism``, ``sasl.username``
        and ``sasl.password``; with TLS: ``ssl.ca.location``, ``ssl.certificate.location``,
        ``ssl.key.location`` (one key-and-certificate file) and ``ssl.key.password``. Both clusters share
        the login and the client certificate.
        """
        return client_security(self.login, self.tls)

    def client_config(self, cluster: str) -> dict[str, str]:
        """The confluent-kafka config of a client of ``cluster`` (a ``kafka`` connection's extra)."""
        return {"bootstrap.servers": self.bootstrap(cluster), **self.security_config()}

    # ---- lifecycle ---------------------------------------------------------------------------------

    def _claim_run_dir(self) -> None:
        """Make the run directory ours: create it, or clean a stale one we own; refuse a foreign one."""
        if self.run_dir.exists() and any(self.run_dir.iterdir()):
            if not (self.run_dir / MARKER).exists():
                raise SandboxError(
                    f"run directory {self.run_dir} is not empty and was not created by the sandbox "
                    f"(no {MARKER} file); choose another with --run-dir or AKF_SANDBOX_DIR"
                )
            self._stop_all()
            for child in self.run_dir.iterdir():
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.security != "none":
            # Besides the owner-only config files, Kafka's data files hold the password too (MirrorMaker 2
            # stores its connectors' configs in a topic): only the owner may enter the run directory.
            self.run_dir.chmod(0o700)
        (self.run_dir / MARKER).write_text("created by airflow-kafka-failover; safe to delete when down\n")

    def up(self, timeout: float = 150.0, extra_listeners: dict[str, dict[str, int]] | None = None) -> dict:
        """Start both clusters and MirrorMaker 2 on free ports; return once all of them are ready.

        An already running, healthy sandbox in the same run directory is returned as it is.

        :param timeout: seconds to wait for readiness before stopping everything and raising.
        :param extra_listeners: per cluster, additional listeners as ``{name: advertised port}``; each
            listens on a free port of its own and tells clients to connect to 127.0.0.1:<advertised port>
            (e.g. a ``TcpProxy`` in front of it, to cut one client's path to the cluster).
        """
        if self.brokers and self.is_up():
            if self.requested_security not in (None, self.security):
                raise SandboxError(
                    f"the sandbox in {self.run_dir} is already up with security "
                    f"{self.security!r}, not {self.requested_security!r}: run "
                    "`akf-dev sandbox down` first"
                )
            log.info("Sandbox in %s is already up", self.run_dir)
            return self.info()
        self.security = self.requested_security or "none"
        self._claim_run_dir()
        self.login = ScramLogin.generate() if _uses_scram(self.security) else None
        if self.login is not None:
            self.login.save(self.run_dir)
        self.tls = TlsMaterial.generate(self.run_dir) if _uses_tls(self.security) else None
        extra_listeners = extra_listeners or {}
        wanted = sum(2 + len(extra_listeners.get(name, [])) for name in self.cluster_names)
        ports = iter(free_ports(wanted))
        self.brokers = {}
        for name in self.cluster_names:
            port, controller_port = next(ports), next(ports)
            extra = {}
            for listener, advertised_port in extra_listeners.get(name, {}).items():
                extra[listener] = (next(ports), f"127.0.0.1:{advertised_port}")
            self.brokers[name] = KafkaBroker(
                name=name,
                run_dir=self.run_dir,
                port=port,
                controller_port=controller_port,
                cluster_id=new_cluster_id(),
                extra_listeners=extra,
                login=self.login,
                tls=self.tls,
            )
        self._save_state()
        kafka_classpath()  # resolve jars once, before parallel broker starts need them
        started = time.monotonic()
        try:
            self._start_brokers(list(self.brokers.values()), timeout)
            self.mirrormaker.start()
            self.wait_replicating(timeout - (time.monotonic() - started))
        except BaseException:
            self._stop_all()
            raise
        log.info("Sandbox up in %.1f s: %s", time.monotonic() - started, self.info())
        return self.info()

    def _start_brokers(self, brokers: list[KafkaBroker], timeout: float) -> None:
        """Format and start brokers in parallel (JVM start-up dominates), then wait for each to answer."""
        for broker in brokers:
            for port in (broker.port, broker.controller_port):
                # Connections of a just-killed broker can hold its port for a few seconds.
                if not wait_until(
                    lambda port=port: not port_in_use(port), PORT_RELEASE_WAIT_S, interval=0.25
                ):
                    raise SandboxError(
                        f"port {port} of cluster {broker.name} is taken by another process; "
                        "run `akf-dev sandbox down` and `up` again to pick new free ports"
                    )
        errors: list[BaseException] = []

        def start(broker: KafkaBroker) -> None:
            try:
                broker.start()
                broker.wait_ready(timeout)
            except BaseException as exc:  # re-raised below in the calling thread
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(broker,)) for broker in brokers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def heartbeat_marks(self) -> dict[tuple[str, str], int]:
        """Return, per MirrorMaker 2 flow, how many heartbeats its target cluster holds now (0 if none)."""
        from akf_devtools.sandbox.kafka_io import high_watermark

        return {
            (src, dst): high_watermark(self.client_config(dst), self.heartbeats_topic(src), 0) or 0
            for src, dst in self.mirrormaker.heartbeat_flows()
        }

    def wait_replicating(self, timeout: float, since: dict[tuple[str, str], int] | None = None) -> None:
        """Wait until every MirrorMaker 2 flow has replicated new heartbeats to its target cluster.

        :param since: per flow, the heartbeats its target held before MirrorMaker 2 started (see
            ``heartbeat_marks``); a flow replicates once its target holds more. Without it, any heartbeat
            counts (a fresh sandbox).
        """
        marks = since or {}

        def replicated_heartbeats() -> bool:
            if not self.mirrormaker.process.is_running():
                raise SandboxError(
                    f"MirrorMaker 2 exited during start; log {self.mirrormaker.process.log_file}:\n"
                    f"{self.mirrormaker.process.log_tail()}"
                )
            now = self.heartbeat_marks()
            return all(count > marks.get(flow, 0) for flow, count in now.items())

        if not wait_until(replicated_heartbeats, max(timeout, 1.0), interval=0.5):
            flows = self.mirrormaker.heartbeat_flows()
            raise SandboxError(
                f"MirrorMaker 2 did not start replicating flows {flows} within {timeout:.0f} s; "
                f"log {self.mirrormaker.process.log_file}:\n{self.mirrormaker.process.log_tail()}"
            )

    def heartbeats_topic(self, source: str) -> str:
        """Return the name, on the target cluster, of the heartbeats replicated from ``source``."""
        return f"{source}.heartbeats"  # both policies prefix heartbeats (see MirrorMaker.heartbeat_flows)

    def is_up(self) -> bool:
        """Say whether every process runs and both clusters answer metadata requests."""
        return (
            bool(self.brokers)
            and all(b.process.is_running() and not b.process.is_stopped() for b in self.brokers.values())
            and self.mirrormaker.process.is_running()
            and all(b.answers_metadata() for b in self.brokers.values())
        )

    def _stop_all(self) -> None:
        if not self.brokers:
            return
        self.mirrormaker.stop()
        threads = [
            threading.Thread(target=b.process.stop, kwargs={"timeout": 8.0}) for b in self.brokers.values()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def down(self) -> None:
        """Stop MirrorMaker 2 and both brokers (also frozen ones); data and logs stay for inspection."""
        if not self.state_file.exists():
            log.info("No sandbox state in %s; nothing to stop", self.run_dir)
            return
        self._stop_all()
        log.info("Sandbox in %s is down", self.run_dir)

    def info(self) -> dict:
        """Return what clients need: bootstrap address of each cluster, the run directory, the security.

        Never the password: with SCRAM, ``security`` names the user and the owner-only file that holds it.
        """
        security: dict = {"mode": self.security}
        if self.login is not None or self.tls is not None:
            security["protocol"] = security_protocol(self.login is not None, self.tls is not None)
        if self.login is not None:
            security.update(mechanism="SCRAM-SHA-512", username=self.login.username)
            security["credentials_file"] = str(credentials_file(self.run_dir))
        if self.tls is not None:
            security.update(
                ca_file=str(self.tls.ca_file), client_file=str(self.tls.client_file), client_auth="required"
            )
        return {
            "clusters": {name: {"bootstrap": broker.bootstrap} for name, broker in self.brokers.items()},
            "run_dir": str(self.run_dir),
            "security": security,
            "replication": {
                "policy": self.settings.policy,
                "flows": [f"{s}->{d}" for s, d in self.mirrormaker.flows()],
            }
            if self.brokers
            else {},
        }

    def status(self) -> dict:
        """Report each process (pid, running, frozen) and whether each cluster answers."""
        processes = {}
        for name, broker in self.brokers.items():
            proc = broker.process
            processes[f"broker-{name}"] = {
                "pid": proc.pid(),
                "running": proc.is_running(),
                "frozen": proc.is_stopped(),
                "answers": proc.is_running() and not proc.is_stopped() and broker.answers_metadata(),
                "bootstrap": broker.bootstrap,
            }
        if self.brokers:
            mm2 = self.mirrormaker.process
            processes["mirrormaker"] = {
                "pid": mm2.pid(),
                "running": mm2.is_running(),
                "frozen": mm2.is_stopped(),
            }
        return {"run_dir": str(self.run_dir), "processes": processes}

    # ---- faults ------------------------------------------------------------------------------------

    def fault(self, kind: str, cluster: str, timeout: float = 60.0) -> None:
        """Inject a whole-cluster fault.

        :param kind: ``crash`` (SIGKILL), ``hang`` (SIGSTOP), ``resume`` (SIGCONT), ``restart`` (start
            again keeping data), ``wipe`` (start again with an empty data folder).
        :param cluster: the cluster's name.
        :param timeout: for restart and wipe, seconds to wait until the cluster answers again.
        """
        if kind not in FAULTS:
            raise SandboxError(f"unknown fault {kind!r}: use one of {', '.join(FAULTS)}")
        broker = self.broker(cluster)
        proc = broker.process
        if kind == "crash":
            proc.kill()
        elif kind == "hang":
            if not proc.signal_group(signal.SIGSTOP):
                raise SandboxError(f"cluster {cluster} is not running; nothing to hang")
            # Signals are delivered asynchronously; return only once the broker is really frozen.
            wait_until(proc.is_stopped, 5.0, interval=0.02)
        elif kind == "resume":
            if not proc.signal_group(signal.SIGCONT):
                raise SandboxError(f"cluster {cluster} is not running; nothing to resume")
            wait_until(lambda: not proc.is_stopped(), 5.0, interval=0.02)
        else:
            proc.kill()
            if kind == "wipe":
                broker.wipe()
                self._save_state()
            self._start_brokers([broker], timeout)
        self.faults_injected.append((kind, cluster))
        log.info("Fault %s injected on cluster %s", kind, cluster)

    def stop_mirrormaker(self) -> None:
        """Stop MirrorMaker 2 alone (replication pauses; the clusters keep serving)."""
        self.mirrormaker.stop()

    def start_mirrormaker(self, timeout: float = 120.0) -> None:
        """Start MirrorMaker 2 again and wait until each of its flows has replicated a new heartbeat."""
        marks = self.heartbeat_marks()
        if not self.mirrormaker.process.is_running():
            self.mirrormaker.start()
        self.wait_replicating(timeout, since=marks)


def _uses_scram(security: str) -> bool:
    return security in ("scram", "scram-tls")


def _uses_tls(security: str) -> bool:
    return security in ("tls", "scram-tls")


def _broker_from_state(
    name: str, run_dir: Path, cluster: dict, login: ScramLogin | None, tls: TlsMaterial | None
) -> KafkaBroker:
    return KafkaBroker(
        name=name,
        run_dir=run_dir,
        port=cluster["port"],
        controller_port=cluster["controller_port"],
        cluster_id=cluster["cluster_id"],
        extra_listeners={k: (v[0], v[1]) for k, v in cluster.get("extra_listeners", {}).items()},
        login=login,
        tls=tls,
    )

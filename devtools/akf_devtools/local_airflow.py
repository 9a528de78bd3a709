"""``make airflow``: Airflow 3 on this machine with the provider, the sandbox and the example pair.

It brings the two-cluster sandbox up, creates the example pair's topic on both clusters, writes a pair
config for the sandbox (``examples/pairs.yaml``'s pair ``orders``) and its connections (``kafka_a``,
``kafka_b``, ``spark_default`` as ``AIRFLOW_CONN_*`` variables), then runs Airflow's api-server, scheduler,
dag-processor and triggerer with the repository's ``dags/`` folder, and waits until the pair's DAGs are
loaded. Ctrl-C (or SIGTERM) stops everything it started: the producer, streaming jobs, Airflow and the
sandbox.

Everything lives in the run directory (default ``.airflow/local``, which is also ``AIRFLOW_HOME``)::

    airflow.db, airflow.cfg, logs/     Airflow's metadata DB, config and task logs
    simple_auth_manager_passwords.json.generated   the admin password (kept across starts)
    sandbox/                           the Kafka sandbox (clusters A and B, MirrorMaker 2)
    pairs.yaml                         the pair config the DAGs are built from
    kafka-failover/                    the job's sink, checkpoints, runs and the fencing marker
    processes/                         pid files and logs of the Airflow components
    ready.json                         URL, login and paths, written once Airflow is ready
    .launcher.lock                     locked by the running launcher (one per run directory)

Every start begins afresh (new clusters, so a new metadata DB and no record or fence of an earlier
start); only the generated password is kept.
"""

from __future__ import annotations

import argparse
import copy
import fcntl
import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from airflow_kafka_failover.core.exceptions import FailoverError
from airflow_kafka_failover.core.process_group import ManagedProcess
from akf_devtools.sandbox.jars import project_root

log = logging.getLogger(__name__)

PAIR = "orders"
TOPIC_PARTITIONS = 2
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
DAG_KINDS = ("start", "failover", "failback", "keeper")
MARKER = ".airflow-kafka-failover-local"
LOCK_FILE = ".launcher.lock"
PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"
USERNAME = "admin"
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
# Small and quiet: no Spark UI (no port clash with Airflow), few shuffle partitions, a modest driver.
SPARK_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "768m"}


def _say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def pair_names(pairs: int = 1) -> list[str]:
    """The pairs of a local Airflow of ``pairs`` pairs: the example pair, then ``orders_02``, ..."""
    return [PAIR] + [f"{PAIR}_{number:02d}" for number in range(2, pairs + 1)]


def dag_ids(pairs: list[str] | None = None) -> list[str]:
    """The DAGs of ``pairs`` (the example pair by default)."""
    return [f"kafka_failover_{pair}_{kind}" for pair in pairs or [PAIR] for kind in DAG_KINDS]


def sandbox_pair_config(
    example: Path,
    automatic: bool,
    home: Path,
    settings: dict[str, dict[str, Any]] | None = None,
    pairs: list[str] | None = None,
    overrides: dict[str, dict[str, dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The example pair of ``example`` set up for the sandbox: job files under ``home``, a light Spark job.

    :param example: the example config (``examples/pairs.yaml``).
    :param automatic: whether the switch DAGs run on their own (``switch.wake``) or only when triggered.
    :param home: where the job's sink, checkpoints, runs and fencing marker go.
    :param settings: pair config sections to merge in last, e.g. ``{"switch": {"wake": "event"}}``.
    :param pairs: the pairs to write (default the example pair alone): each a copy of the example pair
        reading the topic of its own name, with its own bookkeeping group, sink and fence.
    :param overrides: per pair, config sections merged in after ``settings``.
    """
    example_pair = yaml.safe_load(example.read_text())["pairs"][PAIR]
    config: dict[str, Any] = {}
    for name in pairs or [PAIR]:
        pair = copy.deepcopy(example_pair)
        pair["topics"] = [name]
        pair["bookkeeping_group"] = f"airflow-kafka-failover.{name}"
        pair["job"] = {
            **(pair.get("job") or {}),
            "spark_conf": SPARK_CONF,
            "sink_root": str(home / "sink" / name),
            "checkpoint_root": str(home / "checkpoints"),
            "run_root": str(home / "runs"),
            "fencing_marker": str(home / "fencing" / name),
        }
        pair["switch"] = {**(pair.get("switch") or {}), "automatic": automatic}
        for section, values in [*(settings or {}).items(), *((overrides or {}).get(name) or {}).items()]:
            pair[section] = {**(pair.get(section) or {}), **values}
        config[name] = pair
    return {"pairs": config}


def connection_env(
    config: dict[str, Any],
    bootstraps: dict[str, str],
    spark_master: str = "local[2]",
    kafka_extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """``AIRFLOW_CONN_*`` variables of the pair's connections: ``kafka`` for each cluster, one ``spark``.

    :param config: the pair config (as :func:`sandbox_pair_config` returns it; its pairs share connections).
    :param bootstraps: cluster name -> bootstrap address.
    :param spark_master: the Spark master of the job's connection.
    :param kafka_extra: more client options of the ``kafka`` connections, e.g. a ``client.id``.
    """
    pair = next(iter(config["pairs"].values()))
    env = {}
    for name, cluster in pair["clusters"].items():
        conn = {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstraps[name], **(kafka_extra or {})}}
        env[f"AIRFLOW_CONN_{cluster['connection'].upper()}"] = json.dumps(conn)
    spark_conn = (pair.get("job") or {}).get("spark_connection") or "spark_default"
    env[f"AIRFLOW_CONN_{spark_conn.upper()}"] = json.dumps({"conn_type": "spark", "host": spark_master})
    return env


def read_json(request: urllib.request.Request, attempts: int = 3, timeout: float = 60.0) -> Any:
    """The JSON answer to ``request``; a request that gets no answer in ``timeout`` seconds is made again, up
    to ``attempts`` times in all (the API server answers slowly on a loaded 2-core machine). Give 1 for a
    request that must not be repeated (a POST that creates something)."""
    for attempt in range(1, attempts + 1):
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())
        except TimeoutError:
            if attempt == attempts:
                raise
            log.warning(
                "%s: no answer in %.0f s (attempt %s of %s); asking again",
                request.full_url,
                timeout,
                attempt,
                attempts,
            )
    raise AssertionError("unreachable")


@dataclass
class LocalAirflow:
    """Airflow, the sandbox and the example pair in one run directory.

    :param run_dir: the run directory, also ``AIRFLOW_HOME``.
    :param port: the API server's (and UI's) port on 127.0.0.1.
    :param automatic: run the switch DAGs on their own (``@continuous``) instead of only on a trigger.
    :param login: require the generated admin password; False lets everyone in as admin.
    :param produce_rate: records per second written to the topic on the active cluster (0: none).
    :param pair_settings: pair config sections merged into the example pair's (benchmarks, tests).
    :param pairs: how many pairs (:func:`pair_names`): copies of the example pair over the same clusters,
        each with a topic of its own name and, with a produce rate, a producer of its own.
    :param pair_overrides: per pair name, config sections merged in after ``pair_settings``.
    :param kafka_extra: more client options of the ``kafka`` connections (e.g. ``client.id``).
    :param request_log: log every request the brokers answer (:meth:`Sandbox.up`), to count them by client.
    :param parallelism: Airflow's ``[core] parallelism``: task instances running at once.
    """

    run_dir: Path
    port: int
    automatic: bool = False
    login: bool = True
    produce_rate: float = 2.0
    pair_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    pairs: int = 1
    pair_overrides: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    kafka_extra: dict[str, str] = field(default_factory=dict)
    request_log: bool = False
    parallelism: int = 4
    producers: dict[str, Any] = field(default_factory=dict, init=False)
    _token: str = field(default="", init=False, repr=False)
    _lock: Any = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.run_dir / "pairs.yaml"

    @property
    def job_home(self) -> Path:
        return self.run_dir / "kafka-failover"

    @property
    def pair_names(self) -> list[str]:
        return pair_names(self.pairs)

    @property
    def producer(self) -> Any:
        """The example pair's producer (None without a produce rate, or before the start)."""
        return self.producers.get(PAIR)

    @property
    def fencing_marker(self) -> Path:
        return self.fencing_marker_of(PAIR)

    def fencing_marker_of(self, pair: str) -> Path:
        return self.job_home / "fencing" / pair

    @property
    def password_file(self) -> Path:
        return self.run_dir / PASSWORD_FILE

    @property
    def ready_file(self) -> Path:
        return self.run_dir / "ready.json"

    @property
    def logs_dir(self) -> Path:
        return self.run_dir / "processes" / "logs"

    @property
    def sandbox(self):
        from akf_devtools.sandbox.sandbox import Sandbox

        return Sandbox(self.run_dir / "sandbox")

    def component(self, name: str) -> ManagedProcess:
        return ManagedProcess(f"airflow-{name}", self.run_dir / "processes")

    # ---- start ---------------------------------------------------------------------------------------

    def start(self) -> dict[str, Any]:
        """Start the sandbox and Airflow in the locked, cleaned run directory; return ready.json's content."""
        sandbox = self.sandbox
        _say(f"starting Kafka clusters A and B with MirrorMaker 2 in {sandbox.run_dir} ...")
        info = sandbox.up(request_log=self.request_log)
        bootstraps = {name: cluster["bootstrap"] for name, cluster in info["clusters"].items()}
        self._create_topics(bootstraps)
        example = project_root() / "examples" / "pairs.yaml"
        config = sandbox_pair_config(
            example, self.automatic, self.job_home, self.pair_settings, self.pair_names, self.pair_overrides
        )
        self.config_path.write_text(yaml.safe_dump(config))
        env = self.airflow_env(connection_env(config, bootstraps, kafka_extra=self.kafka_extra))
        _say("preparing Airflow's metadata database ...")
        self._migrate(env)
        for name in COMPONENTS:
            self.component(name).start(self._component_argv(name), env)
        _say(f"starting Airflow ({', '.join(COMPONENTS)}); waiting for the DAGs of {self._pairs_named()} ...")
        self.wait_ready()
        self._start_producer(bootstraps)
        ready = {
            "url": self.url,
            "username": USERNAME if self.login else None,
            "password_file": str(self.password_file) if self.login else None,
            "pair": PAIR,
            "pairs": self.pair_names,
            "dag_ids": dag_ids(self.pair_names),
            "config": str(self.config_path),
            "fencing_marker": str(self.fencing_marker),
            "sandbox_run_dir": str(sandbox.run_dir),
            "bootstraps": bootstraps,
        }
        self.ready_file.write_text(json.dumps(ready, indent=1))
        return ready

    def lock_run_dir(self) -> None:
        """Make the run directory ours for as long as this process lives; refuse a foreign or busy one."""
        if self.run_dir.exists() and any(self.run_dir.iterdir()) and not (self.run_dir / MARKER).exists():
            raise FailoverError(
                f"{self.run_dir} is not empty and was not created by this launcher "
                f"(no {MARKER} file); choose another with --run-dir"
            )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / MARKER).write_text("airflow-kafka-failover's local Airflow; emptied on start\n")
        # Held open until this process ends; the kernel drops the lock then, however it ends.
        handle = open(self.run_dir / LOCK_FILE, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "unknown"
            handle.close()
            raise FailoverError(
                f"another launcher (pid {owner}) runs from {self.run_dir}; stop it with "
                "Ctrl-C in its terminal, or choose another --run-dir"
            ) from None
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock = handle

    def clean_run_dir(self) -> None:
        """Stop what a killed launcher left running here, then empty the directory but for the password."""
        self.stop()
        for child in self.run_dir.iterdir():
            if child.name in (MARKER, PASSWORD_FILE, LOCK_FILE):
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    def _create_topics(self, bootstraps: dict[str, str]) -> None:
        from akf_devtools.sandbox.kafka_io import create_topic

        for bootstrap in bootstraps.values():
            for pair in self.pair_names:
                create_topic(bootstrap, pair, TOPIC_PARTITIONS)

    def airflow_env(self, connections: dict[str, str]) -> dict[str, str]:
        """The environment of every Airflow process: home, DAGs, pair config, connections, port, login."""
        return {
            "AIRFLOW_HOME": str(self.run_dir),
            "AIRFLOW__CORE__DAGS_FOLDER": str(project_root() / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # The start DAG has no schedule and the switch DAGs only run on a trigger unless --automatic.
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
            "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USERNAME}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": str(not self.login),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            # Task processes reach the execution API through this URL.
            "AIRFLOW__API__BASE_URL": self.url,
            "AKF_PAIRS_CONFIG": str(self.config_path),
            # spark-submit of the pyspark install, and the same Python for Airflow's own subprocesses.
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
            **connections,
        }

    def _airflow(self) -> str:
        return str(Path(sys.executable).with_name("airflow"))

    def _component_argv(self, name: str) -> list[str]:
        if name == "api-server":
            return [self._airflow(), "api-server", "--host", "127.0.0.1", "--port", str(self.port)]
        return [self._airflow(), name]

    def _migrate(self, env: dict[str, str]) -> None:
        log_file = self.logs_dir / "airflow-db-migrate.log"
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "wb") as out:
            result = subprocess.run(
                [self._airflow(), "db", "migrate"],
                env={**os.environ, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                check=False,
                timeout=600,
            )
        if result.returncode != 0:
            tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-30:])
            raise FailoverError(
                f"`airflow db migrate` failed (exit {result.returncode}); log {log_file}:\n{tail}"
            )

    # ---- readiness -----------------------------------------------------------------------------------

    def _pairs_named(self) -> str:
        names = self.pair_names
        return f"pair {names[0]}" if len(names) == 1 else f"{len(names)} pairs ({names[0]} to {names[-1]})"

    def wait_ready(self, timeout: float = 300.0) -> None:
        """Wait until every component is healthy and the pairs' DAGs are loaded; raise saying why not."""
        deadline = time.monotonic() + timeout
        wanted = dag_ids(self.pair_names)
        while time.monotonic() < deadline:
            self.check_components()
            if self._healthy() and set(wanted) <= self._loaded_dag_ids():
                return
            time.sleep(2.0)
        missing = sorted(set(wanted) - self._loaded_dag_ids())
        raise TimeoutError(
            f"Airflow at {self.url} was not ready with the DAGs of {self._pairs_named()} within "
            f"{timeout:.0f} s (missing: {missing[:8]}); health: "
            f"{self.api_get('/api/v2/monitor/health')}; import errors: "
            f"{self.api_get('/api/v2/importErrors')}; logs in {self.logs_dir}"
        )

    def _loaded_dag_ids(self) -> set[str]:
        """The ids of the DAGs the API knows (one listing, not one request per DAG of a fleet)."""
        found: set[str] = set()
        offset = 0
        while True:
            page = self.api_get(f"/api/v2/dags?limit=100&offset={offset}")
            dags = (page or {}).get("dags") or []
            found.update(dag["dag_id"] for dag in dags)
            if len(dags) < 100:
                return found
            offset += 100

    def check_components(self) -> None:
        """Raise naming the first Airflow component that exited, with the tail of its log."""
        for name in COMPONENTS:
            process = self.component(name)
            if not process.is_running():
                raise FailoverError(f"Airflow's {name} exited; log {process.log_file}:\n{process.log_tail()}")

    def _healthy(self) -> bool:
        health = self.api_get("/api/v2/monitor/health")
        if not isinstance(health, dict):
            return False
        return all(
            (health.get(part) or {}).get("status") == "healthy"
            for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
        )

    def token(self) -> str:
        """An API access token of the admin user (of everyone, without login)."""
        if self._token:
            return self._token
        if self.login:
            body = json.dumps({"username": USERNAME, "password": self.password()}).encode()
            request = urllib.request.Request(
                f"{self.url}/auth/token",
                data=body,
                method="POST",
                headers={"Content-Type": "application/json"},
            )
        else:
            request = urllib.request.Request(f"{self.url}/auth/token", method="GET")
        self._token = read_json(request)["access_token"]
        return self._token

    def password(self) -> str:
        """The admin password Airflow generated (it keeps it in ``AIRFLOW_HOME``)."""
        return json.loads(self.password_file.read_text())[USERNAME]

    def api_get(self, path: str) -> Any:
        """GET a JSON document of Airflow's API; None when the server is not up (yet) or says no."""
        try:
            public = path.startswith("/api/v2/monitor/")
            headers = {} if public else {"Authorization": f"Bearer {self.token()}"}
            with urllib.request.urlopen(
                urllib.request.Request(self.url + path, headers=headers), timeout=10
            ) as response:
                return json.loads(response.read())
        except (OSError, ValueError, KeyError):  # URLError and HTTPError are OSErrors
            return None

    def api_post(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` to Airflow's API as the admin user; return the JSON answer (HTTP errors raise)."""
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {self.token()}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    # ---- producer and stop ---------------------------------------------------------------------------

    def _start_producer(self, bootstraps: dict[str, str]) -> None:
        """Write records to the topic on the cluster the fencing marker names (A before any switch)."""
        if self.produce_rate <= 0:
            return
        from akf_devtools.sandbox.producer import SteadyProducer

        for pair in self.pair_names:
            self.producers[pair] = SteadyProducer(
                bootstraps,
                pair,
                functools.partial(self.active_cluster, pair),
                rate=self.produce_rate,
                prefix=pair,
                partitions=TOPIC_PARTITIONS,
            ).start()

    def active_cluster(self, pair: str = PAIR) -> str:
        """The cluster the pair's fencing folder names (A before any switch)."""
        from airflow_kafka_failover.run_format.fencing import FencingMarker

        try:
            fence = FencingMarker(str(self.fencing_marker_of(pair)), pair).read()
        except (OSError, ValueError):
            return "A"
        return "A" if fence is None else fence.cluster

    def stop(self) -> None:
        """Stop everything this run directory holds: producer, streaming jobs, Airflow, the sandbox."""
        from airflow_kafka_failover.run_format.layout import PROCESS_NAME

        for producer in self.producers.values():
            producer.stop(flush_timeout=2.0)
        self.producers.clear()
        # Airflow first, then the jobs: a keeper still running would restart a job stopped under it.
        # Within each group in parallel: each may take seconds to wind down, none needs another to stop first.
        _stop_all([self.component(name) for name in COMPONENTS])
        _stop_all([ManagedProcess(PROCESS_NAME, run) for run in (self.job_home / "runs").glob("*/*/epoch-*")])
        from akf_devtools.demo.story import stop_warm_standbys

        stop_warm_standbys(self.job_home / "runs")
        if (self.run_dir / "sandbox").exists():
            self.sandbox.down()
        self.ready_file.unlink(missing_ok=True)


def _stop_all(processes: list[ManagedProcess]) -> None:
    threads = [threading.Thread(target=process.stop, kwargs={"timeout": 20}) for process in processes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def print_ready(ready: dict[str, Any], airflow: LocalAirflow) -> None:
    _say(f"Airflow is ready: open {ready['url']}")
    if airflow.login:
        _say(f"  log in as {USERNAME}, password {airflow.password()} (kept in {airflow.password_file})")
    _say(
        f"  dry run: {ready['url']}/dags/kafka_failover_{PAIR}_failover -> Trigger -> switch 'Dry run' on, "
        "fill in 'Reason' -> Trigger; the plan is in the log of the task 'plan'"
    )
    _say(f"  to plan from a running job, trigger kafka_failover_{PAIR}_start first (Spark job on A)")
    _say(
        f"  cluster A: {ready['bootstraps']['A']}, B: {ready['bootstraps']['B']}; a fault: kafka-failover "
        f"sandbox --run-dir {ready['sandbox_run_dir']} fault crash --cluster A"
    )
    _say(f"  logs of Airflow's components: {airflow.logs_dir}")
    _say("  Ctrl-C stops Airflow, the job and the sandbox")


def _raise_interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(airflow: LocalAirflow) -> int:
    """Start everything, report, and keep running until Ctrl-C or SIGTERM; then stop everything."""
    # SIGINT explicitly too: a shell starting us in the background leaves it ignored, and Python keeps that.
    signal.signal(signal.SIGINT, _raise_interrupt)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        airflow.lock_run_dir()
    except FailoverError as exc:  # another launcher's run directory: nothing here is ours to stop
        _say(f"error: {exc}")
        return 1
    code = 0
    try:
        airflow.clean_run_dir()
        print_ready(airflow.start(), airflow)
        while True:
            time.sleep(2.0)
            airflow.check_components()
    except KeyboardInterrupt:
        _say("stopping ...")
    except (FailoverError, TimeoutError) as exc:
        _say(f"error: {exc}")
        code = 1
    finally:
        # A second Ctrl-C must not cut the clean-up short: every stop below is bounded.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        airflow.stop()
        _say(f"stopped Airflow, the jobs and the sandbox; files stay in {airflow.run_dir}")
    return code


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"must be a TCP port (1-65535), got {text!r}")
    return int(text)


def _rate(text: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        rate = -1.0
    if not 0 <= rate < float("inf"):
        raise argparse.ArgumentTypeError(f"must be records per second >= 0 (0: no producer), got {text!r}")
    return rate


def _default_port() -> int:
    from akf_devtools.sandbox.loopback import free_ports, port_in_use

    return 8080 if not port_in_use(8080) else free_ports(1)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m akf_devtools.local_airflow",
        description="Run Airflow 3 locally with this provider, the Kafka sandbox and the example pair.",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=None,
        help="the UI's port on 127.0.0.1 (default: 8080 if free, else a free one)",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="run directory and AIRFLOW_HOME (default: .airflow/local in the checkout)",
    )
    parser.add_argument(
        "--automatic",
        action="store_true",
        help="let the failover and failback DAGs run on their own (@continuous)",
    )
    parser.add_argument(
        "--no-login",
        action="store_true",
        help="no password: everyone is admin (the UI listens on loopback only)",
    )
    parser.add_argument(
        "--produce-rate",
        type=_rate,
        default=2.0,
        help="records per second written to 'orders' on the active cluster (0: none)",
    )
    parser.add_argument(
        "--standby",
        choices=("none", "warm"),
        default="none",
        help="warm: the keeper keeps a warm standby driver for each switch's run (switch.standby: warm), as "
        "make demo does; none (default): the example pair's setting",
    )
    parser.add_argument(
        "--stop",
        action="store_true",
        help="stop what a killed launcher left running in the run directory, then exit",
    )
    args = parser.parse_args(argv)
    from akf_devtools.sandbox.jars import use_job_jars

    use_job_jars(delta=False)  # the example pair runs the packaged Parquet job: no Delta (make setup's sets)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    run_dir = (args.run_dir or project_root() / ".airflow" / "local").resolve()
    airflow = LocalAirflow(
        run_dir,
        args.port or _default_port(),
        automatic=args.automatic,
        login=not args.no_login,
        produce_rate=args.produce_rate,
        pair_settings={"switch": {"standby": "warm"}} if args.standby == "warm" else {},
    )
    if args.stop:
        try:
            airflow.lock_run_dir()  # refuses while a live launcher runs there
        except FailoverError as exc:
            _say(f"error: {exc}")
            return 1
        airflow.stop()
        _say(f"stopped what ran from {run_dir}")
        return 0
    return run(airflow)


if __name__ == "__main__":
    sys.exit(main())

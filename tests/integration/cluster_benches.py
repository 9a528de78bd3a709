"""The benches of the cluster-manager conformance suite (``test_cluster_managers.py``), one per manager.

A bench starts its cluster manager once (the Spark standalone master and worker, the Hadoop minicluster, the
fake Kubernetes API server), registers the ``spark`` connection the product submits through, and knows:

- how to make a run of the contract job (``contract_job.py``) and start it through
  ``StreamingJobHook.submit()``, the product's own way, obeying the stop request or ignoring it;
- which drivers of a run its manager lists (the processes of this host, the master's active applications,
  YARN's live applications, the run's labelled pods), and how the handle and the log name the driver;
- what a kill leaves behind, and what ``status.json`` says of it;
- how to make the manager unreachable and reachable again (the master or the ResourceManager frozen with
  SIGSTOP, the API server taken off the network);
- how to tear everything down.

The fake Kubernetes API server runs no driver: a kubelet thread of the bench plays the contract job's pod
(``Running`` once created, its status and log written; for a run that obeys the stop request, ``stopped``
once the request is there, and ``Succeeded`` a moment later).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from akf_devtools.sandbox.airflow_env import register_spark_connection
from akf_devtools.sandbox.hadoop import HadoopMiniCluster
from akf_devtools.sandbox.jars import JOB_JARS_ENV
from akf_devtools.sandbox.spark_standalone import SparkStandalone

from airflow_kafka_failover.cluster_managers.handle import JobHandle, ManagerName
from airflow_kafka_failover.cluster_managers.kubernetes_pods import (
    RUN_LABEL,
    KubernetesApiUnreachable,
    run_label,
)
from airflow_kafka_failover.cluster_managers.standalone import StandaloneMasterUnreachable
from airflow_kafka_failover.cluster_managers.yarn import ResourceManagerUnreachable
from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.run_format.layout import RunLayout, read_status, stop_requested
from airflow_kafka_failover.run_format.settings import JobSettings
from tests.builders import run_of
from tests.integration.conftest import RUN_ROOT
from tests.integration.contract_job import IGNORE_STOP_REQUEST
from tests.integration.waiting import wait_for
from tests.unit.fake_kubernetes_api import ApiServer, FakeKubernetesApi, kubeconfig

CONTRACT_JOB = Path(__file__).with_name("contract_job.py")
PAIR, CLUSTER = "conformance", "A"
JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
"""Short-lived drivers: a serial collector and the quick compiler leave the 2 cores to the rest."""
DRIVER_EXIT_S = 1.0
"""How long the played driver pod takes to end after the job wrote ``stopped`` (a real driver's JVM stops
Spark, then exits: YARN's took 0.7 s on the minicluster)."""


@contextmanager
def hadoop_cluster(folder: Path) -> Iterator[HadoopMiniCluster]:
    """A Hadoop minicluster (YARN and HDFS in one JVM) in ``folder`` for the block; nothing of it may
    outlive the block."""
    cluster = HadoopMiniCluster(folder)
    try:
        took = cluster.up()
        print(f"Hadoop minicluster up in {took:.1f} s at {cluster.resource_manager_url}")
        yield cluster
    finally:
        cluster.down()
    # The NodeManager stops its containers; nothing of the cluster may outlive the block.
    assert not cluster.process.is_running()
    assert cluster.container_pids() == []


@contextmanager
def standalone_cluster(folder: Path) -> Iterator[SparkStandalone]:
    """A Spark standalone master and worker (one core, 1 GB) in ``folder`` for the block."""
    cluster = SparkStandalone(folder, worker_cores=1, worker_memory="1g")
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()


def master_state(cluster: SparkStandalone) -> dict[str, Any]:
    """The standalone master's ``/json/``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.master_ui_port}/json/", timeout=5) as response:
        state: dict[str, Any] = json.load(response)
    return state


def yarn_applications(cluster: HadoopMiniCluster) -> list[dict[str, Any]]:
    """Every application the ResourceManager knows."""
    url = f"{cluster.resource_manager_url}/ws/v1/cluster/apps"
    with urllib.request.urlopen(url, timeout=10) as answer:
        apps: list[dict[str, Any]] = (json.load(answer).get("apps") or {}).get("app") or []
    return apps


def yarn_spark_conf() -> dict[str, str]:
    """What a PySpark driver in YARN cluster mode needs on the minicluster: this Python, one attempt, and
    Spark's jars from this machine (the containers run here), so that no submission zips and uploads them
    (440 MB) to HDFS."""
    import pyspark  # deferred: collecting the tests needs no pyspark

    python = sys.executable
    jars = Path(pyspark.__file__).parent / "jars"
    return {
        "spark.yarn.jars": f"local:{jars}/*",
        "spark.yarn.appMasterEnv.PYSPARK_PYTHON": python,
        "spark.executorEnv.PYSPARK_PYTHON": python,
        "spark.driver.extraJavaOptions": JVM_OPTIONS,
        "spark.executor.extraJavaOptions": JVM_OPTIONS,
        "spark.yarn.maxAppAttempts": "1",
    }


def use_yarn(cluster: HadoopMiniCluster, env: pytest.MonkeyPatch, conn_id: str) -> str:
    """Point Hadoop's clients at the minicluster and expose a ``spark`` connection to its YARN in cluster
    deploy mode (the ResourceManager's address in the extra); return the connection id."""
    for name, value in cluster.env.items():
        env.setenv(name, value)
    extra = {"deploy-mode": "cluster", "yarn_resourcemanager_webapp_address": cluster.resource_manager_url}
    env.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "spark", "host": "yarn", "extra": extra})
    )
    return conn_id


def run_settings(root: Path, epoch: int) -> tuple[JobSettings, RunLayout]:
    """The settings and folders of the conformance pair's run at ``epoch`` under ``root`` (the contract job
    reads no Kafka)."""
    return run_of(root, epoch, CLUSTER, PAIR, bootstrap="127.0.0.1:9")


class RecordingHook(StreamingJobHook):
    """The product's hook, keeping the Spark provider's hooks it builds (their parse of spark-submit's
    output is read by the Kubernetes case)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.built: list[Any] = []

    def spark_submit_hook(self, *args: Any, **kwargs: Any) -> Any:
        self.built.append(super().spark_submit_hook(*args, **kwargs))
        return self.built[-1]


@dataclass
class Run:
    """One run of the contract job (pair, cluster, epoch) on a bench.

    :param bench: the bench it runs on.
    :param settings: its settings.
    :param layout: its folders, as the host that submits it has them.
    :param hook: the hook it is submitted and stopped through.
    :param obeys: whether the job stops on the stop request.
    """

    bench: Bench
    settings: JobSettings
    layout: RunLayout
    hook: RecordingHook
    obeys: bool
    handle: JobHandle | None = None
    outcome: str | None = None

    @property
    def app_name(self) -> str:
        """The name spark-submit gives the application (the hook's)."""
        return f"akf-{PAIR}-{CLUSTER}-epoch-{self.settings.epoch}"

    def submit(self, startup_timeout: float = 240.0, application: Path = CONTRACT_JOB) -> JobHandle:
        """``StreamingJobHook.submit()`` of this run (start it, or adopt its live driver)."""
        self.handle = self.hook.submit(
            self.settings, self.layout, application=application, startup_timeout=startup_timeout
        )
        return self.handle

    def stop(self, timeout: float) -> str:
        """``StreamingJobHook.stop()`` of this run's handle; remember the outcome."""
        assert self.handle is not None, "stop of a run never submitted"
        self.outcome = self.hook.stop(self.handle.to_dict(), timeout=timeout)
        return self.outcome

    def from_another_host(self) -> Run:
        """The same run as another Airflow worker sees it: the shared run folder, none of this host's
        process files (the keeper or a retried task on another machine)."""
        elsewhere = str(self.bench.root / "another-host")
        layout = replace(self.layout, local_root=elsewhere)
        handle = None if self.handle is None else replace(self.handle, local_dir=layout.local_dir)
        return replace(self, layout=layout, handle=handle)


class Bench:
    """A cluster manager the conformance suite runs its cases against (see the module).

    :param root: the bench's folder (runs, clusters' files).
    :param env: the environment of the bench's life (connections, Hadoop's folders), undone after it.
    :param stack: what the bench started (its cluster, its threads), undone after it.
    """

    name: ManagerName
    unknown: type[Exception] | None = None
    """What ``alive()`` raises while the manager is unreachable (None: there is no manager to lose)."""
    kill_takes: float = 15.0
    """Seconds a kill may take after the stop request's timeout."""

    def __init__(self, root: Path, env: pytest.MonkeyPatch, stack: ExitStack) -> None:
        self.root = root
        self.env = env
        self.stack = stack
        self.runs: list[Run] = []
        self._epochs = iter(range(1, 1000))
        self._shared: Run | None = None
        # The contract job needs none of the Kafka jars the tests give the packaged job.
        env.delenv(JOB_JARS_ENV, raising=False)

    # ---- the life of the bench ---------------------------------------------------------------------------

    def open(self) -> None:
        """Start the cluster manager and register the ``spark`` connection."""

    def stop_runs(self) -> None:
        """Stop what the runs left running (before the cluster manager stops)."""
        for run in self.runs:
            if run.handle is not None and run.outcome is None:
                try:
                    run.stop(timeout=5)
                except Exception as exc:  # teardown goes on; the cluster's stop ends what is left
                    print(f"{self.name} bench: could not stop {run.app_name}: {exc}")

    # ---- runs --------------------------------------------------------------------------------------------

    spark_conn = ""
    spark_conf: dict[str, str] = {}
    hook_options: dict[str, Any] = {}

    def new_run(self, obeys: bool = True) -> Run:
        """A run of the contract job at a new epoch, not started yet."""
        settings, layout = run_settings(self.root, next(self._epochs))
        conf = {**self.spark_conf, IGNORE_STOP_REQUEST: "false" if obeys else "true"}
        hook = RecordingHook(self.spark_conn, conf=conf, **self.hook_options)
        run = Run(self, settings, layout, hook, obeys)
        self.runs.append(run)
        return run

    def start(self, obeys: bool = True) -> Run:
        """A new run, submitted and running: its driver wrote ``running`` (a cluster-mode submit returns
        once the manager says it runs, which may be before the job reads its stop request)."""
        run = self.new_run(obeys)
        run.submit()
        wait_for(
            lambda: read_status(run.layout.run_dir).get("state") == "running",
            240,
            f"{run.app_name} on {self.name} to report running",
            interval=1.0,
        )
        return run

    def shared_run(self) -> Run:
        """The bench's running run that obeys the stop request, started on first use and shared by the
        cases that only look at a live run until one stops it (a new one is started after that)."""
        if self._shared is None or self._shared.outcome is not None:
            self._shared = self.start(obeys=True)
        return self._shared

    def ended_run(self) -> Run:
        """A run that stopped on request (the shared run, stopped now if it still runs)."""
        run = self._shared if self._shared is not None and self._shared.outcome == "stopped" else None
        if run is None:
            run = self.shared_run()
            assert run.stop(timeout=60) == "stopped"
        return run

    # ---- what the manager says of a run ------------------------------------------------------------------

    def driver(self, handle: JobHandle) -> str:
        """How the handle names its driver (what ``describe()`` shows, what an adoption keeps)."""
        raise NotImplementedError

    def drivers(self, run: Run) -> list[str]:
        """The run's live drivers as the manager lists them (a second submit must not add one)."""
        raise NotImplementedError

    def in_log(self, handle: JobHandle) -> str:
        """What the log tail of the handle's driver shows: a line of the job, or where its log is."""
        return f"contract job {read_status(handle.run_dir)['application_id']} running"

    def kill_said(self, handle: JobHandle) -> str:
        """How ``status.json`` says the driver was killed."""
        raise NotImplementedError

    def left_behind(self, handle: JobHandle) -> list[Any]:
        """What of the handle's driver still runs on the machine after its end (processes, pods)."""
        raise NotImplementedError

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        """The cluster manager does not answer within the block; it answers again after it."""
        raise NotImplementedError(f"{self.name} has no cluster manager apart from the driver")
        yield


def spark_submit_pids(app_name: str) -> list[int]:
    """The spark-submit JVMs of this machine submitting ``app_name`` (a local or client-mode driver)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.deploy.SparkSubmit" in argv and app_name.encode() in argv:
            pids.append(int(proc.name))
    return sorted(pids)


@contextmanager
def frozen(process: ManagedProcess) -> Iterator[None]:
    """``process``'s group stopped (SIGSTOP) for the block: it accepts connections and answers nothing."""
    assert process.signal_group(signal.SIGSTOP), f"{process.name} is not running"
    try:
        yield
    finally:
        process.signal_group(signal.SIGCONT)


class LocalBench(Bench):
    """A local-mode driver: spark-submit detached on this host (``local[1]``)."""

    name = ManagerName.LOCAL
    spark_conn = "spark_conformance_local"
    spark_conf = {
        "spark.ui.enabled": "false",
        "spark.driver.memory": "512m",
        "spark.driver.extraJavaOptions": JVM_OPTIONS,
    }
    master = "local[1]"
    deploy_mode: str | None = None
    connection_extra: dict[str, Any] = {}

    def open(self) -> None:
        # register_spark_connection writes os.environ: set first here, the connection goes with the bench.
        self.env.setenv(f"AIRFLOW_CONN_{self.spark_conn.upper()}", "")
        register_spark_connection(self.spark_conn, self.master, self.deploy_mode, self.connection_extra)

    def driver(self, handle: JobHandle) -> str:
        return f"pid {handle.process.pid()}"

    def drivers(self, run: Run) -> list[str]:
        return [f"pid {pid}" for pid in spark_submit_pids(run.app_name)]

    def kill_said(self, handle: JobHandle) -> str:
        return "of the stop request; its process group was terminated"

    def left_behind(self, handle: JobHandle) -> list[Any]:
        name = f"akf-{handle.pair}-{handle.cluster}-epoch-{handle.epoch}"
        return [pid for pid in [handle.process.pid()] if pid is not None] + spark_submit_pids(name)


class StandaloneBench(LocalBench):
    """A client-mode driver on a real Spark standalone master and worker."""

    name = ManagerName.STANDALONE
    unknown = StandaloneMasterUnreachable
    spark_conn = "spark_conformance_standalone"
    spark_conf = {**LocalBench.spark_conf, "spark.cores.max": "1", "spark.executor.memory": "512m"}
    deploy_mode = "client"
    cluster: SparkStandalone

    def open(self) -> None:
        self.cluster = self.stack.enter_context(standalone_cluster(self.root / "cluster"))
        self.master = self.cluster.master_url
        self.connection_extra = {"standalone_master_webui_port": self.cluster.master_ui_port}
        super().open()

    def driver(self, handle: JobHandle) -> str:
        return str(handle.application_id)

    def drivers(self, run: Run) -> list[str]:
        return [app["id"] for app in master_state(self.cluster)["activeapps"] if app["name"] == run.app_name]

    def left_behind(self, handle: JobHandle) -> list[Any]:
        active = [app["id"] for app in master_state(self.cluster)["activeapps"]]
        return super().left_behind(handle) + [app for app in active if app == handle.application_id]

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        with frozen(self.cluster.master):
            yield


class YarnBench(Bench):
    """A PySpark driver in YARN cluster mode on a Hadoop minicluster (ResourceManager and NodeManager)."""

    name = ManagerName.YARN
    unknown = ResourceManagerUnreachable
    kill_takes = 40.0  # the ResourceManager's kill, and its wait for a final state (30 s at most)
    spark_conn = "spark_conformance_yarn"
    hook_options = {"driver_memory": "512m"}
    cluster: HadoopMiniCluster

    def open(self) -> None:
        self.cluster = self.stack.enter_context(hadoop_cluster(self.root / "cluster"))
        use_yarn(self.cluster, self.env, self.spark_conn)
        # No executor is ever asked for (the contract job runs no task): the application is its master's
        # container, the driver. spark-submit refuses spark.executor.instances=0; dynamic allocation can
        # start at 0.
        self.spark_conf = {
            **yarn_spark_conf(),
            "spark.dynamicAllocation.enabled": "true",
            "spark.dynamicAllocation.shuffleTracking.enabled": "true",
            "spark.dynamicAllocation.minExecutors": "0",
            "spark.dynamicAllocation.initialExecutors": "0",
        }

    def driver(self, handle: JobHandle) -> str:
        return str(handle.application_id)

    def drivers(self, run: Run) -> list[str]:
        live = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
        return [
            app["id"]
            for app in yarn_applications(self.cluster)
            if app["name"] == run.app_name and app["state"] in live
        ]

    def in_log(self, handle: JobHandle) -> str:
        return f"the driver runs on the cluster as {handle.application_id}"

    def kill_said(self, handle: JobHandle) -> str:
        return f"YARN application {handle.application_id} is KILLED"

    def left_behind(self, handle: JobHandle) -> list[Any]:
        return self.cluster.container_pids(handle.application_id)

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        # The minicluster's JVM (ResourceManager, NodeManager, HDFS) stops; the containers, in sessions of
        # their own, run on.
        with frozen(self.cluster.process):
            yield


class KubernetesBench(Bench):
    """The real spark-submit in Kubernetes cluster mode against the fake API server; a kubelet thread plays
    the driver pod (see the module)."""

    name = ManagerName.KUBERNETES
    unknown = KubernetesApiUnreachable
    kill_takes = 20.0
    namespace = "spark-jobs"
    spark_conn = "spark_conformance_k8s"
    kubernetes_conn = "kube_conformance"

    def open(self) -> None:
        self.api = FakeKubernetesApi()
        self.server = ApiServer(self.api)
        self.server.up()
        self.stack.callback(self.server.down)
        config = self.root / "kubeconfig.json"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps(kubeconfig(self.api)))  # JSON is YAML
        self.env.setenv(
            f"AIRFLOW_CONN_{self.kubernetes_conn.upper()}",
            json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(config)}}),
        )
        extra = {
            "deploy-mode": "cluster",
            "namespace": self.namespace,
            "kubernetes_conn_id": self.kubernetes_conn,
        }
        self.env.setenv(
            f"AIRFLOW_CONN_{self.spark_conn.upper()}",
            json.dumps({"conn_type": "spark", "host": f"k8s://{self.api.url}", "extra": extra}),
        )
        # spark-submit's own Kubernetes client must not read a kubeconfig of this machine.
        self.env.setenv("KUBECONFIG", str(self.root / "no-kubeconfig"))
        self.spark_conf = {
            "spark.kubernetes.container.image": "apache/spark:4.0.0",
            "spark.kubernetes.file.upload.path": f"file://{self.root / 'upload'}",
        }
        self._exits: dict[str, float] = {}
        self._kubelet_stop = threading.Event()
        kubelet = threading.Thread(target=self._kubelet_loop, daemon=True)
        kubelet.start()
        self.stack.callback(kubelet.join, 5)
        self.stack.callback(self._kubelet_stop.set)

    def _run_of(self, pod: dict[str, Any]) -> Run | None:
        label = (pod["metadata"].get("labels") or {}).get(RUN_LABEL)
        for run in self.runs:
            if run_label(PAIR, CLUSTER, run.settings.epoch) == label:
                return run
        return None

    def _kubelet_loop(self) -> None:
        while not self._kubelet_stop.wait(0.2):
            try:
                pods = list(self.api.pods())
            except RuntimeError:  # the server changed the objects meanwhile: look again
                continue
            for pod in pods:
                run = self._run_of(pod)
                if run is not None and not pod["metadata"].get("deletionTimestamp"):
                    self._play(pod, run)

    def _play(self, pod: dict[str, Any], run: Run) -> None:
        """Move the pod as its driver would: Running, then, if it obeys, ``stopped`` once the stop request is
        there, and Succeeded a moment later (its JVM ends after the job's last word)."""
        name, phase = pod["metadata"]["name"], pod.get("status", {}).get("phase")
        app_id = pod["metadata"]["labels"].get("spark-app-selector", "spark-conformance")
        run_dir = Path(run.layout.run_dir)
        if phase == "Pending":
            self.api.logs[(self.namespace, name)] = f"contract job {app_id} running\n"
            _write_status(run_dir, {"state": "running", "application_id": app_id})
            self.api.set_phase(self.namespace, name, "Running")
        elif phase == "Running" and run.obeys and name not in self._exits and stop_requested(str(run_dir)):
            _write_status(run_dir, {"state": "stopped", "application_id": app_id, "reason": "stop requested"})
            self._exits[name] = time.monotonic() + DRIVER_EXIT_S
        elif phase == "Running" and time.monotonic() > self._exits.get(name, float("inf")):
            self.api.set_phase(self.namespace, name, "Succeeded", terminated=(0, "Completed", ""))

    def driver(self, handle: JobHandle) -> str:
        return str(handle.driver_id)

    def drivers(self, run: Run) -> list[str]:
        label = run_label(PAIR, CLUSTER, run.settings.epoch)
        return [
            f"{self.namespace}:{pod['metadata']['name']}"
            for pod in self.api.pods()
            if (pod["metadata"].get("labels") or {}).get(RUN_LABEL) == label
            and pod.get("status", {}).get("phase") in ("Pending", "Running")
        ]

    def kill_said(self, handle: JobHandle) -> str:
        return f"deleted driver pod {handle.driver_id} through the Kubernetes API at {self.api.url}"

    def left_behind(self, handle: JobHandle) -> list[Any]:
        ref = handle.driver_pod()
        return [pod for pod in [self.api.pod(ref.namespace, ref.name)] if pod is not None]

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        self.server.down()
        try:
            yield
        finally:
            self.server.up()


def _write_status(run_dir: Path, status: dict[str, Any]) -> None:
    """What the driver writes in ``status.json`` (replaced whole)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    written = run_dir / ".status.json.kubelet"
    written.write_text(json.dumps({**status, "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S")}))
    written.replace(run_dir / "status.json")


BENCHES: dict[str, type[Bench]] = {
    "local": LocalBench,
    "standalone": StandaloneBench,
    "yarn": YarnBench,
    "kubernetes": KubernetesBench,
}


@contextmanager
def bench_of(name: str) -> Iterator[Bench]:
    """The bench of one cluster manager, open for the block (its cluster started once), closed after."""
    with pytest.MonkeyPatch.context() as env, ExitStack() as stack:
        bench = BENCHES[name](RUN_ROOT / f"cluster-managers-{name}", env, stack)
        bench.open()
        stack.callback(bench.stop_runs)  # first: the runs' drivers, then what runs them
        yield bench

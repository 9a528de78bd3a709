"""Submit the streaming job detached, stop it, and check on it, on top of the Spark provider's hook.

``SparkSubmitHook`` builds the spark-submit command from a ``spark`` connection (master, deploy mode,
binary) and the usual options. It waits for the application to end, which a streaming job never does,
so this hook uses it differently per deploy mode:

- **local** (``local[*]`` master) and **client** (a cluster master, driver next to Airflow): the command
  runs as a detached process in its own process group, output to ``<local_dir>/logs/job.log`` (the run's
  folder on this host: ``job.local_root``). Stopping the process group stops the application. Spark
  standalone runs Python drivers only this way.
- **cluster** (YARN, Kubernetes): spark-submit is run with ``waitAppCompletion=false``, so it returns once
  the application is accepted; the handle keeps the application id or driver pod for the kill. On YARN the
  submit then waits until the ResourceManager reports the application ``RUNNING``, and the handle is kept
  in ``<run_dir>/cluster_handle.json`` so that a retried submit of the same run adopts a live application
  instead of submitting a second one. On Kubernetes the provider names and labels the driver pod, waits
  until the API server reports it ``Running``, adopts a live driver of the run found by its label, and
  deletes the pod when a stop request is not obeyed (``cluster_managers/kubernetes_submission.py``).

The run folder, checkpoint and fencing folder may be on a store (``hdfs://``, ``s3a://``): the settings,
status, stop request and cluster handle go through :mod:`airflow_kafka_failover.core.storage`. What the driver
needs to reach the store (``spark.hadoop.fs.s3a.*``, the S3 keys among them) is written to an owner-only
properties file in the local folder and given to spark-submit with ``--properties-file`` (plus
``--load-spark-defaults``, so that the installation's own defaults still apply): no secret on a command line.

A client-mode driver on a standalone master is tracked through its process and through the master: the
handle records the master's web UI port (the connection's extra ``standalone_master_webui_port``, default
8080) and Spark's application id once the job reports running.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook

from airflow_kafka_failover.cluster_managers import kubernetes_submission
from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.kubernetes import INSTALL_HINT
from airflow_kafka_failover.cluster_managers.kubernetes_pods import (
    DEFAULT_KUBERNETES_CONN_ID,
    KUBERNETES_CONN_EXTRA,
    is_kubernetes_master,
)
from airflow_kafka_failover.cluster_managers.standalone import (
    MASTER_WEBUI_PORT_EXTRA,
    check_webui_port,
    is_standalone_master,
)
from airflow_kafka_failover.cluster_managers.tracking import JobTracker
from airflow_kafka_failover.cluster_managers.yarn import (
    RESOURCE_MANAGER_EXTRA,
    ResourceManagerClient,
    ResourceManagerUnreachable,
    UnknownYarnApplication,
    YarnApplicationState,
    find_resource_manager,
    is_yarn_master,
    normalize_resource_manager_url,
    resource_manager_from_hadoop_conf,
)
from airflow_kafka_failover.core.atomic_file import OWNER_ONLY, write_atomically
from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import StoreUnavailable, read_json, replace_json
from airflow_kafka_failover.hooks import spark_submit_compat
from airflow_kafka_failover.jobs.layout import (
    RunLayout,
    clear_run_state,
    mark_killed,
    read_status,
    request_stop,
    status_file,
)
from airflow_kafka_failover.jobs.options import DeployMode, JobOptions
from airflow_kafka_failover.jobs.settings import JobSettings

log = logging.getLogger(__name__)

JOB_JARS_OPTION = ("kafka_failover", "job_jars")
"""Airflow configuration option (``AIRFLOW__KAFKA_FAILOVER__JOB_JARS``): the ``--jars`` of a job whose config
names neither ``jars`` nor ``packages``; ``make setup`` fills it for the repository's local runs."""
JOB_APPLICATION = Path(__file__).resolve().parents[1] / "jobs" / "stream_job.py"
"""The packaged PySpark job."""
LOG4J_CONFIG = Path(__file__).resolve().parents[1] / "jobs" / "log4j2.properties"
AIRFLOW_ONLY_ENV = ("AIRFLOW_CONN_", "AIRFLOW_VAR_", "AIRFLOW__")
"""Environment variables the job never inherits: Airflow's connections, variables and configuration hold
every connection's secrets, the metadata database's password and the Fernet key; the job needs none of them
(it gets its own cluster's settings through the owner-only settings file)."""
WAIT_APP_COMPLETION = {
    "yarn": "spark.yarn.submit.waitAppCompletion",
    "k8s": "spark.kubernetes.submission.waitAppCompletion",
    "spark": "spark.standalone.submit.waitAppCompletion",
}
CLUSTER_HANDLE_FILE = "cluster_handle.json"
"""In the run folder: the handle of the run's cluster-mode application (a retried submit adopts it)."""
STORE_PROPERTIES_FILE = "store.properties"
"""In the run's local folder (owner-only): the ``spark.hadoop.*`` settings of the stores, for spark-submit."""


@contextmanager
def _submit_lock(local_dir: str) -> Iterator[None]:
    """Hold ``<local_dir>/submit.lock`` (an exclusive ``flock``) from the running check to the start: a keeper
    and a switch on this host that submit the same run at once start one process."""
    folder = Path(local_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "submit.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class JobStartError(FailoverError):
    """The job died or did not report running during start-up."""


class StreamingJobHook(BaseHook):
    """Runs the streaming job through a ``spark`` connection.

    :param spark_conn_id: the Spark connection (master, deploy mode, spark binary), as the Spark provider
        defines it; ``local[2]`` as host runs in local mode.
    :param conf: Spark configuration (``--conf``).
    :param jars: comma-separated jars for ``--jars``; when neither ``jars`` nor ``packages`` is given, the
        Airflow option ``[kafka_failover] job_jars`` (environment ``AIRFLOW__KAFKA_FAILOVER__JOB_JARS``).
    :param packages: Maven coordinates for ``--packages`` instead of ``jars``.
    :param driver_memory: ``--driver-memory``.
    :param executor_memory: ``--executor-memory``.
    :param total_executor_cores: ``--total-executor-cores`` (standalone).
    :param deploy_mode: overrides the connection's ``deploy-mode``.
    :param py_files: ``--py-files``; in cluster deploy mode this must carry the provider package.
    :param storage_connections: the connection of each remote scheme the run's paths use (the pair's
        ``job.storage_connections``); a remote run folder is reached through it.
    :param storage_timeout_seconds: time a request to a remote store may take.
    """

    conn_name_attr = "spark_conn_id"
    default_conn_name = "spark_default"
    conn_type = "spark"
    hook_name = "Spark streaming job (failover)"

    def __init__(
        self,
        spark_conn_id: str = default_conn_name,
        conf: dict[str, Any] | None = None,
        jars: str | None = None,
        packages: str | None = None,
        driver_memory: str | None = None,
        executor_memory: str | None = None,
        total_executor_cores: int | None = None,
        deploy_mode: str | None = None,
        py_files: str | None = None,
        storage_connections: dict[str, str] | None = None,
        storage_timeout_seconds: float = 10.0,
    ) -> None:
        super().__init__()
        self.spark_conn_id = spark_conn_id
        self.conf = dict(conf or {})
        self.jars = jars
        self.packages = packages
        self.driver_memory = driver_memory
        self.executor_memory = executor_memory
        self.total_executor_cores = total_executor_cores
        self.deploy_mode = deploy_mode
        self.py_files = py_files
        self.storage_connections = dict(storage_connections or {})
        self.storage_timeout_seconds = storage_timeout_seconds

    @classmethod
    def for_options(cls, options: JobOptions) -> StreamingJobHook:
        """The hook that submits and stops a job with these options (a pair's ``job`` section).

        :param options: the job's options.
        """
        return cls(
            options.spark_connection,
            conf=dict(options.spark_conf),
            jars=options.jars,
            packages=options.packages,
            driver_memory=options.driver_memory,
            executor_memory=options.executor_memory,
            total_executor_cores=options.total_executor_cores,
            deploy_mode=None if options.deploy_mode is None else str(options.deploy_mode),
            storage_connections=dict(options.storage_connections),
            storage_timeout_seconds=options.storage_timeout_seconds,
        )

    def use_storage_of(self, handle: JobHandle) -> None:
        """Register the stores of a handle's remote folders (its run folder, checkpoint and sink)."""
        from airflow_kafka_failover.hooks.storage import use_storage

        use_storage(
            (handle.run_dir, handle.checkpoint, handle.sink_root),
            self.storage_connections,
            self.storage_timeout_seconds,
        )

    # ---- building the command --------------------------------------------------------------------------

    def _jars(self) -> str | None:
        if self.jars or self.packages:
            return self.jars
        from airflow_kafka_failover.version_compat import conf

        configured = conf.get(*JOB_JARS_OPTION, fallback=None)
        if configured:
            return str(configured)
        if not any(key in self.conf for key in ("spark.jars", "spark.jars.packages")):
            log.warning(
                "the job gets no --jars: neither job.jars, job.packages nor the Airflow option "
                "[kafka_failover] job_jars is set, so the Spark installation itself must provide Spark's "
                "Kafka "
                "source (spark-sql-kafka-0-10); set one of them if the job fails with 'Failed to find data "
                "source: kafka'"
            )
        return None

    def spark_submit_hook(
        self,
        name: str,
        application_args: list[str],
        conf: dict[str, Any],
        properties_file: str | None = None,
    ) -> Any:
        """The Spark provider's hook, configured for one run.

        :param properties_file: an owner-only properties file (the stores' settings); the installation's
            ``spark-defaults.conf`` is still loaded beside it.
        """
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        try:
            hook = SparkSubmitHook(
                # On a k8s:// master in cluster mode: spark-submit returns once the driver pod exists, and
                # no exit code is asked of a driver that has not run yet (the pod is tracked here).
                track_driver_via_k8s_api=True,
                conn_id=self.spark_conn_id,
                conf=conf,
                jars=self._jars(),
                packages=self.packages,
                driver_memory=self.driver_memory,
                executor_memory=self.executor_memory,
                total_executor_cores=self.total_executor_cores,
                deploy_mode=self.deploy_mode,
                py_files=self.py_files,
                name=name,
                application_args=application_args,
                properties_file=properties_file,
            )
        except (ValueError, RuntimeError) as exc:
            hint = f"; {INSTALL_HINT}" if "kubernetes" in str(exc).lower() else ""
            raise ConfigError(f"spark connection {self.spark_conn_id!r}: {exc}{hint}") from None
        except NameError as exc:  # the Spark provider 6.3 without cncf-kubernetes: its kube_client is unbound
            if "kube_client" not in str(exc):
                raise
            raise ConfigError(f"spark connection {self.spark_conn_id!r}: {INSTALL_HINT}") from None
        if properties_file:
            spark_submit_compat.add_submit_options(hook, ["--load-spark-defaults"])
        return hook

    def _store_properties_file(self, settings: JobSettings, layout: RunLayout) -> str | None:
        """Write the stores' ``spark.hadoop.*`` settings owner-only to the run's local folder; None when the
        run uses no remote store."""
        from airflow_kafka_failover.hooks.storage import spark_store_properties

        paths = (settings.checkpoint, settings.sink_root, settings.run_dir, settings.fencing_marker)
        if not any(locations.is_remote(path) for path in paths):
            return None
        properties = spark_store_properties(paths, self.storage_connections)
        where = Path(layout.local_dir) / STORE_PROPERTIES_FILE
        lines = "".join(f"{key} {_escape_property(value)}\n" for key, value in sorted(properties.items()))
        write_atomically(where, lines, OWNER_ONLY)
        return str(where)

    def _conf_for(self, master: str, deploy_mode: str) -> dict[str, Any]:
        conf = dict(self.conf)
        if (
            LOG4J_CONFIG.is_file()
            and "spark.driver.extraJavaOptions" not in conf
            and deploy_mode != "cluster"
        ):
            conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
        if deploy_mode == "cluster":
            scheme = master.split("://", 1)[0]
            if scheme in WAIT_APP_COMPLETION:
                conf.setdefault(WAIT_APP_COMPLETION[scheme], "false")
            if deploy_mode == "cluster" and scheme == "spark":
                raise ConfigError(
                    f"spark connection {self.spark_conn_id!r} asks for cluster deploy mode on a standalone "
                    "master "
                    f"({master}); Spark standalone does not run Python drivers in cluster mode: use "
                    "deploy-mode "
                    "client (the driver then runs detached next to Airflow)"
                )
        return conf

    @staticmethod
    def deploy_mode_of(master: str, deploy_mode: str | None) -> str:
        if master.startswith("local"):
            return "local"
        return "cluster" if deploy_mode == "cluster" else "client"

    # ---- submit --------------------------------------------------------------------------------------

    def submit(
        self,
        settings: JobSettings,
        layout: RunLayout,
        application: str | os.PathLike[str] = JOB_APPLICATION,
        startup_timeout: float = 180.0,
        env: dict[str, str] | None = None,
    ) -> JobHandle:
        """Start one run and wait until it runs; return its handle.

        Local and client mode wait for the job's ``status.json`` to say ``running``; cluster mode on YARN for
        the ResourceManager to say ``RUNNING``. A run of the same (pair, cluster, epoch) that is already
        running (its process, its application on the standalone master, or its YARN application) is
        adopted, not started twice, so a retried task converges; when that cannot be told (a cluster
        manager that does not answer) nothing is started and :class:`JobStartError` says why.

        :param settings: the run's settings (written owner-only to the run folder).
        :param layout: the run's folders.
        :param application: the PySpark application file.
        :param startup_timeout: seconds allowed until the run runs; it is stopped (killed on YARN) after.
        :param env: environment variables for spark-submit on top of this process's (minus Airflow's).
        :raises JobStartError: the run ended or did not run within ``startup_timeout``, or adopting could
            not be decided.
        """
        application = Path(application)
        if not application.is_file():
            raise ConfigError(
                f"application file {application} does not exist; point 'application' at the job "
                f"(the packaged one is {JOB_APPLICATION})"
            )
        probe = self.spark_submit_hook("probe", [], self.conf)
        master, deploy_mode = spark_submit_compat.master_and_deploy_mode(probe)
        mode = self.deploy_mode_of(master, deploy_mode)
        handle = JobHandle(
            pair=settings.pair,
            cluster=settings.cluster,
            epoch=settings.epoch,
            deploy_mode=DeployMode(mode),
            master=master,
            run_dir=layout.run_dir,
            checkpoint=settings.checkpoint,
            sink_root=settings.sink_root,
            spark_conn_id=self.spark_conn_id,
            submitted_at=datetime.now(UTC).isoformat(timespec="seconds"),
            local_dir=layout.local_dir,
        )
        if mode == "cluster":
            if is_kubernetes_master(master):
                handle = kubernetes_submission.prepare(
                    handle,
                    spark_submit_compat.kubernetes_namespace(probe),
                    self.kubernetes_conn_id(),
                    self.conf,
                )
            with _submit_lock(layout.local_dir):
                adopted = self._live_cluster_run(handle, layout)
                if adopted is not None:
                    log.info("%s is on the cluster; adopting it, not submitting another", adopted.describe())
                    handle = adopted
                else:
                    # A Kubernetes driver pod is named before spark-submit: on_kill can delete it meanwhile.
                    if handle.runs_on_kubernetes:
                        replace_json(locations.join(layout.run_dir, CLUSTER_HANDLE_FILE), handle.to_dict())
                    handle = self._start(settings, layout, application, handle, env)
                    replace_json(locations.join(layout.run_dir, CLUSTER_HANDLE_FILE), handle.to_dict())
            self.wait_cluster_running(handle, startup_timeout)
            return handle
        if is_standalone_master(master):
            port = self.standalone_master_webui_port()
            handle = JobHandle(**{**handle.to_dict(), "master_webui_port": port})
        with _submit_lock(layout.local_dir):  # a keeper and a switch submitting the same run start one job
            if self._alive_or_refuse(handle):
                log.info("%s is already running; adopting it instead of starting another", handle.describe())
            else:
                handle = self._start(settings, layout, application, handle, env)
        self.wait_running(handle, startup_timeout)
        return self._with_reported_application(handle)

    @staticmethod
    def _alive_or_refuse(handle: JobHandle) -> bool:
        """Whether the run is alive (its process, or its application on a standalone master); raise
        JobStartError when that cannot be told, so that no second driver of the run starts."""
        try:
            return bool(handle.is_alive())
        except (FailoverError, OSError) as exc:
            raise JobStartError(
                f"cannot tell whether {handle.describe()} still runs ({exc}); nothing was submitted, so that "
                "two drivers of one epoch never run: retry once the cluster manager answers"
            ) from exc

    @staticmethod
    def _with_reported_application(handle: JobHandle) -> JobHandle:
        """The handle with Spark's application id the job reported, on a standalone master (where the
        master knows the application by it)."""
        reported = handle.status().get("application_id")
        if not is_standalone_master(handle.master) or not reported or handle.application_id:
            return handle
        return JobHandle(**{**handle.to_dict(), "application_id": str(reported)})

    def _live_cluster_run(self, handle: JobHandle, layout: RunLayout) -> JobHandle | None:
        """The handle of this run's live application (None: submit a new one): its YARN application, or on
        Kubernetes its driver pod found by the run's label.

        :raises JobStartError: whether one is alive cannot be told (the cluster manager does not answer, or
            does not know the recorded id): nothing is submitted, so that two drivers never run one epoch.
        """
        recorded_file = locations.join(layout.run_dir, CLUSTER_HANDLE_FILE)
        try:
            recorded: JobHandle | None = JobHandle.from_dict(read_json(recorded_file))
        except FileNotFoundError:
            recorded = None
        except StoreUnavailable:
            raise
        except (OSError, ValueError, ConfigError) as exc:
            raise JobStartError(
                f"cannot read {recorded_file}, the handle of the run's last cluster-mode submission ({exc}); "
                "check on the cluster whether that application still runs, then remove the file"
            ) from None
        if handle.runs_on_kubernetes:
            client = JobTracker().pods(handle)
            try:
                return kubernetes_submission.live_driver(client, handle, recorded)
            except kubernetes_submission.DriverStartError as exc:
                raise JobStartError(str(exc)) from None
        if recorded is None or not (is_yarn_master(recorded.master) and recorded.application_id):
            return None
        try:
            alive = recorded.is_alive()
        except UnknownYarnApplication as exc:
            raise JobStartError(
                f"{exc}. The run's last submission ({recorded_file}) names it; nothing was submitted: once "
                "you checked that it no longer runs, remove that file and submit again"
            ) from None
        except (ResourceManagerUnreachable, ConfigError) as exc:
            raise JobStartError(
                f"{exc}. Nothing was submitted, so that two drivers of epoch {handle.epoch} never run; retry "
                "once the ResourceManager answers"
            ) from None
        return recorded if alive else None

    def _start(
        self,
        settings: JobSettings,
        layout: RunLayout,
        application: Path,
        handle: JobHandle,
        env: dict[str, str] | None,
    ) -> JobHandle:
        """Write the settings and start spark-submit (detached, or to the cluster manager)."""
        master, mode = handle.master, handle.deploy_mode
        settings_path = settings.write(layout.settings_file)
        clear_run_state(layout.run_dir)
        name = f"akf-{settings.pair}-{settings.cluster}-epoch-{settings.epoch}"
        conf = self._conf_for(master, mode)
        if handle.runs_on_kubernetes:
            conf.update(kubernetes_submission.submission_conf(handle))
        submit_hook = self.spark_submit_hook(
            name,
            ["--settings", settings_path],
            conf,
            properties_file=self._store_properties_file(settings, layout),
        )
        command = spark_submit_compat.spark_submit_command(submit_hook, str(application))
        child_env = self._child_env(env)
        if mode == "cluster":
            return self._submit_to_cluster(submit_hook, application, handle, child_env)
        pid = handle.process.start(command, env=child_env, inherit_env=False)
        log.info("submitted %s: pid %s, log %s", handle.describe(), pid, handle.log_file)
        return handle

    @staticmethod
    def _child_env(env: dict[str, str] | None) -> dict[str, str]:
        """The job's whole environment: this one without Airflow's (``AIRFLOW_ONLY_ENV``), PATH with this
        interpreter's bin (spark-submit of the pyspark install), the same Python for the driver."""
        bin_dir = str(Path(sys.executable).parent)
        path = os.environ.get("PATH", "")
        inherited = {
            name: value for name, value in os.environ.items() if not name.startswith(AIRFLOW_ONLY_ENV)
        }
        child = {
            "PATH": bin_dir + (os.pathsep + path if path else ""),
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
        }
        return {**inherited, **child, **(env or {})}

    def _submit_to_cluster(
        self, submit_hook: Any, application: Path, handle: JobHandle, env: dict[str, str]
    ) -> JobHandle:
        try:
            returned_driver_id = submit_hook.submit(str(application), env=env)
        except Exception as exc:
            raise JobStartError(f"spark-submit to {handle.master} failed: {exc}") from None
        if handle.runs_on_kubernetes:  # named by the provider before spark-submit (kubernetes_submission)
            log.info("submitted %s", handle.describe())
            return handle
        driver, app_id = returned_driver_id, spark_submit_compat.yarn_application_id(submit_hook)
        if not driver and not app_id:
            raise JobStartError(
                f"spark-submit to {handle.master} returned without an application id or driver; "
                "the job's state is unknown: check the cluster before retrying"
            )
        resource_manager = self.yarn_resource_manager() if is_yarn_master(handle.master) else None
        handle = JobHandle(
            **{
                **handle.to_dict(),
                "driver_id": driver,
                "application_id": app_id,
                "resource_manager": resource_manager,
            }
        )
        log.info("submitted %s", handle.describe())
        return handle

    def wait_running(self, handle: JobHandle, timeout: float) -> None:
        """Wait until the job reports running; raise with its log tail if it dies or stays silent."""
        deadline = time.monotonic() + timeout
        while True:
            status = read_status(handle.run_dir)
            state = status.get("state")
            if state == "running":
                log.info(
                    "%s is running (Spark application %s)", handle.describe(), status.get("application_id")
                )
                return
            if state in ("refused", "failed") or not handle.process.is_running():
                reason = status.get("reason") or f"the process exited during start-up (state {state!r})"
                raise JobStartError(
                    f"{handle.describe()} did not start: {reason}\n--- log tail ---\n{handle.log_tail()}"
                )
            if time.monotonic() > deadline:
                tail = handle.log_tail()
                handle.process.stop(timeout=10)
                raise JobStartError(
                    f"{handle.describe()} did not report running in {status_file(handle.run_dir)} within "
                    f"{timeout:.0f} s (last state {state!r}); it was stopped. A job of your own must write "
                    "it (the job-side API does: docs/jobs.md); on a slow machine raise "
                    f"startup_timeout_seconds.\n--- log tail ---\n{tail}"
                )
            time.sleep(0.5)

    def wait_cluster_running(self, handle: JobHandle, timeout: float) -> None:
        """Wait until the ResourceManager reports the YARN application ``RUNNING`` (its driver started).

        ``ACCEPTED`` (waiting for a container) is not running. An application that ends during start-up, or
        is not running after ``timeout`` (it is then killed through the ResourceManager), raises. On
        Kubernetes: until the driver pod is ``Running`` (see ``kubernetes_submission.wait_running``).
        """
        if handle.runs_on_kubernetes:
            try:
                kubernetes_submission.wait_running(JobTracker().pods(handle), handle, timeout)
            except kubernetes_submission.DriverStartError as exc:
                raise JobStartError(str(exc)) from None
            return
        if not (is_yarn_master(handle.master) and handle.application_id):
            log.info("%s: not waiting for it to run (not tracked on this master)", handle.describe())
            return
        self._wait_yarn_running(handle, handle.application_id, timeout)

    @staticmethod
    def _wait_yarn_running(handle: JobHandle, app_id: str, timeout: float) -> None:
        client = ResourceManagerClient(find_resource_manager(handle.resource_manager))
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            try:
                report = client.application(app_id)
            except ResourceManagerUnreachable as exc:  # passing: the deadline decides
                last = str(exc)
            else:
                last = f"state {report.state}"
                if report.state == YarnApplicationState.RUNNING:
                    log.info("%s is running (YARN application %s)", handle.describe(), app_id)
                    return
                if report.state.is_final:
                    raise JobStartError(
                        f"YARN application {app_id} ({handle.describe()}) ended {report.state} "
                        f"({report.final_status}) during start-up: {report.diagnostics or 'no diagnostics'}; "
                        f"its driver's log is in the ResourceManager's UI at {client.url}"
                    )
            if time.monotonic() > deadline:
                break
            time.sleep(1)
        try:
            killed = client.kill(app_id)
        except ResourceManagerUnreachable as exc:
            raise JobStartError(
                f"YARN application {app_id} ({handle.describe()}) was not RUNNING within {timeout:.0f} s "
                f"({last}), and could not be killed: {exc}"
            ) from None
        raise JobStartError(
            f"YARN application {app_id} ({handle.describe()}) was not RUNNING within {timeout:.0f} s "
            f"({last}); it was killed through the ResourceManager ({killed.state}). Check the cluster's free "
            "capacity, or raise startup_timeout_seconds"
        )

    # ---- stop ----------------------------------------------------------------------------------------

    def stop(self, handle: JobHandle | dict | None, timeout: float = 60.0) -> str:
        """Ask the job to finish its batch and stop; force it after ``timeout``. Idempotent.

        :return: ``not-running`` (nothing to stop), ``stopped`` (it stopped on request), or ``forced``.
        """
        if not handle:
            log.info("no job handle given: there is no job to stop")
            return "not-running"
        handle = JobHandle.from_dict(handle)
        self.use_storage_of(handle)
        if handle.deploy_mode == "cluster":
            return self._stop_on_cluster(handle, timeout)
        if not handle.process.is_running():
            log.info(
                "%s is not running (last state %r); nothing to stop",
                handle.describe(),
                handle.status().get("state"),
            )
            return "not-running"
        request_stop(handle.run_dir)
        log.info("asked %s to finish its batch and stop (waiting up to %.0f s)", handle.describe(), timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not handle.process.is_running():
                log.info("%s stopped on request: %s", handle.describe(), handle.status().get("reason"))
                return "stopped"
            time.sleep(0.25)
        log.warning(
            "%s did not stop within %.0f s; terminating its process group", handle.describe(), timeout
        )
        handle.process.stop(timeout=10)
        mark_killed(
            handle.run_dir,
            f"did not stop within {timeout:.0f} s of the stop request; its process group was terminated",
        )
        return "forced"

    def yarn_resource_manager(self) -> str | None:
        """The ``spark`` connection's extra ``yarn_resourcemanager_webapp_address``, else the one in
        ``yarn-site.xml`` of ``YARN_CONF_DIR`` / ``HADOOP_CONF_DIR`` (None when neither names one)."""
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            extra = self.get_connection(self.spark_conn_id).extra_dejson
        except AirflowNotFoundException:
            extra = {}
        recorded = extra.get(RESOURCE_MANAGER_EXTRA)
        if recorded:
            return normalize_resource_manager_url(str(recorded))
        return resource_manager_from_hadoop_conf()

    def kubernetes_conn_id(self) -> str:
        """The ``spark`` connection's extra ``kubernetes_conn_id``: the ``kubernetes`` connection driver pods
        are read and deleted through (default ``kubernetes_default``)."""
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            extra = self.get_connection(self.spark_conn_id).extra_dejson
        except AirflowNotFoundException:
            extra = {}
        return str(extra.get(KUBERNETES_CONN_EXTRA) or DEFAULT_KUBERNETES_CONN_ID)

    def standalone_master_webui_port(self) -> int | None:
        """The ``spark`` connection's extra ``standalone_master_webui_port`` (None: Spark's default 8080).

        :raises ConfigError: a value that is not a port.
        """
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            extra = self.get_connection(self.spark_conn_id).extra_dejson
        except AirflowNotFoundException:
            return None
        port = extra.get(MASTER_WEBUI_PORT_EXTRA)
        return None if port in (None, "") else check_webui_port(port)

    def _kill_on_yarn(self, handle: JobHandle, application_id: str) -> str:
        """Kill the YARN application through the ResourceManager's REST API; return what was done."""
        client = ResourceManagerClient(
            find_resource_manager(handle.resource_manager or self.yarn_resource_manager())
        )
        log.info("killing %s through the YARN ResourceManager at %s", handle.describe(), client.url)
        report = client.kill(application_id)
        return f"YARN application {application_id} is {report.state} (ResourceManager {client.url})"

    def _yarn_state(self, handle: JobHandle) -> YarnApplicationState | None:
        """The application's state on YARN; None when the ResourceManager does not answer.

        :raises UnknownYarnApplication: the ResourceManager does not know the application.
        """
        client = ResourceManagerClient(
            find_resource_manager(handle.resource_manager or self.yarn_resource_manager())
        )
        try:
            return client.application(str(handle.application_id)).state
        except ResourceManagerUnreachable as exc:
            log.warning("%s", exc)
            return None

    def _stop_on_cluster(self, handle: JobHandle, timeout: float) -> str:
        handle.check_cluster_manager()
        if handle.runs_on_kubernetes:
            return kubernetes_submission.stop_driver(
                JobTracker().pods(handle),
                handle,
                lambda ended: self._stopped_on_request(handle, timeout, ended),
                lambda how: self._record_kill(handle, how),
            )
        on_yarn = bool(handle.application_id and is_yarn_master(handle.master))
        if on_yarn:
            state = self._yarn_state(handle)
            if state is not None and state.is_final:
                log.info("%s is not running (YARN says %s); nothing to stop", handle.describe(), state)
                return "not-running"

        def yarn_ended() -> bool:
            state = self._yarn_state(handle) if on_yarn else None
            if state is not None and state.is_final:
                log.info("%s ended on the stop request (YARN says %s)", handle.describe(), state)
                return True
            return False

        if self._stopped_on_request(handle, timeout, yarn_ended):
            return "stopped"
        if on_yarn:
            how = self._kill_on_yarn(handle, str(handle.application_id))
        else:
            command = ["spark-submit", "--master", handle.master, "--kill", str(handle.driver_id)]
            log.info("killing %s: %s", handle.describe(), " ".join(command))
            result = subprocess.run(
                command, capture_output=True, text=True, env=self._child_env(None), check=False, timeout=120
            )
            if result.returncode != 0:
                raise FailoverError(
                    f"could not kill {handle.describe()}: {' '.join(command)} exited "
                    f"{result.returncode}: {(result.stderr or result.stdout)[-1000:]}"
                )
            how = " ".join(command)
        self._record_kill(handle, how)
        return "forced"

    @staticmethod
    def _record_kill(handle: JobHandle, how: str) -> None:
        try:
            mark_killed(handle.run_dir, f"killed through the cluster manager: {how}")
        except OSError as exc:  # the run folder may be out of reach, which is why the kill went this way
            log.info("could not record the kill in %s: %s", handle.run_dir, exc)

    def _stopped_on_request(self, handle: JobHandle, timeout: float, ended: Callable[[], bool]) -> bool:
        """Write the stop request and wait up to ``timeout`` for the cluster-mode job to end on it (its
        ``status.json``, or ``ended()``: the cluster manager's word); False when it did not (the caller
        kills it)."""
        try:
            request = request_stop(handle.run_dir)
        except OSError as exc:
            log.warning(
                "cannot write the stop request of %s (%s); killing through the cluster manager",
                handle.run_dir,
                exc,
            )
            return False
        log.info(
            "asked %s to finish its batch and stop (waiting up to %.0f s; a driver that does not share "
            "%s is then killed through the cluster manager)",
            handle.describe(),
            timeout,
            request,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if handle.status().get("state") in ("stopped", "fenced", "failed"):
                return True
            if ended():
                return True
            time.sleep(1)
        log.warning(
            "%s did not stop within %.0f s of the stop request (a cluster-mode driver may not see %s); "
            "killing it through the cluster manager",
            handle.describe(),
            timeout,
            request,
        )
        return False


def _escape_property(value: str) -> str:
    """A value as a Java properties file reads it back (backslashes and line breaks escaped)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")

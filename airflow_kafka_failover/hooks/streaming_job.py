"""Submit the streaming job detached and stop it, on the Spark provider's hook and the cluster managers.

``SparkSubmitHook`` builds the spark-submit command from a ``spark`` connection (master, deploy mode,
binary) and the usual options. It waits for the application to end, which a streaming job never does, so
this hook builds the command and the run's settings, and leaves the rest to the run's cluster manager
(:mod:`airflow_kafka_failover.cluster_managers`: starting, adopting, waiting until it runs, stopping):

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
  deletes the pod when a stop request is not obeyed (``cluster_managers/kubernetes.py``).

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
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook

from airflow_kafka_failover.cluster_managers.handle import JobHandle, is_standalone_master
from airflow_kafka_failover.cluster_managers.kubernetes import INSTALL_HINT
from airflow_kafka_failover.cluster_managers.kubernetes_pods import (
    DEFAULT_KUBERNETES_CONN_ID,
    KUBERNETES_CONN_EXTRA,
)
from airflow_kafka_failover.cluster_managers.local import check_spark_submit, job_environment
from airflow_kafka_failover.cluster_managers.manager import (
    CLUSTER_HANDLE_FILE,
    ClusterManager,
    JobStartError,
    Launch,
    Submission,
    record_submission,
)
from airflow_kafka_failover.cluster_managers.registry import ClusterManagers
from airflow_kafka_failover.cluster_managers.standalone import MASTER_WEBUI_PORT_EXTRA, check_webui_port
from airflow_kafka_failover.cluster_managers.standby_handover import (
    hand_over,
    launch_fingerprint,
    option_value,
    start_standby,
    waiting_standby,
)
from airflow_kafka_failover.cluster_managers.yarn import (
    RESOURCE_MANAGER_EXTRA,
    normalize_resource_manager_url,
)
from airflow_kafka_failover.core.atomic_file import OWNER_ONLY, write_atomically
from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.hooks import spark_submit_compat
from airflow_kafka_failover.hooks.storage import spark_store_properties, use_storage
from airflow_kafka_failover.run_format.layout import RunLayout, clear_run_state
from airflow_kafka_failover.run_format.options import DeployMode, JobOptions
from airflow_kafka_failover.run_format.settings import JobSettings
from airflow_kafka_failover.run_format.standby import StandbySlot, standby_dir
from airflow_kafka_failover.version_compat import conf

__all__ = ["CLUSTER_HANDLE_FILE", "JOB_APPLICATION", "JobStartError", "StreamingJobHook"]

log = logging.getLogger(__name__)

JOB_JARS_OPTION = ("kafka_failover", "job_jars")
"""Airflow configuration option (``AIRFLOW__KAFKA_FAILOVER__JOB_JARS``): the ``--jars`` of a job whose config
names neither ``jars`` nor ``packages``; ``make setup`` fills it for the repository's local runs."""
JOB_APPLICATION = Path(__file__).resolve().parents[1] / "jobs" / "stream_job.py"
"""The packaged PySpark job."""
LOG4J_CONFIG = Path(__file__).resolve().parents[1] / "jobs" / "log4j2.properties"
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

        use_storage(
            (handle.run_dir, handle.checkpoint, handle.sink_root),
            self.storage_connections,
            self.storage_timeout_seconds,
        )

    # ---- building the command --------------------------------------------------------------------------

    def _jars(self) -> str | None:
        if self.jars or self.packages:
            return self.jars

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

        paths = (settings.checkpoint, settings.sink_root, settings.run_dir, settings.fencing_marker)
        if not any(locations.is_remote(path) for path in paths):
            return None
        properties = spark_store_properties(paths, self.storage_connections)
        where = Path(layout.local_dir) / STORE_PROPERTIES_FILE
        lines = "".join(f"{key} {_escape_property(value)}\n" for key, value in sorted(properties.items()))
        write_atomically(where, lines, OWNER_ONLY)
        return str(where)

    def _conf_for(self, handle: JobHandle, manager: ClusterManager) -> dict[str, Any]:
        """The run's Spark settings: the hook's, the provider's log4j2 setup for a driver here, and what the
        manager adds (a detached submit, the driver pod's name)."""
        conf = dict(self.conf)
        if (
            LOG4J_CONFIG.is_file()
            and "spark.driver.extraJavaOptions" not in conf
            and handle.deploy_mode != DeployMode.CLUSTER
        ):
            conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
        for key, value in manager.submission_conf(handle).items():
            conf.setdefault(key, value)
        return conf

    @staticmethod
    def deploy_mode_of(master: str, deploy_mode: str | None) -> DeployMode:
        if master.startswith("local"):
            return DeployMode.LOCAL
        return DeployMode.CLUSTER if deploy_mode == "cluster" else DeployMode.CLIENT

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

        The run's cluster manager (:mod:`airflow_kafka_failover.cluster_managers`) says when it runs: the
        job's ``status.json`` saying ``running`` for a driver here, the ResourceManager saying ``RUNNING`` on
        YARN, the driver pod ``Running`` on Kubernetes. A run of the same (pair, cluster, epoch) that is
        already running is adopted, not started twice, so a retried task converges; when that cannot be told
        (a cluster manager that does not answer) nothing is started and :class:`JobStartError` says why.

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
        handle = self._handle(settings, layout, probe)
        master = handle.master
        if handle.deploy_mode == DeployMode.CLUSTER and is_standalone_master(master):
            raise ConfigError(
                f"spark connection {self.spark_conn_id!r} asks for cluster deploy mode on a standalone "
                f"master ({master}); Spark standalone does not run Python drivers in cluster mode: use "
                "deploy-mode client (the driver then runs detached next to Airflow)"
            )
        manager = self.managers.of(handle)
        handle = manager.prepared(handle, self._submission(probe))
        with _submit_lock(layout.local_dir):  # a keeper and a switch submitting the same run start one job
            adopted = manager.live_run(handle, layout)
            if adopted is not None:
                log.info("%s is already running; adopting it instead of starting another", adopted.describe())
                handle = adopted
            else:
                launch = self._launch(settings, layout, application, handle, manager, env)
                if not self._handed_to_standby(handle, layout, launch, application):
                    handle = manager.start(handle, launch)
                if handle.deploy_mode == DeployMode.CLUSTER:
                    record_submission(layout, handle)
        return manager.wait_running(handle, startup_timeout)

    # ---- warm standby --------------------------------------------------------------------------------

    def start_standby(
        self,
        settings: JobSettings,
        layout: RunLayout,
        application: str | os.PathLike[str] = JOB_APPLICATION,
        env: dict[str, str] | None = None,
    ) -> int | None:
        """Start a warm standby driver for the pair and cluster of ``settings`` (``run_format/standby.py``)
        unless one holds the slot; return its pid (None: one was there). The next submission of a run of that
        pair and cluster with the same launch is handed to it instead of starting spark-submit.

        :param settings: the settings of a run on that cluster (only its pair, cluster and store paths are
            used: the warm driver learns its run from the handoff).
        :param layout: that run's folders (the slot is beside its epochs, under the local root).
        :raises ConfigError: a deploy mode that does not run the driver on this host (cluster mode).
        """
        handle = self._handle(settings, layout, self.spark_submit_hook("probe", [], self.conf))
        if handle.deploy_mode == DeployMode.CLUSTER:
            raise ConfigError(
                f"a warm standby driver runs on this host: spark connection {self.spark_conn_id!r} submits "
                "in cluster mode, where the driver runs in the cluster; use client mode for a warm standby"
            )
        manager = self.managers.of(handle)
        slot = StandbySlot(standby_dir(self._local_root(layout), settings.pair, settings.cluster))
        properties = self._store_properties_file(settings, layout)
        command = spark_submit_compat.spark_submit_command(
            self.spark_submit_hook(
                f"akf-{settings.pair}-{settings.cluster}-standby",
                ["--standby", str(slot.folder)],
                self._conf_for(handle, manager),
                properties_file=properties,
            ),
            str(application),
        )
        fingerprint = launch_fingerprint(command, [str(application), *([properties] if properties else [])])
        child_env = job_environment(env)
        check_spark_submit(command[0], child_env, self.spark_conn_id)
        return start_standby(slot, command, child_env, fingerprint, settings)

    def _handle(self, settings: JobSettings, layout: RunLayout, probe: Any) -> JobHandle:
        """The handle of the run of ``settings``, submitted now with the connection ``probe`` reads."""
        master, deploy_mode = spark_submit_compat.master_and_deploy_mode(probe)
        return JobHandle(
            pair=settings.pair,
            cluster=settings.cluster,
            epoch=settings.epoch,
            deploy_mode=self.deploy_mode_of(master, deploy_mode),
            master=master,
            run_dir=layout.run_dir,
            checkpoint=settings.checkpoint,
            sink_root=settings.sink_root,
            spark_conn_id=self.spark_conn_id,
            submitted_at=datetime.now(UTC).isoformat(timespec="seconds"),
            local_dir=layout.local_dir,
        )

    @staticmethod
    def _local_root(layout: RunLayout) -> str:
        return str(Path(layout.local_dir).parents[2])

    def _handed_to_standby(
        self, handle: JobHandle, layout: RunLayout, launch: Launch, application: str | os.PathLike[str]
    ) -> bool:
        """Hand the run to the pair's waiting warm driver on this cluster when there is one started with the
        same launch (local and client mode); False: submit it as usual."""
        if handle.deploy_mode == DeployMode.CLUSTER:
            return False
        slot = StandbySlot(standby_dir(self._local_root(layout), handle.pair, handle.cluster))
        properties = option_value(launch.command, "--properties-file")
        fingerprint = launch_fingerprint(
            launch.command, [str(application), *([properties] if properties else [])]
        )
        if not waiting_standby(slot, fingerprint):
            return False
        settings_path = option_value(launch.command, "--settings")
        if settings_path is None:
            return False
        return hand_over(slot, layout.local_dir, settings_path, handle.epoch) is not None

    def _submission(self, probe: Any) -> Submission:
        """What the cluster managers need of this hook's connection before a submission."""
        return Submission(
            spark_conf=dict(self.conf),
            kubernetes_namespace=spark_submit_compat.kubernetes_namespace(probe),
            kubernetes_conn_id=self.kubernetes_conn_id(),
            resource_manager=self.yarn_resource_manager(),
            master_webui_port=self.standalone_master_webui_port(),
        )

    def _connection_extra(self) -> dict[str, Any]:
        from airflow_kafka_failover.version_compat import AirflowNotFoundException

        try:
            return dict(self.get_connection(self.spark_conn_id).extra_dejson)
        except AirflowNotFoundException:
            return {}

    def yarn_resource_manager(self) -> str | None:
        """The ``spark`` connection's extra ``yarn_resourcemanager_webapp_address`` (None: YARN's manager then
        reads ``yarn-site.xml`` of ``YARN_CONF_DIR`` / ``HADOOP_CONF_DIR``)."""
        address = self._connection_extra().get(RESOURCE_MANAGER_EXTRA)
        return normalize_resource_manager_url(str(address)) if address else None

    def kubernetes_conn_id(self) -> str:
        """The ``spark`` connection's extra ``kubernetes_conn_id``: the ``kubernetes`` connection driver pods
        are read and deleted through (default ``kubernetes_default``)."""
        return str(self._connection_extra().get(KUBERNETES_CONN_EXTRA) or DEFAULT_KUBERNETES_CONN_ID)

    def standalone_master_webui_port(self) -> int | None:
        """The ``spark`` connection's extra ``standalone_master_webui_port`` (None: Spark's default 8080).

        :raises ConfigError: a value that is not a port.
        """
        port = self._connection_extra().get(MASTER_WEBUI_PORT_EXTRA)
        return None if port in (None, "") else check_webui_port(port)

    def _launch(
        self,
        settings: JobSettings,
        layout: RunLayout,
        application: Path,
        handle: JobHandle,
        manager: ClusterManager,
        env: dict[str, str] | None,
    ) -> Launch:
        """Build spark-submit, check that it can run here, then write the settings and clear the run's last
        stop request and status."""
        name = f"akf-{settings.pair}-{settings.cluster}-epoch-{settings.epoch}"
        submit_hook = self.spark_submit_hook(
            name,
            ["--settings", str(layout.settings_file)],
            self._conf_for(handle, manager),
            properties_file=self._store_properties_file(settings, layout),
        )
        child_env = job_environment(env)
        command = spark_submit_compat.spark_submit_command(submit_hook, str(application))
        check_spark_submit(command[0], child_env, self.spark_conn_id)
        settings.write(layout.settings_file)
        clear_run_state(layout.run_dir)

        def submit_to_cluster() -> tuple[str | None, str | None]:
            try:
                driver = submit_hook.submit(str(application), env=child_env)
            except Exception as exc:
                raise JobStartError(f"spark-submit to {handle.master} failed: {exc}") from None
            return driver, spark_submit_compat.yarn_application_id(submit_hook)

        return Launch(command, child_env, submit_to_cluster, layout)

    # ---- stop ----------------------------------------------------------------------------------------

    def stop(self, handle: JobHandle | dict | None, timeout: float = 60.0, at_once: bool = False) -> str:
        """Ask the job to finish its batch and stop; force it after ``timeout``. Idempotent.

        :param timeout: seconds the stop request is given (0: write it and force the job at once).
        :param at_once: force without a grace: SIGKILL instead of SIGTERM and a wait for a local driver's
            shutdown hooks (the cluster managers' kills have none).
        :return: ``not-running`` (nothing to stop), ``stopped`` (it stopped on request), or ``forced``.
        """
        if not handle:
            log.info("no job handle given: there is no job to stop")
            return "not-running"
        handle = JobHandle.from_dict(handle)
        self.use_storage_of(handle)
        return self.managers.of(handle).stop(handle, timeout, at_once=at_once)

    @cached_property
    def managers(self) -> ClusterManagers:
        """The cluster managers this hook submits to and stops through."""
        return ClusterManagers()


def _escape_property(value: str) -> str:
    """A value as a Java properties file reads it back (backslashes and line breaks escaped)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")

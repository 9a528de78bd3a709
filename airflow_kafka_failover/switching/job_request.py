"""One request to run the job: checked against the cluster, the checkpoint and the fence, then submitted.

Shared by ``SubmitStreamingJobOperator`` and the failover/failback DAGs' submit step, so both refuse the
same bad input with the same messages before anything is started. It talks to Kafka through
``KafkaClusterHook``, so it lives beside the operator, not in the job package (which imports no hooks).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import read_json
from airflow_kafka_failover.domain.config import PairConfig
from airflow_kafka_failover.domain.kafka_options import java_client_options
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.hooks.storage import use_job_storage
from airflow_kafka_failover.hooks.streaming_job import CLUSTER_HANDLE_FILE, JOB_APPLICATION
from airflow_kafka_failover.run_format.fencing import FencedError, FencingMarker
from airflow_kafka_failover.run_format.layout import SETTINGS_FILE, RunLayout, claim_checkpoint
from airflow_kafka_failover.run_format.options import STORE_PATH_OPTIONS, DeployMode, JobOptions
from airflow_kafka_failover.run_format.settings import (
    JobSettings,
    SwitchPlan,
    missing_partitions,
    parse_starting_offsets,
)
from airflow_kafka_failover.run_format.state_carry import clear_interrupted_carry

log = logging.getLogger(__name__)


def started_plan(run_dir: str) -> SwitchPlan | None:
    """The plan of the switch that started the run of ``run_dir``, from its settings file; None when a
    switch did not start it, or when the file cannot be read (logged)."""
    where = locations.join(run_dir, SETTINGS_FILE)
    try:
        return JobSettings.load(where).switch_plan
    except ConfigError as exc:
        log.warning("cannot read the plan the run was started with: %s", exc)
        return None


def parse_epoch(value: Any) -> int:
    """An epoch from a parameter or template: an integer >= 0."""
    try:
        epoch = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"epoch must be an integer >= 0, got {value!r}") from None
    if epoch < 0 or isinstance(value, bool) or str(value).strip() != str(epoch):
        raise ConfigError(f"epoch must be an integer >= 0, got {value!r}")
    return epoch


@dataclass
class JobRequest:
    """What to run where: the job's options plus the run's place (pair, cluster, epoch) and its input.

    :param pair: the pair's name.
    :param cluster: the cluster the job reads.
    :param epoch: the epoch of the run.
    :param kafka_conn_id: the cluster's ``kafka`` connection.
    :param options: the job's options; its four paths must be given (the pair config resolves them).
    :param topics: topics to read on this cluster.
    :param topic_pattern: a regex of topics instead of ``topics``.
    :param starting_offsets: ``earliest``, ``latest`` or a start map (dict or JSON).
    :param bookkeeping_group: consumer group the job commits its position to ('' for the pair's default).
    :param switch_plan: the plan of the switch that submits the run (kept in its settings, see
        :class:`~airflow_kafka_failover.run_format.settings.SwitchPlan`); None for the start and the operator.
    """

    pair: str
    cluster: str
    epoch: int
    kafka_conn_id: str
    options: JobOptions
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting_offsets: Any = "earliest"
    bookkeeping_group: str = ""
    switch_plan: SwitchPlan | None = None

    @classmethod
    def for_pair(
        cls,
        pair: PairConfig,
        cluster: str,
        epoch: int,
        starting_offsets: Any,
        switch_plan: SwitchPlan | None = None,
    ) -> JobRequest:
        """The run of ``pair``'s job on ``cluster`` at ``epoch``, as the switches, the start and the keeper
        submit it.

        :param pair: the pair.
        :param cluster: the cluster the run reads.
        :param epoch: its epoch.
        :param starting_offsets: where a new checkpoint starts (``earliest``, ``latest`` or a start map).
        :param switch_plan: the plan of the switch that submits it (None: not a switch).
        """
        return cls(
            pair=pair.name,
            cluster=cluster,
            epoch=epoch,
            kafka_conn_id=pair.cluster(cluster).connection,
            options=pair.job,
            topics=tuple(pair.topics_on(cluster)),
            starting_offsets=starting_offsets,
            bookkeeping_group=pair.bookkeeping_group or "",
            switch_plan=switch_plan,
        )

    def starting_handle(self) -> JobHandle:
        """The handle of this run while it may still be starting: its cluster-mode submission (the handle in
        the run folder, so that a stop kills it through the cluster manager), else the detached process of
        its local folder."""
        layout = self.layout
        try:
            return JobHandle.from_dict(read_json(locations.join(layout.run_dir, CLUSTER_HANDLE_FILE)))
        except (OSError, ValueError, ConfigError):
            pass  # no cluster-mode submission (yet): the run folder's process is what starts
        return JobHandle(
            pair=self.pair,
            cluster=self.cluster,
            epoch=self.epoch,
            deploy_mode=DeployMode.CLIENT,
            master="(starting)",
            run_dir=layout.run_dir,
            checkpoint=layout.checkpoint,
            sink_root=self.sink_root,
            spark_conn_id=self.options.spark_connection,
            local_dir=layout.local_dir,
        )

    @property
    def application(self) -> str:
        """The job file spark-submit runs."""

        return self.options.application or str(JOB_APPLICATION)

    def path(self, name: str) -> str:
        """One of the job's paths, or a ConfigError saying it is required."""
        value = getattr(self.options, name)
        if not value:
            raise ConfigError(f"the job's {name} is required: give {name} (a local path or a store URI)")
        return str(value)

    @property
    def sink_root(self) -> str:
        return self.path("sink_root")

    @property
    def fencing_marker(self) -> str:
        return self.path("fencing_marker")

    @property
    def layout(self) -> RunLayout:
        return RunLayout(
            self.pair,
            self.cluster,
            self.epoch,
            self.path("checkpoint_root"),
            self.path("run_root"),
            self.options.local_root,
        )

    def settings(self) -> JobSettings:
        """Check the inputs against the cluster; return the job's settings (raises ConfigError)."""

        for name in STORE_PATH_OPTIONS:
            self.path(name)
        use_job_storage(self.options)
        if not Path(self.application).is_file():
            raise ConfigError(
                f"application file {self.application} does not exist; point 'application' at the "
                f"job file (the packaged one is {JOB_APPLICATION})"
            )
        layout = self.layout
        kafka = KafkaClusterHook(self.kafka_conn_id, timeout_seconds=self.options.check_timeout_seconds)
        options = {
            **java_client_options(
                kafka.client_config, f"connection {self.kafka_conn_id!r}", self.options.kafka_options
            ),
            **self.options.kafka_options,
        }
        starting = parse_starting_offsets(self.starting_offsets)
        settings = JobSettings(
            pair=self.pair,
            cluster=self.cluster,
            epoch=self.epoch,
            bootstrap_servers=kafka.bootstrap_servers,
            checkpoint=str(layout.checkpoint),
            sink_root=self.sink_root,
            bookkeeping_group=self.bookkeeping_group or f"airflow-kafka-failover.{self.pair}",
            fencing_marker=self.fencing_marker,
            run_dir=str(layout.run_dir),
            topics=tuple(self.topics),
            topic_pattern=self.topic_pattern,
            starting_offsets=starting,
            record_id_field=self.options.record_id_field,
            kafka_options=options,
            max_offsets_per_trigger=self.options.max_offsets_per_trigger,
            trigger_interval_seconds=self.options.trigger_interval_seconds,
            switch_plan=self.switch_plan,
        )
        if self.topics:
            self._check_start_map(kafka, starting)
        return settings

    def _check_start_map(self, kafka: Any, starting: Any) -> None:
        try:
            counts = kafka.partition_counts(self.topics)
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"cannot reach the Kafka cluster of connection {self.kafka_conn_id!r} "
                f"({kafka.bootstrap_servers}) within {self.options.check_timeout_seconds:.0f} s: {exc}; "
                "check the bootstrap servers and that the cluster is up"
            ) from None
        problems = missing_partitions(starting, counts)
        if problems["missing"]:
            raise ConfigError(
                f"the start map misses partitions {problems['missing']} of {self.kafka_conn_id!r}; Spark "
                "needs an offset for every partition (use -2 for earliest): re-plan, or add them"
            )
        if problems["unknown"] or problems["extra_topics"]:
            raise ConfigError(
                f"the start map names partitions the cluster does not have: {problems['unknown']} "
                f"and topics not subscribed: {problems['extra_topics']}; it was planned for other topics: "
                f"re-plan for the topics {list(self.topics)} of {self.kafka_conn_id!r}"
            )

    def fence_to_create(self) -> FencingMarker | None:
        """Refuse a fence at another epoch or cluster; return the marker to create when there is none."""
        marker = FencingMarker(self.fencing_marker, self.pair)
        fence = marker.read()
        if fence is None:
            return marker
        if fence.epoch != self.epoch or fence.cluster != self.cluster:
            raise FencedError(
                f"fencing folder {self.fencing_marker} is at epoch {fence.epoch} for cluster "
                f"{fence.cluster!r}, but this job is for epoch {self.epoch} on {self.cluster!r}: advance the "
                "fence first (a switch does) or submit for the current epoch"
            )
        return None

    def submit(self, hook: Any) -> JobHandle:
        """Check everything, then submit through ``hook`` (a StreamingJobHook); return the handle."""
        settings = self.settings()
        new_marker = self.fence_to_create()
        if clear_interrupted_carry(settings.checkpoint):
            log.warning(
                "removed what an interrupted state carry left in %s (no run had started on it)",
                settings.checkpoint,
            )
        if claim_checkpoint(
            settings.checkpoint, self.pair, self.cluster, self.epoch, settings.bootstrap_servers
        ):
            log.info(
                "checkpoint %s holds batches of this run: Spark resumes from it, ignoring the start offsets",
                settings.checkpoint,
            )
            settings = settings.model_copy(update={"switch_plan": started_plan(self.layout.run_dir)})
        if new_marker is not None:
            log.info(
                "no epoch marker in the fencing folder %s yet; creating epoch %s for cluster %s",
                self.fencing_marker,
                self.epoch,
                self.cluster,
            )
            new_marker.advance(None, self.epoch, self.cluster)
        return hook.submit(settings, self.layout, self.application, self.options.startup_timeout_seconds)

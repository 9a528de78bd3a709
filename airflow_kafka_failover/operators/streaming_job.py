"""Operators that start and stop the streaming job on one cluster of a pair.

``SubmitStreamingJobOperator`` checks everything it can before spark-submit runs (the application file,
the Kafka connection, that the topics exist and the start map names every partition, that the checkpoint
belongs to this cluster and epoch, that the fencing marker is at this epoch), then submits the job
detached and returns its handle to XCom without waiting for the job to end.

``StopStreamingJobOperator`` stops a job through its stop request (it finishes the batch in flight), then
by force after a timeout. Stopping a job that is not running succeeds with a log line that says so.

Bad input fails the task at once with ``AirflowFailException`` (no retry can fix it); a job that dies in
start-up fails it with the job's log tail.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_kafka_failover.exceptions import CheckpointError, ConfigError
from airflow_kafka_failover.hooks.streaming_job import JOB_APPLICATION, StreamingJobHook
from airflow_kafka_failover.jobs.fencing import FencedError
from airflow_kafka_failover.jobs.request import JobRequest, parse_epoch


def fail_on_bad_input(func):
    """Turn configuration and checkpoint errors into AirflowFailException (retrying cannot fix them)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from airflow.sdk.exceptions import AirflowFailException

        try:
            return func(*args, **kwargs)
        except (ConfigError, CheckpointError, FencedError) as exc:
            raise AirflowFailException(str(exc)) from exc

    return wrapper


class SubmitStreamingJobOperator(BaseOperator):
    """Submit the streaming job on one cluster, detached; return its handle (a dict) to XCom.

    :param pair: the pair's name.
    :param cluster: the cluster the job will read (a name of the pair).
    :param epoch: the epoch this run belongs to; the fencing marker must hold it (or not exist yet).
    :param kafka_conn_id: the cluster's ``kafka`` connection; its bootstrap servers and security settings
        reach the job through an owner-only settings file, never the command line.
    :param topics: topics to read on this cluster (e.g. ``["orders", "A.orders"]``).
    :param topic_pattern: a regex of topics instead of ``topics``.
    :param starting_offsets: ``earliest``, ``latest``, or a start map naming every partition, as a dict or
        JSON (a translation plan's ``to_spark_starting_offsets()``). Used only with a new checkpoint.
    :param sink_root: the Parquet sink root.
    :param checkpoint_root: root of the checkpoints; this run uses ``<root>/<pair>/<cluster>/epoch-<n>``.
    :param run_root: root of the run folders (settings, status, stop request, log).
    :param fencing_marker: the pair's fencing marker file.
    :param bookkeeping_group: consumer group the job commits its position to.
    :param record_id_field: JSON field of the value holding the record id, or ``key``.
    :param kafka_options: Java Kafka client options that override those derived from the connection.
    :param max_offsets_per_trigger: cap on records per micro-batch (None: no cap).
    :param trigger_interval_s: micro-batch trigger interval.
    :param spark_conn_id: the ``spark`` connection.
    :param conf: Spark configuration.
    :param jars: ``--jars`` (default: the Kafka source jars resolved by ``make setup``).
    :param packages: ``--packages`` instead of ``jars``.
    :param driver_memory: ``--driver-memory``.
    :param executor_memory: ``--executor-memory``.
    :param total_executor_cores: ``--total-executor-cores``.
    :param deploy_mode: overrides the connection's deploy mode.
    :param application: the job file (default: the packaged ``stream_job.py``).
    :param startup_timeout: seconds the job has to report running before the task fails.
    :param check_timeout: seconds for the Kafka checks before submission.
    """

    template_fields: Sequence[str] = (
        "epoch",
        "kafka_conn_id",
        "topics",
        "starting_offsets",
        "sink_root",
        "checkpoint_root",
        "run_root",
        "fencing_marker",
        "cluster",
    )
    ui_color = "#e8f1fb"

    def __init__(
        self,
        *,
        pair: str,
        cluster: str,
        epoch: int | str,
        kafka_conn_id: str,
        sink_root: str,
        checkpoint_root: str,
        run_root: str,
        fencing_marker: str,
        topics: Sequence[str] = (),
        topic_pattern: str | None = None,
        starting_offsets: Any = "earliest",
        bookkeeping_group: str | None = None,
        record_id_field: str = "id",
        kafka_options: Mapping[str, str] | None = None,
        max_offsets_per_trigger: int | None = None,
        trigger_interval_s: float = 5.0,
        spark_conn_id: str = "spark_default",
        conf: Mapping[str, Any] | None = None,
        jars: str | None = None,
        packages: str | None = None,
        driver_memory: str | None = None,
        executor_memory: str | None = None,
        total_executor_cores: int | None = None,
        deploy_mode: str | None = None,
        application: str | None = None,
        startup_timeout: float = 180.0,
        check_timeout: float = 10.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pair, self.cluster, self.epoch = pair, cluster, epoch
        self.kafka_conn_id = kafka_conn_id
        self.sink_root, self.checkpoint_root, self.run_root = sink_root, checkpoint_root, run_root
        self.fencing_marker = fencing_marker
        self.topics, self.topic_pattern = list(topics), topic_pattern
        self.starting_offsets = starting_offsets
        self.bookkeeping_group = bookkeeping_group or f"airflow-kafka-failover.{pair}"
        self.record_id_field = record_id_field
        self.kafka_options = dict(kafka_options or {})
        self.max_offsets_per_trigger = max_offsets_per_trigger
        self.trigger_interval_s = trigger_interval_s
        self.spark_conn_id = spark_conn_id
        self.spark_options = {
            "conf": dict(conf or {}),
            "jars": jars,
            "packages": packages,
            "driver_memory": driver_memory,
            "executor_memory": executor_memory,
            "total_executor_cores": total_executor_cores,
            "deploy_mode": deploy_mode,
        }
        self.application = application or str(JOB_APPLICATION)
        self.startup_timeout = startup_timeout
        self.check_timeout = check_timeout

    def request(self) -> JobRequest:
        """The operator's (rendered) parameters as a job request."""
        return JobRequest(
            pair=self.pair,
            cluster=self.cluster,
            epoch=parse_epoch(self.epoch),
            kafka_conn_id=self.kafka_conn_id,
            sink_root=self.sink_root,
            checkpoint_root=self.checkpoint_root,
            run_root=self.run_root,
            fencing_marker=self.fencing_marker,
            topics=tuple(self.topics),
            topic_pattern=self.topic_pattern,
            starting_offsets=self.starting_offsets,
            bookkeeping_group=self.bookkeeping_group,
            record_id_field=self.record_id_field,
            kafka_options=self.kafka_options,
            max_offsets_per_trigger=self.max_offsets_per_trigger,
            trigger_interval_s=self.trigger_interval_s,
            application=self.application,
            startup_timeout=self.startup_timeout,
            check_timeout=self.check_timeout,
        )

    @fail_on_bad_input
    def execute(self, context: Any) -> dict[str, Any]:
        hook = StreamingJobHook(self.spark_conn_id, **self.spark_options)
        handle = self.request().submit(hook)
        self.log.info("job handle: %s", handle.to_dict())
        return handle.to_dict()


class StopStreamingJobOperator(BaseOperator):
    """Stop a streaming job: stop request first (it finishes its batch), force after ``timeout``.

    :param handle: the submit operator's handle (templated, e.g. ``{{ ti.xcom_pull('submit') }}`` with
        ``render_template_as_native_obj``), or None/empty to stop nothing.
    :param timeout: seconds to wait for a graceful stop before forcing it.
    :param spark_conn_id: the ``spark`` connection (cluster deploy mode kills through it).
    """

    template_fields: Sequence[str] = ("handle",)
    ui_color = "#fbe8e8"

    def __init__(
        self, *, handle: Any, timeout: float = 60.0, spark_conn_id: str = "spark_default", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.handle = handle
        self.timeout = timeout
        self.spark_conn_id = spark_conn_id

    @fail_on_bad_input
    def execute(self, context: Any) -> str:
        handle = self.handle
        if isinstance(handle, str) and handle.strip():
            import json

            try:
                handle = json.loads(handle)
            except json.JSONDecodeError:
                raise ConfigError(f"job handle is neither a mapping nor JSON: {handle[:200]!r}") from None
        outcome = StreamingJobHook(self.spark_conn_id).stop(handle, self.timeout)
        self.log.info("stop outcome: %s", outcome)
        return outcome

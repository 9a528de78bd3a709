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
from functools import cached_property
from typing import Any

from airflow.sdk import BaseOperator
from pydantic import ValidationError

from airflow_kafka_failover.core.exceptions import CheckpointError, ConfigError
from airflow_kafka_failover.core.schema import problem_of
from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.run_format.fencing import FencedError
from airflow_kafka_failover.run_format.options import JobOptions
from airflow_kafka_failover.switching.job_request import JobRequest, parse_epoch


def fail_on_bad_input(func):
    """Turn configuration and checkpoint errors into AirflowFailException (retrying cannot fix them)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from airflow_kafka_failover.version_compat import AirflowFailException

        try:
            return func(*args, **kwargs)
        except (ConfigError, CheckpointError, FencedError) as exc:
            raise AirflowFailException(str(exc)) from exc

    return wrapper


def _job_options_from(arguments: dict[str, Any]) -> dict[str, Any]:
    """Take the job options out of an operator's keyword arguments."""
    return {name: arguments.pop(name) for name in list(arguments) if name in JobOptions.model_fields}


class SubmitStreamingJobOperator(BaseOperator):
    """Submit the streaming job on one cluster, detached; return its handle (a dict) to XCom.

    Besides the arguments below it takes every job option of
    :class:`~airflow_kafka_failover.run_format.options.JobOptions` by its name (the pair config's ``job``
    section): ``sink_root``, ``checkpoint_root``, ``run_root`` and ``fencing_marker`` are required;
    ``record_id_field``, ``kafka_options``, ``max_offsets_per_trigger``, ``trigger_interval_seconds``,
    ``jars``, ``packages``, ``driver_memory``, ``executor_memory``, ``total_executor_cores``,
    ``deploy_mode``, ``application``, ``startup_timeout_seconds`` and ``check_timeout_seconds`` are optional.

    :param pair: the pair's name.
    :param cluster: the cluster the job will read (a name of the pair).
    :param epoch: the epoch this run belongs to; the fencing marker must hold it (or not exist yet).
    :param kafka_conn_id: the cluster's ``kafka`` connection; its bootstrap servers and security settings
        reach the job through an owner-only settings file, never the command line.
    :param topics: topics to read on this cluster (e.g. ``["orders", "A.orders"]``).
    :param topic_pattern: a regex of topics instead of ``topics``.
    :param starting_offsets: ``earliest``, ``latest``, or a start map naming every partition, as a dict or
        JSON (a translation plan's ``to_spark_starting_offsets()``). Used only with a new checkpoint.
    :param bookkeeping_group: consumer group the job commits its position to.
    :param spark_conn_id: the ``spark`` connection (the job option ``spark_connection``, which it also
        takes by that name).
    :param conf: Spark configuration (the job option ``spark_conf``, which it also takes by that name).
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
        topics: Sequence[str] = (),
        topic_pattern: str | None = None,
        starting_offsets: Any = "earliest",
        bookkeeping_group: str | None = None,
        spark_conn_id: str = "spark_default",
        conf: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        options = _job_options_from(kwargs)
        # The job options' own names of the two the operator has arguments for: the same setting, so
        # given both ways they must agree (they were dropped before, leaving the defaults).
        if "spark_connection" in options:
            named = str(options.pop("spark_connection"))
            if spark_conn_id not in ("spark_default", named):
                raise ConfigError(
                    f"spark_connection={named!r} and spark_conn_id={spark_conn_id!r} name two connections "
                    "for one job; give one of them"
                )
            spark_conn_id = named
        if "spark_conf" in options:
            if conf:
                raise ConfigError("spark_conf and conf are the same Spark settings; give one of them")
            conf = options.pop("spark_conf")
        super().__init__(**kwargs)
        self.pair, self.cluster, self.epoch = pair, cluster, epoch
        self.kafka_conn_id = kafka_conn_id
        self.topics, self.topic_pattern = list(topics), topic_pattern
        self.starting_offsets = starting_offsets
        self.bookkeeping_group = bookkeeping_group or f"airflow-kafka-failover.{pair}"
        self.spark_conn_id = spark_conn_id
        self.conf = dict(conf or {})
        # The paths are templated fields of their own; the other options are stored as given and
        # validated in execute().
        self.sink_root = options.pop("sink_root", None)
        self.checkpoint_root = options.pop("checkpoint_root", None)
        self.run_root = options.pop("run_root", None)
        self.fencing_marker = options.pop("fencing_marker", None)
        self.job_options = options
        self._starting: JobRequest | None = None

    def options(self) -> JobOptions:
        """The (rendered) job options, validated; a bad one raises ConfigError naming it."""
        values = {
            **self.job_options,
            "sink_root": self.sink_root,
            "checkpoint_root": self.checkpoint_root,
            "run_root": self.run_root,
            "fencing_marker": self.fencing_marker,
            "spark_connection": self.spark_conn_id,
            "spark_conf": {str(k): str(v) for k, v in self.conf.items()},
        }
        try:
            return JobOptions.model_validate(values)
        except ValidationError as exc:
            field, problem = problem_of(exc)
            raise ConfigError(f"task {self.task_id}: {field}: {problem}") from None

    def request(self) -> JobRequest:
        """The operator's (rendered) parameters as a job request."""
        return JobRequest(
            pair=self.pair,
            cluster=self.cluster,
            epoch=parse_epoch(self.epoch),
            kafka_conn_id=self.kafka_conn_id,
            options=self.options(),
            topics=tuple(self.topics),
            topic_pattern=self.topic_pattern,
            starting_offsets=self.starting_offsets,
            bookkeeping_group=self.bookkeeping_group,
        )

    @cached_property
    def hook(self) -> StreamingJobHook:
        """The hook that submits and stops the job."""
        return StreamingJobHook.for_options(self.options())

    @fail_on_bad_input
    def execute(self, context: Any) -> dict[str, Any]:
        request = self.request()
        self._starting = request
        try:
            handle = request.submit(self.hook)
        finally:
            self._starting = None
        self.log.info("job handle: %s", handle.to_dict())
        return handle.to_dict()

    def on_kill(self) -> None:
        """Stop the job this task is still starting (a job already handed to XCom is left running)."""
        request = self._starting
        if request is None:
            return
        self.log.info(
            "task killed while starting the job of %s on %s: stopping it", request.pair, request.cluster
        )
        outcome = self.hook.stop(request.starting_handle(), request.options.stop_timeout_seconds)
        self.log.info("stop outcome: %s", outcome)


class StopStreamingJobOperator(BaseOperator):
    """Stop a streaming job: stop request first (it finishes its batch), force after ``timeout``.

    :param handle: the submit operator's handle (templated, e.g. ``{{ ti.xcom_pull('submit') }}`` with
        ``render_template_as_native_obj``), or None/empty to stop nothing.
    :param timeout: seconds to wait for a graceful stop before forcing it.
    :param spark_conn_id: the ``spark`` connection (cluster deploy mode kills through it).
    :param storage_connections: the connection of each remote scheme of the handle's run folder (the job's
        ``storage_connections``; unnamed schemes use ``aws_default`` and ``webhdfs_default``).
    """

    template_fields: Sequence[str] = ("handle",)
    ui_color = "#fbe8e8"

    def __init__(
        self,
        *,
        handle: Any,
        timeout: float = 60.0,
        spark_conn_id: str = "spark_default",
        storage_connections: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.handle = handle
        self.timeout = timeout
        self.spark_conn_id = spark_conn_id
        self.storage_connections = dict(storage_connections or {})

    @fail_on_bad_input
    def execute(self, context: Any) -> str:
        handle = self.handle
        if isinstance(handle, str) and handle.strip():
            import json

            try:
                handle = json.loads(handle)
            except json.JSONDecodeError:
                raise ConfigError(f"job handle is neither a mapping nor JSON: {handle[:200]!r}") from None
        hook = StreamingJobHook(self.spark_conn_id, storage_connections=self.storage_connections)
        outcome = hook.stop(handle, self.timeout)
        self.log.info("stop outcome: %s", outcome)
        return outcome

"""The streaming job's options, defined once.

:class:`JobOptions` is the pair config's ``job`` section, the options ``SubmitStreamingJobOperator`` takes
(as keyword arguments of the same names) and part of every job request. Its stream part,
:class:`StreamOptions`, is what the job itself reads on the Spark driver: the settings file
(:class:`~airflow_kafka_failover.jobs.settings.JobSettings`) extends it.

Pure module: pydantic only, no Airflow, no pyspark.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import Field

from airflow_kafka_failover.schema import Count, JobSeconds, LocalPath, Options, Schema, Text, choice

RECORD_ID_FROM_KEY = "key"
"""``record_id_field`` value meaning: the record id is the Kafka key (as UTF-8 text)."""

PATH_OPTIONS = ("sink_root", "checkpoint_root", "run_root", "fencing_marker")
"""The options that are local paths; the pair config resolves them relative to its file."""


class DeployMode(StrEnum):
    """Where spark-submit runs the driver."""

    CLIENT = "client"
    CLUSTER = "cluster"


class StreamOptions(Schema):
    """What the job does with the stream it reads; the job reads these on the Spark driver."""

    record_id_field: Text = Field(
        "id",
        description="JSON field of the record's value that holds its id, or `key` for the Kafka key. A plain "
        "top-level name (letters, digits, `_`, `-`) is read by the record-id jar's reader when the jar is "
        "among the job's jars, with `get_json_object` for whatever it leaves; anything else is a JSON path "
        "for `get_json_object` (`order.id`). The ids are the same either way; the job's log says which.",
    )
    trigger_interval_seconds: JobSeconds = Field(5.0, description="Micro-batch trigger interval (seconds).")
    max_offsets_per_trigger: Count | None = Field(
        None, description="Cap on records per micro-batch (Spark's `maxOffsetsPerTrigger`); null for no cap."
    )
    kafka_options: Options = Field(
        default_factory=dict,
        description="Java Kafka client options (without the `kafka.` prefix) that override those derived "
        'from the connection; values are strings (quote YAML booleans and numbers: `"true"`).',
    )


class JobOptions(StreamOptions):
    """The streaming job of a pair: what it reads with, how it is submitted, where its files go.

    The four paths ``sink_root``, ``checkpoint_root``, ``run_root`` and ``fencing_marker`` default (in the
    pair config) to folders under ``$AIRFLOW_HOME/kafka-failover/`` (``~/airflow`` when ``AIRFLOW_HOME`` is
    unset); in them ``~`` is expanded and a relative path is relative to the config file's folder. A URL
    (``s3://...``, any ``scheme://``) is refused: remote storage is not supported yet. ``application`` and
    ``jars`` are used as written: a relative path there is relative to the working directory of the
    Airflow worker that submits the job. Seconds must be finite and >= 0.1.
    """

    _null_means_default: ClassVar[tuple[str, ...]] = PATH_OPTIONS

    spark_connection: Text = Field(
        "spark_default",
        description="The Airflow `spark` connection (master `local[*]`, `spark://host:port`, `yarn`, "
        "`k8s://...`; its deploy mode).",
    )
    sink_root: LocalPath = Field(  # type: ignore[assignment]
        None,
        json_schema_extra={"x-default": "`$AIRFLOW_HOME/kafka-failover/sink/<pair>`"},
        description="Where the job writes: the packaged job's Parquet sink root, or whatever a job of your "
        "own writes to (a Delta table, a folder), read there as `stream.sink_root` (default "
        "`$AIRFLOW_HOME/kafka-failover/sink/<pair>`).",
    )
    checkpoint_root: LocalPath = Field(  # type: ignore[assignment]
        None,
        json_schema_extra={"x-default": "`$AIRFLOW_HOME/kafka-failover/checkpoints`"},
        description="Root of the per-(pair, cluster, epoch) checkpoints (default "
        "`$AIRFLOW_HOME/kafka-failover/checkpoints`).",
    )
    run_root: LocalPath = Field(  # type: ignore[assignment]
        None,
        json_schema_extra={"x-default": "`$AIRFLOW_HOME/kafka-failover/runs`"},
        description="Root of the run folders: settings, status, stop request, log (default "
        "`$AIRFLOW_HOME/kafka-failover/runs`).",
    )
    fencing_marker: LocalPath = Field(  # type: ignore[assignment]
        None,
        json_schema_extra={"x-default": "`$AIRFLOW_HOME/kafka-failover/fencing/<pair>.json`"},
        description="The pair's fencing marker file; each pair needs its own (default "
        "`$AIRFLOW_HOME/kafka-failover/fencing/<pair>.json`).",
    )
    spark_conf: Options = Field(
        default_factory=dict, description="Spark configuration (`--conf`); values are strings."
    )
    jars: Text | None = Field(
        None,
        description="`--jars`; null: the Airflow option `[kafka_failover] job_jars` (`make setup` fills it "
        "with the Kafka source jars and the record-id jar); add `.jars/record-id/akf-record-id.jar` to a "
        "list of your own.",
    )
    packages: Text | None = Field(None, description="`--packages` instead of `jars`.")
    driver_memory: Text | None = Field(None, description="`--driver-memory`, e.g. `2g`.")
    executor_memory: Text | None = Field(None, description="`--executor-memory`, e.g. `2g`.")
    total_executor_cores: Count | None = Field(None, description="`--total-executor-cores`.")
    deploy_mode: Annotated[DeployMode, choice(DeployMode)] | None = Field(
        None, description="`client` or `cluster`; null: the spark connection's deploy mode."
    )
    application: Text | None = Field(
        None,
        description="The job file spark-submit runs: your own, written on the job-side API or to the job "
        "contract (docs/jobs.md); null: the packaged `jobs/stream_job.py`.",
    )
    startup_timeout_seconds: JobSeconds = Field(
        180.0,
        description="Time the job has to report `running` (local and client deploy mode; in cluster mode "
        "the submit step does not wait).",
    )
    stop_timeout_seconds: JobSeconds = Field(
        60.0,
        description="Time a stopped job has to finish its batch before it is stopped by force (a failover "
        "waits at most 5 s).",
    )
    first_batch_timeout_seconds: JobSeconds = Field(
        300.0,
        description="Time the new job of a switch has to commit its first batch (timeout of "
        "`wait_first_batch`).",
    )
    check_timeout_seconds: JobSeconds = Field(
        10.0, description="Time the checks against the Kafka cluster (topics, partitions) may take."
    )

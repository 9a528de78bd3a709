"""The streaming job's options, defined once.

:class:`JobOptions` is the pair config's ``job`` section, the options ``SubmitStreamingJobOperator`` takes
(as keyword arguments of the same names) and part of every job request. Its stream part,
:class:`StreamOptions`, is what the job itself reads on the Spark driver: the settings file
(:class:`~airflow_kafka_failover.run_format.settings.JobSettings`) extends it.

Pure module: pydantic only, no Airflow, no pyspark.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import Field, WithJsonSchema, field_validator

from airflow_kafka_failover.core.schema import (
    Count,
    JobSeconds,
    LocalPath,
    Options,
    Schema,
    StorageLocation,
    Text,
    choice,
)

OFFSET_LOG_FORMAT_CONF = "spark.sql.streaming.offsetLog.formatVersion"
"""Spark 4.2's opt-in offset log format; the plan reads the position from format 1 only
(run_format/spark_checkpoint.py)."""

RECORD_ID_FROM_KEY = "key"
"""``record_id_field`` value meaning: the record id is the Kafka key (as UTF-8 text)."""

PATH_OPTIONS = ("sink_root", "checkpoint_root", "run_root", "fencing_marker", "local_root")
"""The options that are paths; the pair config resolves local ones relative to its file."""
STORE_PATH_OPTIONS = ("sink_root", "checkpoint_root", "run_root", "fencing_marker")
"""The paths that may name a store (``hdfs://``, ``s3a://``) instead of a local folder."""


class DeployMode(StrEnum):
    """Where a run's driver runs (a job handle's ``deploy_mode``).

    The ``deploy_mode`` option chooses between ``client`` and ``cluster``; ``local`` follows from a
    ``local[*]`` master, whose driver is spark-submit itself.
    """

    LOCAL = "local"
    """spark-submit in local mode, detached, on the host that submitted it."""
    CLIENT = "client"
    """The driver runs detached next to Airflow; the executors run on the cluster."""
    CLUSTER = "cluster"
    """The driver runs on the cluster (YARN, Kubernetes), known by its application id or pod."""


CHOSEN_DEPLOY_MODES = (DeployMode.CLIENT, DeployMode.CLUSTER)
"""The deploy modes the ``deploy_mode`` option names."""


class StatePolicy(StrEnum):
    """What a switch does with the state of a stateful query (aggregations, deduplication, state stores,
    stream-stream joins): the ``state`` option."""

    CARRY = "carry"
    """The new run's checkpoint starts as a copy of the old run's last committed batch, its source positions
    rewritten to the plan's start offsets on the target: every operator keeps its state."""
    FRESH = "fresh"
    """The new run starts on an empty checkpoint: the state is dropped, and the switch's history entry and
    the status say so."""
    REFUSE = "refuse"
    """The switch stops before the fence moves, naming the state it would drop or carry."""


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
    unset); in them ``~`` is expanded and a relative path is relative to the config file's folder. Those
    defaults serve a deployment whose tasks all run on one host (``LocalExecutor``): with an executor that
    runs tasks on other hosts (Celery, Kubernetes, Edge) the DAG file refuses a pair that leaves any of the
    four at its default, since each host would keep its own fence and run folders; a path named in the
    config is taken as shared (a store URI, or a folder every host mounts). Each may
    instead be a store URI, ``hdfs://namenode:port/...`` or ``s3a://bucket/...`` (``gs://``, ``abfs(s)://``
    untested): the Airflow tasks reach it through the connection ``storage_connections`` names for its
    scheme, the driver through Spark's Hadoop connectors. ``local_root`` is always local. ``application`` and
    ``jars`` are used as written: a relative path there is relative to the working directory of the
    Airflow worker that submits the job. Seconds must be finite and >= 0.1.
    """

    _null_means_default: ClassVar[tuple[str, ...]] = PATH_OPTIONS

    spark_connection: Text = Field(
        "spark_default",
        description="The Airflow `spark` connection (master `local[*]`, `spark://host:port`, `yarn`, "
        "`k8s://...`; its deploy mode).",
    )
    sink_root: StorageLocation = Field(  # type: ignore[assignment]
        None,
        json_schema_extra={"x-default": "`$AIRFLOW_HOME/kafka-failover/sink/<pair>`"},
        description="Where the job writes: the packaged job's Parquet sink root, or whatever a job of your "
        "own writes to (a Delta table, a folder), read there as `stream.sink_root` (default "
        "`$AIRFLOW_HOME/kafka-failover/sink/<pair>`).",
    )
    checkpoint_root: StorageLocation = Field(  # type: ignore[assignment]
        None,
        json_schema_extra={"x-default": "`$AIRFLOW_HOME/kafka-failover/checkpoints`"},
        description="Root of the per-(pair, cluster, epoch) checkpoints (default "
        "`$AIRFLOW_HOME/kafka-failover/checkpoints`).",
    )
    run_root: StorageLocation = Field(  # type: ignore[assignment]
        None,
        json_schema_extra={"x-default": "`$AIRFLOW_HOME/kafka-failover/runs`"},
        description="Root of the run folders: settings (owner-only: it holds the cluster's secrets), status, "
        "stop request (default `$AIRFLOW_HOME/kafka-failover/runs`).",
    )
    fencing_marker: StorageLocation = Field(  # type: ignore[assignment]
        None,
        json_schema_extra={"x-default": "`$AIRFLOW_HOME/kafka-failover/fencing/<pair>`"},
        description="The pair's fencing folder: create-only epoch markers, the records committed at each "
        "epoch, the switch lease (docs/concepts.md); each pair needs its own; every Airflow worker, the "
        "triggerer and every driver must reach it (default `$AIRFLOW_HOME/kafka-failover/fencing/<pair>`).",
    )
    local_root: LocalPath = Field(  # type: ignore[assignment]
        None,
        json_schema_extra={
            "x-default": "`run_root` when it is local, else `$AIRFLOW_HOME/kafka-failover/local`"
        },
        description="A folder on the host that starts spark-submit: its process file and output (the job's "
        "log in local and client mode) and the owner-only Spark properties file with the store's secrets "
        "(default: `run_root` when it is local, else `$AIRFLOW_HOME/kafka-failover/local`).",
    )
    storage_connections: Options = Field(
        default_factory=dict,
        description="The Airflow connection of each remote scheme the paths use, e.g. `{s3a: my_s3}` (an "
        "`aws` connection: keys, `endpoint_url`, `region_name`), `{hdfs: my_hdfs}` (a `webhdfs` connection: "
        "the NameNode's web host and port, the HDFS user as login); unnamed schemes use `aws_default` and "
        "`webhdfs_default`.",
    )
    storage_timeout_seconds: JobSeconds = Field(
        10.0,
        description="Time a request to a remote store may take on the Airflow side (connect, then read) "
        "before it fails, naming the location; an S3 call is tried twice.",
    )
    spark_conf: Options = Field(
        default_factory=dict, description="Spark configuration (`--conf`); values are strings."
    )
    jars: Text | None = Field(
        None,
        description="`--jars`; null: the Airflow option `[kafka_failover] job_jars` (`make setup` prints "
        "the value for Spark's Kafka source jars and the record-id jar; a job writing Delta also needs "
        "Delta's, which `python -m akf_devtools.sandbox.jars --all` adds); add "
        "`.jars/record-id/akf-record-id.jar` to a list of your own.",
    )
    packages: Text | None = Field(None, description="`--packages` instead of `jars`.")
    driver_memory: Text | None = Field(None, description="`--driver-memory`, e.g. `2g`.")
    executor_memory: Text | None = Field(None, description="`--executor-memory`, e.g. `2g`.")
    total_executor_cores: Count | None = Field(None, description="`--total-executor-cores`.")
    deploy_mode: (
        Annotated[
            DeployMode,
            choice(DeployMode, CHOSEN_DEPLOY_MODES),
            WithJsonSchema({"enum": [mode.value for mode in CHOSEN_DEPLOY_MODES], "type": "string"}),
        ]
        | None
    ) = Field(None, description="`client` or `cluster`; null: the spark connection's deploy mode.")
    application: Text | None = Field(
        None,
        description="The job file spark-submit runs: your own, written on the job-side API or to the job "
        "contract (docs/jobs.md); null: the packaged `jobs/stream_job.py`.",
    )
    startup_timeout_seconds: JobSeconds = Field(
        180.0,
        description="Time the job has to report `running` (local and client deploy mode), or its cluster "
        "manager to report it running (cluster mode: YARN's `RUNNING`, a `Running` driver pod); a job not "
        "running by then is stopped and the submit fails.",
    )
    stop_timeout_seconds: JobSeconds = Field(
        60.0,
        description="Time a stopped job has to finish its batch before it is stopped by force (a forced "
        "failover waits at most 5 s; a failover after the down verdict kills the old job at once).",
    )
    first_batch_timeout_seconds: JobSeconds = Field(
        300.0,
        description="Time the new job of a switch has to commit its first batch (timeout of "
        "`wait_first_batch`).",
    )
    check_timeout_seconds: JobSeconds = Field(
        10.0, description="Time the checks against the Kafka cluster (topics, partitions) may take."
    )
    state: Annotated[StatePolicy, choice(StatePolicy)] = Field(
        StatePolicy.CARRY,
        description="What a switch does with a stateful query's state (windowed aggregations, "
        "`dropDuplicates`, state stores, stream-stream joins): `carry` starts the new run from a copy of the "
        "old run's last committed batch with its positions rewritten to the plan's start offsets, so every "
        "operator keeps its state; `fresh` starts it empty and records the dropped state in the switch's "
        "history and the status; `refuse` stops the switch before the fence moves. A stateless query costs "
        'nothing either way (docs/jobs.md, "Stateful jobs").',
    )

    @field_validator("spark_conf")
    @classmethod
    def _offset_log_the_plan_reads(cls, value: dict[str, str]) -> dict[str, str]:
        version = str(value.get(OFFSET_LOG_FORMAT_CONF, "1")).strip()
        if version != "1":
            raise ValueError(
                f"sets {OFFSET_LOG_FORMAT_CONF}={version!r}; failover reads the job's position from Spark's "
                "offset log format 1 (the default) only: remove the setting"
            )
        return value

    @field_validator("storage_connections")
    @classmethod
    def _known_schemes(cls, value: dict[str, str]) -> dict[str, str]:
        from airflow_kafka_failover.core.storage.locations import REMOTE_SCHEMES

        unknown = sorted(set(value) - set(REMOTE_SCHEMES))
        if unknown:
            raise ValueError(f"names unknown schemes {unknown}; the schemes are {list(REMOTE_SCHEMES)}")
        return value

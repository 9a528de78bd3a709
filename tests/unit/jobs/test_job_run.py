"""The job protocol without Spark: the fence before a batch, progress entries from observations, group
commits.

Spark and the JVM are stood in for by small fakes; the write itself (a real Spark job) is covered by the
integration tests that run the job under spark-submit.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.jobs.job_run import SOURCE_METRICS, JobRun, RunStopping, state_of
from airflow_kafka_failover.run_format.fencing import FencingMarker
from airflow_kafka_failover.run_format.settings import JobSettings

BENCH_JOB = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_job.py"
METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}'


class PutDict(dict):
    """java.util.Properties / HashMap as far as the job uses them."""

    def put(self, key, value):
        self[key] = value


class FakeAdmin:
    def __init__(self, calls: list, props: dict) -> None:
        self.calls = calls
        calls.append(("create", dict(props)))

    def alterConsumerGroupOffsets(self, group, offsets):  # the Java name
        self.calls.append(("commit", group, dict(offsets)))
        return SimpleNamespace(all=lambda: SimpleNamespace(get=lambda timeout, unit: None))

    def close(self) -> None:
        self.calls.append(("close",))


def fake_java(calls: list):
    """The Java classes the run asks for by name (``JobRun.java``), as far as the job uses them."""
    classes = {
        "org.apache.kafka.clients.admin.Admin": SimpleNamespace(create=lambda props: FakeAdmin(calls, props)),
        "org.apache.kafka.clients.consumer.OffsetAndMetadata": lambda offset: offset,
        "org.apache.kafka.common.TopicPartition": lambda topic, partition: (topic, partition),
        "java.util.concurrent.TimeUnit": SimpleNamespace(SECONDS="s"),
        "java.util.Properties": PutDict,
        "java.util.HashMap": PutDict,
        "org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper": lambda cb: ("wrapped", cb),
    }
    return classes.__getitem__


def fake_streams(calls: list) -> SimpleNamespace:
    """``spark._jsparkSession.streams()``: where the run adds its listener (wrapped for the JVM)."""
    return SimpleNamespace(
        addListener=lambda wrapper: calls.append(("listen", wrapper[0])),
        removeListener=lambda wrapper: calls.append(("unlisten", wrapper[0])),
    )


class FluentStream:
    """The streaming reader, DataFrame and writer: every builder call returns the same object."""

    def __init__(self, calls: list, query: SimpleNamespace) -> None:
        self._calls = calls
        self._query = query

    @property
    def writeStream(self) -> FluentStream:  # the PySpark name
        return self

    def start(self) -> SimpleNamespace:
        self._calls.append(("start",))
        return self._query

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self


@pytest.fixture
def calls() -> list:
    return []


@pytest.fixture
def job_log() -> list[str]:
    """Messages the job logs; a handler of its own, as Airflow's logging set-up may stop propagation."""
    messages: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = logging.getLogger("airflow_kafka_failover.job")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield messages
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture
def run(tmp_path, calls) -> JobRun:
    settings = JobSettings(
        pair="orders",
        cluster="A",
        epoch=0,
        bootstrap_servers="a1:9092",
        checkpoint=str(tmp_path / "ckpt"),
        sink_root=str(tmp_path / "sink"),
        bookkeeping_group="bk-orders",
        fencing_marker=str(tmp_path / "fence"),
        run_dir=str(tmp_path / "run"),
        topics=("orders",),
        kafka_options={"security.protocol": "PLAINTEXT"},
    )
    query = SimpleNamespace(
        id="query-1", runId="run-1", awaitTermination=lambda timeout: True, stop=lambda: None
    )
    # A gateway whose callback server runs already (pyspark's ensure_callback_server_started then returns).
    gateway = SimpleNamespace(_callback_server="running", _gateway_client=None)
    spark = SimpleNamespace(sparkContext=SimpleNamespace(_gateway=gateway, applicationId="local-1"))
    streams = fake_streams(calls)
    spark._jsparkSession = SimpleNamespace(streams=lambda: streams)
    spark.readStream = FluentStream(calls, query)
    FencingMarker(str(Path(settings.fencing_marker)), "orders").advance(None, 0, "A")
    job_run = JobRun(settings, spark)
    job_run.java = fake_java(calls)
    return job_run


def committed_batch(run: JobRun, batch_id: int, end: dict[str, dict[str, int]]) -> None:
    """The checkpoint files Spark writes for a committed batch."""
    for folder, text in (("offsets", "\n".join(["v1", METADATA, json.dumps(end)])), ("commits", "v1\n{}")):
        path = Path(run.settings.checkpoint) / folder / str(batch_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def progress_lines(run: JobRun) -> list[dict]:
    """The run's progress entries, in batch order."""
    folder = Path(run.settings.checkpoint) / "progress"
    return [json.loads((folder / name).read_text()) for name in sorted(os.listdir(folder), key=int)]


def test_a_batch_is_written_then_recorded_from_the_source_observation(run, calls, job_log):
    run.partitions = [TopicPartition("orders", 0), TopicPartition("orders", 1)]
    written = []
    run.guarded(lambda df, batch_id: written.append(batch_id), cache=False)("batch-df", 5)
    committed_batch(run, 5, {"orders": {"0": 12, "1": 30}})
    observed = {"records": 3, "o0": 11, "t0": 1700, "o1": None, "t1": None}
    run.record_batch(5, {SOURCE_METRICS: observed}, {"triggerExecution": 1500, "addBatch": 1200})
    assert written == [5] and run.last_batch == 5
    [line] = progress_lines(run)
    assert (line["batch_id"], line["records"], line["end_offsets"]) == (5, 3, {"orders": {"0": 12, "1": 30}})
    assert line["max_offset"] == {"orders": {"0": 11}} and line["max_timestamp_ms"] == {"orders": {"0": 1700}}
    assert calls == [
        ("create", {"bootstrap.servers": "a1:9092", "security.protocol": "PLAINTEXT"}),
        ("commit", "bk-orders", {("orders", 0): 12, ("orders", 1): 30}),
    ]
    line = next(message for message in job_log if message.startswith("batch 5: 3 records in"))
    assert "(write " in line and ", progress " in line and ", group commit " in line


def test_a_replayed_batch_keeps_the_statistics_its_writer_returns(run):
    stats = {"records": 2, "max_timestamp_ms": {"orders": {"0": 9}}, "max_offset": {"orders": {"0": 11}}}
    run.guarded(lambda df, batch_id: stats, cache=False)(None, 4)
    committed_batch(run, 4, {"orders": {"0": 12}})
    run.record_batch(4, {SOURCE_METRICS: {"records": 0}})
    [line] = progress_lines(run)
    assert (line["records"], line["max_offset"]) == (2, {"orders": {"0": 11}})


def test_a_batch_whose_writer_returns_its_statistics_is_recorded_from_them_and_names_missing_ids(
    run, job_log
):
    run.source_observed = False  # read_kafka(observe=False): the packaged job's sink reads its footers
    stats = {
        "records": 5,
        "without_id": 2,
        "max_timestamp_ms": {"orders": {"0": 9}},
        "max_offset": {"orders": {"0": 4}},
    }
    run.guarded(lambda df, batch_id: stats, cache=False)(None, 0)
    committed_batch(run, 0, {"orders": {"0": 5}})
    run.record_batch(0, {})
    [line] = progress_lines(run)
    assert (line["records"], line["without_id"], line["max_offset"]) == (5, 2, {"orders": {"0": 4}})
    assert "2 records of batch 0 have no record id (field 'id'); they cannot be deduplicated" in job_log


def test_an_unobserved_source_refuses_a_batch_that_comes_back_without_statistics(run):
    run.source_observed = False
    with pytest.raises(ConfigError, match=r"batch 3: the batch function returned None instead of the batch"):
        run.guarded(lambda df, batch_id: None, cache=False)("batch-df", 3)
    assert run.written_stats == {} and run.last_batch is None


def test_a_batch_is_recorded_once_and_only_when_spark_committed_it(run, calls):
    committed_batch(run, 0, {"orders": {"0": 2}})
    run.record_batch(1, {})  # planned, not committed
    run.record_batch(0, {})
    run.record_batch(0, {})  # Spark may report a batch twice
    assert [line["batch_id"] for line in progress_lines(run)] == [0]
    assert [call[0] for call in calls] == ["create", "commit"]


def test_catch_up_records_what_the_listener_left(run):
    for batch_id in (0, 1, 2):
        committed_batch(run, batch_id, {"orders": {"0": batch_id + 1}})
    run.record_batch(0, {SOURCE_METRICS: {"records": 1}})
    run.catch_up()
    assert [(line["batch_id"], line["records"]) for line in progress_lines(run)] == [
        (0, 1),
        (1, None),
        (2, None),
    ]


def test_records_carry_the_runs_marks_and_count_forward(run):
    """Each record holds the newest mark per partition over the run and the records so far, so that a reader
    needs the newest record only; a run that resumes its checkpoint carries on from it."""
    run.partitions = [TopicPartition("orders", 0), TopicPartition("orders", 1)]
    committed_batch(run, 0, {"orders": {"0": 5, "1": 3}})
    run.record_batch(0, {SOURCE_METRICS: {"records": 7, "o0": 4, "t0": 100, "o1": 2, "t1": 90}})
    committed_batch(run, 1, {"orders": {"0": 9, "1": 3}})
    run.record_batch(1, {SOURCE_METRICS: {"records": 4, "o0": 8, "t0": 130, "o1": None, "t1": None}})
    last = progress_lines(run)[-1]
    assert (last["records"], last["records_total"]) == (4, 11)
    assert last["max_offset"] == {"orders": {"0": 8, "1": 2}}
    assert last["max_timestamp_ms"] == {"orders": {"0": 130, "1": 90}}
    resumed = JobRun(run.settings, run.spark)
    resumed.java, resumed.partitions = run.java, run.partitions
    committed_batch(resumed, 2, {"orders": {"0": 9, "1": 6}})
    resumed.record_batch(2, {SOURCE_METRICS: {"records": 3, "o0": None, "t0": None, "o1": 5, "t1": 150}})
    last = progress_lines(run)[-1]
    assert last["records_total"] == 14
    assert last["max_offset"] == {"orders": {"0": 8, "1": 5}}


def test_only_the_newest_records_are_kept(run, monkeypatch):
    from airflow_kafka_failover.jobs import job_run

    monkeypatch.setattr(job_run, "KEEP_RECORDS", 3)
    for batch_id in range(8):
        committed_batch(run, batch_id, {"orders": {"0": batch_id + 1}})
        run.record_batch(batch_id, {SOURCE_METRICS: {"records": 1}})
    assert [line["batch_id"] for line in progress_lines(run)] == [0, 3, 4, 5, 6, 7]
    assert progress_lines(run)[-1]["records_total"] == 8


def test_a_fenced_run_writes_nothing(run):
    FencingMarker(str(Path(run.settings.fencing_marker)), "orders").advance(None, 1, "B")
    written = []
    with pytest.raises(RunStopping, match="epoch is now 1"):
        run.guarded(lambda df, batch_id: written.append(batch_id), cache=False)("batch-df", 0)
    assert written == [] and run.stop_state == "fenced"


def test_run_opens_the_admin_client_and_the_listener_before_the_query_and_closes_them_after(run, calls):
    assert run.run(lambda: run.spark.readStream.start()) == 0
    assert [call[0] for call in calls] == ["create", "listen", "start", "unlisten", "close"]
    assert [call[1] for call in calls if call[0] in ("listen", "unlisten")] == ["wrapped", "wrapped"]
    status = json.loads((Path(run.settings.run_dir) / "status.json").read_text())
    assert status["state"] == "stopped"


def progress_event(progress: dict) -> SimpleNamespace:
    """A ``QueryProgressEvent`` as the JVM hands it to the listener: its progress gives Spark's JSON."""
    text = json.dumps(progress)
    return SimpleNamespace(progress=lambda: SimpleNamespace(json=lambda: text))


def test_the_listener_records_a_batch_from_the_json_of_its_progress_event(run):
    listener = run.listener()
    run.query_id, run.partitions = "query-1", [TopicPartition("orders", 0)]
    committed_batch(run, 2, {"orders": {"0": 7}})
    progress = {
        "id": "query-1",
        "runId": "run-1",
        "batchId": 2,
        "durationMs": {"addBatch": 120, "triggerExecution": 150},
        "observedMetrics": {SOURCE_METRICS: {"records": 3, "o0": 6, "t0": 1_700_000_000_000}},
        "sources": [{"description": "KafkaV2[Subscribe[orders]]", "numInputRows": 3}],
    }
    listener.onQueryProgress(progress_event({**progress, "id": "another-query", "batchId": 2}))
    assert run.recorded_batch == -1  # another query's event: not this run's batch
    listener.onQueryProgress(progress_event(progress))
    assert run.recorded_batch == 2
    (line,) = progress_lines(run)
    assert (line["batch_id"], line["records"], line["max_offset"]) == (2, 3, {"orders": {"0": 6}})


def test_an_unreadable_progress_event_is_logged_and_the_listener_stays(run, job_log, caplog):
    listener = run.listener()
    broken = SimpleNamespace(progress=lambda: SimpleNamespace(json=lambda: "not json"))
    listener.onQueryProgress(broken)  # raises nothing: Spark would drop a listener that raised
    listener.onQueryProgress(progress_event({"id": "query-1", "batchId": None}))
    assert run.recorded_batch == -1
    assert any("could not read a query progress event" in m for m in job_log)
    assert any("could not record batch None" in m for m in job_log)


@pytest.fixture
def bench():
    """benchmarks/bench_job.py, which parses the job's log lines."""
    spec = importlib.util.spec_from_file_location("bench_job_under_test", BENCH_JOB)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def test_the_batch_line_is_what_the_benchmark_parses(run, job_log, bench):
    run.guarded(lambda df, batch_id: None, cache=False)("batch-df", 3)
    committed_batch(run, 3, {"orders": {"0": 7}})
    run.record_batch(3, {SOURCE_METRICS: {"records": 2}}, {"triggerExecution": 900})
    text = "\n".join(f"[akf-job] {message}" for message in job_log)
    match = bench.JOB_BATCH_LINE.search(text)
    assert match is not None and match[1] == "3" and match[2] == "2"
    assert float(match[4]) <= float(match[3])
    assert 0 <= float(match["fence"]) < 5  # the stop and fence check before the batch


def test_the_checks_between_batches_are_timed_and_counted_in_the_runs_last_lines(run, job_log, bench):
    answers = iter([False, False, True])  # two polls find the query running, then it ends
    run.spark.readStream._query.awaitTermination = lambda timeout: next(answers)
    checked = []
    why_stop = run.why_stop
    run.why_stop = lambda: checked.append(1) or why_stop()
    assert run.run(lambda: run.spark.readStream.start()) == 0
    assert len(checked) == 2
    line = next(m for m in job_log if m.startswith("stop and fence checks between batches: "))
    match = bench.BETWEEN_CHECKS_LINE.search(f"[akf-job] {line}")
    assert match is not None and match["count"] == "2", line
    assert 0 <= float(match["median"]) <= float(match["max"]) < 5


def test_the_state_of_a_progress_event_sums_its_operators():
    operators = [
        {"operatorName": "dedupeWithinWatermark", "numRowsTotal": 30, "memoryUsedBytes": 1000},
        {"operatorName": "stateStoreSave", "numRowsTotal": 12, "memoryUsedBytes": 500},
    ]
    assert state_of(operators) == {"operators": 2, "rows": 42, "memory_bytes": 1500}
    assert state_of([]) is None and state_of(None) is None
    assert state_of([{"numRowsTotal": None}]) == {"operators": 1, "rows": 0, "memory_bytes": 0}


def test_a_stateful_batch_records_its_state_and_a_stateless_one_none(run):
    run.partitions = [TopicPartition("orders", 0)]
    committed_batch(run, 0, {"orders": {"0": 5}})
    run.record_batch(0, {SOURCE_METRICS: {"records": 5}})
    committed_batch(run, 1, {"orders": {"0": 9}})
    run.on_progress(
        {
            "id": None,
            "batchId": 1,
            "observedMetrics": {SOURCE_METRICS: {"records": 4}},
            "stateOperators": [{"numRowsTotal": 7, "memoryUsedBytes": 300}],
        }
    )
    first, second = progress_lines(run)
    assert "state" not in first
    assert second["state"] == {"operators": 1, "rows": 7, "memory_bytes": 300}

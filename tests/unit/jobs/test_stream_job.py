"""The job's batch bookkeeping without Spark: a replayed batch, its log line, and the one Admin client.

Spark and the JVM are stood in for by small fakes; the write itself (a real Spark job) is covered by the
integration tests that run the job under spark-submit.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_kafka_failover.jobs.settings import JobSettings
from airflow_kafka_failover.jobs.sink import batch_dir
from airflow_kafka_failover.jobs.stream_job import StepTimes, StreamRun
from tests.unit.jobs.test_sink import row, write_batch

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


def fake_jvm(calls: list) -> SimpleNamespace:
    admin = SimpleNamespace(Admin=SimpleNamespace(create=lambda props: FakeAdmin(calls, props)))
    consumer = SimpleNamespace(OffsetAndMetadata=lambda offset: offset)
    common = SimpleNamespace(TopicPartition=lambda topic, partition: (topic, partition))
    concurrent = SimpleNamespace(TimeUnit=SimpleNamespace(SECONDS="s"))
    util = SimpleNamespace(Properties=PutDict, HashMap=PutDict, concurrent=concurrent)
    return SimpleNamespace(
        java=SimpleNamespace(util=util),
        org=SimpleNamespace(
            apache=SimpleNamespace(
                kafka=SimpleNamespace(clients=SimpleNamespace(admin=admin, consumer=consumer), common=common)
            )
        ),
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
def run(tmp_path, calls) -> StreamRun:
    settings = JobSettings(
        pair="orders",
        cluster="A",
        epoch=0,
        bootstrap_servers="a1:9092",
        checkpoint=str(tmp_path / "ckpt"),
        sink_root=str(tmp_path / "sink"),
        bookkeeping_group="bk-orders",
        fencing_marker=str(tmp_path / "fence.json"),
        run_dir=str(tmp_path / "run"),
        topics=("orders",),
        kafka_options={"security.protocol": "PLAINTEXT"},
    )
    query = SimpleNamespace(
        id="query-1", runId="run-1", awaitTermination=lambda timeout: True, stop=lambda: None
    )
    spark = SimpleNamespace(sparkContext=SimpleNamespace(_jvm=fake_jvm(calls), applicationId="local-1"))
    spark.readStream = FluentStream(calls, query)
    return StreamRun(settings, spark)


def replayed_batch(run: StreamRun, batch_id: int, end: dict[str, dict[str, int]]) -> None:
    """A batch whose output is already in place, as after a crash between the sink and Spark's commit."""
    write_batch(
        Path(run.settings.sink_root),
        run.settings.epoch,
        batch_id,
        [row("r-1", 10, partition=0), row("r-2", 11, partition=0)],
    )
    offsets = Path(run.settings.checkpoint) / "offsets" / str(batch_id)
    offsets.parent.mkdir(parents=True, exist_ok=True)
    offsets.write_text("\n".join(["v1", METADATA, json.dumps(end)]))


def test_step_times_laps_in_order():
    steps = StepTimes()
    steps.lap("write")
    steps.lap("stats")
    assert [name for name, _ in steps.steps] == ["write", "stats"]
    assert all(seconds >= 0 for _, seconds in steps.steps)
    assert steps.total() >= sum(seconds for _, seconds in steps.steps)
    assert str(steps).startswith("write 0.00 s, stats 0.00 s")


def test_replayed_batch_writes_nothing_and_still_records_progress_and_commits(run, calls, job_log):
    replayed_batch(run, 5, {"orders": {"0": 12}})
    before = sorted(p.name for p in batch_dir(run.settings.sink_root, 0, 5).iterdir())
    run.process_batch(None, 5)  # no DataFrame: a replayed batch must not touch it
    assert sorted(p.name for p in batch_dir(run.settings.sink_root, 0, 5).iterdir()) == before
    lines = (Path(run.settings.checkpoint) / "progress.jsonl").read_text().splitlines()
    progress = [json.loads(line) for line in lines]
    assert [(p["batch_id"], p["records"], p["end_offsets"]) for p in progress] == [
        (5, 2, {"orders": {"0": 12}})
    ]
    assert calls == [
        ("create", {"bootstrap.servers": "a1:9092", "security.protocol": "PLAINTEXT"}),
        ("commit", "bk-orders", {("orders", 0): 12}),
    ]
    assert run.last_batch == 5
    line = next(message for message in job_log if message.startswith("batch 5: 2 records in"))
    assert "(write " in line and ", stats " in line and ", progress " in line and ", group commit " in line


def test_one_admin_client_for_every_batch(run, calls):
    replayed_batch(run, 0, {"orders": {"0": 2}})
    replayed_batch(run, 1, {"orders": {"0": 4}})
    run.process_batch(None, 0)
    run.process_batch(None, 1)
    assert [call[0] for call in calls] == ["create", "commit", "commit"]


def test_run_opens_the_admin_client_before_the_query_and_closes_it_after(run, calls):
    assert run.run() == 0
    assert [call[0] for call in calls] == ["create", "start", "close"]
    status = json.loads((Path(run.settings.run_dir) / "status.json").read_text())
    assert status["state"] == "stopped"


def test_the_batch_line_is_what_the_benchmark_parses(run, job_log):
    spec = importlib.util.spec_from_file_location("bench_job_under_test", BENCH_JOB)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.modules.pop(spec.name, None)
    replayed_batch(run, 3, {"orders": {"0": 7}})
    run.process_batch(None, 3)
    text = "\n".join(f"[akf-job] {message}" for message in job_log)
    match = bench.JOB_BATCH_LINE.search(text)
    assert match is not None and match[1] == "3" and match[2] == "2"
    assert float(match[4]) <= float(match[3])

"""The real PySpark job under real spark-submit (local mode) against the sandbox's clusters and MM2.

A job reads A, is stopped gracefully, and a new run reads B from a translated plan with a new checkpoint:
the deduplicated output must be exactly the produced ids. Fencing, kill -9, and a replayed batch are
checked on the same machinery.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from akf_devtools.demo.story import stop_warm_standbys
from akf_devtools.sandbox.kafka_io import create_topic, read_all

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import job_alive, job_log_tail
from airflow_kafka_failover.domain.config import parse_pair
from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.hooks.streaming_job import JOB_APPLICATION, StreamingJobHook
from airflow_kafka_failover.io.planner import build_plan, load_position
from airflow_kafka_failover.jobs.sink import batch_dirs, parquet_files, read_sink
from airflow_kafka_failover.run_format.fencing import FencingMarker
from airflow_kafka_failover.run_format.layout import read_status
from airflow_kafka_failover.run_format.progress import read_progress
from airflow_kafka_failover.run_format.spark_checkpoint import in_flight_offsets, last_committed_offsets
from airflow_kafka_failover.run_format.standby import StandbySlot, standby_dir
from airflow_kafka_failover.sensors.job_progress import StreamingJobProgressSensor
from tests.integration import translation_support as data
from tests.integration.conftest import register_connections
from tests.integration.job_support import (
    CRASH_AFTER_SINK,
    JobWorld,
    crash_after_sink,
    progress_records,
    register_spark_connection,
)
from tests.integration.jobs.crash_after_sink import CRASHED
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.spark

PARTITIONS = 2


@pytest.fixture
def world(sandbox, tmp_path, request):
    conns = register_connections(sandbox, "job")
    spark = register_spark_connection("spark_job_local", "local[2]")
    pair = f"p{abs(hash(request.node.name)) % 10**6}"
    job_world = JobWorld(tmp_path, pair, conns, spark, group=f"bk-{pair}")
    yield job_world
    job_world.stop_all()


def progress_sensor(handle, **kwargs) -> StreamingJobProgressSensor:
    return StreamingJobProgressSensor(task_id="progress", handle=handle, **kwargs)


def wait_progress(handle, timeout: float = 120, **kwargs) -> None:
    sensor = progress_sensor(handle, **kwargs)
    wait_for(lambda: sensor.poke({}), timeout, f"job progress {kwargs}", interval=1.0)


def dictionary_encoded(batch: str) -> dict[str, bool]:
    """Whether the record id and topic columns of a batch's first file have a dictionary page."""
    import pyarrow.parquet as pq

    group = pq.ParquetFile(parquet_files(batch)[0]).metadata.row_group(0)
    encodings = {group.column(i).path_in_schema: group.column(i).encodings for i in range(group.num_columns)}
    return {name: any("DICTIONARY" in e for e in encodings[name]) for name in ("record_id", "topic")}


def test_job_moves_from_a_to_b_without_loss(world, sandbox, unique_topic):
    a, b = sandbox.bootstrap("A"), sandbox.bootstrap("B")
    topic = unique_topic("orders")
    create_topic(a, topic, PARTITIONS)
    create_topic(b, topic, PARTITIONS)  # the topic also exists on B, as producers write to the active side
    first = [f"r-{n}" for n in range(300)]
    data.produce_ids(a, topic, first, PARTITIONS)

    # 1. On A from an explicit start map.
    handle = world.submit("A", 0, [topic], {topic: {"0": -2, "1": -2}})
    wait_progress(handle, min_records=300)
    progress = read_progress(handle["checkpoint"])
    assert sum(progress.offsets.values()) == 300
    lines = progress_records(handle["checkpoint"])
    assert lines and all(line["epoch"] == 0 for line in lines)
    assert lines[-1]["end_offsets"] == {topic: {str(tp.partition): o for tp, o in progress.offsets.items()}}
    wait_group_commit(
        world, world.group, progress.offsets, lambda c: {tp: o for tp, o in c.items() if tp.topic == topic}
    )

    def mm2_checkpointed() -> bool:
        records = read_all(b, "A.checkpoints.internal", timeout=10)
        found = [
            Checkpoint.decode(r.key, r.value) for r in records if r.key and world.group.encode() in r.key
        ]
        return any(c.topic == f"A.{topic}" and c.group == world.group for c in found)

    wait_for(mm2_checkpointed, 60, "MM2 checkpoints of the bookkeeping group on B", interval=2.0)

    # 2. Graceful stop; the fence moves to epoch 1 on B; records keep arriving on A (replicated to B).
    assert StreamingJobHook(world.spark_conn).stop(handle, timeout=60) == "stopped"
    assert JobHandle.from_dict(handle).status()["state"] == "stopped"
    second = [f"r-{n}" for n in range(300, 500)]
    data.produce_ids(a, topic, second, PARTITIONS)
    data.wait_replicated(b, f"A.{topic}", set(first + second))

    pair = parse_pair(
        world.pair,
        {
            "clusters": {
                "A": {"connection": world.kafka_conns["A"]},
                "B": {"connection": world.kafka_conns["B"]},
            },
            "primary": "A",
            "topics": [topic],
            "bookkeeping_group": world.group,
        },
    )
    hooks = {name: KafkaClusterHook(conn) for name, conn in world.kafka_conns.items()}
    plan = build_plan(pair, "A", "B", load_position(checkpoint=handle["checkpoint"]), hooks)
    FencingMarker(world.fence, world.pair).advance(0, 1, "B")

    # 3. On B with a new checkpoint from the translated plan.
    on_b = world.submit("B", 1, pair.topics_on("B"), plan.to_spark_starting_offsets())
    assert on_b["checkpoint"] != handle["checkpoint"]
    wanted = set(first + second)
    wait_for(lambda: read_sink(world.sink).record_ids >= wanted, 120, "every id in the sink", interval=2.0)
    contents = read_sink(world.sink)
    assert contents.record_ids == wanted
    assert contents.without_id == 0
    assert dictionary_encoded(batch_dirs(world.sink)[0][2]) == {"record_id": False, "topic": True}
    bound = plan.max_redelivery
    assert bound is None or contents.duplicates <= bound, (contents.duplicates, bound)
    assert set(contents.rows_by_cluster) == {"A", "B"}

    # 4. Fencing: epoch 2 stops the run on B within about one trigger interval (1 s) plus a poll.
    FencingMarker(world.fence, world.pair).advance(1, 2, "A")
    fenced_at = time.monotonic()
    wait_for(lambda: not job_alive(JobHandle.from_dict(on_b)), 30, "the fenced job to exit", interval=0.2)
    took = time.monotonic() - fenced_at
    assert JobHandle.from_dict(on_b).status()["state"] == "fenced"
    print(f"fenced run exited {took:.1f} s after the marker moved")


def test_killed_job_fails_the_progress_sensor(world, sandbox, unique_topic):
    from airflow_kafka_failover.version_compat import AirflowFailException

    a = sandbox.bootstrap("A")
    topic = unique_topic("killed")
    create_topic(a, topic, 1)
    handle = world.submit("A", 0, [topic], "earliest")
    pid = JobHandle.from_dict(handle).process.pid()
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: not job_alive(JobHandle.from_dict(handle)), 15, "the killed job to be gone")
    with pytest.raises(AirflowFailException, match="is not running") as failure:
        progress_sensor(handle, min_records=1).poke({})
    assert "log tail" in str(failure.value)
    assert StreamingJobHook(world.spark_conn).stop(handle) == "not-running"


def test_replayed_batch_writes_nothing_new(world, sandbox, unique_topic, monkeypatch):
    a = sandbox.bootstrap("A")
    topic = unique_topic("replay")
    create_topic(a, topic, PARTITIONS)
    ids = [f"x-{n}" for n in range(120)]
    data.produce_ids(a, topic, ids, PARTITIONS)
    for name, value in crash_after_sink(0).items():  # the packaged job, its sink dying after batch 0
        monkeypatch.setenv(name, value)
    handle = world.submit("A", 0, [topic], "earliest", application=str(CRASH_AFTER_SINK))
    wait_for(lambda: not job_alive(JobHandle.from_dict(handle)), 120, "the job to die after writing batch 0")
    assert CRASHED.format(batch=0) in job_log_tail(JobHandle.from_dict(handle), 400)
    assert read_sink(world.sink).rows == 120
    assert read_progress(handle["checkpoint"]).batch_id is None  # batch 0 was never committed

    for name in crash_after_sink(0):
        monkeypatch.delenv(name)
    again = world.submit("A", 0, [topic], "earliest")  # same epoch: Spark resumes the checkpoint
    wait_progress(again, min_records=120)
    contents = read_sink(world.sink)
    assert (contents.rows, contents.duplicates, len(contents.records)) == (120, 0, 120)
    assert "replayed batch" in job_log_tail(JobHandle.from_dict(again), 400)


def wait_group_commit(world, group: str, expected, view=lambda committed: committed, timeout: float = 30.0):
    """Wait until the group's committed offsets on A, as ``view`` shows them, are ``expected``.

    The job commits a batch to the group just after it writes the batch's progress entry (``job_run``), so
    a test that has seen the progress entry waits for the commit instead of reading it at once."""
    hook = KafkaClusterHook(world.kafka_conns["A"])
    seen: list = [None]

    def arrived() -> bool:
        seen[0] = view(hook.committed_offsets(group))
        return seen[0] == expected

    try:
        wait_for(arrived, timeout, f"the commit of group {group!r} on A")
    except AssertionError as timeout_error:
        raise AssertionError(f"{timeout_error}: committed {seen[0]!r}, expected {expected!r}") from None


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "jobs"


def test_user_job_on_the_api_replays_a_crashed_batch_into_delta_once(
    world, sandbox, unique_topic, monkeypatch
):
    """The Delta MERGE example, killed after writing batch 0 and before Spark's commit, then run again: the
    table holds every id once; the progress entries and the group commits are the API's."""
    from akf_devtools.demo.user_sinks import read_delta_orders

    a = sandbox.bootstrap("A")
    topic = unique_topic("delta")
    create_topic(a, topic, PARTITIONS)
    ids = [f"d-{n}" for n in range(150)]
    data.produce_ids(a, topic, ids, PARTITIONS)
    table = world.root / "orders_delta"
    example = EXAMPLES / "orders_to_delta" / "job.py"
    job = {"application": str(example), "sink_root": str(table)}
    for name, value in crash_after_sink(0, job=example).items():  # the example, its sink dying after batch 0
        monkeypatch.setenv(name, value)
    handle = world.submit("A", 0, [topic], "earliest", **{**job, "application": str(CRASH_AFTER_SINK)})
    wait_for(lambda: not job_alive(JobHandle.from_dict(handle)), 180, "the job to die after writing batch 0")
    assert CRASHED.format(batch=0) in job_log_tail(JobHandle.from_dict(handle), 400)
    assert read_delta_orders(table).rows == 150
    assert read_progress(handle["checkpoint"]).batch_id is None  # batch 0 was never committed

    for name in crash_after_sink(0, job=example):
        monkeypatch.delenv(name)
    again = world.submit("A", 0, [topic], "earliest", **job)  # Spark replays batch 0 from the checkpoint
    wait_progress(again, timeout=180, min_records=150)
    contents = read_delta_orders(table)
    assert (contents.rows, contents.duplicates, contents.record_ids) == (150, 0, set(ids))
    [line] = progress_records(again["checkpoint"])
    assert line["records"] == 150 and set(line["max_offset"][topic]) == {"0", "1"}
    wait_group_commit(world, f"bk-{world.pair}", 150, lambda committed: sum(committed.values()))


STREAM_SINK_JOB = """
from pyspark.sql import functions as F
from airflow_kafka_failover.jobs.api import FailoverStream

with FailoverStream.from_args(delta=True) as stream:
    rows = stream.read_kafka().select(
        F.get_json_object(F.col("value").cast("string"), "$.id").alias("order_id"),
        F.lit(stream.cluster).alias("source_cluster"),
    )
    stream.write_stream(rows.writeStream.format("delta").option("path", stream.sink_root))
"""


def test_user_job_with_its_own_write_stream_sink_gets_progress_lines_and_group_commits(
    world, sandbox, unique_topic
):
    """A ``writeStream`` sink of the user's (Delta's streaming sink): the API sets the checkpoint and
    trigger, records each committed batch, and stops the query on a stop request."""
    from akf_devtools.demo.user_sinks import read_delta_orders

    a = sandbox.bootstrap("A")
    topic = unique_topic("wstream")
    create_topic(a, topic, PARTITIONS)
    ids = [f"w-{n}" for n in range(100)]
    data.produce_ids(a, topic, ids, PARTITIONS)
    application = world.root / "stream_sink_job.py"
    application.write_text(STREAM_SINK_JOB)
    table = world.root / "stream_delta"
    handle = world.submit("A", 0, [topic], "earliest", application=str(application), sink_root=str(table))
    wait_progress(handle, timeout=180, min_records=100)
    assert read_delta_orders(table).record_ids == set(ids)
    lines = progress_records(handle["checkpoint"])
    assert sum(line["records"] for line in lines) == 100 == lines[-1]["records_total"]
    assert {p for line in lines for p in line["max_timestamp_ms"].get(topic, {})} == {"0", "1"}
    wait_group_commit(world, f"bk-{world.pair}", 100, lambda committed: sum(committed.values()))
    assert StreamingJobHook(world.spark_conn).stop(handle, timeout=30) == "stopped"
    assert JobHandle.from_dict(handle).status()["state"] == "stopped"


def test_warm_standby_driver_refuses_what_it_must_and_becomes_the_run_handed_to_it(
    world, sandbox, unique_topic, request
):
    """A warm driver (the packaged job with ``--standby``) waits with Spark up; a second one for its slot
    refuses; handed an epoch the fence has left behind it refuses and writes ``refused``; the next warm
    driver is handed the run a submission starts, and reads every record."""
    a = sandbox.bootstrap("A")
    topic = unique_topic("warm")
    create_topic(a, topic, PARTITIONS)
    ids = [f"w-{n}" for n in range(200)]
    data.produce_ids(a, topic, ids, PARTITIONS)
    operator = world.submit_operator("A", 1, [topic], "earliest")
    job_request, hook = operator.request(), operator.hook
    slot = StandbySlot(standby_dir(str(world.root / "runs"), world.pair, "A"))
    request.addfinalizer(lambda: stop_warm_standbys(world.root / "runs"))  # even when a step fails

    def start_warm() -> int:
        pid = hook.start_standby(job_request.settings(), job_request.layout, job_request.application)
        assert pid is not None
        wait_for(slot.waiting, 180, "the warm driver to wait for a handoff", interval=0.5)
        return pid

    # 1. One warm driver per slot: the second exits with code 2 before its Spark starts.
    first = start_warm()
    second = subprocess.run(
        [sys.executable, str(JOB_APPLICATION), "--standby", str(slot.folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 2, second.stderr[-2000:]
    # The pid is the first driver's Python process (spark-submit's child), as its state file says.
    assert f"held by another warm driver (pid {slot.state()['pid']})" in second.stderr
    assert hook.start_standby(job_request.settings(), job_request.layout, job_request.application) is None

    # 2. The fence is at epoch 1; a handoff of epoch 0 is refused, and nothing is read.
    FencingMarker(world.fence, world.pair).advance(None, 1, "A")
    old = world.submit_operator("A", 0, [topic], "earliest").request()
    old_settings = old.settings().write(old.layout.settings_file)
    slot.hand_off(old_settings, 0)
    wait_for(lambda: not slot.held(), 60, "the warm driver handed epoch 0 to exit", interval=0.5)
    assert read_status(old.layout.run_dir)["state"] == "refused"
    assert "is at epoch 1" in read_status(old.layout.run_dir)["reason"]
    assert slot.state()["state"] == "refused"
    assert read_sink(world.sink).rows == 0

    # 3. The submission of epoch 1 goes to the next warm driver: it is the run now, and the slot is free.
    warm = start_warm()
    assert warm != first
    submitted = time.monotonic()
    handle = world.submit("A", 1, [topic], "earliest")
    print(f"submit to running through the warm driver: {time.monotonic() - submitted:.2f} s")
    assert JobHandle.from_dict(handle).process.pid() == warm  # its process record moved to the run's folder
    assert slot.state()["state"] == "taken" and not slot.held()
    wait_for(lambda: read_sink(world.sink).record_ids >= set(ids), 120, "every id in the sink", interval=1.0)
    assert read_sink(world.sink).record_ids == set(ids)
    tail = job_log_tail(JobHandle.from_dict(handle), 400)
    assert "warm standby" in tail and "rehearsed a start" in tail, tail
    assert JobHandle.from_dict(handle).status()["state"] == "running", tail
    assert StreamingJobHook(world.spark_conn).stop(handle, timeout=60) == "stopped"


def test_old_job_nobody_stops_commits_nothing_after_the_new_jobs_first_batch(world, sandbox, unique_topic):
    """Issue 30: a switch does not wait on the old job. When its stop never returns (a driver on a host that
    is gone, a process deaf to SIGTERM), the new job starts all the same. Here nothing stops the old job but
    the fence, while its source keeps answering and receiving records: it commits no batch of its epoch
    after the new job's first batch, it ends as ``fenced``, nothing is lost, and the duplicates stay within
    the plan's bound plus the batch it had in flight when the fence moved (what the switch's
    ``max_duplicates`` adds)."""
    a, b = sandbox.bootstrap("A"), sandbox.bootstrap("B")
    topic = unique_topic("unstopped")
    create_topic(a, topic, PARTITIONS)
    create_topic(b, topic, PARTITIONS)
    produced: list[str] = []
    done = threading.Event()

    def produce() -> None:  # about 200 records/s until the new job has committed its first batch
        while not done.is_set():
            chunk = [f"u-{len(produced) + n}" for n in range(40)]
            data.produce_ids(a, topic, chunk, PARTITIONS)
            produced.extend(chunk)
            time.sleep(0.2)

    producer = threading.Thread(target=produce, name="producer", daemon=True)
    producer.start()
    try:
        old = world.submit("A", 0, [topic], "earliest")
        wait_progress(old, min_records=400)
        pair = parse_pair(
            world.pair,
            {
                "clusters": {name: {"connection": conn} for name, conn in world.kafka_conns.items()},
                "primary": "A",
                "topics": [topic],
                "bookkeeping_group": world.group,
            },
        )
        marker = FencingMarker(world.fence, world.pair)
        fence = marker.read()
        assert fence is not None and fence.epoch == 0, fence
        marker.advance(0, 1, "B")
        fenced_at = time.time()
        position = load_position(checkpoint=old["checkpoint"])
        in_flight = in_flight_offsets(old["checkpoint"])
        hooks = {name: KafkaClusterHook(conn) for name, conn in world.kafka_conns.items()}
        plan = build_plan(pair, "A", "B", position, hooks)
        new = world.submit("B", 1, pair.topics_on("B"), plan.to_spark_starting_offsets())
        wait_for(lambda: progress_records(new["checkpoint"]), 120, "the new job's first batch", interval=0.5)
        first_new_batch = progress_records(new["checkpoint"])[0]["written_at"]
    finally:
        done.set()
        producer.join(30)
    wait_for(lambda: not job_alive(JobHandle.from_dict(old)), 60, "the old job to end on the fence")
    assert JobHandle.from_dict(old).status()["state"] == "fenced", job_log_tail(JobHandle.from_dict(old), 80)
    old_batches = progress_records(old["checkpoint"])
    assert old_batches and all(line["epoch"] == 0 for line in old_batches)
    # Only the batch that passed its fence check before the fence moved may commit after the plan read the
    # position: the next one reads the fence first.
    after_plan = [line["batch_id"] for line in old_batches if line["batch_id"] > position.batch_id]
    print(
        f"old job: last batch (id {old_batches[-1]['batch_id']}) written "
        f"{old_batches[-1]['written_at'] - fenced_at:+.2f} s after the fence moved; the plan read batch "
        f"{position.batch_id}, {in_flight} offsets in flight; committed after it: {after_plan}; the new "
        f"job's first batch {first_new_batch - fenced_at:.2f} s after the fence"
    )
    assert len(after_plan) <= 1 and (not after_plan or in_flight > 0), (after_plan, in_flight)
    assert all(line["written_at"] < first_new_batch for line in old_batches), (
        old_batches[-1],
        first_new_batch,
    )

    wanted = set(produced)
    data.wait_replicated(b, f"A.{topic}", wanted)
    wait_for(lambda: read_sink(world.sink).record_ids >= wanted, 120, "every id in the sink", interval=1.0)
    contents = read_sink(world.sink)
    assert contents.record_ids == wanted
    bound = None if plan.max_redelivery is None else plan.max_redelivery + in_flight
    print(
        f"{len(wanted)} ids, {contents.duplicates} duplicates, bound {bound} ({in_flight} of them in flight)"
    )
    assert bound is None or contents.duplicates <= bound, (
        contents.duplicates,
        plan.max_redelivery,
        in_flight,
    )


LIGHT_JOB = Path(__file__).resolve().parents[2] / "benchmarks" / "fleet_job.py"


def test_the_fleet_benchmarks_light_job_keeps_the_contract(world, sandbox, unique_topic):
    """``benchmarks/fleet_job.py`` (no Spark session) through spark-submit: progress entries, Spark's offset
    and commit files, group commits and the packaged sink layout; it stops on request, resumes its checkpoint
    without writing a record twice, and stops once fenced."""
    a = sandbox.bootstrap("A")
    topic = unique_topic("light")
    create_topic(a, topic, PARTITIONS)
    first = [f"l-{n}" for n in range(50)]
    data.produce_ids(a, topic, first, PARTITIONS)
    light = {"application": str(LIGHT_JOB)}
    handle = world.submit("A", 0, [topic], "earliest", **light)
    wait_progress(handle, min_records=50)
    assert read_sink(world.sink).record_ids == set(first)
    lines = progress_records(handle["checkpoint"])
    assert all(line["epoch"] == 0 and isinstance(line["written_at"], float) for line in lines)
    assert sum(line["records"] for line in lines) == 50 == lines[-1]["records_total"]
    committed = last_committed_offsets(handle["checkpoint"])  # Spark's files, as the planner reads them
    assert committed is not None and read_progress(handle["checkpoint"]).offsets == committed[1]
    wait_group_commit(world, world.group, 50, lambda committed: sum(committed.values()))
    assert StreamingJobHook(world.spark_conn).stop(handle, timeout=30) == "stopped"

    more = [f"l-{n}" for n in range(50, 80)]
    data.produce_ids(a, topic, more, PARTITIONS)
    again = world.submit("A", 0, [topic], "earliest", **light)  # the same run's checkpoint: it resumes
    wait_progress(again, min_records=80)
    contents = read_sink(world.sink)
    assert (contents.record_ids, contents.duplicates) == (set(first + more), 0)
    FencingMarker(str(world.fence), world.pair).advance(0, 1, "B")
    wait_for(lambda: not job_alive(JobHandle.from_dict(again)), 30, "the fenced light job to exit")
    assert JobHandle.from_dict(again).status()["state"] == "fenced"

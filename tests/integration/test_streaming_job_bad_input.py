"""Bad input to the submit operator fails the task quickly, names the problem, and starts nothing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from akf_devtools.sandbox.kafka_io import create_topic
from akf_devtools.sandbox.loopback import free_ports

from airflow_kafka_failover.run_format.fencing import FencingMarker
from airflow_kafka_failover.run_format.layout import OWNER_FILE, RunLayout
from airflow_kafka_failover.version_compat import AirflowFailException
from tests.integration.conftest import register_connections
from tests.integration.job_support import JobWorld, register_spark_connection


@pytest.fixture
def world(sandbox, tmp_path, monkeypatch):
    conn_ids = [f"badjob_{name.lower()}" for name in sandbox.cluster_names] + ["spark_badjob"]
    for conn_id in conn_ids:
        # Set through monkeypatch before the registry overwrites it, so that monkeypatch records the
        # original (or its absence: delenv would record nothing then) and restores it at teardown.
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", "")
    conns = register_connections(sandbox, "badjob")
    spark = register_spark_connection("spark_badjob", "local[2]")
    assert sorted([*conns.values(), spark]) == sorted(conn_ids), "the registry names connections otherwise"
    return JobWorld(tmp_path, "bad", conns, spark)


@pytest.fixture
def topic(sandbox, unique_topic):
    name = unique_topic("bad")
    create_topic(sandbox.bootstrap("A"), name, 2)
    return name


def refused(
    world: JobWorld, match: str, cluster: str = "A", epoch: int = 0, **kwargs
) -> AirflowFailException:
    """Run the submit operator, expect a quick AirflowFailException matching ``match``, nothing started."""
    kwargs.setdefault("topics", [kwargs.pop("topic", "missing")])
    kwargs.setdefault("starting_offsets", "earliest")
    fence_before = world.fence_text()
    operator = world.submit_operator(cluster, epoch, **kwargs)
    started = time.monotonic()
    with pytest.raises(AirflowFailException, match=match) as failure:
        operator.execute({})
    assert time.monotonic() - started < 30
    run_dir = Path(RunLayout(world.pair, cluster, epoch, "", str(world.root / "runs")).local_dir)
    assert not (run_dir / "pids").exists(), "a job process was started"
    assert world.fence_text() == fence_before
    return failure.value


def test_start_map_missing_partitions_is_refused_with_their_names(world, topic):
    error = refused(world, "misses partitions", topics=[topic], starting_offsets={topic: {"0": 5}})
    assert f"{topic}-1" in str(error)


def test_start_map_naming_partitions_that_do_not_exist(world, topic):
    refused(world, "does not have", topics=[topic], starting_offsets={topic: {"0": 1, "1": 1, "7": 1}})


def test_unknown_topic(world):
    refused(world, "do not exist", topics=["no-such-topic-anywhere"])


def test_unreachable_bootstrap_fails_fast(world, topic, monkeypatch):
    port = free_ports(1)[0]
    monkeypatch.setenv(
        "AIRFLOW_CONN_BADJOB_DEAD",
        json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": f"127.0.0.1:{port}"}}),
    )
    error = refused(
        world, "cannot reach", topics=[topic], kafka_conn_id="badjob_dead", check_timeout_seconds=3
    )
    assert f"127.0.0.1:{port}" in str(error)


def test_checkpoint_of_another_cluster_or_epoch_is_refused(world, topic):
    layout = RunLayout(world.pair, "A", 0, str(world.root / "checkpoints"), str(world.root / "runs"))
    checkpoint = Path(layout.checkpoint)
    checkpoint.mkdir(parents=True)
    (checkpoint / OWNER_FILE).write_text(json.dumps({"pair": world.pair, "cluster": "B", "epoch": 3}))
    error = refused(world, "belongs to", topics=[topic])
    assert "'cluster': 'B'" in str(error) and "'epoch': 3" in str(error)


def test_fence_at_another_epoch_is_refused(world, topic):
    FencingMarker(str(world.fence), world.pair).advance(None, 2, "B")
    refused(world, "epoch 2", topics=[topic], epoch=1)


def test_missing_application_file(world, topic):
    refused(world, "application file", topics=[topic], application=str(Path("/nonexistent/job.py")))


@pytest.mark.parametrize("starting", ["{not json", {"t": {"zero": 1}}, {"t": {"0": -7}}])
def test_malformed_start_maps(world, topic, starting):
    refused(world, "starting offset|not valid JSON", topics=[topic], starting_offsets=starting)


def test_bad_epoch(world, topic):
    refused(world, "epoch must be an integer", topics=[topic], epoch="one")


# Last in the file: the tests above ran in this process before it.
def test_no_connection_of_this_file_outlives_its_test():
    prefixes = ("AIRFLOW_CONN_BADJOB_", "AIRFLOW_CONN_SPARK_BADJOB")
    leaked = sorted(name for name in os.environ if name.startswith(prefixes))
    assert not leaked, f"connections left in os.environ by the tests above: {leaked}"


def user_job(world: JobWorld, text: str) -> str:
    path = world.root / "user_job.py"
    path.write_text(text)
    return str(path)


def test_a_job_that_never_reports_running_fails_the_submit_naming_status_json(world, topic):
    from airflow_kafka_failover.core.process_group import ManagedProcess
    from airflow_kafka_failover.hooks.streaming_job import JobStartError
    from airflow_kafka_failover.run_format.layout import PROCESS_NAME

    FencingMarker(str(world.fence), world.pair).advance(None, 0, "A")
    fence_before = world.fence_text()
    silent = user_job(world, "import time\ntime.sleep(600)  # a job that ignores the contract\n")
    operator = world.submit_operator(
        "A", 0, [topic], "earliest", application=silent, startup_timeout_seconds=10
    )
    with pytest.raises(JobStartError, match=r"did not report running in .*status\.json within 10 s"):
        operator.execute({})
    run_dir = Path(RunLayout(world.pair, "A", 0, "", str(world.root / "runs")).local_dir)
    assert not ManagedProcess(PROCESS_NAME, run_dir).is_running(), "the silent job was left running"
    assert world.fence_text() == fence_before


def test_a_job_that_raises_at_import_fails_the_submit_with_its_error(world, topic):
    from airflow_kafka_failover.hooks.streaming_job import JobStartError

    FencingMarker(str(world.fence), world.pair).advance(None, 0, "A")
    broken = user_job(world, "import orders_lib_that_is_not_installed\n")
    operator = world.submit_operator("A", 0, [topic], "earliest", application=broken)
    started = time.monotonic()
    with pytest.raises(JobStartError, match="did not start") as failure:
        operator.execute({})
    assert "orders_lib_that_is_not_installed" in str(failure.value)  # the log tail shows the error
    assert time.monotonic() - started < 120

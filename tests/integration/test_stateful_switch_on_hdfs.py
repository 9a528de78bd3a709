"""The stateful story with the pair's whole state on HDFS: the carry copies the checkpoint on HDFS.

The job is ``examples/jobs/order_counts_to_delta`` (``test_stateful_switch.py`` says what it does). The
pair's sink (the Delta table), checkpoints, run folders and fence are on HDFS (the MiniDFSCluster of
``akf_devtools.sandbox.hdfs``), reached by the Airflow tasks through WebHDFS and by the driver through
Spark's HDFS client, with no local folder shared by the two sides (``state_on_store.py``). The chain: start
on A; crash A -> failover, the state of both operators carried from HDFS to HDFS; the table, read back from
HDFS, equals the counts of the acknowledged records. The failback and the policies are left to the
local-disk story.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable

import pytest
from akf_devtools.sandbox.airflow_env import register_webhdfs_connection

from airflow_kafka_failover.core.storage.store import forget_all
from tests.integration.state_on_store import (
    assert_nothing_of_the_pair_on_local_disk,
    running_hdfs,
    story_fields,
)
from tests.integration.switch_story import new_pair_story, run_chain
from tests.integration.test_stateful_switch import (
    EXAMPLE_JOB,
    step_crash_fails_over_with_the_state,
    step_start,
    step_the_table_equals_the_no_switch_counts,
)

pytestmark = pytest.mark.spark

HDFS_CONNECTION = "akf_stateful_hdfs"


@pytest.fixture(scope="module")
def hdfs():
    with running_hdfs("stateful-hdfs") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def story(own_sandbox, airflow_home, tmp_path_factory, hdfs):
    register_webhdfs_connection(HDFS_CONNECTION, hdfs, user=getpass.getuser())
    root = tmp_path_factory.mktemp("stateful-hdfs")
    fields = story_fields(root, hdfs.path("pair-state"), {"hdfs": HDFS_CONNECTION}, hdfs.spark_properties())
    fields["job_options"] = {**fields["job_options"], "application": str(EXAMPLE_JOB)}
    forget_all()
    with new_pair_story(own_sandbox, airflow_home, root, "sh", **fields) as story:
        story.use_storage()
        yield story
    print("figures:", story.figures)


def step_the_state_was_carried_on_hdfs(story) -> None:
    record = story.record()
    state = record["history"][-1]["state"]
    assert record["checkpoint"].startswith(story.hdfs_uri), record["checkpoint"]
    assert state["checkpoint"].startswith(story.hdfs_uri), state
    print(f"carried on HDFS: {state['files']} files, {state['bytes']} bytes in {state['seconds']} s")
    assert_nothing_of_the_pair_on_local_disk(story.root)


STEPS: list[Callable[..., None]] = [
    step_start,
    step_crash_fails_over_with_the_state,
    step_the_state_was_carried_on_hdfs,
    step_the_table_equals_the_no_switch_counts,
]


@pytest.fixture(scope="module")
def steps_run(story, hdfs) -> dict[str, str]:
    story.hdfs_uri = hdfs.uri
    return {}


@pytest.mark.timeout(1200)
def test_crash_fails_over_with_the_state_on_hdfs(story, steps_run):
    run_chain(STEPS, story, steps_run, step_the_state_was_carried_on_hdfs)


@pytest.mark.timeout(1800)
def test_the_table_on_hdfs_equals_the_no_switch_counts(story, steps_run):
    run_chain(STEPS, story, steps_run, step_the_table_equals_the_no_switch_counts)

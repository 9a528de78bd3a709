"""A pair whose whole state lives on a store, with no local folder shared by the Airflow side and the driver.

The Airflow side (every DAG run process and the tasks in it) works in ``<root>/airflow-side``: its working
directory, ``TMPDIR``, ``HOME`` and the job's ``local_root`` (spark-submit's process file, its output, the
owner-only store settings). The driver works in ``<root>/driver-side``: Spark's scratch space
(``spark.local.dir``), the JVM's temporary folder and Spark SQL's warehouse. The sink, the checkpoints, the
run folders and the fencing folder are on the store. :func:`assert_nothing_of_the_pair_on_local_disk` checks
afterwards that neither side holds a file of the pair's state.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from akf_devtools.demo.story import LOCAL_SPARK_CONF
from akf_devtools.sandbox.hdfs import HdfsCluster
from akf_devtools.sandbox.local_fs import CLASS_PATH, with_class_path

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.core.exceptions import FailoverError
from airflow_kafka_failover.core.storage.store import replace_json
from airflow_kafka_failover.run_format.layout import read_status
from tests.integration.conftest import RUN_ROOT
from tests.integration.switch_story import Story, assert_one_job

STATE_FILE_NAMES = ("settings.json", "status.json", "_owner.json", "stop-request", "switch-lease.json")
"""Files of the pair's state that must only exist on the store."""
STATE_FOLDER_NAMES = ("offsets", "commits", "progress", "sources")
LOCAL_RUN_FILES = {"job.log", "job.json", "store.properties", "submit.lock"}
"""What the Airflow side may keep of a run in its local root."""


@contextmanager
def running_hdfs(name: str) -> Iterator[HdfsCluster]:
    """A MiniDFSCluster of its own under the run root (``<name>-<random>``), stopped on the way out."""
    cluster = HdfsCluster(RUN_ROOT / f"{name}-{uuid.uuid4().hex[:6]}")
    try:
        print(f"HDFS up in {cluster.start():.1f} s at {cluster.uri}")
        yield cluster
    finally:
        cluster.stop()


def sides(root: Path) -> tuple[Path, Path]:
    """The Airflow side's and the driver's own folders under ``root`` (created)."""
    airflow_side, driver_side = root / "airflow-side", root / "driver-side"
    for folder in (airflow_side / "tmp", airflow_side / "home", driver_side / "tmp", driver_side / "scratch"):
        folder.mkdir(parents=True, exist_ok=True)
    return airflow_side, driver_side


def story_fields(
    root: Path, state_root: str, connections: dict[str, str], spark_conf: dict[str, str]
) -> dict[str, Any]:
    """The story's fields for a pair whose state is under ``state_root`` (see the module's docstring).

    :param connections: ``job.storage_connections``.
    :param spark_conf: the store's Spark settings that are no secret (timeouts, class path).
    """
    airflow_side, driver_side = sides(root)
    java = LOCAL_SPARK_CONF["spark.driver.extraJavaOptions"]
    conf = {
        **LOCAL_SPARK_CONF,
        # the local file system's jar after the store's class path, which would otherwise replace it
        **with_class_path(spark_conf, LOCAL_SPARK_CONF.get(CLASS_PATH, "")),
        "spark.local.dir": str(driver_side / "scratch"),
        "spark.sql.warehouse.dir": str(driver_side / "warehouse"),
        # the JVM's temporary files in the driver's folder; no hsperfdata in /tmp
        "spark.driver.extraJavaOptions": f"{java} -XX:-UsePerfData -Djava.io.tmpdir={driver_side / 'tmp'}",
    }
    return {
        "state_root": state_root,
        "storage_connections": connections,
        "local_root": airflow_side / "local",
        "run_env": {"TMPDIR": str(airflow_side / "tmp"), "HOME": str(airflow_side / "home")},
        "run_cwd": airflow_side,
        "job_options": {"spark_conf": conf},
    }


def assert_nothing_of_the_pair_on_local_disk(root: Path) -> dict[str, int]:
    """Neither side holds a file of the pair's state; the Airflow side's local root holds only what the
    submitting host needs. Return the count of files per side."""
    airflow_side, driver_side = sides(root)
    found: dict[str, int] = {}
    for side in (airflow_side, driver_side):
        files = [Path(folder) / name for folder, _dirs, names in os.walk(side) for name in names]
        folders = [Path(folder) / name for folder, dirs, _names in os.walk(side) for name in dirs]
        state = [f for f in files if f.name in STATE_FILE_NAMES or f.name.startswith("epoch-")]
        state += [f for f in folders if f.name in STATE_FOLDER_NAMES]
        state += [f for f in files if f.suffix == ".parquet" and "scratch" not in f.parts]
        assert state == [], f"state of the pair on the local disk of {side.name}: {state[:20]}"
        found[side.name] = len(files)
    local = airflow_side / "local"
    run_files = {f.name for f in local.rglob("*") if f.is_file()} if local.exists() else set()
    assert run_files <= LOCAL_RUN_FILES, f"unexpected files in the local root: {run_files - LOCAL_RUN_FILES}"
    assert not (root / "sink").exists() and not (root / "checkpoints").exists()
    assert not (root / "runs").exists() and not (root / "fence").exists()
    return found


def refused_submit(story: Story, cluster: str, epoch: int, **job: Any) -> str:
    """Submit the running epoch's job with ``job`` options over the pair's; return the refusal."""
    from airflow_kafka_failover.domain.config import load_pair
    from airflow_kafka_failover.hooks.storage import use_job_storage
    from airflow_kafka_failover.switching import steps

    pair = load_pair(story.config_path, story.pair)
    changed = pair.model_copy(update={"job": pair.job.model_copy(update=job)})
    try:
        with pytest.raises(FailoverError) as failure:
            steps.submit(changed, cluster, epoch, "earliest")
    finally:
        # a task runs in a process of its own; here the next steps share this one: give the pair's stores
        # back their connections
        use_job_storage(pair.job)
    return str(failure.value)


def a_foreign_checkpoint_is_refused(story: Story, root: str, cluster: str, epoch: int) -> None:
    """A checkpoint of another pair at the run's place under ``root`` is refused by the submit."""
    owner = {"pair": "payments", "cluster": cluster, "epoch": epoch}
    replace_json(f"{root}/{story.pair}/{cluster}/epoch-{epoch}/_owner.json", owner)
    foreign = refused_submit(story, cluster, epoch, checkpoint_root=root)
    assert "belongs to {'pair': 'payments'" in foreign and "give this run its own checkpoint" in foreign


def a_frozen_store_fails_what_needs_it_and_the_pair_converges(
    story: Story, store: Any, scheme: str, cluster: str, epoch: int
) -> None:
    """Freeze the store (SIGSTOP) while the job runs: a switch fails naming it and changes nothing, the job
    stops by itself and says why; once the store answers, the start DAG brings back one job at the epoch."""
    before, fence = story.record(), story.fence()
    job = JobHandle.from_dict(before["job"])
    store.freeze()
    try:
        state, output = story.run("failover", force=True, reason="the store does not answer")
        assert state == "failed", output[-6000:]
        assert f"{scheme}://" in output and "the store cannot be used" in output, output[-6000:]
        # A batch under way when the store froze first fails through the store client's timeouts (on S3A
        # with FAIL_FAST_S3A a Parquet write and its magic commit took 134 s of them on the loaded machine
        # in a run of 2026-11-29), then the job stops after 30 s without reading the fence; the job of
        # that run exited 3 min 30 s after the freeze, 3 min after this failover run ended.
        deadline = time.monotonic() + 300
        while job.process.is_running() and time.monotonic() < deadline:
            time.sleep(1)
        assert not job.process.is_running(), "the job went on while it could not reach its store"
    finally:
        store.thaw()
    assert f"{scheme}://" in job.log_file.read_text()
    assert story.record() == before and story.fence() == fence
    state, output = story.run("start")
    assert state == "success", output[-6000:]
    assert_one_job(story, cluster, epoch, within=90)
    assert read_status(job.run_dir)["state"] == "running"
    story.counts[f"{scheme} frozen"] = story.check_no_loss()

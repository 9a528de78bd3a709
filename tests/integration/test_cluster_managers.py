"""The cluster managers' conformance suite (issue 28): the same cases against each of them, then the cases
only one of them has.

One bench per manager (``cluster_benches.py``): a local-mode driver on this host, a client-mode driver on a
real Spark standalone master and worker, a PySpark driver in YARN cluster mode on a Hadoop minicluster, and
the real spark-submit in Kubernetes cluster mode against the fake API server (a thread of the bench plays
the driver pod). Each starts its cluster once; pytest runs one bench's cases together and stops its cluster
before the next bench starts. Every run is the contract job (``contract_job.py``) started the product's way,
through ``StreamingJobHook.submit()``, and stopped through ``StreamingJobHook.stop()``.

The cases that only look at a live run share one per bench (started on first use): the first two, and the
unknown-is-never-dead case, which freezes the manager under it and checks that it runs on; the run that
obeys the stop request is then stopped, and the one that ignores it is a run of its own. The local driver
has no manager apart from itself to make unreachable: its own case shows that its process file cannot
lie instead. The cases only one manager has run on the same clusters.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from airflow_kafka_failover.cluster_managers.registry import ClusterManagers
from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.hooks.streaming_job import JobStartError
from airflow_kafka_failover.jobs.layout import stop_requested
from tests.integration.cluster_benches import Bench, bench_of
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.spark

EVERY_MANAGER = ["local", "standalone", "yarn", "kubernetes"]
APART_FROM_THE_DRIVER = ["standalone", "yarn", "kubernetes"]
"""The managers that are not the driver itself: they can be unreachable while it runs."""
STOP_TIMEOUT = 60.0
"""An obedient job stops within a second or two of its stop request; this is the bound."""
IGNORED_STOP_TIMEOUT = 3.0
"""What a job that ignores its stop request is given before the kill."""


@pytest.fixture(scope="module", params=EVERY_MANAGER)
def bench(request: pytest.FixtureRequest) -> Iterator[Bench]:
    with bench_of(request.param) as opened:
        yield opened


# ---- the same cases against each manager ---------------------------------------------------------------


def test_a_run_waited_for_is_alive_and_a_second_submit_adopts_its_driver(bench):
    run = bench.shared_run()
    handle = run.handle
    assert handle.manager == bench.name
    assert ClusterManagers().alive(handle) is True
    driver = bench.driver(handle)
    assert bench.drivers(run) == [driver]

    # A retried task, or the keeper, submits the same (pair, cluster, epoch): the live driver is adopted.
    again = run.submit(startup_timeout=60)
    assert bench.driver(again) == driver
    assert bench.drivers(run) == [driver]


def test_the_log_tail_and_the_description_name_the_driver(bench):
    handle = bench.shared_run().handle
    assert bench.in_log(handle) in ClusterManagers().log_tail(handle, 40)
    assert bench.driver(handle) in handle.describe()


@pytest.mark.parametrize("bench", APART_FROM_THE_DRIVER, indirect=True)
def test_an_unreachable_manager_is_unknown_never_dead(bench):
    """Seen from another Airflow worker (no process of the run there): while the manager does not answer,
    whether the driver runs is unknown, and a retried submit starts nothing; the driver ran on."""
    run = bench.shared_run()
    driver = bench.driver(run.handle)
    elsewhere = run.from_another_host()
    handle = elsewhere.handle
    managers = ClusterManagers()
    with bench.unreachable():
        with pytest.raises(bench.unknown):
            managers.alive(handle)
        assert managers.alive_or_unknown(handle) is None
        assert isinstance(managers.log_tail(handle), str)
        with pytest.raises(JobStartError, match="(?i)nothing was submitted"):
            elsewhere.submit(startup_timeout=30)
    assert managers.alive(handle) is True
    assert bench.drivers(run) == [driver]


def test_a_run_that_obeys_the_stop_request_stops(bench):
    run = bench.shared_run()
    handle = run.handle
    assert run.stop(timeout=STOP_TIMEOUT) == "stopped"
    assert ClusterManagers().alive(handle) is False
    assert handle.status()["state"] == "stopped"
    assert bench.drivers(run) == []
    # Stopping again finds nothing to stop.
    assert run.hook.stop(handle.to_dict(), timeout=5) == "not-running"


def test_a_run_that_ignores_the_stop_request_is_killed(bench):
    run = bench.start(obeys=False)
    handle = run.handle
    started = time.monotonic()
    assert run.stop(timeout=IGNORED_STOP_TIMEOUT) == "forced"
    took = time.monotonic() - started
    print(f"{bench.name}: forced in {took:.1f} s")
    assert took < IGNORED_STOP_TIMEOUT + bench.kill_takes
    assert stop_requested(handle.run_dir)  # asked first
    assert ClusterManagers().alive(handle) is False
    status = handle.status()
    assert status["state"] == "killed", status
    assert bench.kill_said(handle) in status["reason"]
    assert bench.drivers(run) == []
    wait_for(lambda: not bench.left_behind(handle), 60, f"nothing of {bench.driver(handle)} left running")
    assert isinstance(ClusterManagers().log_tail(handle), str)
    assert run.hook.stop(handle.to_dict(), timeout=5) == "not-running"


# ---- what only one manager has ---------------------------------------------------------------------------


@pytest.mark.parametrize("bench", ["local"], indirect=True)
def test_local_a_pid_file_naming_a_recycled_pid_is_not_the_job(bench):
    """The local driver has no manager apart from itself to lose; its process file is what could lie. Once
    the job ended, its pid may be given to another process: that process is not the job."""
    run = bench.ended_run()
    handle = run.handle
    record = json.loads(handle.process.pid_file.read_text())
    stranger = ManagedProcess("stranger", bench.root)
    stranger.start(["sleep", "300"])
    try:
        # The job's pid file, its pid now another process's (started at another time).
        handle.process.pid_file.write_text(json.dumps({**record, "pid": stranger.pid()}))
        managers = ClusterManagers()
        assert managers.alive(handle) is False
        assert "not running" in handle.describe()
        assert managers.of(handle).live_run(handle, run.layout) is None  # a submit starts its own
        assert run.hook.stop(handle.to_dict(), timeout=5) == "not-running"
        assert stranger.is_running()  # never signalled
    finally:
        stranger.stop(timeout=5)

"""The standalone master's client and the handle's cross-check of a client-mode driver with the master."""

from __future__ import annotations

import pytest

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.cluster_managers.standalone import (
    Standalone,
    StandaloneMasterClient,
    StandaloneMasterUnreachable,
    check_webui_port,
    is_standalone_master,
    master_webui_urls,
    parse_master_state,
)
from airflow_kafka_failover.core.exceptions import ConfigError
from tests.builders import closed_port
from tests.unit.fake_standalone_master import FakeStandaloneMaster, serving

APP = "app-20261123213000-0003"


@pytest.mark.parametrize(
    ("master", "expected"),
    [
        ("spark://127.0.0.1:7077", ["http://127.0.0.1:8080"]),
        ("spark://m1:7077,m2:7078", ["http://m1:8080", "http://m2:8080"]),
        ("spark://m1", ["http://m1:8080"]),
    ],
)
def test_web_ui_addresses_come_from_the_master_hosts(master, expected):
    assert master_webui_urls(master, 8080) == expected


@pytest.mark.parametrize("master", ["yarn", "local[2]", "k8s://https://api:6443"])
def test_other_masters_have_no_standalone_web_ui(master):
    assert not is_standalone_master(master)
    with pytest.raises(ConfigError) as err:
        master_webui_urls(master, 8080)
    assert str(err.value) == f"{master!r} is not a Spark standalone master URL (spark://host:port)"


def test_a_master_url_without_a_host_is_refused():
    with pytest.raises(ConfigError, match="names a master without a host"):
        master_webui_urls("spark://:7077", 8080)


@pytest.mark.parametrize(("port", "expected"), [(8080, 8080), ("18080", 18080), (" 80 ", 80)])
def test_a_web_ui_port_is_checked(port, expected):
    assert check_webui_port(port) == expected


@pytest.mark.parametrize("port", [0, 65536, -1, "http://m:8080", "", True, None, 80.5])
def test_a_bad_web_ui_port_names_the_value_and_the_key(port):
    with pytest.raises(ConfigError) as err:
        check_webui_port(port)
    assert f"'standalone_master_webui_port' is {port!r}" in str(err.value)


@pytest.mark.parametrize("payload", [{}, [], "ALIVE", {"activeapps": []}, {"completedapps": []}])
def test_a_body_that_is_no_master_state_is_unknown_not_dead(payload):
    with pytest.raises(StandaloneMasterUnreachable, match="not a Spark standalone master's state"):
        parse_master_state(payload)


@pytest.mark.parametrize(
    ("state", "alive"),
    [("WAITING", True), ("RUNNING", True), ("FINISHED", False), ("FAILED", False), ("KILLED", False)],
)
def test_the_client_reads_an_application_state(state, alive):
    with serving(FakeStandaloneMaster(apps={APP: state})) as master:
        app = StandaloneMasterClient("spark://127.0.0.1:7077", master.port).application(APP)
    assert app is not None and (app.application_id, app.state, app.alive) == (APP, state, alive)


def test_an_application_the_master_does_not_list_is_none():
    with serving(FakeStandaloneMaster(apps={APP: "RUNNING"})) as master:
        assert StandaloneMasterClient("spark://127.0.0.1:7077", master.port).application("app-x") is None


def test_the_alive_master_of_two_answers():
    with serving(FakeStandaloneMaster(status="STANDBY")) as standby:
        with serving(FakeStandaloneMaster(apps={APP: "RUNNING"})) as alive:
            # Both on loopback: two host names for one address would need DNS, so two ports of one host
            # are asked through two clients; the standby alone is no answer.
            with pytest.raises(StandaloneMasterUnreachable, match="status STANDBY"):
                StandaloneMasterClient("spark://127.0.0.1:7077", standby.port).application(APP)
            assert StandaloneMasterClient("spark://127.0.0.1:7077", alive.port).application(APP)


def test_a_master_that_does_not_answer_is_unknown():
    port = closed_port()
    with pytest.raises(StandaloneMasterUnreachable) as err:
        StandaloneMasterClient("spark://127.0.0.1:7077", port, timeout=2).application(APP)
    message = str(err.value)
    assert f"http://127.0.0.1:{port}: " in message
    assert f"the state of {APP} is unknown and it may still run" in message
    assert "'standalone_master_webui_port'" in message


def standalone_handle(run_dir, port: int, **overrides) -> JobHandle:
    values = {
        "pair": "orders",
        "cluster": "A",
        "epoch": 3,
        "deploy_mode": "client",
        "master": "spark://127.0.0.1:7077",
        "run_dir": str(run_dir),
        "checkpoint": str(run_dir / "ckpt"),
        "sink_root": str(run_dir / "sink"),
        "master_webui_port": port,
        **overrides,
    }
    return JobHandle.from_dict(values)


@pytest.fixture
def local_driver(tmp_path):
    """A live process in the handle's pid file, as a detached client-mode driver leaves it."""
    handle = standalone_handle(tmp_path, 1)
    handle.process.start(["sleep", "60"])
    try:
        yield
    finally:
        handle.process.stop(timeout=5)


def test_an_application_the_master_ended_is_dead_even_with_a_live_pid(tmp_path, local_driver):
    with serving(FakeStandaloneMaster(apps={APP: "KILLED"})) as master:
        handle = standalone_handle(tmp_path, master.port, application_id=APP)
        assert handle.process.is_running()
        assert job_alive(handle) is False


def test_an_application_the_master_runs_is_alive_without_a_pid_here(tmp_path):
    with serving(FakeStandaloneMaster(apps={APP: "RUNNING"})) as master:
        handle = standalone_handle(tmp_path, master.port, application_id=APP)
        assert not handle.process.is_running()
        assert job_alive(handle) is True


def test_the_id_the_job_reported_in_its_status_is_asked_about(tmp_path):
    (tmp_path / "status.json").write_text(f'{{"state": "running", "application_id": "{APP}"}}')
    with serving(FakeStandaloneMaster(apps={APP: "FINISHED"})) as master:
        handle = standalone_handle(tmp_path, master.port)
        asked = Standalone().application(handle)  # the id comes from status.json: the handle names none
        assert asked is not None and (asked.application_id, asked.state) == (APP, "FINISHED")
        assert job_alive(handle) is False
    assert "Spark application app-20261123213000-0003" in handle.describe()


def test_without_an_id_or_a_listing_the_pid_decides(tmp_path, local_driver):
    with serving(FakeStandaloneMaster(apps={})) as master:
        assert job_alive(standalone_handle(tmp_path, master.port)) is True
        assert job_alive(standalone_handle(tmp_path, master.port, application_id=APP)) is True
    assert "(not reported yet)" in standalone_handle(tmp_path, master.port).describe()


def test_a_silent_master_and_no_pid_here_is_unknown_never_dead(tmp_path):
    handle = standalone_handle(tmp_path, closed_port(), application_id=APP)
    with pytest.raises(StandaloneMasterUnreachable, match=f"the state of {APP} is unknown"):
        job_alive(handle)


def test_a_silent_master_and_a_live_pid_here_is_alive(tmp_path, local_driver):
    assert job_alive(standalone_handle(tmp_path, closed_port(), application_id=APP)) is True


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"master": "yarn", "deploy_mode": "cluster", "driver_id": "spark:akf-driver"},
            "names driver 'spark:akf-driver' (a Kubernetes pod or a standalone driver) but its master is "
            "YARN",
        ),
        (
            {"master": "yarn", "deploy_mode": "cluster"},
            "runs in cluster mode on YARN but names no application id",
        ),
        (
            {
                "master": "k8s://https://api:6443",
                "deploy_mode": "cluster",
                "application_id": "application_1_2",
            },
            "names YARN application 'application_1_2' but its master is 'k8s://https://api:6443', not YARN",
        ),
        (
            {"application_id": "application_1700000000000_0042"},
            "names YARN application 'application_1700000000000_0042' but its master is "
            "'spark://127.0.0.1:7077'",
        ),
    ],
)
def test_ids_of_another_cluster_manager_are_refused(tmp_path, overrides, message):
    handle = standalone_handle(tmp_path, 8080, **overrides)
    with pytest.raises(ConfigError, match="job handle of pair 'orders' ") as err:
        job_alive(handle)
    assert message in str(err.value)

from __future__ import annotations

import socket

import pytest

from airflow_kafka_failover.cluster_managers.handle import JobHandle, is_yarn_master
from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.cluster_managers.yarn import (
    ResourceManagerClient,
    ResourceManagerUnreachable,
    UnknownYarnApplication,
    YarnApplicationState,
    check_application_id,
    find_resource_manager,
    normalize_resource_manager_url,
    parse_application_report,
    resource_manager_from_hadoop_conf,
)
from airflow_kafka_failover.core.exceptions import ConfigError
from tests.unit.fake_resource_manager import FakeResourceManager, running

APP = "application_1795459092068_0001"


@pytest.mark.parametrize("good", [APP, "application_1_2"])
def test_check_application_id_accepts_yarn_ids(good):
    assert check_application_id(good) == good


@pytest.mark.parametrize(
    "bad", ["app-20240101000000-0001", "local-1700000000", "application_1", "application_x_1", "", None, 7]
)
def test_check_application_id_names_the_bad_value(bad):
    with pytest.raises(ConfigError) as err:
        check_application_id(bad)
    assert str(err.value).startswith(
        f"{bad!r} is not a YARN application id (expected application_<timestamp>"
    )


@pytest.mark.parametrize(
    ("state", "alive"),
    [
        ("NEW", True),
        ("NEW_SAVING", True),
        ("SUBMITTED", True),
        ("ACCEPTED", True),
        ("RUNNING", True),
        ("FINISHED", False),
        ("FAILED", False),
        ("KILLED", False),
    ],
)
def test_every_state_maps_to_alive_or_not(state, alive):
    report = parse_application_report(APP, {"app": {"state": state, "finalStatus": "UNDEFINED"}})
    assert (report.state, report.alive) == (YarnApplicationState(state), alive)


def test_a_report_keeps_final_status_and_diagnostics():
    report = parse_application_report(
        APP, {"app": {"state": "FAILED", "finalStatus": "FAILED", "diagnostics": "AM exited with 13"}}
    )
    assert (report.final_status, report.diagnostics) == ("FAILED", "AM exited with 13")


@pytest.mark.parametrize("payload", [{}, {"app": None}, {"apps": {}}, [], "RUNNING", {"app": {"id": APP}}])
def test_a_body_that_is_no_report_is_an_error_not_a_death(payload):
    with pytest.raises(ResourceManagerUnreachable, match=f"answer for {APP} is not an application report"):
        parse_application_report(APP, payload)


def test_an_unknown_state_is_named():
    with pytest.raises(ResourceManagerUnreachable, match="in state 'SLEEPING', which is not one of"):
        parse_application_report(APP, {"app": {"state": "SLEEPING"}})


@pytest.mark.parametrize(
    ("address", "url"),
    [
        ("rm:8088", "http://rm:8088"),
        (" http://rm:8088/ ", "http://rm:8088"),
        ("https://rm.example.com:8090", "https://rm.example.com:8090"),
    ],
)
def test_normalize_resource_manager_url(address, url):
    assert normalize_resource_manager_url(address) == url


@pytest.mark.parametrize("address", ["", "  ", "ftp://rm:21"])
def test_normalize_refuses_empty_and_other_schemes(address):
    with pytest.raises(ConfigError):
        normalize_resource_manager_url(address)


def _site(folder, **properties) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in properties.items())
    (folder / "yarn-site.xml").write_text(f"<?xml version='1.0'?><configuration>{body}</configuration>")


def test_hadoop_conf_gives_the_webapp_address(tmp_path):
    _site(tmp_path / "h", **{"yarn.resourcemanager.webapp.address": "rm1:8088"})
    assert resource_manager_from_hadoop_conf({"HADOOP_CONF_DIR": str(tmp_path / "h")}) == "http://rm1:8088"


def test_hadoop_conf_falls_back_to_the_hostname_and_port_8088(tmp_path):
    _site(tmp_path / "h", **{"yarn.resourcemanager.hostname": "rm2"})
    assert resource_manager_from_hadoop_conf({"HADOOP_CONF_DIR": str(tmp_path / "h")}) == "http://rm2:8088"


def test_yarn_conf_dir_comes_before_hadoop_conf_dir(tmp_path):
    _site(tmp_path / "y", **{"yarn.resourcemanager.webapp.address": "yarn-rm:1"})
    _site(tmp_path / "h", **{"yarn.resourcemanager.webapp.address": "hadoop-rm:2"})
    env = {"YARN_CONF_DIR": str(tmp_path / "y"), "HADOOP_CONF_DIR": str(tmp_path / "h")}
    assert resource_manager_from_hadoop_conf(env) == "http://yarn-rm:1"


def test_no_conf_folder_or_no_rm_in_it_gives_none(tmp_path):
    _site(tmp_path / "h", **{"fs.defaultFS": "hdfs://nn:8020"})
    assert resource_manager_from_hadoop_conf({}) is None
    assert resource_manager_from_hadoop_conf({"HADOOP_CONF_DIR": str(tmp_path / "h")}) is None
    assert resource_manager_from_hadoop_conf({"HADOOP_CONF_DIR": str(tmp_path / "missing")}) is None


def test_a_broken_yarn_site_is_named(tmp_path):
    (tmp_path / "yarn-site.xml").write_text("<configuration><property>")
    with pytest.raises(
        ConfigError, match=f"cannot read the Hadoop configuration {tmp_path / 'yarn-site.xml'}"
    ):
        resource_manager_from_hadoop_conf({"HADOOP_CONF_DIR": str(tmp_path)})


def test_find_resource_manager_prefers_the_recorded_address(tmp_path):
    _site(tmp_path, **{"yarn.resourcemanager.webapp.address": "conf-rm:8088"})
    env = {"HADOOP_CONF_DIR": str(tmp_path)}
    assert find_resource_manager("rec-rm:8088", env) == "http://rec-rm:8088"
    assert find_resource_manager(None, env) == "http://conf-rm:8088"


def test_find_resource_manager_says_what_to_set():
    with pytest.raises(ConfigError) as err:
        find_resource_manager(None, {})
    assert "set the spark connection's extra 'yarn_resourcemanager_webapp_address'" in str(err.value)
    assert "YARN_CONF_DIR / HADOOP_CONF_DIR" in str(err.value)


@pytest.mark.parametrize(
    ("master", "yarn"), [("yarn", True), ("YARN", True), ("local[2]", False), ("k8s://x", False)]
)
def test_is_yarn_master(master, yarn):
    assert is_yarn_master(master) is yarn


def test_client_reads_state_and_alive():
    with running(FakeResourceManager(apps={APP: "RUNNING", "application_1_2": "FINISHED"})) as rm:
        client = ResourceManagerClient(rm.url)
        assert client.application(APP).state == YarnApplicationState.RUNNING
        assert client.is_alive(APP) is True
        assert client.is_alive("application_1_2") is False


def test_client_unknown_application_is_a_clear_error():
    with running(FakeResourceManager()) as rm, pytest.raises(UnknownYarnApplication) as err:
        ResourceManagerClient(rm.url).is_alive(APP)
    assert f"the YARN ResourceManager at {rm.url} does not know application {APP}" in str(err.value)
    assert "app with id: application_1795459092068_0001 not found" in str(err.value)


def test_client_checks_the_id_before_asking():
    with running(FakeResourceManager()) as rm:
        with pytest.raises(ConfigError, match="'bogus' is not a YARN application id"):
            ResourceManagerClient(rm.url).is_alive("bogus")
        assert rm.requests == []


@pytest.mark.parametrize(("status", "body"), [(500, b"oops"), (503, b"standby"), (200, b"not json")])
def test_client_error_answers_are_unknown_state_not_death(status, body):
    fake = FakeResourceManager(apps={APP: "RUNNING"}, status_override=status, body_override=body)
    with running(fake) as rm, pytest.raises(ResourceManagerUnreachable) as err:
        ResourceManagerClient(rm.url).is_alive(APP)
    assert rm.url in str(err.value) and f"the state of {APP} is unknown" in str(err.value)


def test_client_cannot_reach_a_closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ResourceManagerUnreachable) as err:
        ResourceManagerClient(f"http://127.0.0.1:{port}", timeout=2).is_alive(APP)
    assert str(err.value).startswith(f"cannot reach the YARN ResourceManager at http://127.0.0.1:{port}")
    assert "it may still run" in str(err.value)


@pytest.mark.slow
def test_kill_puts_killed_and_waits_for_the_final_state():
    with running(FakeResourceManager(apps={APP: "RUNNING"}, kill_takes=2)) as rm:
        report = ResourceManagerClient(rm.url).kill(APP, wait_seconds=10)
        assert report.state == YarnApplicationState.KILLED and not report.alive
        assert ("PUT", f"/ws/v1/cluster/apps/{APP}/state") in rm.requests


def test_kill_leaves_a_finished_application_alone():
    with running(FakeResourceManager(apps={APP: "FINISHED"})) as rm:
        assert ResourceManagerClient(rm.url).kill(APP).state == YarnApplicationState.FINISHED
        assert [method for method, _ in rm.requests] == ["GET"]


@pytest.mark.slow
def test_kill_that_does_not_take_effect_is_reported():
    with running(FakeResourceManager(apps={APP: "RUNNING"}, kill_takes=10_000)) as rm:
        with pytest.raises(ResourceManagerUnreachable, match=f"{APP} is still RUNNING 1 s after"):
            ResourceManagerClient(rm.url).kill(APP, wait_seconds=1)


def _yarn_handle(tmp_path, **overrides) -> JobHandle:
    values = {
        "pair": "orders",
        "cluster": "B",
        "epoch": 3,
        "deploy_mode": "cluster",
        "master": "yarn",
        "run_dir": str(tmp_path),
        "checkpoint": str(tmp_path / "ckpt"),
        "sink_root": str(tmp_path / "sink"),
        "application_id": APP,
        **overrides,
    }
    return JobHandle.from_dict(values)


def test_a_yarn_handle_asks_the_recorded_resource_manager(tmp_path):
    with running(FakeResourceManager(apps={APP: "ACCEPTED"})) as rm:
        job = _yarn_handle(tmp_path, resource_manager=rm.url)
        assert job_alive(job) is True
        rm.apps[APP] = "FAILED"
        assert job_alive(job) is False
        assert JobHandle.from_dict(job.to_dict()).resource_manager == rm.url


def test_a_yarn_handle_without_an_address_uses_the_hadoop_conf(tmp_path, monkeypatch):
    with running(FakeResourceManager(apps={APP: "RUNNING"})) as rm:
        _site(tmp_path / "conf", **{"yarn.resourcemanager.webapp.address": rm.url.removeprefix("http://")})
        monkeypatch.delenv("YARN_CONF_DIR", raising=False)
        monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "conf"))
        assert job_alive(_yarn_handle(tmp_path)) is True


def test_a_yarn_handle_whose_resource_manager_is_down_raises_instead_of_saying_dead(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ResourceManagerUnreachable):
        job_alive(_yarn_handle(tmp_path, resource_manager=f"127.0.0.1:{port}"))

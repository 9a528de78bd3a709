"""The driver pod as the provider names and reads it (pure: no client, no Airflow), and the job handle's
checks of a Kubernetes driver."""

from __future__ import annotations

import re

import pytest

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.kubernetes_pods import (
    DriverPodRef,
    DriverStateUnknown,
    PodPhase,
    api_server_of,
    check_namespace,
    driver_pod_name,
    is_kubernetes_master,
    parse_pod,
    run_label,
)
from airflow_kafka_failover.core.exceptions import ConfigError
from tests.unit.fake_kubernetes_api import container_status

REF = DriverPodRef("spark-jobs", "akf-orders-b-e1-1a2b3c4d-driver")


def pod(status: dict, **metadata) -> dict:
    return {"metadata": {"name": REF.name, "namespace": REF.namespace, **metadata}, "status": status}


@pytest.mark.parametrize(
    ("master", "expected"), [("k8s://https://api:6443", True), ("K8S://x", True), ("yarn", False)]
)
def test_is_kubernetes_master(master, expected):
    assert is_kubernetes_master(master) is expected


@pytest.mark.parametrize(
    ("master", "server"),
    [
        ("k8s://https://api.example.com:6443", "https://api.example.com:6443"),
        ("k8s://http://127.0.0.1:8001/", "http://127.0.0.1:8001"),
        ("k8s://api.example.com:443", "https://api.example.com:443"),
    ],
)
def test_the_api_server_of_a_master(master, server):
    assert api_server_of(master) == server


def test_a_driver_pod_reads_and_prints_as_namespace_colon_pod():
    assert DriverPodRef.parse(str(REF)) == REF and str(REF) == f"spark-jobs:{REF.name}"


@pytest.mark.parametrize(
    "bad", ["akf-driver", "driver-20240101-0001", "Spark:pod", "ns:", ":pod", "ns:Pod_1", None, ""]
)
def test_anything_else_is_not_a_driver_pod(bad):
    with pytest.raises(ConfigError) as err:
        DriverPodRef.parse(bad)
    assert str(err.value).startswith(f"driver {bad!r} is not a Kubernetes driver pod '<namespace>:<pod>'")


@pytest.mark.parametrize("bad", ["Spark", "ns_1", "", "a" * 64, 7])
def test_a_namespace_kubernetes_refuses_is_named(bad):
    with pytest.raises(ConfigError, match=rf"Kubernetes namespace {bad!r} \(the conf\) is not a valid"):
        check_namespace(bad, "the conf")


def test_pod_names_are_dns_labels_unique_per_submission_and_readable():
    name = driver_pod_name("Orders_EU", "B", 12, token="0a1b2c3d")
    assert name == "akf-orders-eu-b-e12-0a1b2c3d-driver"
    long = driver_pod_name("p" * 80, "cluster.with.dots", 3)
    assert len(long) <= 63 and long.endswith("-driver") and DriverPodRef.parse(f"ns:{long}")
    assert driver_pod_name("orders", "B", 1) != driver_pod_name("orders", "B", 1)


def test_the_run_label_is_a_valid_label_value_per_run():
    label = run_label("orders", "B", 1)
    assert len(label) == 20 and label.isalnum()
    assert label == run_label("orders", "B", 1) != run_label("orders", "B", 2) != run_label("orders", "A", 1)


def test_phases_as_the_spark_provider_reads_them():
    assert [p for p in PodPhase if p.alive] == [PodPhase.PENDING, PodPhase.RUNNING]
    assert [p for p in PodPhase if p.ended] == [PodPhase.SUCCEEDED, PodPhase.FAILED]


def test_a_running_pod():
    report = parse_pod(REF, pod({"phase": "Running"}, labels={"akf-run": "x"}))
    assert (report.phase, report.alive, report.deleting, report.describe()) == (
        PodPhase.RUNNING,
        True,
        False,
        "Running",
    )
    assert report.labels == {"akf-run": "x"}


def test_a_pending_pod_says_why_it_waits():
    waiting = {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "spark:9"'}}
    report = parse_pod(
        REF,
        pod(
            {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes are available: 3 Insufficient memory.",
                    }
                ],
                "containerStatuses": [container_status(waiting)],
            }
        ),
    )
    assert report.alive and report.describe() == (
        "Pending (not scheduled: Unschedulable: 0/3 nodes are available: 3 Insufficient memory.; container "
        'spark-kubernetes-driver waiting: ImagePullBackOff: Back-off pulling image "spark:9")'
    )


def test_a_failed_pod_says_why_it_ended():
    terminated = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    report = parse_pod(
        REF,
        pod(
            {
                "phase": "Failed",
                "reason": "Evicted",
                "message": "The node was low on resource: memory.",
                "containerStatuses": [container_status(terminated, restarts=2)],
            }
        ),
    )
    assert not report.alive and report.phase.ended
    assert report.describe() == (
        "Failed (Evicted: The node was low on resource: memory.; container spark-kubernetes-driver "
        "terminated with exit code 137: OOMKilled; 2 container restarts)"
    )


def test_a_pod_being_deleted_still_runs():
    report = parse_pod(REF, pod({"phase": "Running"}, deletionTimestamp="2026-01-01T00:00:00Z"))
    assert report.alive and report.deleting and report.describe() == "Running (being deleted)"


def test_a_pod_whose_node_does_not_report_cannot_be_told():
    with pytest.raises(DriverStateUnknown) as err:
        parse_pod(REF, pod({"phase": "Unknown", "reason": "NodeLost"}))
    assert f"driver pod {REF} is Unknown (NodeLost): its node does not report" in str(err.value)


@pytest.mark.parametrize(
    "payload", [{}, {"kind": "Status"}, [], "x", {"status": {"phase": "Exploded"}, "metadata": {}}]
)
def test_an_answer_that_is_not_a_pod_is_not_taken_for_a_state(payload):
    with pytest.raises(DriverStateUnknown):
        parse_pod(REF, payload)


# ---------------------------------------------------------------- the handle


def k8s_handle(tmp_path, **overrides) -> JobHandle:
    values = {
        "pair": "orders",
        "cluster": "B",
        "epoch": 1,
        "deploy_mode": "cluster",
        "master": "k8s://https://api.example.com:6443",
        "run_dir": str(tmp_path),
        "checkpoint": str(tmp_path / "ckpt"),
        "sink_root": str(tmp_path / "sink"),
        "driver_id": str(REF),
        "kubernetes_conn_id": "kube_b",
    }
    return JobHandle.from_dict({**values, **overrides})


def test_a_kubernetes_handle_names_its_pod_and_connection(tmp_path):
    handle = k8s_handle(tmp_path)
    assert handle.runs_on_kubernetes and handle.driver_pod() == REF
    assert JobHandle.from_dict(handle.to_dict()).kubernetes_conn_id == "kube_b"
    assert not k8s_handle(tmp_path, deploy_mode="client", driver_id=None).runs_on_kubernetes


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"driver_id": None},
            "runs in cluster mode on Kubernetes ('k8s://https://api.example.com:6443') but names no "
            "driver pod",
        ),
        (
            {"driver_id": "driver-20240101-0001"},
            "driver 'driver-20240101-0001' is not a Kubernetes driver pod",
        ),
        (
            {"driver_id": None, "application_id": "application_1_2"},
            "names YARN application 'application_1_2'",
        ),
        (
            {"master": "yarn"},
            f"names driver '{REF}' (a Kubernetes pod or a standalone driver) but its master is YARN",
        ),
    ],
)
def test_a_kubernetes_handle_that_does_not_fit_its_master_is_refused(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        k8s_handle(tmp_path, **overrides).check_cluster_manager()

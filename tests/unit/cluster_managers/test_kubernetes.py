"""The driver-pod client and the job tracker, through the real cncf-kubernetes ``KubernetesHook`` and
``kubernetes`` client, against a fake Kubernetes API server over HTTP on loopback (no Kubernetes runs here:
docs/limits.md)."""

from __future__ import annotations

import json
import os
import socket

import pytest

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.kubernetes import DriverPodClient, deleted_by_us
from airflow_kafka_failover.cluster_managers.kubernetes_pods import (
    DriverPodRef,
    DriverStateUnknown,
    KubernetesApiUnreachable,
    PodPhase,
    UnknownDriverPod,
)
from airflow_kafka_failover.cluster_managers.registry import ClusterManagers
from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.run_format.layout import mark_killed
from tests.unit.fake_kubernetes_api import FakeKubernetesApi, kubeconfig, running

POD = "akf-orders-b-e1-0a1b2c3d-driver"
REF = DriverPodRef("spark-jobs", POD)


def kubernetes_connection(monkeypatch, tmp_path, conn_id: str, config: dict, **extra) -> None:
    path = tmp_path / f"{conn_id}.kubeconfig"
    path.write_text(json.dumps(config))  # JSON is YAML
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(path), **extra}}),
    )


@pytest.fixture
def api(monkeypatch, tmp_path):
    """A fake API server that wants a bearer token, and the connection ``kube_fake`` with it."""
    with running(FakeKubernetesApi(token="s3cret")) as fake:
        kubernetes_connection(monkeypatch, tmp_path, "kube_fake", kubeconfig(fake, token="s3cret"))
        yield fake


def handle(tmp_path, **overrides) -> JobHandle:
    values = {
        "pair": "orders",
        "cluster": "B",
        "epoch": 1,
        "deploy_mode": "cluster",
        "master": "k8s://https://api.example.com:6443",
        "run_dir": str(tmp_path / "run"),
        "checkpoint": str(tmp_path / "ckpt"),
        "sink_root": str(tmp_path / "sink"),
        "driver_id": str(REF),
        "kubernetes_conn_id": "kube_fake",
    }
    return JobHandle.from_dict({**values, **overrides})


def test_the_client_reads_a_pod_through_the_connection_with_its_credentials(api):
    api.add_pod("spark-jobs", POD, "Pending")
    client = DriverPodClient("kube_fake")
    assert client.api_server == api.url
    assert client.read(REF).phase == PodPhase.PENDING
    api.set_phase("spark-jobs", POD, "Running")
    assert client.read(REF).alive
    assert ("GET", f"/api/v1/namespaces/spark-jobs/pods/{POD}") in api.requests


def test_the_tracker_follows_the_pod_through_its_life(api, tmp_path):
    job, tracker = handle(tmp_path), ClusterManagers()
    api.add_pod("spark-jobs", POD, "Pending")
    assert tracker.alive(job) is True
    api.set_phase("spark-jobs", POD, "Running")
    assert tracker.alive(job) is True
    api.set_phase("spark-jobs", POD, "Failed", terminated=(1, "Error", "Traceback: boom"))
    assert tracker.alive(job) is False
    assert tracker.kubernetes.report(job).describe() == (
        "Failed (container spark-kubernetes-driver terminated with exit code 1: Error: Traceback: boom)"
    )
    api.set_phase("spark-jobs", POD, "Succeeded")
    assert tracker.alive(job) is False


def test_a_pod_the_api_server_does_not_have_is_an_error_never_dead(api, tmp_path):
    with pytest.raises(UnknownDriverPod) as err:
        ClusterManagers().alive(handle(tmp_path))
    assert str(err.value) == (
        f"cannot read driver pod {REF}: the Kubernetes API at {api.url} (connection 'kube_fake') has no pod "
        f"'{POD}' in namespace 'spark-jobs' (pods \"{POD}\" not found). It was deleted (kubectl delete, a "
        "node drain), or the handle names another namespace or cluster than the driver runs in; whether the "
        "driver runs is not guessed"
    )
    assert ClusterManagers().alive_or_unknown is not None  # the waiting callers still get the error:
    with pytest.raises(UnknownDriverPod):
        ClusterManagers().alive_or_unknown(handle(tmp_path))


def test_a_pod_the_provider_deleted_itself_is_dead(api, tmp_path):
    job = handle(tmp_path)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "status.json").write_text('{"state": "running"}')
    mark_killed(job.run_dir, f"killed through the cluster manager: deleted driver pod {REF} through ...")
    assert deleted_by_us(job) and ClusterManagers().alive(job) is False
    other = handle(tmp_path, driver_id=f"spark-jobs:{POD[:-7]}-x-driver")
    assert not deleted_by_us(other)


def test_a_silent_api_server_is_unknown_never_dead(monkeypatch, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    silent = FakeKubernetesApi()
    silent.url = f"http://127.0.0.1:{port}"
    kubernetes_connection(monkeypatch, tmp_path, "kube_silent", kubeconfig(silent))
    job = handle(tmp_path, kubernetes_conn_id="kube_silent")
    with pytest.raises(KubernetesApiUnreachable) as err:
        ClusterManagers().alive(job)
    assert f"cannot read driver pod {REF}: the Kubernetes API at http://127.0.0.1:{port} (connection " in str(
        err.value
    )
    assert "does not answer (MaxRetryError" in str(err.value) and "it may still run" in str(err.value)
    assert ClusterManagers().alive_or_unknown(job) is None


def test_a_server_error_is_unknown(api, tmp_path):
    api.status_override = 503
    with pytest.raises(KubernetesApiUnreachable, match="answered HTTP 503 \\(fake API server answers 503\\)"):
        ClusterManagers().alive(handle(tmp_path))


def test_a_pod_whose_node_does_not_report_is_unknown(api, tmp_path):
    api.add_pod("spark-jobs", POD, "Unknown")
    with pytest.raises(DriverStateUnknown, match="its node does not report"):
        ClusterManagers().alive(handle(tmp_path))


def test_wrong_credentials_are_a_config_error(monkeypatch, tmp_path, api):
    kubernetes_connection(monkeypatch, tmp_path, "kube_anonymous", kubeconfig(api))
    with pytest.raises(ConfigError, match="refuses it with HTTP 401 \\(Unauthorized\\)"):
        ClusterManagers().alive(handle(tmp_path, kubernetes_conn_id="kube_anonymous"))


def test_a_namespace_the_connection_may_not_read_names_both_namespaces(monkeypatch, tmp_path, api):
    api.forbidden.add("spark-jobs")
    kubernetes_connection(
        monkeypatch, tmp_path, "kube_team", kubeconfig(api, token="s3cret"), namespace="team-a"
    )
    with pytest.raises(ConfigError) as err:
        ClusterManagers().alive(handle(tmp_path, kubernetes_conn_id="kube_team"))
    assert "refuses it with HTTP 403 (pods" in str(err.value)
    assert (
        "give the connection the right to get, list and delete pods in namespace 'spark-jobs' (the "
        "connection names namespace 'team-a': the spark connection submits to 'spark-jobs')"
    ) in str(err.value)


def test_a_connection_that_gives_no_client_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBE_BROKEN",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(tmp_path / "missing")}}),
    )
    with pytest.raises(ConfigError) as err:
        ClusterManagers().alive(handle(tmp_path, kubernetes_conn_id="kube_broken"))
    assert str(err.value).startswith("kubernetes connection 'kube_broken' gives no Kubernetes client (")
    assert "name another connection in the spark connection's extra 'kubernetes_conn_id'" in str(err.value)


def test_without_the_cncf_kubernetes_provider_the_error_names_the_extra(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "airflow.providers.cncf.kubernetes.hooks.kubernetes", None)
    with pytest.raises(ConfigError) as err:
        ClusterManagers().alive(handle(tmp_path))
    assert (
        "pip install 'airflow-kafka-failover[kubernetes]' (apache-airflow-providers-cncf-kubernetes)"
        in str(err.value)
    )


def test_a_handle_with_a_pod_on_yarn_is_refused_before_asking(api, tmp_path):
    with pytest.raises(ConfigError, match="but its master is YARN"):
        ClusterManagers().alive(handle(tmp_path, master="yarn", deploy_mode="cluster"))
    assert api.requests == []


def test_run_drivers_lists_the_pods_of_the_run_by_label(api):
    api.add_pod("spark-jobs", POD, "Running", labels={"akf-run": "r1", "spark-role": "driver"})
    api.add_pod("spark-jobs", "other-driver", "Running", labels={"akf-run": "r2", "spark-role": "driver"})
    api.add_pod("spark-jobs", "exec-1", "Running", labels={"akf-run": "r1", "spark-role": "executor"})
    reports = DriverPodClient("kube_fake").run_drivers("spark-jobs", "r1")
    assert [str(r.ref) for r in reports] == [str(REF)]


@pytest.mark.slow
def test_delete_and_wait_until_gone(api):
    api.add_pod("spark-jobs", POD, "Running")
    api.delete_takes = 2
    client = DriverPodClient("kube_fake")
    assert client.delete(REF) is True
    assert client.read(REF).deleting
    assert client.wait_gone(REF, 10) is None
    assert client.delete(REF) is False  # already gone


def test_the_log_tail_never_raises(api, tmp_path):
    tail = ClusterManagers().log_tail(handle(tmp_path), 5)
    assert tail.startswith(f"(no log of driver pod {REF}: NotFoundException")


WITHOUT_CNCF_KUBERNETES = r"""
import importlib, json, os, sys

class WithoutCncfKubernetes:
    '''The kubernetes clients and the cncf-kubernetes provider's hooks cannot be imported (its provider
    metadata still can: Airflow reads it for every installed provider).'''

    def find_spec(self, name, path=None, target=None):
        blocked = ("kubernetes", "kubernetes_asyncio", "airflow.providers.cncf.kubernetes.hooks",
                   "airflow.providers.cncf.kubernetes.kube_client")
        if any(name == b or name.startswith(b + ".") for b in blocked):
            raise ImportError(f"No module named {name!r} (blocked by the test)")

sys.meta_path.insert(0, WithoutCncfKubernetes())
from airflow_kafka_failover.get_provider_info import get_provider_info
info = get_provider_info()
for kind in ("hooks", "sensors", "operators", "triggers"):
    for entry in info[kind]:
        for module in entry["python-modules"]:
            importlib.import_module(module)
for module in ("airflow_kafka_failover.workflows.factory", "airflow_kafka_failover.cluster_managers.registry",
               "airflow_kafka_failover.io.status_readers", "airflow_kafka_failover.cli"):
    importlib.import_module(module)
from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.cluster_managers.handle import JobHandle

local = JobHandle(pair="p", cluster="A", epoch=1, deploy_mode="local", master="local[1]",
                  run_dir=sys.argv[1], checkpoint=sys.argv[1], sink_root=sys.argv[1])
said = {"local": job_alive(local)}
pod = JobHandle(**{**local.to_dict(), "deploy_mode": "cluster", "master": "k8s://https://api:6443",
                   "driver_id": "ns:akf-p-a-e1-0a1b2c3d-driver"})
for name, call in (("pod", lambda: job_alive(pod)),
                   ("submit", lambda: StreamingJobHook("spark_k8s").spark_submit_hook("x", [], {}))):
    try:
        call()
    except ConfigError as exc:
        said[name] = str(exc)
print(json.dumps(said))
"""


@pytest.mark.slow
def test_the_provider_works_without_the_kubernetes_extra_until_a_kubernetes_master_is_used(tmp_path):
    import subprocess
    import sys

    env = {
        **os.environ,
        "AIRFLOW_CONN_SPARK_K8S": json.dumps(
            {"conn_type": "spark", "host": "k8s://https://api:6443", "extra": {"deploy-mode": "cluster"}}
        ),
    }
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_CNCF_KUBERNETES, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    said = json.loads(result.stdout.strip().splitlines()[-1])
    assert said["local"] is False
    hint = "pip install 'airflow-kafka-failover[kubernetes]' (apache-airflow-providers-cncf-kubernetes)"
    assert hint in said["pod"]
    assert said["submit"] == (
        f"spark connection 'spark_k8s': Kubernetes masters need the cncf-kubernetes provider: {hint}"
    )


def test_every_caller_asks_a_job_through_the_cluster_managers():
    """The handle is plain data: whether a job runs, waiting for it and stopping it are its manager's, and
    outside cluster_managers/ every caller reaches a manager through ClusterManagers, never by its class."""
    import re
    from pathlib import Path

    for behaviour in ("is_alive", "stop", "wait_running", "log_tail", "standalone_application"):
        assert not hasattr(JobHandle, behaviour), behaviour
    package = Path(__file__).resolve().parents[3] / "airflow_kafka_failover"
    direct = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "cluster_managers" not in path.relative_to(package).parts
        and re.search(r"\b(LocalDriver|Standalone|Yarn|Kubernetes)\(\)", path.read_text())
    }
    assert direct == set()

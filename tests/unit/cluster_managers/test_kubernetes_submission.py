"""Kubernetes cluster deploy mode through StreamingJobHook, the submit operator, the keeper's look, the start
DAG's check and the status view: the Spark provider's SparkSubmitHook runs a stand-in spark-submit that
creates the driver pod as Spark 4.0's does (the pod it is told to name, with its labels) and prints Spark
4.0's line; the pod is then read, listed and deleted through the cncf-kubernetes provider's KubernetesHook
against a fake Kubernetes API server over HTTP. tests/integration/test_cluster_managers.py runs the real
spark-submit against the same fake server."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.kubernetes_pods import run_label
from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.hooks.streaming_job import (
    CLUSTER_HANDLE_FILE,
    JobStartError,
    StreamingJobHook,
)
from airflow_kafka_failover.run_format.layout import read_status, stop_request_file
from tests.unit.cluster_managers.test_kubernetes import kubernetes_connection
from tests.unit.fake_kubernetes_api import FakeKubernetesApi, kubeconfig, running
from tests.unit.hooks.test_streaming_job import (  # noqa: F401 - a fixture
    _settings,
    _submit_operator,
    checked_without_kafka,
)

NAMESPACE = "spark-jobs"
LABEL = run_label("orders", "B", 1)

SPARK_SUBMIT = """#!{python}
# Stands in for Spark 4.0's spark-submit in Kubernetes cluster mode with waitAppCompletion=false: creates
# the driver pod named by spark.kubernetes.driver.pod.name with the spark.kubernetes.driver.label.* labels,
# prints what Spark 4.0 prints (tests/integration/test_cluster_managers.py runs the real one), exits 0.
import json, sys, urllib.request
args = sys.argv[1:]
with open({calls!r}, "a") as calls:
    calls.write(" ".join(args) + "\\n")
conf = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--conf")
master = args[args.index("--master") + 1][len("k8s://"):]
namespace = conf.get("spark.kubernetes.namespace", "default")
name = conf.get("spark.kubernetes.driver.pod.name", "akf-generated-0123456789abcdef-driver")
labels = {{k.split(".")[-1]: v for k, v in conf.items() if k.startswith("spark.kubernetes.driver.label.")}}
labels.update({{"spark-role": "driver", "spark-app-selector": "spark-0123456789abcdef"}})
pod = {{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": name, "labels": labels}}, "spec": {{}}}}
request = urllib.request.Request(
    f"{{master}}/api/v1/namespaces/{{namespace}}/pods", data=json.dumps(pod).encode(), method="POST",
    headers={{"Content-Type": "application/json"}},
)
try:
    urllib.request.urlopen(request, timeout=10).read()
except urllib.error.HTTPError as exc:
    print(f"ERROR Client: {{exc.read().decode()}}")
    sys.exit(1)
app = args[args.index("--name") + 1]
print(f"26/11/26 00:20:57 INFO Client: Deployed Spark application {{app}} with application ID "
      f"spark-0123456789abcdef and submission ID {{namespace}}:{{name}} into Kubernetes")
"""


@pytest.fixture
def k8s(tmp_path, monkeypatch):
    """The fake API server (pods created Pending), the stand-in spark-submit, and the connections:
    ``spark_k8s`` (cluster mode, namespace spark-jobs, kubernetes_conn_id kube_fake) and ``kube_fake``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    script = bin_dir / "spark-submit"
    script.write_text(SPARK_SUBMIT.format(python=sys.executable, calls=str(calls)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with running(FakeKubernetesApi()) as api:
        kubernetes_connection(monkeypatch, tmp_path, "kube_fake", kubeconfig(api))
        extra = {"deploy-mode": "cluster", "namespace": NAMESPACE, "kubernetes_conn_id": "kube_fake"}
        monkeypatch.setenv(
            "AIRFLOW_CONN_SPARK_K8S",
            json.dumps({"conn_type": "spark", "host": f"k8s://{api.url}", "extra": extra}),
        )
        api.calls = calls
        yield api


def submissions(api) -> int:
    return len(api.calls.read_text().splitlines()) if api.calls.exists() else 0


def submit(tmp_path, startup_timeout: float = 30.0, **hook_args) -> JobHandle:
    settings, layout = _settings(tmp_path)
    hook = StreamingJobHook("spark_k8s", jars="", **hook_args)
    return hook.submit(settings, layout, env={"PATH": os.environ["PATH"]}, startup_timeout=startup_timeout)


def run_when_created(api, phase: str = "Running", after: float = 1.0, **status) -> threading.Thread:
    """Move the first driver pod created from now on to ``phase`` once it exists (as the kubelet would)."""
    before = {p["metadata"]["name"] for p in api.pods()}

    def move() -> None:
        for _ in range(600):
            new = [p for p in api.pods() if p["metadata"]["name"] not in before]
            if new:
                threading.Event().wait(after)
                api.set_phase(NAMESPACE, new[0]["metadata"]["name"], phase, **status)
                return
            threading.Event().wait(0.05)

    thread = threading.Thread(target=move, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_a_submit_names_and_labels_the_driver_pod_and_waits_until_it_runs(tmp_path, k8s):
    run_when_created(k8s)
    handle = submit(tmp_path)
    [pod] = k8s.pods()
    name = pod["metadata"]["name"]
    assert handle.driver_id == f"{NAMESPACE}:{name}" and handle.kubernetes_conn_id == "kube_fake"
    assert name.startswith("akf-orders-b-e1-") and name.endswith("-driver")
    assert pod["metadata"]["labels"]["akf-run"] == LABEL
    assert pod["status"]["phase"] == "Running"
    submitted = k8s.calls.read_text()
    assert f"--conf spark.kubernetes.driver.pod.name={name}" in submitted
    assert f"--conf spark.kubernetes.namespace={NAMESPACE}" in submitted
    assert "spark.kubernetes.submission.waitAppCompletion=false" in submitted
    # Pending was seen and waited on, and the handle is kept for a retried submit and on_kill.
    reads = [r for r in k8s.requests if r == ("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")]
    assert len(reads) >= 2
    _settings_, layout = _settings(tmp_path)
    assert json.loads((Path(layout.run_dir) / CLUSTER_HANDLE_FILE).read_text()) == handle.to_dict()


def test_a_retried_submit_adopts_the_live_driver_and_submits_after_it_ended(tmp_path, k8s):
    k8s.created_phase = "Running"
    first = submit(tmp_path)
    again = submit(tmp_path)
    assert submissions(k8s) == 1 and again == first
    # Without the file (another worker, or the task died during spark-submit) the label finds it.
    _settings_, layout = _settings(tmp_path)
    (Path(layout.run_dir) / CLUSTER_HANDLE_FILE).unlink()
    assert submit(tmp_path).driver_id == first.driver_id and submissions(k8s) == 1
    # Once it ended, a retry submits a new driver with a new name.
    k8s.set_phase(NAMESPACE, first.driver_pod().name, "Failed", terminated=(1, "Error", ""))
    third = submit(tmp_path)
    assert submissions(k8s) == 2 and third.driver_id != first.driver_id
    assert len(k8s.pods()) == 2


def test_two_live_drivers_of_one_run_are_refused(tmp_path, k8s):
    labels = {"akf-run": LABEL, "spark-role": "driver"}
    k8s.add_pod(NAMESPACE, "akf-orders-b-e1-1-driver", "Running", labels)
    k8s.add_pod(NAMESPACE, "akf-orders-b-e1-2-driver", "Pending", labels)
    with pytest.raises(JobStartError) as err:
        submit(tmp_path)
    assert str(err.value).startswith("2 driver pods of the run of pair 'orders' on B at epoch 1 run: ")
    assert "nothing was submitted. Delete all but one" in str(err.value) and submissions(k8s) == 0


def test_a_driver_being_deleted_is_not_adopted_and_nothing_is_submitted(tmp_path, k8s):
    k8s.add_pod(NAMESPACE, "akf-orders-b-e1-1-driver", "Running", {"akf-run": LABEL, "spark-role": "driver"})
    k8s.objects[("pods", NAMESPACE, "akf-orders-b-e1-1-driver")]["metadata"]["deletionTimestamp"] = "now"
    with pytest.raises(
        JobStartError, match="is being deleted .* nothing was submitted: retry once it is gone"
    ):
        submit(tmp_path)
    assert submissions(k8s) == 0


def test_a_silent_api_server_submits_nothing(tmp_path, k8s):
    k8s.status_override = 503
    with pytest.raises(JobStartError) as err:
        submit(tmp_path)
    assert "cannot tell whether a driver of the run of pair 'orders' on B at epoch 1 already runs" in str(
        err.value
    )
    assert "answered HTTP 503" in str(err.value) and "Nothing was submitted" in str(err.value)
    assert submissions(k8s) == 0


@pytest.mark.slow
def test_a_driver_that_fails_during_start_up_names_the_pods_reason(tmp_path, k8s):
    run_when_created(k8s, "Failed", reason="Evicted", message="The node was low on resource: memory.")
    with pytest.raises(JobStartError) as err:
        submit(tmp_path)
    name = k8s.pods()[0]["metadata"]["name"]
    assert str(err.value).startswith(
        f"driver pod {NAMESPACE}:{name} (job of pair 'orders' on B at epoch 1 (cluster, {NAMESPACE}:{name})) "
        "ended during start-up: Failed (Evicted: The node was low on resource: memory.)\n--- log tail ---\n"
    )


@pytest.mark.slow
def test_a_driver_still_pending_at_the_deadline_is_deleted(tmp_path, k8s):
    k8s.delete_takes = 0
    run_when_created(
        k8s, "Pending", after=0, waiting=("ImagePullBackOff", 'Back-off pulling image "spark:9"')
    )
    with pytest.raises(JobStartError) as err:
        submit(tmp_path, startup_timeout=2)
    assert "was not Running within 2 s (last: Pending (container spark-kubernetes-driver waiting: " in str(
        err.value
    )
    assert (
        'ImagePullBackOff: Back-off pulling image "spark:9")); it was deleted through the Kubernetes API'
        in (str(err.value))
    )
    assert k8s.pods() == [] and any(method == "DELETE" for method, _ in k8s.requests)


@pytest.mark.slow
def test_stop_deletes_a_driver_that_ignores_the_stop_request(tmp_path, k8s):
    k8s.created_phase = "Running"
    handle = submit(tmp_path)
    hook = StreamingJobHook("spark_k8s")
    assert hook.stop(handle.to_dict(), timeout=0.5) == "forced"
    assert Path(stop_request_file(handle.run_dir)).exists() and k8s.pods() == []
    status = read_status(handle.run_dir)
    assert status["state"] == "killed"
    assert status["reason"].startswith(
        f"killed through the cluster manager: deleted driver pod {handle.driver_id} through the Kubernetes "
        f"API at {k8s.url} (it is gone)"
    )
    # The keeper, the start DAG and the status view now see a job the provider stopped, not an unknown pod.
    from airflow_kafka_failover.cluster_managers.registry import job_alive

    assert job_alive(handle) is False
    assert hook.stop(handle.to_dict(), timeout=0.5) == "not-running"


@pytest.mark.slow
def test_a_driver_that_ends_on_the_stop_request_is_stopped_not_deleted(tmp_path, k8s):
    k8s.created_phase = "Running"
    handle = submit(tmp_path)
    # The driver does not share the run folder: only its pod's phase tells that it ended.
    timer = threading.Timer(1.0, lambda: k8s.set_phase(NAMESPACE, handle.driver_pod().name, "Succeeded"))
    timer.start()
    try:
        assert StreamingJobHook("spark_k8s").stop(handle.to_dict(), timeout=20) == "stopped"
    finally:
        timer.cancel()
    assert not any(method == "DELETE" for method, _ in k8s.requests)


def test_stopping_a_pod_that_is_gone_changes_nothing(tmp_path, k8s):
    k8s.created_phase = "Running"
    handle = submit(tmp_path)
    del k8s.objects[("pods", NAMESPACE, handle.driver_pod().name)]
    assert StreamingJobHook("spark_k8s").stop(handle.to_dict(), timeout=5) == "not-running"
    assert not Path(stop_request_file(handle.run_dir)).exists()


def test_a_namespace_mismatch_between_the_connections_is_refused_before_spark_submit(
    tmp_path, k8s, monkeypatch
):
    kubernetes_connection(monkeypatch, tmp_path, "kube_fake", kubeconfig(k8s), namespace="team-a")
    with pytest.raises(ConfigError) as err:
        submit(tmp_path)
    assert str(err.value) == (
        "namespace mismatch: the spark connection submits the driver to namespace 'spark-jobs' (the spark "
        "connection's extra 'namespace' or spark.kubernetes.namespace) but kubernetes connection 'kube_fake' "
        "is for namespace 'team-a'; set the same namespace in both, or name another kubernetes connection in "
        "the spark connection's extra 'kubernetes_conn_id'"
    )
    assert submissions(k8s) == 0 and k8s.requests == []


def test_a_live_driver_of_the_run_in_the_old_namespace_blocks_a_submit(tmp_path, k8s):
    k8s.created_phase = "Running"
    first = submit(tmp_path)
    with pytest.raises(JobStartError) as err:
        submit(tmp_path, conf={"spark.kubernetes.namespace": "default"})
    assert f"namespace mismatch: driver pod {first.driver_id} of this run is Running in namespace" in str(
        err.value
    )
    assert "the spark connection now submits to 'default'; nothing was submitted" in str(err.value)
    assert submissions(k8s) == 1


def test_the_pod_name_is_the_providers(tmp_path, k8s):
    with pytest.raises(ConfigError, match="spark_conf sets spark.kubernetes.driver.pod.name='mine'"):
        submit(tmp_path, conf={"spark.kubernetes.driver.pod.name": "mine"})


@pytest.mark.slow
def test_on_kill_while_waiting_deletes_the_submitted_pod(tmp_path, k8s, checked_without_kafka):  # noqa: F811
    operator = _submit_operator(tmp_path, spark_conn_id="spark_k8s", stop_timeout_seconds=0.5)

    def kill_the_task_once_submitted() -> None:
        while not k8s.pods():
            threading.Event().wait(0.1)
        operator._starting = operator.request()  # what execute() holds while the hook submits
        operator.on_kill()

    killer = threading.Thread(target=kill_the_task_once_submitted)
    killer.start()
    with pytest.raises(JobStartError, match="has no pod .* spark-submit created it .* moments ago"):
        submit(tmp_path, startup_timeout=60)  # stays Pending until the task is killed
    killer.join(timeout=30)
    assert k8s.pods() == [] and any(method == "DELETE" for method, _ in k8s.requests)


@pytest.mark.parametrize("unbound", [True, False])
def test_without_the_cncf_kubernetes_provider_a_kubernetes_master_names_the_extra(
    tmp_path, k8s, monkeypatch, unbound
):
    """The Spark provider 6.3 leaves its ``kube_client`` unbound without cncf-kubernetes (a NameError at
    the hook's construction); a None there raises its RuntimeError. Both become the same ConfigError."""
    from airflow.providers.apache.spark.hooks import spark_submit

    if unbound:
        monkeypatch.delattr(spark_submit, "kube_client")
    else:
        monkeypatch.setattr(spark_submit, "kube_client", None)
    with pytest.raises(ConfigError) as err:
        submit(tmp_path)
    assert str(err.value).startswith("spark connection 'spark_k8s'")
    assert "pip install 'airflow-kafka-failover[kubernetes]'" in str(err.value)
    assert submissions(k8s) == 0


def test_the_start_dag_adopts_the_live_driver_of_the_run_when_the_recorded_pod_is_gone(tmp_path, k8s):
    """The record names a pod that was deleted; the start DAG's check does not call it dead, the submit
    finds the run's live driver by its label and adopts it."""
    from airflow_kafka_failover.switching.starting import _recorded_job_runs

    k8s.created_phase = "Running"
    live = submit(tmp_path)
    gone = JobHandle(**{**live.to_dict(), "driver_id": f"{NAMESPACE}:akf-orders-b-e1-deleted0-driver"})
    assert _recorded_job_runs(live) is True
    assert _recorded_job_runs(gone) is False  # logged as an unknown pod; the submit decides
    assert submit(tmp_path) == live and submissions(k8s) == 1


def test_the_progress_sensor_fails_at_once_when_the_driver_pod_failed(tmp_path, k8s):
    from airflow_kafka_failover.sensors.job_progress import StreamingJobProgressSensor
    from airflow_kafka_failover.version_compat import AirflowFailException

    k8s.created_phase = "Running"
    handle = submit(tmp_path)
    sensor = StreamingJobProgressSensor(task_id="progress", handle=handle.to_dict())
    assert sensor.poke({}) is False  # running, no batch yet
    k8s.set_phase(NAMESPACE, handle.driver_pod().name, "Failed", terminated=(1, "Error", "boom"))
    k8s.logs[(NAMESPACE, handle.driver_pod().name)] = "".join(f"line {n}\n" for n in range(100))
    with pytest.raises(AirflowFailException) as err:
        sensor.poke({})
    assert f"{handle.describe()} is not running" in str(err.value)
    assert str(err.value).endswith("--- log tail ---\n" + "\n".join(f"line {n}" for n in range(60, 100)))


def test_a_kubernetes_connection_to_another_cluster_is_warned_about_and_never_reads_as_dead(
    tmp_path, k8s, monkeypatch, caplog
):
    """spark-submit creates the pod on the master's API server; the kubernetes connection reads another
    one: the submit warns before spark-submit, then fails naming both, and the pod is never called dead."""
    import logging

    with running(FakeKubernetesApi()) as elsewhere:
        kubernetes_connection(monkeypatch, tmp_path, "kube_fake", kubeconfig(elsewhere))
        with caplog.at_level(logging.WARNING), pytest.raises(JobStartError) as err:
            submit(tmp_path)
        assert (
            f"submits to the API server {k8s.url}, and kubernetes connection 'kube_fake' reads pods from "
            in (caplog.text)
        )
        assert elsewhere.url in caplog.text
        [pod] = k8s.pods()  # created where the master points
        assert elsewhere.pods() == []
        assert "has no pod" in str(err.value)
        assert (
            f"if the spark master k8s://{k8s.url} and kubernetes connection 'kube_fake' are not the same "
            in (str(err.value))
        )
        assert "the driver may run there untracked: check it" in str(err.value)


def test_a_namespace_the_connection_may_not_list_fails_the_submit_as_configuration(tmp_path, k8s):
    k8s.forbidden.add(NAMESPACE)
    with pytest.raises(ConfigError) as err:
        submit(tmp_path)
    assert "cannot list the driver pods labelled akf-run=" in str(err.value)
    assert "refuses it with HTTP 403" in str(err.value) and submissions(k8s) == 0

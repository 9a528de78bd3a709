"""The real spark-submit (pyspark 4.0's, which carries Spark's Kubernetes client) submitting the packaged job
in Kubernetes cluster deploy mode, through StreamingJobHook and the Spark provider's SparkSubmitHook, to a
fake Kubernetes API server on loopback; the driver pod is then tracked, adopted and deleted through the
cncf-kubernetes provider's KubernetesHook against the same server.

No Kubernetes can run on this machine (no container runtime), so no driver ever starts: the test moves the
pod's phase itself, as a kubelet would. What is real: spark-submit's requests (the pod with the name and
labels the provider set, its ConfigMap and Service through server-side apply) and its output, the Spark
provider's command line and its parsing of that output, and the Kubernetes client's requests.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path

import pytest

from airflow_kafka_failover.cluster_managers.kubernetes_pods import run_label
from airflow_kafka_failover.cluster_managers.registry import ClusterManagers
from airflow_kafka_failover.hooks.streaming_job import JOB_APPLICATION, StreamingJobHook
from airflow_kafka_failover.jobs.layout import RunLayout, read_status
from airflow_kafka_failover.jobs.settings import JobSettings
from tests.builders import run_of
from tests.unit.cluster_managers.test_kubernetes import kubernetes_connection
from tests.unit.fake_kubernetes_api import FakeKubernetesApi, kubeconfig, running

pytestmark = pytest.mark.spark

NAMESPACE = "spark-jobs"


def settings_and_layout(tmp_path: Path) -> tuple[JobSettings, RunLayout]:
    return run_of(tmp_path, bootstrap="kafka-b:9092")


def test_the_real_spark_submit_creates_the_named_labelled_pod_and_the_provider_tracks_it(
    tmp_path, monkeypatch, caplog, capsys
):
    with running(FakeKubernetesApi()) as api:
        kubernetes_connection(monkeypatch, tmp_path, "kube_fake", kubeconfig(api))
        extra = {"deploy-mode": "cluster", "namespace": NAMESPACE, "kubernetes_conn_id": "kube_fake"}
        monkeypatch.setenv(
            "AIRFLOW_CONN_SPARK_K8S",
            json.dumps({"conn_type": "spark", "host": f"k8s://{api.url}", "extra": extra}),
        )
        # spark-submit's own Kubernetes client must not read a kubeconfig of this machine.
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
        hooks = []
        original = StreamingJobHook.spark_submit_hook

        def keep(self, name, application_args, conf, properties_file=None):
            hooks.append(original(self, name, application_args, conf, properties_file))
            return hooks[-1]

        monkeypatch.setattr(StreamingJobHook, "spark_submit_hook", keep)
        conf = {
            "spark.kubernetes.container.image": "apache/spark:4.0.0",
            "spark.kubernetes.file.upload.path": f"file://{tmp_path / 'upload'}",
        }
        hook = StreamingJobHook("spark_k8s", conf=conf, jars="")
        settings, layout = settings_and_layout(tmp_path)

        def kubelet() -> None:  # the pod runs a moment after spark-submit created it
            while not api.pods():
                threading.Event().wait(0.1)
            threading.Event().wait(1)
            api.set_phase(NAMESPACE, api.pods()[0]["metadata"]["name"], "Running")

        threading.Thread(target=kubelet, daemon=True).start()
        env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        with caplog.at_level(logging.INFO):
            handle = hook.submit(settings, layout, JOB_APPLICATION, startup_timeout=180, env=env)

        [pod] = api.pods()
        name = pod["metadata"]["name"]
        assert handle.driver_id == f"{NAMESPACE}:{name}" and name.startswith("akf-orders-b-e1-")
        assert pod["metadata"]["labels"]["akf-run"] == run_label("orders", "B", 1)
        assert pod["metadata"]["labels"]["spark-role"] == "driver"
        created = {(method, path.split("/")[5]) for method, path in api.requests if method != "GET"}
        assert created == {("POST", "pods"), ("PATCH", "services"), ("PATCH", "configmaps")}, api.requests
        # Spark 4.0 prints the pod only as the submission id; the Spark provider (6.3) does not parse it in a
        # namespace other than "spark", which is why the provider names the pod itself.
        said = f"submission ID {NAMESPACE}:{name} into Kubernetes"
        logged = capsys.readouterr().out + "".join(record.getMessage() for record in caplog.records)
        assert said in logged
        assert hooks[-1]._kubernetes_driver_pod is None

        tracker = ClusterManagers()
        assert tracker.alive(handle) is True
        # A retried submit adopts the running driver: no second spark-submit, no second pod.
        again = hook.submit(settings, layout, JOB_APPLICATION, startup_timeout=30, env=env)
        assert again == handle and len(api.pods()) == 1 and len(hooks) == 3  # its probe only

        # The driver never sees the stop request (no shared run folder): it is deleted through the API.
        assert hook.stop(handle.to_dict(), timeout=1) == "forced"
        assert api.pods() == [] and tracker.alive(handle) is False
        assert read_status(layout.run_dir)["state"] == "killed"

"""The keeper task's decisions on a worker, with the Variable store replaced by a dict and the job by its
run folder: what it does with each event, and that it never acts on a record or fence that moved.

The real keeper against the real sandbox, DAGs and spark-submit is tests/integration/test_keeper.py.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml

from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.io.record_store import variable_key
from airflow_kafka_failover.operators import keeper as keeper_module
from airflow_kafka_failover.operators.keeper import KeepStreamingJobOperator, keeper_variable
from airflow_kafka_failover.run_format.fencing import FencingMarker
from airflow_kafka_failover.run_format.layout import RunLayout
from airflow_kafka_failover.triggers.job_keeper import JobKeeperTrigger, KeeperPauseTrigger
from airflow_kafka_failover.version_compat import AirflowFailException, TaskDeferred


class Variables:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value) -> None:
        self.values[key] = value


@pytest.fixture
def world(tmp_path, monkeypatch):
    """Pair ``orders``, A active at epoch 2 with a job that is not running; fence at 2."""
    from airflow_kafka_failover import version_compat

    variables = Variables()
    monkeypatch.setattr(version_compat, "Variable", variables)
    config = tmp_path / "pairs.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "pairs": {
                    "orders": {
                        "clusters": {"A": {"connection": "unit_a"}, "B": {"connection": "unit_b"}},
                        "primary": "A",
                        "topics": ["orders"],
                        "job": {
                            "sink_root": str(tmp_path / "sink"),
                            "checkpoint_root": str(tmp_path / "checkpoints"),
                            "run_root": str(tmp_path / "runs"),
                            "fencing_marker": str(tmp_path / "fence"),
                        },
                        "keeper": {"max_restarts": 2},
                    }
                }
            }
        )
    )
    layout = RunLayout("orders", "A", 2, str(tmp_path / "checkpoints"), str(tmp_path / "runs"))
    job = {
        "pair": "orders",
        "cluster": "A",
        "epoch": 2,
        "deploy_mode": "local",
        "master": "local[2]",
        "run_dir": str(layout.run_dir),
        "checkpoint": str(layout.checkpoint),
        "sink_root": str(tmp_path / "sink"),
        "submitted_at": "2026-11-23T10:00:00+00:00",
    }
    record = ActiveRecord(pair="orders", active="A", epoch=2, job=job, checkpoint=job["checkpoint"])
    variables.set(variable_key("orders"), json.dumps(record.to_dict()))
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, 2, "A")
    operator = KeepStreamingJobOperator(task_id="keep", config_path=str(config), pair_name="orders")
    return operator, variables, tmp_path


def event(status: str, **extra) -> dict:
    return {
        "status": status,
        "state": {"deadline": time.time() + 600, "restarts": 0, "restarted_at": None},
        **extra,
    }


def memory(variables) -> dict:
    return json.loads(variables.values.get(keeper_variable("orders"), "{}"))


def test_an_alert_fails_the_task_once_and_is_remembered(world):
    operator, variables, _ = world
    with pytest.raises(AirflowFailException, match="keeper alert for pair 'orders': stalled since 400 s"):
        operator.resume({}, event("alert", finding="stalled", message="stalled since 400 s"))
    assert memory(variables)["alerted"] == ["stalled"]


def test_a_cleared_alert_is_forgotten_and_the_keeper_watches_on(world):
    operator, variables, _ = world
    variables.set(keeper_variable("orders"), json.dumps({"alerted": ["stalled", "lagging"]}))
    with pytest.raises(TaskDeferred) as deferred:
        operator.resume({}, event("cleared", cleared=["stalled"], message="cleared"))
    assert memory(variables)["alerted"] == ["lagging"]
    trigger = deferred.value.trigger
    assert isinstance(trigger, JobKeeperTrigger) and trigger.alerted == ["lagging"]
    assert trigger.state["deadline"] > time.time() and trigger.job["epoch"] == 2


def test_an_event_without_the_keepers_state_fails_naming_it(world):
    operator, _, _ = world
    with pytest.raises(AirflowFailException, match="resumed without its state"):
        operator.resume({}, {"status": "act", "finding": "dead"})


def test_a_dead_job_behind_a_moved_fence_is_not_restarted(world, monkeypatch):
    operator, _, tmp_path = world
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, 3, "B")
    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_restart_now", _must_not_restart)
    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_finish_switch", _must_not_restart)
    # No lease of epoch 3 is held: the keeper would finish that switch; here it must only not restart.
    from airflow_kafka_failover.io.lease_file import write_lease

    write_lease(tmp_path / "fence", "orders", 3, "B", "failover", 60)
    with pytest.raises(TaskDeferred) as deferred:
        operator.resume({}, event("act", finding="dead", look={"epoch": 2}))
    assert isinstance(deferred.value.trigger, JobKeeperTrigger)
    assert deferred.value.trigger.not_before == deferred.value.trigger.deadline  # never restarts it


def _must_not_restart(*_args, **_kwargs):
    raise AssertionError("the keeper acted against a switch")


def test_after_max_restarts_the_keeper_gives_up_loudly_and_remembers_the_job(world):
    operator, variables, _ = world
    state = {"deadline": time.time() + 600, "restarts": 2, "restarted_at": time.time() - 5}
    with pytest.raises(
        AirflowFailException, match="gives up on job of pair 'orders' on A at epoch 2.*after 2"
    ):
        operator.resume({}, {"status": "act", "finding": "dead", "look": {"epoch": 2}, "state": state})
    gave_up = memory(variables)["gave_up"]
    assert gave_up["epoch"] == 2 and gave_up["job"]["run_dir"].endswith("epoch-2")
    # The next keeper run leaves that job alone for its whole window.
    with pytest.raises(TaskDeferred) as deferred:
        operator.resume({}, event("wake"))
    assert deferred.value.trigger.not_before == deferred.value.trigger.deadline


def test_a_restart_that_reached_a_batch_starts_the_count_again(world, monkeypatch):
    operator, _, _ = world
    seen = {}

    def restart_now(self, pair, record, handle, state):
        seen.update(state)
        raise TaskDeferred(trigger=KeeperPauseTrigger(0, state), method_name="resume")

    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_restart_now", restart_now)
    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_active_cluster_problem", lambda *_: None)
    restarted_at = time.time() - 60
    state = {"deadline": time.time() + 600, "restarts": 2, "restarted_at": restarted_at}
    look = {"epoch": 2, "committed_at": restarted_at + 30}
    with pytest.raises(TaskDeferred):
        operator.resume({}, {"status": "act", "finding": "dead", "look": look, "state": state})
    assert seen["restarts"] == 0


def test_a_dead_job_on_a_cluster_that_does_not_answer_is_left_to_the_failover_dag(world, monkeypatch):
    operator, _, _ = world
    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_restart_now", _must_not_restart)
    monkeypatch.setattr(
        keeper_module.KeepStreamingJobOperator,
        "_active_cluster_problem",
        lambda *_: "KafkaException: timed out",
    )
    with pytest.raises(TaskDeferred) as deferred:
        operator.resume({}, event("act", finding="dead", look={"epoch": 2}))
    assert deferred.value.trigger.not_before > time.time() + 20


@pytest.mark.parametrize("window", [0, -5, "soon", True])
def test_a_bad_window_param_fails_naming_it(world, window):
    operator, _, _ = world
    with pytest.raises(
        AirflowFailException, match=f"window_seconds must be a number of seconds > 0, got {window!r}"
    ):
        operator.execute({"params": {"window_seconds": window}})


def test_a_fence_two_epochs_ahead_fails_for_a_person(world):
    operator, _, tmp_path = world
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, 4, "B")
    with pytest.raises(Exception, match="more than one switch apart"):
        operator.resume({}, event("act", finding="fence_ahead"))


def test_a_cluster_manager_that_does_not_answer_at_restart_time_is_never_a_second_job(world, monkeypatch):
    from airflow_kafka_failover.cluster_managers.yarn import Yarn

    operator, _, _ = world

    def unreachable(self, handle):
        raise ConnectionError("ResourceManager at http://rm:8088 does not answer")

    monkeypatch.setattr(Yarn, "alive", unreachable)
    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_restart_now", _must_not_restart)
    with pytest.raises(TaskDeferred) as deferred:
        operator.resume({}, event("act", finding="dead", look={"epoch": 2}))
    assert deferred.value.trigger.not_before > time.time() + 20


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("manager", "said"),
    [
        ("yarn-silent", "cannot reach the YARN ResourceManager at http://127.0.0.1:"),
        ("yarn-unknown-id", "does not know application application_1700000000000_0007"),
        ("standalone-silent", "no Spark standalone master of spark://127.0.0.1:7077 answered"),
    ],
)
def test_a_cluster_manager_that_cannot_say_never_gets_a_second_job(world, manager, said, capfd):
    """The record's job names a real cluster manager address that does not answer (or does not know the
    id): the keeper waits and says why, it never restarts the job of that epoch."""
    from tests.unit.fake_resource_manager import FakeResourceManager, running

    operator, variables, _ = world
    record = json.loads(variables.get(variable_key("orders")))
    job = record["job"]
    if manager == "standalone-silent":
        job.update(master="spark://127.0.0.1:7077", deploy_mode="client", master_webui_port=_closed_port())
        job["application_id"] = "app-20261123100000-0001"
    else:
        job.update(master="yarn", deploy_mode="cluster", application_id="application_1700000000000_0007")
        job["resource_manager"] = f"http://127.0.0.1:{_closed_port()}"
    with running(FakeResourceManager()) as rm:
        if manager == "yarn-unknown-id":
            job["resource_manager"] = rm.url
        variables.set(variable_key("orders"), json.dumps(record))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(keeper_module.KeepStreamingJobOperator, "_restart_now", _must_not_restart)
            with pytest.raises(TaskDeferred) as deferred:
                operator.resume({}, event("act", finding="dead", look={"epoch": 2}))
    assert deferred.value.trigger.not_before > time.time() + 20
    logged = "".join(capfd.readouterr())
    assert "not restarting it" in logged and said in logged
    assert json.loads(variables.get(variable_key("orders"))) == record


# ---------------------------------------------------------------- a Kubernetes driver pod, through the API


@pytest.fixture
def k8s_world(world, monkeypatch):
    """The record's job is a Kubernetes driver pod, read through connection ``kube_keeper`` from a fake API
    server over HTTP (the real KubernetesHook and client)."""
    from tests.unit.cluster_managers.test_kubernetes import kubernetes_connection
    from tests.unit.fake_kubernetes_api import FakeKubernetesApi, kubeconfig, running

    operator, variables, tmp_path = world
    record = json.loads(variables.get(variable_key("orders")))
    record["job"].update(
        master="k8s://https://api.example.com:6443",
        deploy_mode="cluster",
        driver_id="spark-jobs:akf-orders-a-e2-0a1b2c3d-driver",
        kubernetes_conn_id="kube_keeper",
    )
    variables.set(variable_key("orders"), json.dumps(record))
    with running(FakeKubernetesApi()) as api:
        kubernetes_connection(monkeypatch, tmp_path, "kube_keeper", kubeconfig(api))
        yield operator, variables, api, record


def test_a_failed_kubernetes_driver_is_restarted_in_place(k8s_world, monkeypatch):
    operator, _, api, record = k8s_world
    api.add_pod("spark-jobs", "akf-orders-a-e2-0a1b2c3d-driver", "Running")
    from airflow_kafka_failover.triggers.job_keeper import JobLooker

    looker = JobLooker("orders", record["job"], "unused", "unit_a", ["orders"])
    assert looker._alive() is True
    api.set_phase("spark-jobs", "akf-orders-a-e2-0a1b2c3d-driver", "Failed", terminated=(1, "Error", "boom"))
    assert looker._alive() is False

    class Restarted(Exception):
        pass

    def restart_now(self, pair, record, handle, state):
        raise Restarted(handle.driver_id)

    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_restart_now", restart_now)
    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_active_cluster_problem", lambda *a: None)
    with pytest.raises(Restarted, match="spark-jobs:akf-orders-a-e2-0a1b2c3d-driver"):
        operator.resume({}, event("act", finding="dead", look={"epoch": 2}))


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("silent", "does not answer (MaxRetryError"),
        ("unknown-pod", "has no pod 'akf-orders-a-e2-0a1b2c3d-driver' in namespace 'spark-jobs'"),
        ("forbidden", "refuses it with HTTP 403"),
        ("node-lost", "its node does not report"),
    ],
)
def test_a_kubernetes_driver_that_cannot_be_seen_never_gets_a_second_job(
    k8s_world, case, said, capfd, monkeypatch, tmp_path
):
    """The API server does not answer, does not have the pod, refuses the connection, or the pod's node
    does not report: the trigger's look says unknown, and the keeper waits and says why."""
    from airflow_kafka_failover.triggers.job_keeper import JobLooker
    from tests.unit.cluster_managers.test_kubernetes import kubernetes_connection
    from tests.unit.fake_kubernetes_api import kubeconfig

    operator, variables, api, record = k8s_world
    if case == "silent":
        api.url = f"http://127.0.0.1:{_closed_port()}"
        kubernetes_connection(monkeypatch, tmp_path, "kube_keeper", kubeconfig(api))
    if case == "forbidden":
        api.forbidden.add("spark-jobs")
    if case == "node-lost":
        api.add_pod("spark-jobs", "akf-orders-a-e2-0a1b2c3d-driver", "Unknown")
    assert JobLooker("orders", record["job"], "unused", "unit_a", ["orders"])._alive() is None
    _keeper_waits(operator)
    logged = "".join(capfd.readouterr())
    assert "not restarting it" in logged and said in logged
    assert json.loads(variables.get(variable_key("orders"))) == record


def _keeper_waits(operator) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keeper_module.KeepStreamingJobOperator, "_restart_now", _must_not_restart)
        with pytest.raises(TaskDeferred) as deferred:
            operator.resume({}, event("act", finding="dead", look={"epoch": 2}))
    assert deferred.value.trigger.not_before > time.time() + 20


@pytest.fixture
def warm_world(world):
    """The same pair with ``switch.standby: warm``."""
    operator, variables, tmp_path = world
    config = yaml.safe_load(open(operator.config_path))
    config["pairs"]["orders"]["switch"] = {"standby": "warm"}
    with open(operator.config_path, "w") as handle:
        yaml.safe_dump(config, handle)
    return operator, variables, tmp_path


def test_a_missing_warm_standby_is_started_on_the_cluster_the_job_does_not_read(warm_world, monkeypatch):
    from airflow_kafka_failover.switching import standby

    operator, _, tmp_path = warm_world
    started = []
    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_active_cluster_problem", lambda *_: None)
    monkeypatch.setattr(
        standby, "start_standby", lambda pair, cluster, epoch: started.append((cluster, epoch)) or 4242
    )
    with pytest.raises(TaskDeferred) as deferred:
        operator.resume({}, event("act", finding="no_standby"))
    assert started == [("B", 2)]
    assert not (tmp_path / "runs" / "orders" / "A" / "standby" / "stop-request").exists()  # none held there
    trigger = deferred.value.trigger
    assert isinstance(trigger, JobKeeperTrigger)
    assert trigger.standby_slot == str(tmp_path / "runs" / "orders" / "B" / "standby")
    # One that dies at once (a job that does not know --standby) is not started again at the next look.
    assert trigger.standby_not_before > time.time() + 20


class _Said:
    """A stand-in for an operator's logger that keeps each message, formatted."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def _keep(self, message: str, *args: object, **_: object) -> None:
        self.lines.append(message % args)

    info = warning = error = debug = exception = _keep


def test_a_warm_standby_still_starting_is_not_counted_as_a_new_start(warm_world, monkeypatch):
    """``start_standby`` finds the slot held, or its driver still on the way to the lock (None): the keeper
    says so, counts no start, and looks again after the usual pause."""
    from airflow_kafka_failover.io import metrics
    from airflow_kafka_failover.switching import standby

    operator, _, _ = warm_world
    counted = []
    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_active_cluster_problem", lambda *_: None)
    monkeypatch.setattr(standby, "start_standby", lambda pair, cluster, epoch: None)
    monkeypatch.setattr(metrics, "standby_started", lambda pair, cluster: counted.append(cluster))
    said = _Said()
    monkeypatch.setattr(type(operator), "log", property(lambda self: said))
    with pytest.raises(TaskDeferred) as deferred:
        operator.resume({}, event("act", finding="no_standby"))
    assert counted == []
    text = "\n".join(said.lines)
    assert "a warm standby driver for B is there already" in text, text
    assert "started a warm standby driver" not in text, text
    assert deferred.value.trigger.standby_not_before > time.time() + 20


def test_a_warm_standby_that_cannot_start_is_asked_again_later_not_at_once(warm_world, monkeypatch):
    from airflow_kafka_failover.core.exceptions import ConfigError
    from airflow_kafka_failover.switching import standby

    operator, _, _ = warm_world

    def refused(pair, cluster, epoch):
        raise ConfigError("spark connection 'spark_default' submits in cluster mode")

    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_active_cluster_problem", lambda *_: None)
    monkeypatch.setattr(standby, "start_standby", refused)
    with pytest.raises(TaskDeferred) as deferred:
        operator.resume({}, event("act", finding="no_standby"))
    assert deferred.value.trigger.standby_not_before > time.time() + 20
    # The other cluster does not answer: nothing is started, and the keeper asks again later.
    monkeypatch.setattr(standby, "start_standby", _must_not_restart)
    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_active_cluster_problem", lambda *_: "down")
    with pytest.raises(TaskDeferred) as deferred:
        operator.resume({}, event("act", finding="no_standby"))
    assert deferred.value.trigger.standby_not_before > time.time() + 20


def test_a_pair_without_a_warm_standby_gives_its_trigger_no_slot(world):
    operator, _, _ = world
    with pytest.raises(TaskDeferred) as deferred:
        operator.resume({}, event("wake"))
    assert deferred.value.trigger.standby_slot is None


def test_a_warm_driver_left_idle_on_the_active_cluster_is_asked_to_stop(warm_world, monkeypatch):
    """A switch to A submitted without A's warm driver (it was still starting): that driver is of no use
    while A is active, and the keeper stops it when it starts the one for B."""
    from airflow_kafka_failover.run_format.standby import StandbySlot
    from airflow_kafka_failover.switching import standby

    operator, _, tmp_path = warm_world
    idle = StandbySlot(tmp_path / "runs" / "orders" / "A" / "standby")
    idle.claim()  # this test process holds it, as the idle driver would
    monkeypatch.setattr(keeper_module.KeepStreamingJobOperator, "_active_cluster_problem", lambda *_: None)
    monkeypatch.setattr(standby, "start_standby", lambda pair, cluster, epoch: 1)
    with pytest.raises(TaskDeferred):
        operator.resume({}, event("act", finding="no_standby"))
    assert idle.stop_file.exists()
    idle.release()

"""``switch.wake: event`` on the real scheduler, triggerer and dag-processor: a crash wakes the failover DAG.

``akf_devtools.local_airflow`` brings up the sandbox and Airflow with the example pair in event mode (no
job: the record is the initial one, A active at epoch 0, so the failover applies). While A is healthy the
failover DAG has no run at all. A is crashed (kill -9); ``ClusterVerdictTrigger`` in the triggerer decides
"down", its asset event starts an ``asset_triggered`` run, whose ``wait_for_down`` starts from the
trigger's evidence and confirms it with one probe, and the run reaches ``fence_and_stop``. About 3 minutes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from akf_devtools.local_airflow import PAIR, LocalAirflow
from akf_devtools.sandbox.loopback import free_ports

from tests.integration.conftest import RUN_ROOT
from tests.integration.waiting import wait_for

pytestmark = [pytest.mark.sandbox]

FAILOVER_DAG = f"kafka_failover_{PAIR}_failover"
WOKEN = "woken by the down verdict of the triggerer's watch"


@pytest.fixture
def event_airflow(monkeypatch) -> Iterator[LocalAirflow]:
    # The Airflow components inherit the environment: they must not run in the unit tests' mode.
    monkeypatch.delenv("AIRFLOW__CORE__UNIT_TEST_MODE", raising=False)
    airflow = LocalAirflow(
        RUN_ROOT / f"wake-event-{uuid.uuid4().hex[:6]}",
        free_ports(1)[0],
        automatic=True,
        login=False,
        produce_rate=0,
        pair_settings={"switch": {"wake": "event"}, "keeper": {"automatic": False}},
    )
    airflow.lock_run_dir()
    try:
        airflow.clean_run_dir()
        airflow.start()
        yield airflow
    finally:
        airflow.stop()


def _runs(airflow: LocalAirflow) -> list[dict[str, Any]]:
    return (airflow.api_get(f"/api/v2/dags/{FAILOVER_DAG}/dagRuns") or {}).get("dag_runs", [])


def _tasks(airflow: LocalAirflow, run_id: str) -> dict[str, dict[str, Any]]:
    listed = airflow.api_get(f"/api/v2/dags/{FAILOVER_DAG}/dagRuns/{run_id}/taskInstances") or {}
    return {ti["task_id"]: ti for ti in listed.get("task_instances", [])}


def test_a_crash_of_the_primary_wakes_the_failover_dag_through_the_asset_watcher(event_airflow):
    airflow = event_airflow
    time.sleep(15)  # the triggerer picks the watcher up and probes a healthy A
    assert _runs(airflow) == [], "a quiet pair must not make failover runs in event mode"
    crashed_at = time.time()
    airflow.sandbox.fault("crash", "A")

    def fenced() -> dict[str, Any] | None:
        airflow.check_components()
        for run in _runs(airflow):
            tasks = _tasks(airflow, run["dag_run_id"])
            if (tasks.get("fence_and_stop") or {}).get("start_date"):
                return {"run": run, "tasks": tasks}
        return None

    found = wait_for(fenced, 150, "a failover run to start fence_and_stop after the crash", interval=2.0)
    run, tasks = found["run"], found["tasks"]
    assert run["run_type"] == "asset_triggered"
    assert tasks["wait_for_down"]["state"] == "success"
    started = datetime.fromisoformat(tasks["fence_and_stop"]["start_date"]).timestamp()
    print(f"crash -> fence_and_stop started: {started - crashed_at:.1f} s")
    logs = list((airflow.run_dir / "logs").glob(f"dag_id={FAILOVER_DAG}/**/task_id=wait_for_down/*.log"))
    text = "".join(path.read_text(errors="replace") for path in logs)
    assert WOKEN in text, f"the sensor did not start from the trigger's evidence; logs: {logs}"
    assert "Deferring" not in text  # it confirmed the verdict with one probe instead of waiting again

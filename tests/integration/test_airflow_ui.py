"""The Airflow UI, for manual triggers: ``make airflow``'s launcher driven by a real browser.

The launcher (``akf_devtools.local_airflow``) brings up the sandbox and Airflow on a free port.
The start DAG runs the Spark job on A (through the API, so that the plan has a position to translate).
Then headless Chromium (Debian's ``/usr/bin/chromium`` through Playwright; no browser download) logs in,
opens the failover DAG's trigger form, switches the ``dry_run`` Param on, triggers, and reads the plan in
the log of the ``plan`` task. The record, the fencing marker and the job must be untouched. Last, SIGTERM
stops the launcher, which must leave nothing running.

Selectors of Airflow 3.3's UI used here (they are what breaks first on an Airflow upgrade): the login
form's "Username"/"Password" labels and "Sign in" button, the DAG page's button labelled "Trigger Dag",
the trigger dialog's switch ``[id="switch:element_dry_run"]`` (its input ``name="element_dry_run"``), the
input ``name="element_reason"``, the dialog's "Trigger" button, the "Dag Run Triggered" toast, and the
task page ``/dags/<dag>/runs/<run>/tasks/plan`` whose Logs tab is open by default.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from akf_devtools.local_airflow import COMPONENTS, PAIR, LocalAirflow, read_json
from akf_devtools.sandbox.loopback import free_ports

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.registry import job_alive
from tests.integration.conftest import REPO, RUN_ROOT
from tests.integration.job_support import fence_text
from tests.integration.waiting import wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.spark]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = REPO / "results" / "airflow_ui_dry_run_plan.png"
START_DAG, FAILOVER_DAG = f"kafka_failover_{PAIR}_start", f"kafka_failover_{PAIR}_failover"
RECORD_VARIABLE = f"kafka_failover.{PAIR}.active_record"
UI_TIMEOUT_MS = 60_000
REASON = "dry run from the UI test"


@dataclass
class Launcher:
    """The launcher process, and its Airflow (for API calls) once ready."""

    process: subprocess.Popen
    log_path: Path
    airflow: LocalAirflow
    ready: dict[str, Any]
    started_at: float

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def api(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """Call Airflow's API as the admin user (POST when ``body`` is given)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.airflow.token()}", "Content-Type": "application/json"}
        request = urllib.request.Request(
            self.airflow.url + path, data=data, headers=headers, method="GET" if body is None else "POST"
        )
        return read_json(request, attempts=1 if body is not None else 3)  # a GET may be asked again

    def record(self) -> str:
        return self.api(f"/api/v2/variables/{RECORD_VARIABLE}")["value"]

    def wait_run(self, dag_id: str, run_id: str, timeout: float) -> str:
        """Wait for the run to end; return its state."""

        def ended() -> str | None:
            state = self.api(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]
            return state if state in ("success", "failed") else None

        return wait_for(ended, timeout, f"the end of run {run_id} of {dag_id}", interval=2.0)

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        listed = self.api(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"]: ti["state"] for ti in listed}

    def stop(self, timeout: float = 120.0) -> int | None:
        """SIGTERM, as Ctrl-C would; SIGKILL the launcher's process group if it does not exit in time."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.process.returncode


@pytest.fixture(scope="module")
def launcher() -> Iterator[Launcher]:
    run_dir = RUN_ROOT / f"airflow-ui-{uuid.uuid4().hex[:6]}"
    port = free_ports(1)[0]
    log_path = RUN_ROOT / f"{run_dir.name}-launcher.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {key: value for key, value in os.environ.items() if key != "AIRFLOW__CORE__UNIT_TEST_MODE"}
    started_at = time.monotonic()
    with open(log_path, "wb") as log_handle:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "akf_devtools.local_airflow",
                "--port",
                str(port),
                "--run-dir",
                str(run_dir),
                "--produce-rate",
                "5",
            ],
            stdout=log_handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    airflow = LocalAirflow(run_dir, port)
    launched = Launcher(process, log_path, airflow, {}, started_at)
    try:
        wait_for(
            lambda: airflow.ready_file.exists() or process.poll() is not None,
            360,
            "the launcher's ready.json",
            interval=1.0,
        )
        assert process.poll() is None, f"launcher exited ({process.returncode}):\n{launched.output()[-4000:]}"
        launched.ready = json.loads(airflow.ready_file.read_text())
        print(f"launcher ready in {time.monotonic() - started_at:.0f} s at {airflow.url}")
        yield launched
    finally:
        launched.stop()
        airflow.stop()  # a no-op after a clean stop; the safety net after a failed one


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[Any]:
    """A page of Debian's Chromium, headless, with a fresh profile."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make setup` (it installs Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(UI_TIMEOUT_MS)
            yield page
        finally:
            context.close()


def trigger_once(launcher: Launcher, path: str, body: dict[str, Any], attempts: int = 3) -> None:
    """POST a DAG run whose ``dag_run_id`` the body names; ask again after a server error (the api-server
    answered 500 once under load on CI's 2-core machine), which is safe because the id is ours: a run the
    first POST did create makes the next one answer 409."""
    for attempt in range(1, attempts + 1):
        try:
            launcher.api(path, body)
            return
        except urllib.error.HTTPError as exc:
            if exc.code == 409 and attempt > 1:
                return  # the earlier attempt created the run after all
            if exc.code < 500 or attempt == attempts:
                raise
            print(f"POST {path} answered {exc.code} (attempt {attempt} of {attempts}); asking again")
            time.sleep(2.0 * attempt)


def start_job_on_a(launcher: Launcher) -> dict[str, Any]:
    """Run the start DAG (through the API) and return the record it wrote."""
    run_id = f"ui-test-start-{uuid.uuid4().hex[:8]}"
    body = {"dag_run_id": run_id, "logical_date": None, "conf": {"reason": "ui test"}}
    trigger_once(launcher, f"/api/v2/dags/{START_DAG}/dagRuns", body)
    state = launcher.wait_run(START_DAG, run_id, 300)
    assert state == "success", launcher.task_states(START_DAG, run_id)
    return json.loads(launcher.record())


def trigger_dry_run(page: Any, launcher: Launcher) -> None:
    """Log in, open the failover DAG's trigger form, switch 'Dry run' on, give a reason, trigger."""
    from playwright.sync_api import expect

    url = launcher.airflow.url
    page.goto(f"{url}/auth/login?next=%2Fdags%2F{FAILOVER_DAG}")
    page.get_by_label("Username").fill(launcher.ready["username"])
    page.get_by_label("Password").fill(launcher.airflow.password())
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"**/dags/{FAILOVER_DAG}")
    page.get_by_role("button", name="Trigger Dag").click()
    dialog = page.get_by_role("dialog")
    dry_run = dialog.locator('input[name="element_dry_run"]')
    expect(dry_run).not_to_be_checked()
    dialog.locator('[id="switch:element_dry_run"]').click()  # the switch a user clicks; its input is hidden
    expect(dry_run).to_be_checked()
    # The form marks Reason as required: its Trigger button stays disabled while it is empty.
    dialog.locator('input[name="element_reason"]').fill(REASON)
    dialog.get_by_role("button", name="Trigger", exact=True).click()
    expect(page.get_by_text("Dag Run Triggered").first).to_be_visible(timeout=UI_TIMEOUT_MS)


def the_dry_run(launcher: Launcher) -> dict[str, Any]:
    """The failover run the UI created (the launcher's switch DAGs run only when triggered)."""
    runs = launcher.api(f"/api/v2/dags/{FAILOVER_DAG}/dagRuns")["dag_runs"]
    assert len(runs) == 1, [(run["dag_run_id"], run["conf"]) for run in runs]
    return runs[0]


def show_plan_log(page: Any, launcher: Launcher, run_id: str) -> str:
    """Open the 'plan' task's log page, wait for the plan, save a screenshot; return the page's text."""
    page.goto(f"{launcher.airflow.url}/dags/{FAILOVER_DAG}/runs/{run_id}/tasks/plan")
    page.get_by_text("plan A -> B:").wait_for()
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    return page.inner_text("body")


def test_dry_run_from_the_trigger_form_shows_the_plan(launcher: Launcher, browser_page: Any) -> None:
    began = time.monotonic()
    record = start_job_on_a(launcher)
    assert (record["active"], record["epoch"], record["job"]["cluster"]) == ("A", 0, "A")
    started = time.monotonic()
    record_before = launcher.record()
    fence = launcher.ready["fencing_marker"]
    fence_before = fence_text(fence, launcher.ready["pair"])

    trigger_dry_run(browser_page, launcher)
    run = the_dry_run(launcher)
    assert run["conf"] == {"force": False, "dry_run": True, "reason": REASON}
    state = launcher.wait_run(FAILOVER_DAG, run["dag_run_id"], 240)
    states = launcher.task_states(FAILOVER_DAG, run["dag_run_id"])
    assert state == "success", states
    assert (states["plan"], states["submit"], states["commit"]) == ("success", "skipped", "skipped"), states
    text = show_plan_log(browser_page, launcher, run["dag_run_id"])
    print(
        f"start DAG {started - began:.0f} s, dry run through the UI {time.monotonic() - started:.0f} s; "
        f"screenshot {SCREENSHOT}"
    )

    # Every partition of every target topic, with its start offset and the method that found it.
    assert re.search(r"source\s+offset\s+target\s+start\s+method", text), text[-3000:]
    for source, target in (("orders", "A.orders"), ("B.orders", "orders")):
        for partition in range(2):
            row = rf"\n{re.escape(source)}-{partition}\s+\d+\s+{re.escape(target)}-{partition}\s+\d+\s+\w+"
            assert re.search(row, text), f"no plan row for {source}-{partition}:\n{text[-3000:]}"
    assert "A -> B: 4 partitions translated" in text, text[-3000:]

    assert launcher.record() == record_before, "a dry run changed the active record"
    assert fence_text(fence, launcher.ready["pair"]) == fence_before, "a dry run moved the fencing marker"
    assert job_alive(JobHandle.from_dict(record["job"])), "a dry run stopped the job"


def test_sigterm_stops_airflow_the_job_and_the_sandbox(launcher: Launcher) -> None:
    try:
        job = json.loads(launcher.record())["job"]
    except urllib.error.HTTPError:  # the first test failed before the start DAG wrote a record
        job = None
    stopping = time.monotonic()
    assert launcher.stop() == 0, launcher.output()[-4000:]
    now = time.monotonic()
    print(f"stopped in {now - stopping:.0f} s; the launcher ran {now - launcher.started_at:.0f} s in all")
    assert "stopped Airflow, the jobs and the sandbox" in launcher.output()
    running = [name for name in COMPONENTS if launcher.airflow.component(name).is_running()]
    assert not running, f"Airflow components still running: {running}"
    assert job is None or not job_alive(JobHandle.from_dict(job)), "the streaming job still runs"
    sandbox = launcher.airflow.sandbox
    left = [name for name, broker in sandbox.brokers.items() if broker.process.is_running()]
    assert not left and not sandbox.mirrormaker.process.is_running(), f"sandbox processes still run: {left}"

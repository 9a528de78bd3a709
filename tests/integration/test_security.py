"""SASL/SCRAM on both clusters: the provider, MirrorMaker 2 and the Spark job authenticate.

The password leaks nowhere.

One sandbox with ``security="scram"`` (SCRAM-SHA-512 on every client listener and between the broker and
itself; the KRaft controller listener stays PLAINTEXT). Tests run in file order: auth is on and MM2
authenticates; the real start DAG then a forced failover move the job A -> B without loss while every
process's command line (and the job's and the sandbox's environments) are scanned for the password; then
the password is looked for everywhere the provider writes: task logs, job logs, XCom, rendered template
fields, the active record (history, job handle), progress records, the trigger's serialized kwargs.

File modes the provider must use (the narrowest that works):

- ``settings.json`` 0600: it is the one provider file that holds the password (``sasl.jaas.config``); only
  the job's driver, running as the submitting user (local and client mode) or reading it before start,
  needs it.
- fencing marker, ``status.json``, ``progress.jsonl``, the checkpoint's ``_owner.json``: at most 0644. They
  hold no secret (epochs, offsets, timestamps, bootstrap addresses), and in cluster deploy mode they are
  written by a driver that may run as another user and read by Airflow (or the other way round, for the
  marker), so owner-only would break that; group/other never get write access.
- the sandbox's credentials file, server.properties and mm2.properties: 0600 (they hold the password).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
import time
import uuid
from pathlib import Path

import pytest
from akf_devtools.sandbox.airflow_env import register_kafka_connections
from akf_devtools.sandbox.kafka_io import create_topic, end_offsets, produce
from akf_devtools.sandbox.sandbox import Sandbox
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from tests.integration.conftest import RUN_ROOT
from tests.integration.switch_story import Story, new_pair_story
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.spark

OWNER_ONLY = 0o600
NO_WIDER_THAN = 0o644


@pytest.fixture(scope="module")
def scram_sandbox():
    """A SCRAM sandbox; its run directory (logs) stays for inspection until the session ends well."""
    sandbox = Sandbox(RUN_ROOT / f"scram-{uuid.uuid4().hex[:6]}", security="scram")
    try:
        sandbox.up(timeout=240)
        yield sandbox
    finally:
        sandbox.down()


@pytest.fixture(scope="module")
def password(scram_sandbox) -> str:
    secret = scram_sandbox.security_config()["sasl.password"]
    assert len(secret) >= 16
    return secret


@pytest.fixture(scope="module")
def story(scram_sandbox, airflow_home, tmp_path_factory):
    with new_pair_story(
        scram_sandbox, airflow_home, tmp_path_factory.mktemp("secure-story"), "sec", rate=20
    ) as story:
        story.scans = []  # type: ignore[attr-defined]
        yield story


# ---- (a) authentication is on, and MirrorMaker 2 authenticates ---------------------------------------------


def _list_topics(config: dict) -> tuple[object | None, list[KafkaError]]:
    """Cluster metadata (None when refused) and the client's errors."""
    errors: list[KafkaError] = []
    admin = AdminClient(
        {**config, "socket.connection.setup.timeout.ms": 2000, "error_cb": errors.append, "log_level": 0}
    )
    try:
        metadata = admin.list_topics(timeout=6)
    except KafkaException:
        metadata = None
    admin.poll(0.5)  # serves error_cb
    return metadata, errors


def test_clients_without_the_password_are_refused(scram_sandbox, password):
    metadata, _ = _list_topics({"bootstrap.servers": scram_sandbox.bootstrap("A")})
    assert metadata is None  # PLAINTEXT to a SASL listener: no answer
    metadata, errors = _list_topics({**scram_sandbox.client_config("A"), "sasl.password": "not-the-password"})
    assert metadata is None
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
    metadata, errors = _list_topics(scram_sandbox.client_config("A"))
    assert metadata is not None and metadata.brokers, errors
    info = scram_sandbox.info()
    assert info["security"]["mode"] == "scram" and password not in json.dumps(info)


def test_mirrormaker_replicates_between_scram_clusters(scram_sandbox, unique_topic, password):
    topic = unique_topic("mm2-scram")
    a, b = scram_sandbox.client_config("A"), scram_sandbox.client_config("B")
    create_topic(a, topic, 2)
    produce(a, topic, [(None, f"v{i}".encode(), i % 2, None) for i in range(50)])
    wait_for(
        lambda: sum((end_offsets(b, f"A.{topic}") or {}).values()) >= 50, 90, f"A.{topic} replicated to B"
    )
    run_dir = scram_sandbox.run_dir
    for path in (
        run_dir / "scram-credentials.json",
        run_dir / "mm2.properties",
        run_dir / "A" / "server.properties",
        run_dir / "B" / "server.properties",
    ):
        assert password in path.read_text(), path
        assert _mode(path) == OWNER_ONLY, f"{path} has mode {oct(_mode(path))}"
    assert _mode(run_dir) == 0o700
    assert not list(run_dir.glob("*/format.args")), (
        "the format argument file (with the password) was left behind"
    )
    for log in (run_dir / "logs").glob("*.log"):
        assert password not in log.read_text(errors="replace"), f"{log} holds the password"


def test_health_trigger_kwargs_and_events_carry_no_password(scram_sandbox, password):
    """The down sensor's watch probes the SCRAM cluster through the connection; what its trigger serializes
    (and the event the trigger yields) names connection ids only."""
    from airflow_kafka_failover.sensors.cluster_health import KafkaClusterDownSensor
    from airflow_kafka_failover.triggers.cluster_health import ClusterHealthTrigger

    conns = register_kafka_connections(scram_sandbox, "sectrigger")
    sensor = KafkaClusterDownSensor(
        task_id="a_down", kafka_config_id=conns["A"], cluster_alias="A", peer_kafka_config_id=conns["B"]
    )
    watch = sensor._build()
    watch.observe()
    probe = watch.state()["history"][-1]
    assert probe["reachable"] and not probe["error"], probe  # authenticated with the connection's extra
    trigger = ClusterHealthTrigger(
        kind=sensor.kind,
        watch_kwargs=sensor.watch_kwargs(),
        thresholds=sensor.thresholds,
        deadline=time.time() + 3,
        state=watch.state(),
    )
    serialized = json.dumps(trigger.serialize())
    assert conns["A"] in serialized and password not in serialized

    async def first_event():
        async for event in trigger.run():
            return event

    event = asyncio.run(first_event())
    assert password not in json.dumps(event.payload, default=str)


# ---- (b) + (c) the real DAGs move the job A -> B; ps never shows the password ------------------------------


def test_start_and_forced_failover_move_the_job_without_loss(story, password):
    state, output = story.run("start")
    assert state == "success", output[-4000:]
    story.scans.append(scan_processes(password, story))
    wait_for(
        lambda: any(p["cluster"] == "A" and p["records"] for p in story.progress_lines()),
        120,
        "a batch with records on A",
    )

    running = story.start_run("failover", force=True, reason="security test")
    while running.process.poll() is None:
        story.scans.append(scan_processes(password, story, control_pid=running.process.pid))
        time.sleep(0.5)
    state, output = running.wait()
    assert state == "success", output[-6000:]
    story.active_for_producer = "B"
    record = story.record()
    assert (record["active"], record["epoch"], record["job"]["cluster"]) == ("B", 1, "B")
    story.scans.append(scan_processes(password, story))

    counts = story.check_no_loss(180)
    on_b = story.producer.acked_per_cluster["B"]
    assert counts["lost"] == 0 and on_b > 0, counts
    clusters = {p["cluster"] for p in story.progress_lines() if p["records"]}
    assert clusters == {"A", "B"}, clusters
    print("counts:", counts, "scans:", len(story.scans))


def test_password_is_on_no_command_line_nor_in_the_job_or_sandbox_environment(story):
    scans = story.scans
    assert len(scans) >= 3, "the start/failover test did not run"
    assert not [hit for scan in scans for hit in scan["cmdline"]], [
        s["cmdline"] for s in scans if s["cmdline"]
    ]
    assert not [hit for scan in scans for hit in scan["environ"]], [
        s["environ"] for s in scans if s["environ"]
    ]
    # Reading environments works: the failover run's dag.test process has the connection (as it must).
    assert any(scan["control"] for scan in scans)
    submits = {cmd for scan in scans for cmd in scan["jobs"]}
    # The scans saw both jobs' spark-submit command lines (the B one while the failover DAG launched it).
    assert any("/A/epoch-0/settings.json" in cmd for cmd in submits), submits
    assert any("/B/epoch-1/settings.json" in cmd for cmd in submits), submits


# ---- (d) nothing the provider writes or shows holds the password, except the job's settings file -----------


def test_password_is_absent_from_logs_xcom_templates_record_and_job_files(story, airflow_home, password):
    runs = sorted(story.root.glob("run-*.log"))
    assert len(runs) >= 2
    holders = files_holding(story.root, password)
    settings = sorted(story.root.glob("runs/*/*/epoch-*/settings.json"))
    assert len(settings) == 2 and holders == settings, holders  # job logs, progress, sink, checkpoints: clean
    for path in settings:
        assert "sasl.jaas.config" in path.read_text()
    assert files_holding(airflow_home, password) == []  # task logs, the metadata DB (XCom, variables, ...)

    record = story.record()
    assert record["history"] and record["job"]
    assert password not in json.dumps(record)
    db = sqlite3.connect(airflow_home / "airflow.db")
    try:
        like = f"kafka_failover_{story.pair}_%"
        xcoms = db.execute("SELECT task_id, key, value FROM xcom WHERE dag_id LIKE ?", (like,)).fetchall()
        rendered = db.execute(
            "SELECT task_id, rendered_fields FROM rendered_task_instance_fields WHERE dag_id LIKE ?", (like,)
        ).fetchall()
        variables = db.execute(
            "SELECT key, val FROM variable WHERE key LIKE ?", (f"%{story.pair}%",)
        ).fetchall()
    finally:
        db.close()
    print(f"scanned {len(xcoms)} XComs, {len(rendered)} rendered task fields, {len(variables)} variables")
    assert xcoms and rendered and variables  # the checks below are not vacuous
    for row in [*xcoms, *rendered, *variables]:
        assert password not in json.dumps([str(value) for value in row]), row[:2]
    assert {task for task, _key, _value in xcoms} >= {"plan", "submit"}, xcoms


# ---- (e) file modes ----------------------------------------------------------------------------------------


def test_files_have_the_narrowest_modes_that_work(story):
    checkpoints = sorted(story.root.glob(f"checkpoints/{story.pair}/*/epoch-*"))
    run_dirs = sorted(story.root.glob(f"runs/{story.pair}/*/epoch-*"))
    assert len(checkpoints) == 2 and len(run_dirs) == 2
    for run_dir in run_dirs:
        assert _mode(run_dir / "settings.json") == OWNER_ONLY, run_dir
        _assert_not_wider(run_dir / "status.json", NO_WIDER_THAN)
    for checkpoint in checkpoints:
        _assert_not_wider(checkpoint / "progress.jsonl", NO_WIDER_THAN)
        _assert_not_wider(checkpoint / "_owner.json", NO_WIDER_THAN)
    _assert_not_wider(story.root / "fence.json", NO_WIDER_THAN)


# ---- helpers ----------------------------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _assert_not_wider(path: Path, widest: int) -> None:
    mode = _mode(path)
    assert mode & ~widest == 0, f"{path} has mode {oct(mode)}, wider than {oct(widest)}"


def files_holding(root: Path, secret: str) -> list[Path]:
    """Every regular file under ``root`` whose bytes contain ``secret``."""
    needle = secret.encode()
    return sorted(path for path in root.rglob("*") if path.is_file() and needle in path.read_bytes())


def _read_proc(pid: str, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:  # gone, or not ours to read
        return b""


def scan_processes(secret: str, story: Story, control_pid: int | None = None) -> dict[str, list[str]]:
    """Look for ``secret`` in every process's command line, and in the environment of the job's processes
    (every process group with a spark-submit member that names the story's files) and of the sandbox's.

    Airflow's own processes keep their environment out of the check: the sandbox hands them the
    connections as ``AIRFLOW_CONN_*`` variables, which is how they are meant to get them. ``control_pid``
    (such a process) shows that the environment check can see the secret at all.
    """
    needle = secret.encode()
    pids = [
        entry.name
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and entry.name != str(os.getpid())
    ]
    cmdlines = {pid: _read_proc(pid, "cmdline") for pid in pids}
    watched_groups = set()
    jobs = []
    for pid, cmdline in cmdlines.items():
        text = cmdline.replace(b"\0", b" ").decode(errors="replace")
        is_job = "SparkSubmit" in text and str(story.root) in text
        if is_job:
            jobs.append(text)
        if is_job or str(story.sandbox.run_dir) in text:
            try:
                watched_groups.add(os.getpgid(int(pid)))
            except ProcessLookupError:
                continue
    environ_hits = []
    for pid in pids:
        try:
            in_group = os.getpgid(int(pid)) in watched_groups
        except ProcessLookupError:
            continue
        if in_group and needle in _read_proc(pid, "environ"):
            environ_hits.append(f"{pid}: {cmdlines[pid][:150]!r}")
    control = [str(control_pid)] if control_pid and needle in _read_proc(str(control_pid), "environ") else []
    return {
        "cmdline": [f"{pid}: {cmd[:150]!r}" for pid, cmd in cmdlines.items() if needle in cmd],
        "environ": environ_hits,
        "jobs": jobs,
        "control": control,
    }

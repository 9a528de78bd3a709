"""SASL/SCRAM over mutual TLS on both clusters: the provider, MirrorMaker 2 and the Spark job authenticate.

No secret leaks: neither the SCRAM password, nor the private keys' password, nor the key material.

One sandbox with ``security="scram-tls"``: every client listener is SASL_SSL with SCRAM-SHA-512 and
requires a client certificate signed by the sandbox CA (``ssl.client.auth=required``); the broker talks
to itself the same way; the KRaft controller listener stays PLAINTEXT on loopback. One sandbox and one
story cover both mechanisms. Tests run in file order: auth and mTLS are on and MM2 authenticates; the real
start DAG, a forced failover A -> B and a forced failback B -> A move the job without loss while every
process's command line (and the job's and the sandbox's environments) are scanned for the secrets; then
the secrets are looked for everywhere the provider writes: task logs, job logs, XCom, rendered template
fields, the active record (history, job handle), progress entries, the trigger's serialized kwargs.
Last, the TLS bad inputs on the real clusters: each is a configuration error naming the file and the
problem, never a probe that calls the healthy cluster down.

File modes the provider must use (the narrowest that works):

- ``settings.json`` 0600: it is the one provider file that holds the passwords (``sasl.jaas.config``,
  ``ssl.key.password``; key files travel by path, never their content); only
  the job's driver, running as the submitting user (local and client mode) or reading it before start,
  needs it.
- fencing markers, ``status.json``, progress entries, the checkpoint's ``_owner.json``: at most 0644. They
  hold no secret (epochs, offsets, timestamps, bootstrap addresses), and in cluster deploy mode they are
  written by a driver that may run as another user and read by Airflow (or the other way round, for the
  marker), so owner-only would break that; group/other never get write access.
- the sandbox's credentials files, key files, server.properties and mm2.properties: 0600 (they hold the
  passwords or keys), in a run directory of mode 0700.
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
from akf_devtools.sandbox.tls import certificate_pem, issue_certificate, key_and_chain_pem
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from airflow_kafka_failover.core.exceptions import ConfigError
from tests.integration.conftest import RUN_ROOT
from tests.integration.switch_story import TEST_HEALTH, Story, new_pair_story
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.spark

SWITCHES = (("failover", "B", 1), ("failback", "A", 2))
"""The forced switches of the story after the start DAG: (DAG, cluster it moves to, new epoch)."""
RUNS = (("A", 0), *((cluster, epoch) for _kind, cluster, epoch in SWITCHES))
"""Every job run of the story: (cluster, epoch)."""

OWNER_ONLY = 0o600
NO_WIDER_THAN = 0o644


@pytest.fixture(scope="module")
def scram_sandbox():
    """A SCRAM + mutual TLS sandbox; its run directory (logs) stays for inspection until the session ends."""
    sandbox = Sandbox(RUN_ROOT / f"scram-tls-{uuid.uuid4().hex[:6]}", security="scram-tls")
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


def _key_line(pem_file: Path) -> str:
    """One line of the (encrypted) private key's body: key material, as unique as the key."""
    lines = pem_file.read_text().splitlines()
    line = lines[lines.index("-----BEGIN ENCRYPTED PRIVATE KEY-----") + 2]
    assert len(line) == 64
    return line


@pytest.fixture(scope="module")
def secrets(scram_sandbox, password) -> dict[str, str]:
    """Every secret of the sandbox: the two passwords and key material of each private key."""
    tls = scram_sandbox.tls
    assert tls is not None and len(tls.key_password) >= 16
    return {
        "SCRAM password": password,
        "key password": tls.key_password,
        "client key": _key_line(tls.client_file),
        "broker key": _key_line(tls.broker_file),
        "CA key": _key_line(tls.ca_key_file),
    }


@pytest.fixture(scope="module")
def story(scram_sandbox, airflow_home, tmp_path_factory):
    # Its runs start as processes of their own: the scans read a run's environment from /proc, where a run
    # forked from the warm process would show that process's (akf_devtools.sandbox.forked_runs).
    with new_pair_story(
        scram_sandbox, airflow_home, tmp_path_factory.mktemp("secure-story"), "sec", rate=20, fork_runs=False
    ) as story:
        story.scans = []  # type: ignore[attr-defined]
        yield story


# ---- (a) authentication is on, and MirrorMaker 2 authenticates ---------------------------------------------


def _list_topics(config: dict, timeout: float = 6) -> tuple[object | None, list[KafkaError]]:
    """Cluster metadata (None when refused) and the client's errors.

    :param timeout: how long to wait for metadata; a refusal is reported in milliseconds, but the client
        waits this long before giving up.
    """
    errors: list[KafkaError] = []
    admin = AdminClient(
        {**config, "socket.connection.setup.timeout.ms": 2000, "error_cb": errors.append, "log_level": 0}
    )
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException:
        metadata = None
    admin.poll(0.5)  # serves error_cb
    return metadata, errors


def test_clients_without_the_password_are_refused(scram_sandbox, password):
    metadata, _ = _list_topics({"bootstrap.servers": scram_sandbox.bootstrap("A")}, timeout=3)
    assert metadata is None  # PLAINTEXT to a SASL listener: no answer
    metadata, errors = _list_topics(
        {**scram_sandbox.client_config("A"), "sasl.password": "not-the-password"}, timeout=6
    )
    assert metadata is None
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
    metadata, errors = _list_topics(scram_sandbox.client_config("A"))
    assert metadata is not None and metadata.brokers, errors
    info = scram_sandbox.info()
    assert info["security"]["mode"] == "scram-tls" and password not in json.dumps(info)
    assert scram_sandbox.tls is not None and scram_sandbox.tls.key_password not in json.dumps(info)


def test_clients_without_a_trusted_certificate_are_refused(scram_sandbox, tmp_path):
    """Mutual TLS: the right password is not enough without a client certificate signed by the sandbox CA."""
    config = scram_sandbox.client_config("A")
    without_certificate = {
        k: v
        for k, v in config.items()
        if k not in ("ssl.certificate.location", "ssl.key.location", "ssl.key.password")
    }
    metadata, errors = _list_topics(without_certificate, timeout=3)
    assert metadata is None
    assert any(
        "bad certificate" in error.str() or "certificate required" in error.str() for error in errors
    ), errors
    foreign_ca_key = _fresh_key()
    foreign_ca = issue_certificate("foreign-ca", foreign_ca_key, is_ca=True)
    key = _fresh_key()
    (tmp_path / "foreign.pem").write_text(
        key_and_chain_pem(key, issue_certificate("intruder", key, (foreign_ca, foreign_ca_key)), None)
    )
    foreign = {**without_certificate, "ssl.certificate.location": str(tmp_path / "foreign.pem")}
    foreign["ssl.key.location"] = foreign["ssl.certificate.location"]
    metadata, errors = _list_topics(foreign, timeout=3)
    assert metadata is None, "a certificate of another CA was accepted"


def test_mirrormaker_replicates_between_scram_clusters(scram_sandbox, unique_topic, password):
    topic = unique_topic("mm2-scram")
    a, b = scram_sandbox.client_config("A"), scram_sandbox.client_config("B")
    create_topic(a, topic, 2)
    produce(a, topic, [(None, f"v{i}".encode(), i % 2, None) for i in range(50)])
    wait_for(
        lambda: sum((end_offsets(b, f"A.{topic}") or {}).values()) >= 50, 90, f"A.{topic} replicated to B"
    )
    run_dir = scram_sandbox.run_dir
    key_password = scram_sandbox.tls.key_password
    for path in (
        run_dir / "scram-credentials.json",
        run_dir / "mm2.properties",
        run_dir / "A" / "server.properties",
        run_dir / "B" / "server.properties",
    ):
        assert password in path.read_text(), path
        assert _mode(path) == OWNER_ONLY, f"{path} has mode {oct(_mode(path))}"
    for path in (
        run_dir / "mm2.properties",
        run_dir / "A" / "server.properties",
        run_dir / "tls" / "key-password",
    ):
        assert key_password in path.read_text(), path
    for path in (run_dir / "tls").iterdir():
        assert _mode(path) == OWNER_ONLY, f"{path} has mode {oct(_mode(path))}"
    assert _mode(run_dir) == 0o700 and _mode(run_dir / "tls") == 0o700
    assert not list(run_dir.glob("*/format.args")), (
        "the format argument file (with the password) was left behind"
    )
    for log in (run_dir / "logs").glob("*.log"):
        text = log.read_text(errors="replace")
        assert password not in text and key_password not in text, f"{log} holds a password"


def test_health_trigger_kwargs_and_events_carry_no_password(scram_sandbox, secrets):
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
    assert conns["A"] in serialized and not _holds_any(serialized, secrets)

    async def first_event():
        async for event in trigger.run():
            return event

    event = asyncio.run(first_event())
    assert not _holds_any(json.dumps(event.payload, default=str), secrets)


# ---- (b) + (c) the real DAGs move the job A -> B; ps never shows the password ------------------------------


def test_start_forced_failover_and_failback_move_the_job_without_loss(story, secrets):
    needles = list(secrets.values())
    state, output = story.run("start")
    assert state == "success", output[-4000:]
    story.scans.append(scan_processes(needles, story))
    wait_for(
        lambda: any(p["cluster"] == "A" and p["records"] for p in story.progress_lines()),
        120,
        "a batch with records on A",
    )

    for kind, to, epoch in SWITCHES:
        running = story.start_run(kind, force=True, reason="security test")
        while running.process.poll() is None:
            story.scans.append(scan_processes(needles, story, control_pid=running.process.pid))
            time.sleep(0.5)
        state, output = running.wait()
        assert state == "success", output[-6000:]
        story.active_for_producer = to
        record = story.record()
        assert (record["active"], record["epoch"], record["job"]["cluster"]) == (to, epoch, to)
        story.scans.append(scan_processes(needles, story))
        wait_for(
            lambda to=to, epoch=epoch: any(
                p["cluster"] == to and p["epoch"] == epoch and p["records"] for p in story.progress_lines()
            ),
            180,
            f"a batch with records on {to} at epoch {epoch}",
        )

    counts = story.check_no_loss(180)
    on_b = story.producer.acked_per_cluster["B"]
    assert counts["lost"] == 0 and on_b > 0, counts
    epochs = {(p["cluster"], p["epoch"]) for p in story.progress_lines() if p["records"]}
    assert epochs == set(RUNS), epochs
    print("counts:", counts, "scans:", len(story.scans))


def test_password_is_on_no_command_line_nor_in_the_job_or_sandbox_environment(story):
    scans = story.scans
    assert len(scans) >= 1 + 2 * len(SWITCHES), "the start/switch test did not run"
    assert not [hit for scan in scans for hit in scan["cmdline"]], [
        s["cmdline"] for s in scans if s["cmdline"]
    ]
    assert not [hit for scan in scans for hit in scan["environ"]], [
        s["environ"] for s in scans if s["environ"]
    ]
    # Reading environments works: a switch run's dag.test process has the connection (as it must).
    assert any(scan["control"] for scan in scans)
    submits = {cmd for scan in scans for cmd in scan["jobs"]}
    # The scans saw every job's spark-submit command line (each while its DAG launched it).
    for cluster, epoch in RUNS:
        assert any(f"/{cluster}/epoch-{epoch}/settings.json" in cmd for cmd in submits), submits


# ---- (d) nothing the provider writes or shows holds the password, except the job's settings file -----------


def test_secrets_are_absent_from_logs_xcom_templates_record_and_job_files(story, airflow_home, secrets):
    runs = sorted(story.root.glob("run-*.log"))
    assert len(runs) >= len(RUNS)
    settings = sorted(story.root.glob("runs/*/*/epoch-*/settings.json"))
    assert len(settings) == len(RUNS)
    for name, secret in secrets.items():
        holders = files_holding(story.root, secret)
        if "password" in name:  # job logs, progress, sink, checkpoints: clean; the settings file: needed
            assert holders == settings, (name, holders)
        else:  # key material: the job reads key files by path, their content is copied nowhere
            assert holders == [], (name, holders)
        assert files_holding(airflow_home, secret) == [], name  # task logs, the metadata DB (XCom, ...)
    for path in settings:
        job_settings = json.loads(path.read_text())["kafka_options"]
        assert "sasl.jaas.config" in job_settings and job_settings["ssl.keystore.type"] == "PEM"
        assert job_settings["ssl.keystore.location"] == str(story.sandbox.tls.client_file)

    record = story.record()
    assert record["history"] and record["job"]
    assert not _holds_any(json.dumps(record), secrets)
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
        assert not _holds_any(json.dumps([str(value) for value in row]), secrets), row[:2]
    assert {task for task, _key, _value in xcoms} >= {"plan", "submit"}, xcoms


# ---- (e) file modes ----------------------------------------------------------------------------------------


def test_files_have_the_narrowest_modes_that_work(story):
    checkpoints = sorted(story.root.glob(f"checkpoints/{story.pair}/*/epoch-*"))
    run_dirs = sorted(story.root.glob(f"runs/{story.pair}/*/epoch-*"))
    assert len(checkpoints) == len(RUNS) and len(run_dirs) == len(RUNS)
    for run_dir in run_dirs:
        assert _mode(run_dir / "settings.json") == OWNER_ONLY, run_dir
        _assert_not_wider(run_dir / "status.json", NO_WIDER_THAN)
    for checkpoint in checkpoints:
        for record in (checkpoint / "progress").iterdir():
            _assert_not_wider(record, NO_WIDER_THAN)
        _assert_not_wider(checkpoint / "_owner.json", NO_WIDER_THAN)
    for marker in (story.root / "fence").iterdir():
        _assert_not_wider(marker, NO_WIDER_THAN)


# ---- (f) TLS bad inputs on the real clusters: configuration errors naming the problem, never "down" ------


HANDSHAKE_HEALTH = {**TEST_HEALTH, "probe_timeout_seconds": 3, "heartbeat_stale_seconds": 5}
"""Quick thresholds, with probes long enough for a TLS handshake to fail (and say why) on a loaded machine."""


def _bad_extra(problem: str, sandbox: Sandbox, tmp_path: Path) -> tuple[dict, str]:
    """A connection extra for cluster A with one TLS problem, and the error text expected for it."""
    import datetime as dt

    tls = sandbox.tls
    extra = dict(sandbox.client_config("A"))
    client = str(tls.client_file)
    if problem == "certificate does not match its key":
        extra["ssl.key.location"] = _write_key(tmp_path / "other.key", _fresh_key())
        extra.pop("ssl.key.password")
        return extra, rf"ssl.certificate.location {client} does not match the private key in .*other.key"
    if problem == "expired certificate":
        start = dt.datetime.now(dt.UTC) - dt.timedelta(days=3)
        key, certificate = tls.issue_client(
            "expired", not_before=start, not_after=start + dt.timedelta(days=1)
        )
        path = tmp_path / "expired.pem"
        path.write_text(key_and_chain_pem(key, certificate, None))
        extra.update({"ssl.certificate.location": str(path), "ssl.key.location": str(path)})
        extra.pop("ssl.key.password")
        return extra, rf"'CN=expired' in ssl.certificate.location {path} expired on"
    if problem == "truststore without the broker's CA":
        other_ca = tmp_path / "other-ca.pem"
        other_ca.write_text(certificate_pem(issue_certificate("other-ca", _fresh_key(), is_ca=True)))
        extra["ssl.ca.location"] = str(other_ca)
        return extra, r"the TLS handshake with .* failed \(.*certificate verify failed.*TLS misconfiguration"
    if problem == "missing key file":
        extra["ssl.key.location"] = str(tmp_path / "gone.key")
        return extra, rf"ssl.key.location {tmp_path / 'gone.key'} does not exist"
    raise AssertionError(problem)


@pytest.mark.parametrize(
    "problem",
    [
        "certificate does not match its key",
        "expired certificate",
        "truststore without the broker's CA",
        "missing key file",
    ],
)
def test_tls_misconfiguration_is_a_configuration_error_not_a_cluster_down(
    scram_sandbox, tmp_path, monkeypatch, problem
):
    """The down sensor on healthy cluster A with a broken TLS setup: it fails with an error naming the file
    and the problem (at its check before waiting, or at its first probe for what only a handshake reveals),
    and no probe of A is ever recorded as FAILED: a misconfiguration must not fail a healthy cluster over."""
    from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
    from airflow_kafka_failover.io.probe import probe_cluster
    from airflow_kafka_failover.sensors.cluster_health import KafkaClusterDownSensor
    from airflow_kafka_failover.triggers.cluster_health import ClusterHealthTrigger

    extra, expected = _bad_extra(problem, scram_sandbox, tmp_path)
    good = register_kafka_connections(scram_sandbox, "tlsbad")
    monkeypatch.setenv("AIRFLOW_CONN_TLSBAD_BROKEN", json.dumps({"conn_type": "kafka", "extra": extra}))
    sensor = KafkaClusterDownSensor(
        task_id="a_down",
        kafka_config_id="tlsbad_broken",
        cluster_alias="A",
        peer_kafka_config_id=good["B"],
        thresholds=HANDSHAKE_HEALTH,
    )
    if problem == "truststore without the broker's CA":  # the files are fine: only the handshake tells
        watch = sensor._build()
        with pytest.raises(ConfigError, match=expected):
            watch.observe()
        assert watch.history == [], "a TLS misconfiguration was recorded as a probe of the cluster"
        trigger = ClusterHealthTrigger(
            kind=sensor.kind,
            watch_kwargs=sensor.watch_kwargs(),
            thresholds=sensor.thresholds,
            deadline=time.time() + 30,
            state=watch.state(),
        )

        async def first_event():
            async for event in trigger.run():
                return event

        event = asyncio.run(first_event())
        assert event.payload["status"] == "error", event.payload
        assert "TLS misconfiguration" in event.payload["message"], event.payload
    else:
        with pytest.raises(ConfigError, match=expected):
            sensor._build()
        with pytest.raises(ConfigError, match=expected):
            probe_cluster(KafkaClusterHook("tlsbad_broken", timeout_seconds=3), "A", [], 3.0)
    # The same cluster through the good connection answers: the cluster was healthy all along.
    assert probe_cluster(KafkaClusterHook(good["A"], timeout_seconds=5), "A", [], 5.0).ok


# ---- helpers ----------------------------------------------------------------------------------------------


def _fresh_key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key) -> str:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(path)


def _holds_any(text: str, secrets: dict[str, str]) -> list[str]:
    """The names of the secrets that ``text`` holds."""
    return [name for name, secret in secrets.items() if secret in text]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _assert_not_wider(path: Path, widest: int) -> None:
    mode = _mode(path)
    assert mode & ~widest == 0, f"{path} has mode {oct(mode)}, wider than {oct(widest)}"


def files_holding(root: Path, secret: str) -> list[Path]:
    """Every regular file under ``root`` whose bytes contain ``secret``.

    The job still runs while this reads its folders: Spark's staging folders and files can vanish between
    listing and reading (they are renamed into the sink). ``os.walk`` skips folders gone before they are
    listed and a file gone before it is read is skipped, instead of failing the scan.
    """
    needle = secret.encode()
    holders = []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            try:
                if path.is_file() and needle in path.read_bytes():
                    holders.append(path)
            except FileNotFoundError:
                continue
    return sorted(holders)


def _read_proc(pid: str, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:  # gone, or not ours to read
        return b""


def scan_processes(secrets: list[str], story: Story, control_pid: int | None = None) -> dict[str, list[str]]:
    """Look for ``secrets`` in every process's command line, and in the environment of the job's processes
    (every process group with a spark-submit member that names the story's files) and of the sandbox's.

    Airflow's own processes keep their environment out of the check: the sandbox hands them the
    connections as ``AIRFLOW_CONN_*`` variables, which is how they are meant to get them. ``control_pid``
    (such a process) shows that the environment check can see the (first) secret at all.
    """
    needles = [secret.encode() for secret in secrets]

    def holds(data: bytes) -> bool:
        return any(needle in data for needle in needles)

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
        if in_group and holds(_read_proc(pid, "environ")):
            environ_hits.append(f"{pid}: {cmdlines[pid][:150]!r}")
    control = (
        [str(control_pid)] if control_pid and needles[0] in _read_proc(str(control_pid), "environ") else []
    )
    return {
        "cmdline": [f"{pid}: {cmd[:150]!r}" for pid, cmd in cmdlines.items() if holds(cmd)],
        "environ": environ_hits,
        "jobs": jobs,
        "control": control,
    }

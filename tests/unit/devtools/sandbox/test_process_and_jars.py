"""Process groups tracked by pid files, and the jar folder manifest (real processes, no Kafka)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import zipfile
from pathlib import Path

import pytest
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox import class_sharing, jars, local_fs, loopback
from akf_devtools.sandbox.loopback import free_ports, port_in_use, wait_until

from airflow_kafka_failover.core.process_group import ManagedProcess


def test_process_lives_in_its_own_group_and_stops_with_it(tmp_path: Path):
    proc = ManagedProcess("sleeper", tmp_path)
    # A shell with a child: stopping must take the whole group, not just the leader.
    pid = proc.start(["sh", "-c", "sleep 300 & exec sleep 301"])
    assert os.getpgid(pid) == pid
    assert proc.is_running()
    # SIGSTOP while the shell is still forking leaves it in 'D' (waiting on a stopped vfork child),
    # not 'T': stop it only once it has become the second sleep.
    assert wait_until(lambda: Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x00301\x00", 5)
    proc.signal_group(signal.SIGSTOP)
    assert wait_until(proc.is_stopped, 5)
    proc.stop(timeout=5)
    assert not proc.is_running()
    assert not proc.pid_file.exists()
    assert "starting sleeper" in proc.log_file.read_text()


def test_recycled_pid_is_not_taken_for_ours(tmp_path: Path):
    proc = ManagedProcess("ghost", tmp_path)
    proc.pid_file.parent.mkdir(parents=True)
    # Our own pid, but with a start time that is not ours: must not be signalled.
    proc.pid_file.write_text(json.dumps({"pid": os.getpid(), "start_ticks": 1, "argv0": "java"}))
    assert proc.pid() is None
    proc.stop()  # nothing to stop; must not kill the test process
    assert not proc.pid_file.exists()


def test_free_ports_are_distinct_and_free():
    ports = free_ports(20)
    assert len(set(ports)) == 20
    assert not any(port_in_use(p) for p in ports)


def test_a_port_handed_out_is_not_handed_out_again_until_its_reservation_expires(tmp_path: Path, monkeypatch):
    # Two pytest-xdist workers share the registry: a port chosen for a broker that is still starting must
    # not be chosen by the other worker for its own server.
    monkeypatch.setenv(loopback.PORT_REGISTRY_ENV, str(tmp_path / "ports"))
    first = free_ports(1)[0]
    monkeypatch.setattr(loopback, "LOWEST_PORT", first)
    monkeypatch.setattr(loopback, "_ephemeral_range", lambda: (first + 1, first + 100))
    # Only ``first`` is a candidate below the range, and it is reserved: the fallback's kernel-chosen port.
    again = free_ports(1)[0]
    assert again != first
    # An hour later the reservation is taken over.
    marker = tmp_path / "ports" / str(first)
    old = marker.stat().st_mtime - loopback.PORT_RESERVATION_S - 1
    os.utime(marker, (old, old))
    assert free_ports(1) == [first]


def test_artifact_names_keep_scala_suffixes():
    assert jars._artifact_name("spark-sql-kafka-0-10_2.13-4.0.0.jar") == "spark-sql-kafka-0-10_2.13"
    assert jars._artifact_name("javassist-3.30.2-GA.jar") == "javassist"
    assert jars._artifact_name("zstd-jni-1.5.6-10.jar") == "zstd-jni"


@pytest.mark.slow
def test_corrupt_or_missing_jar_folder_is_resolved_again(tmp_path: Path, monkeypatch):
    """A copy of the resolved spark-kafka folder with one jar truncated and one deleted gets re-resolved."""
    real = jars.ArtifactSet("spark-kafka")
    real_jars = real.ensure()
    real_folder = real.folder  # resolved now: the property follows AKF_JARS_DIR
    monkeypatch.setenv("AKF_JARS_DIR", str(tmp_path))
    shutil.copytree(real_folder, tmp_path / "spark-kafka")
    copy = jars.ArtifactSet("spark-kafka")
    assert copy.problem() is None
    victims = copy.jars()[:2]
    victims[0].write_bytes(b"not a jar")
    victims[1].unlink()
    assert "missing or has the wrong size" in copy.problem()
    restored = copy.ensure()
    assert copy.problem() is None
    assert {j.name for j in restored} == {j.name for j in real_jars}


def test_missing_maven_gives_one_clear_line(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("AKF_JARS_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxError, match=r"mvn \(Apache Maven 3.8\+\) is not on PATH: install Maven"):
        jars.ArtifactSet("kafka").ensure()


@pytest.mark.slow
def test_spark_jars_leave_out_what_pyspark_ships(tmp_path: Path):
    shipped = tmp_path / "pyspark-jars"
    shipped.mkdir()
    (shipped / "scala-library-2.13.16.jar").write_bytes(b"")
    names = {j.name for j in jars.spark_kafka_jars(shipped)}
    assert any(n.startswith("spark-sql-kafka-0-10_2.13") for n in names)
    assert not any(n.startswith("scala-library") for n in names)


@pytest.mark.slow
def test_record_id_jar_is_compiled_once_and_again_when_it_is_damaged(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("AKF_JARS_DIR", str(tmp_path))
    jar = jars.record_id_jar()
    assert jar == tmp_path / "record-id" / jars.RECORD_ID_JAR
    with zipfile.ZipFile(jar) as archive:
        assert "akf/jobs/JsonStringField.class" in archive.namelist()
    built = jar.stat().st_mtime_ns
    assert jars.record_id_jar() == jar and jar.stat().st_mtime_ns == built  # warm: nothing compiled
    jar.write_bytes(b"not a jar")
    assert jars.record_id_jar() == jar and jars._is_jar(jar)
    manifest = json.loads((jar.parent / jars.MANIFEST).read_text())
    assert manifest["spark_jars"] and manifest["size"] == jar.stat().st_size


@pytest.mark.slow
def test_without_javac_the_job_jars_leave_out_the_record_id_jar_and_say_why(
    tmp_path: Path, monkeypatch, caplog
):
    spark_kafka = jars.spark_kafka_jars()  # resolved with the real PATH
    delta = jars.delta_jars()
    monkeypatch.setenv("AKF_JARS_DIR", str(tmp_path))
    shutil.copytree(spark_kafka[0].parent, tmp_path / "spark-kafka")
    shutil.copytree(delta[0].parent, tmp_path / "delta")
    monkeypatch.setattr(jars.shutil, "which", lambda name: None if name == "javac" else shutil.which(name))
    with pytest.raises(SandboxError, match=r"javac is not on PATH: the record-id jar needs a Java 17 JDK"):
        jars.record_id_jar()
    caplog.set_level("WARNING", logger=jars.__name__)
    names = [jar.name for jar in jars.job_jars()]
    assert names == [jar.name for jar in spark_kafka + delta]
    assert "the job runs without the record-id jar: javac is not on PATH" in caplog.text


def test_in_parallel_waits_for_every_call_then_raises_the_first_error():
    import threading
    import time

    from akf_devtools.sandbox.loopback import in_parallel

    done: list[str] = []
    both_running = threading.Barrier(2, timeout=5)

    def slow() -> None:
        both_running.wait()  # only passes when the two calls run at the same time
        time.sleep(0.2)
        done.append("slow")

    def failing() -> None:
        both_running.wait()
        raise ValueError("first")

    with pytest.raises(ValueError, match="first"):
        in_parallel([failing, slow])
    assert done == ["slow"], "in_parallel raised before every call had ended"
    in_parallel([])


@pytest.fixture
def resolved_sets(tmp_path: Path, monkeypatch) -> list[str]:
    """Stand in for Maven and javac: each set ``ensure`` is asked for gets one jar under ``tmp_path``."""
    asked: list[str] = []

    def ensure(self, *, check_zip: bool = False) -> list[Path]:
        asked.append(self.name)
        self.folder.mkdir(parents=True, exist_ok=True)
        jar = self.folder / f"{self.name}-1.0.jar"
        jar.write_bytes(b"")
        return [jar]

    monkeypatch.setenv("AKF_JARS_DIR", str(tmp_path))
    monkeypatch.delenv(jars.JOB_JARS_ENV, raising=False)
    monkeypatch.setattr(jars.ArtifactSet, "ensure", ensure)
    monkeypatch.setattr(jars, "record_id_jar", lambda: tmp_path / "record-id" / jars.RECORD_ID_JAR)
    monkeypatch.setattr(jars, "hadoop_minicluster_classpath", lambda: str(tmp_path / "hadoop-main"))
    monkeypatch.setattr(jars, "_pyspark_jars_dir", lambda: tmp_path / "pyspark-jars")
    monkeypatch.setattr(class_sharing, "ensure_archive", lambda: tmp_path / "class-sharing" / "spark.jsa")
    monkeypatch.setattr(local_fs, "local_fs_jar", lambda: tmp_path / "local-fs" / local_fs.LOCAL_FS_JAR)
    return asked


def test_setup_resolves_only_the_demos_sets_and_all_of_them_with_all(resolved_sets, capsys):
    jars.main([])
    assert set(resolved_sets) == set(jars.DEMO_SETS) == {"kafka", "mirrormaker", "spark-kafka"}
    out = capsys.readouterr().out
    assert f"local file system of the local drivers: {jars.jars_root() / 'local-fs'}" in out
    assert "not resolved (the tests' sets): delta, hadoop-minicluster, s3a" in out
    assert "delta" not in out.splitlines()[-1]  # the job jars it prints leave Delta out
    resolved_sets.clear()
    jars.main(["--all"])
    assert set(resolved_sets) == set(jars.ARTIFACT_SETS)
    out = capsys.readouterr().out
    assert "hadoop-minicluster main:" in out and "class-sharing archive of the local Spark drivers:" in out


def test_the_demos_job_jars_leave_out_delta_and_resolve_nothing_else(resolved_sets):
    value = jars.use_job_jars(delta=False)
    assert [Path(jar).name for jar in value.split(",")] == ["spark-kafka-1.0.jar", jars.RECORD_ID_JAR]
    assert resolved_sets == ["spark-kafka"]
    assert jars.use_job_jars() == value  # set already: kept as it is, nothing resolved
    assert resolved_sets == ["spark-kafka"]
    names = [jar.name for jar in jars.job_jars()]
    assert names == ["spark-kafka-1.0.jar", "delta-1.0.jar", jars.RECORD_ID_JAR]

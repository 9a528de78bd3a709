"""The local drivers' class-sharing archive: used only when built for this machine's java and pyspark."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from akf_devtools.sandbox import class_sharing
from akf_devtools.sandbox.class_sharing import BASE_JAVA_OPTIONS, archive_path, driver_java_options
from akf_devtools.sandbox.local_fs import CLASS_PATH


@pytest.fixture
def jars_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("AKF_JARS_DIR", str(tmp_path))
    # the local file system's jar on the drivers' class path, without compiling it
    jar = tmp_path / "local-fs" / "akf-local-fs.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"jar")
    monkeypatch.setattr(class_sharing, "local_fs_conf", lambda: {CLASS_PATH: str(jar)})
    return tmp_path


def test_without_an_archive_the_drivers_get_the_base_options(jars_dir):
    assert not archive_path().exists()
    assert driver_java_options() == BASE_JAVA_OPTIONS


def test_a_built_archive_is_shared_and_a_jvm_that_cannot_use_it_stays_quiet(jars_dir):
    archive = archive_path()
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    options = driver_java_options()
    assert options.startswith(BASE_JAVA_OPTIONS)
    assert f"-XX:SharedArchiveFile={archive}" in options and "-Xlog:cds=off" in options


def test_the_archive_name_changes_with_pyspark(jars_dir, monkeypatch):
    first = archive_path()
    monkeypatch.setattr("importlib.metadata.version", lambda name: "9.9.9")
    second = archive_path()
    assert first != second and second.name.startswith("spark-9.9.9-")


def test_no_java_means_no_archive(jars_dir, monkeypatch):
    monkeypatch.setattr(class_sharing.shutil, "which", lambda name: None)
    assert driver_java_options() == BASE_JAVA_OPTIONS


def test_the_archive_name_changes_with_the_class_path_and_its_jars(jars_dir, monkeypatch):
    """A JVM refuses an archive whose class path differs (a jar's size or time included): a rebuilt local
    file system jar, or none, names another archive."""
    first = archive_path()
    (jars_dir / "local-fs" / "akf-local-fs.jar").write_bytes(b"rebuilt jar")
    second = archive_path()
    monkeypatch.setattr(class_sharing, "local_fs_conf", dict)
    third = archive_path()
    assert len({first, second, third}) == 3


def test_a_new_archive_replaces_the_old_spark_ones_and_leaves_kafkas(jars_dir, monkeypatch):
    folder = archive_path().parent
    folder.mkdir(parents=True)
    for name in ("spark-3.5.7-0123456789ab.jsa", "kafka-broker-0123456789ab.jsa"):
        (folder / name).write_bytes(b"old")

    def archiving_driver(options: str):
        written = options.split("-XX:ArchiveClassesAtExit=")[1].split()[0]
        Path(written).write_bytes(b"new")
        return subprocess.CompletedProcess([], 0, "", "")

    monkeypatch.setattr(class_sharing, "_run_workload", archiving_driver)
    archive = class_sharing.ensure_archive()
    assert sorted(path.name for path in folder.glob("*.jsa")) == sorted(
        [archive.name, "kafka-broker-0123456789ab.jsa"]
    )

"""The local drivers' file system settings, and the jar they name."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
from akf_devtools.sandbox import jars, local_fs
from akf_devtools.sandbox.local_fs import (
    ABSTRACT_FILE_SYSTEM,
    CLASS_PATH,
    FILE_SYSTEM,
    conf_for,
    local_fs_conf,
    with_class_path,
)


@pytest.mark.slow
def test_the_settings_name_classes_the_compiled_jar_holds(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("AKF_JARS_DIR", str(tmp_path))
    conf = local_fs_conf()
    jar = Path(conf[CLASS_PATH])
    assert jar == tmp_path / "local-fs" / local_fs.LOCAL_FS_JAR
    assert conf["spark.executor.extraClassPath"] == str(jar)  # executors get spark.hadoop.* too
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
    for key, name in (
        ("spark.hadoop.fs.file.impl", FILE_SYSTEM),
        ("spark.hadoop.fs.AbstractFileSystem.file.impl", ABSTRACT_FILE_SYSTEM),
    ):
        assert conf[key] == name and f"{name.replace('.', '/')}.class" in names
    assert "akf/sandbox/ForklessRawLocalFileSystem.class" in names
    built = jar.stat().st_mtime_ns
    assert local_fs_conf() == conf and jar.stat().st_mtime_ns == built  # warm: nothing compiled


def test_without_javac_the_drivers_keep_hadoops_file_system_and_the_log_says_why(
    tmp_path: Path, monkeypatch, caplog
):
    monkeypatch.setenv("AKF_JARS_DIR", str(tmp_path))
    monkeypatch.setattr(jars.shutil, "which", lambda name: None if name == "javac" else shutil.which(name))
    caplog.set_level("WARNING", logger=local_fs.__name__)
    assert local_fs_conf() == {}
    assert "use Hadoop's own local file system: javac is not on PATH: the local-fs jar" in caplog.text


def test_the_jar_stays_on_the_class_path_after_a_stores_jars_instead_of_being_replaced(tmp_path: Path):
    ours = conf_for(tmp_path / "akf-local-fs.jar")
    store = {CLASS_PATH: "/s3a/hadoop-aws.jar:/s3a/bundle.jar", "spark.hadoop.fs.s3a.bucket.probe": "2"}
    merged = {**ours, **with_class_path(store, ours[CLASS_PATH])}
    assert merged[CLASS_PATH] == f"/s3a/hadoop-aws.jar:/s3a/bundle.jar:{tmp_path / 'akf-local-fs.jar'}"
    assert merged["spark.hadoop.fs.file.impl"] == FILE_SYSTEM
    assert with_class_path({}, "") == {} and with_class_path({}, "/a.jar") == {CLASS_PATH: "/a.jar"}

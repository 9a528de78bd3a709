"""The sandbox's Kafka JVMs' class-sharing archives: one per main class, used only when built for this
machine's java and the Kafka jars; the archiving sandbox's JVMs write one each at their exit."""

from __future__ import annotations

import pytest
from akf_devtools.sandbox import kafka_class_sharing
from akf_devtools.sandbox.kafka_class_sharing import archive_path, java_options

BROKER, MM2 = "kafka.Kafka", "org.apache.kafka.connect.mirror.MirrorMaker"


@pytest.fixture
def kafka_jars(tmp_path, monkeypatch):
    """A jars folder whose broker set holds two jars and whose MirrorMaker 2 set one (each role's key is
    computed from its own)."""
    monkeypatch.setenv("AKF_JARS_DIR", str(tmp_path))
    folder, mirrormaker = tmp_path / "kafka-set", tmp_path / "mirrormaker-set"
    folder.mkdir()
    mirrormaker.mkdir()
    for name in ("kafka_2.13-4.1.0.jar", "kafka-clients-4.1.0.jar"):
        (folder / name).write_bytes(b"jar")
    (mirrormaker / "connect-mirror-4.1.0.jar").write_bytes(b"jar")
    sets = {BROKER: folder, MM2: mirrormaker}
    monkeypatch.setattr(kafka_class_sharing, "kafka_classpath", lambda main_class: f"{sets[main_class]}/*")
    return folder


def test_without_archives_the_jvms_get_no_option(kafka_jars):
    assert java_options(BROKER) == [] and java_options(MM2) == []


def test_a_built_archive_goes_to_its_own_main_class_only(kafka_jars):
    archive = archive_path("broker")
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    assert java_options(BROKER) == [
        f"-XX:SharedArchiveFile={archive}",
        "-Xlog:cds=off",
        "-Xlog:cds+dynamic=off",
    ]
    assert java_options(MM2) == []  # its own is not built
    assert java_options("kafka.tools.StorageTool") == []


def test_other_kafka_jars_make_another_archive(kafka_jars):
    first, mirrormaker = archive_path("broker"), archive_path("mirrormaker")
    (kafka_jars / "kafka_2.13-4.1.0.jar").write_bytes(b"another build")
    second = archive_path("broker")
    assert first != second and first.parent == second.parent
    assert archive_path("mirrormaker") == mirrormaker  # MirrorMaker 2's jars did not change


def test_while_archiving_each_jvm_writes_its_own_archive_at_exit(kafka_jars, tmp_path, monkeypatch):
    monkeypatch.setattr(kafka_class_sharing, "_archiving", tmp_path / "scratch")
    first, second = java_options(BROKER)[0], java_options(BROKER)[0]
    assert first.startswith(f"-XX:ArchiveClassesAtExit={tmp_path / 'scratch'}/broker-") and first != second
    assert java_options(MM2)[0].startswith(f"-XX:ArchiveClassesAtExit={tmp_path / 'scratch'}/mirrormaker-")


def test_no_java_means_no_archive(kafka_jars, monkeypatch):
    monkeypatch.setattr(kafka_class_sharing.shutil, "which", lambda name: None)
    assert java_options(BROKER) == []

"""docker-compose.yml describes the same stack as the sandbox (it cannot run here: no Docker engine)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from airflow_kafka_failover.sandbox.mirrormaker import MirrorMaker, ReplicationSettings

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def _properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def test_services_and_pinned_images(compose):
    services = compose["services"]
    assert {"kafka-a", "kafka-b", "mirrormaker"} <= set(services)
    for name, service in services.items():
        image = service.get("image", "")
        assert ":" in image and not image.endswith(":latest"), f"{name} image {image!r} is not pinned"


def test_kafka_image_matches_the_sandbox_kafka_version(compose):
    pom = (REPO / "jvm" / "kafka" / "pom.xml").read_text()
    version = pom.split("<kafka.version>")[1].split("</kafka.version>")[0]
    for name in ("kafka-a", "kafka-b", "mirrormaker"):
        assert compose["services"][name]["image"] == f"apache/kafka:{version}"


def test_mirrormaker_settings_equal_the_sandbox(compose):
    mounted = [v for v in compose["services"]["mirrormaker"]["volumes"] if "mm2.properties" in v]
    host_path = REPO / mounted[0].split(":")[0]
    assert host_path.is_file()
    sandbox = MirrorMaker(Path("/x"), {"A": "kafka-a:9092", "B": "kafka-b:9092"}, ReplicationSettings())
    assert _properties(host_path.read_text()) == _properties(sandbox.properties())


def test_bootstrap_addresses_in_mm2_match_service_listeners(compose):
    mm2 = _properties((REPO / "docker" / "mm2.properties").read_text())
    for alias, service in (("A", "kafka-a"), ("B", "kafka-b")):
        advertised = compose["services"][service]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
        assert f"INTERNAL://{mm2[f'{alias}.bootstrap.servers']}" in advertised


def _has_compose_plugin() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False, timeout=30)
    return probe.returncode == 0


@pytest.mark.skipif(not _has_compose_plugin(), reason="no docker client with the compose plugin")
def test_docker_compose_config_parses_offline():
    result = subprocess.run(
        ["docker", "compose", "-f", str(REPO / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True, text=True, check=False, timeout=60,
    )
    assert result.returncode == 0, result.stderr

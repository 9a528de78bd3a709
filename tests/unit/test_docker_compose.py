"""docker-compose.yml describes the sandbox's stack plus Spark and Airflow, consistently with the sandbox.

No Docker engine runs here, so the file is checked as data: services, images, mounts and ports, and every
setting that must agree with the sandbox (MirrorMaker 2), the pair config (docker/pairs.yaml) and the
versions the project resolves (pyspark, the poms, the Airflow pin); its syntax is validated against the
compose-spec JSON Schema (check-jsonschema of the `dev` dependency group ships it), and by ``docker compose
config`` where a docker client is installed.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from akf_devtools.sandbox.mirrormaker import (
    DEFAULT_POLICY_CLASS,
    IDENTITY_POLICY_CLASS,
    MirrorMaker,
    ReplicationSettings,
)
from akf_devtools.sandbox.sandbox import Sandbox
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from airflow_kafka_failover.domain.config import PairConfig, load_pairs

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_SERVICES = ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
REQUIRED_SERVICES = (
    "kafka-a",
    "kafka-b",
    "mirrormaker",
    "spark-master",
    "spark-worker",
    "producer",
    *AIRFLOW_SERVICES,
)
POLICY_CLASSES = {"default": DEFAULT_POLICY_CLASS, "identity": IDENTITY_POLICY_CLASS}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def mm2() -> dict[str, str]:
    return dict(_property_lines((REPO / "docker" / "mm2.properties").read_text()))


@pytest.fixture(scope="module")
def pairs() -> dict[str, PairConfig]:
    return load_pairs(REPO / "docker" / "pairs.yaml")


def _property_lines(text: str) -> list[tuple[str, str]]:
    """The (key, value) lines of a .properties file in order; a repeated key keeps every occurrence."""
    lines = (line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    return [(key.strip(), value.strip()) for key, value in (line.split("=", 1) for line in lines)]


def _cluster_service(cluster: str) -> str:
    return f"kafka-{cluster.lower()}"


def _internal_bootstrap(services: dict, service: str) -> str:
    advertised = services[service]["environment"]["KAFKA_ADVERTISED_LISTENERS"].split(",")
    return next(listener.split("://", 1)[1] for listener in advertised if listener.startswith("INTERNAL://"))


def _sandbox_mirrormaker(services: dict, **settings) -> MirrorMaker:
    """The sandbox's MirrorMaker 2, pointed at the compose clusters' internal listeners."""
    names = Sandbox(run_dir=Path("/nonexistent/akf-sandbox")).cluster_names
    bootstraps = {name: _internal_bootstrap(services, _cluster_service(name)) for name in names}
    return MirrorMaker(Path("/unused"), bootstraps, ReplicationSettings(**settings))


def _volumes(service: dict) -> list[tuple[str, str]]:
    """(source, target) of every volume entry (short syntax, which this file keeps to)."""
    entries = service.get("volumes", [])
    assert all(isinstance(entry, str) for entry in entries), f"use the short volume syntax: {entries}"
    return [tuple(entry.split(":")[:2]) for entry in entries]


def _is_bind(source: str) -> bool:
    return source.startswith((".", "/", "~"))


def _argv(service: dict, key: str) -> list[str]:
    value = service.get(key) or []
    return shlex.split(value) if isinstance(value, str) else list(value)


def _option(argv: list[str], name: str) -> str:
    assert name in argv, f"{name} missing from {argv}"
    return argv[argv.index(name) + 1]


def _dockerfile_bases(dockerfile: Path) -> list[str]:
    """The external images a Dockerfile builds FROM (stages it names itself are left out)."""
    bases, stages = [], set()
    for line in dockerfile.read_text().splitlines():
        match = re.match(r"\s*FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.IGNORECASE)
        if match:
            if match.group(1) not in stages:
                bases.append(match.group(1))
            if match.group(2):
                stages.add(match.group(2))
    return bases


def _tag(image: str) -> str:
    name = image.rsplit("/", 1)[-1]
    return name.split(":", 1)[1] if ":" in name else ""


# ---- services, images, mounts, ports ---------------------------------------------------------------------


def test_every_required_service_is_present(services):
    missing = [name for name in REQUIRED_SERVICES if name not in services]
    assert not missing, f"docker-compose.yml lacks {missing}"
    for name in AIRFLOW_SERVICES:
        assert _argv(services[name], "command")[0] == name.removeprefix("airflow-"), name


def test_every_image_is_pinned(services):
    for name, service in services.items():
        image = service.get("image", "")
        tag = _tag(image)
        assert tag and tag != "latest", f"{name}: image {image!r} is not pinned to a version"
    for service in services.values():
        if "build" in service:
            dockerfile = REPO / service["build"]["context"] / service["build"]["dockerfile"]
            for base in _dockerfile_bases(dockerfile):
                pinned = _tag(base) not in ("", "latest") and "$" not in base
                assert pinned, f"{dockerfile}: FROM {base} is not pinned"


def test_the_provider_image_is_tagged_with_the_package_version(services):
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    built = {service["image"] for service in services.values() if "build" in service}
    assert built == {f"{project['name']}:{project['version']}"}


def test_every_bind_mount_and_build_context_exists(compose, services):
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for source, target in _volumes(service):
            if _is_bind(source):
                assert (REPO / source).exists(), f"{name} mounts {source}, which is not in the repository"
            else:
                assert source in declared, f"{name} mounts volume {source!r}, which is not declared"
            assert target.startswith("/"), f"{name}: mount target {target!r} is not absolute"
        if "build" in service:
            context = REPO / service["build"]["context"]
            dockerfile = context / service["build"]["dockerfile"]
            assert dockerfile.is_file(), f"{name}: {dockerfile} is missing"
            # Without it the build context is the whole checkout, .venv and .jars included.
            assert dockerfile.with_name(dockerfile.name + ".dockerignore").is_file(), name


def test_host_ports_are_unique(services):
    published = []
    for name, service in services.items():
        for entry in service.get("ports", []):
            host_port = str(entry).rsplit(":", 1)[0].rsplit(":", 1)[-1]
            assert host_port.isdigit(), f"{name}: publish ports as 'host:container', got {entry!r}"
            published.append(host_port)
    assert len(published) == len(set(published)), f"a host port is published twice: {sorted(published)}"


def test_dependencies_name_services_and_use_conditions(services):
    for name, service in services.items():
        depends_on = service.get("depends_on", {})
        assert isinstance(depends_on, dict), f"{name}: depends_on needs conditions"
        for dependency, spec in depends_on.items():
            assert dependency in services and dependency != name, f"{name} depends on {dependency!r}"
            condition = spec["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits on {dependency}: no healthcheck"
            else:
                assert condition == "service_completed_successfully", f"{name}: {dependency}: {condition}"


# ---- versions --------------------------------------------------------------------------------------------


def test_kafka_images_match_the_kafka_versions_of_the_poms(services):
    """The brokers (and the topic tool) at the broker set's release, MirrorMaker 2 at its own set's."""

    def version(artifact_set: str) -> str:
        pom = (REPO / "jvm" / artifact_set / "pom.xml").read_text()
        return pom.split("<kafka.version>")[1].split("</kafka.version>")[0]

    kafka_services = [
        name for name, service in services.items() if service.get("image", "").startswith("apache/kafka:")
    ]
    assert {"kafka-a", "kafka-b", "mirrormaker"} <= set(kafka_services)
    for name in kafka_services:
        artifact_set = "mirrormaker" if name == "mirrormaker" else "kafka"
        assert services[name]["image"] == f"apache/kafka:{version(artifact_set)}", name


def test_spark_images_match_pyspark_and_the_spark_kafka_pom(services):
    pom = (REPO / "jvm" / "spark-kafka" / "pom.xml").read_text()
    spark_version = pom.split("<spark.version>")[1].split("</spark.version>")[0]
    scala = re.search(r"spark-sql-kafka-0-10_(\d+\.\d+)", pom).group(1)
    assert version("pyspark") == spark_version
    for name in ("spark-master", "spark-worker"):
        image = services[name]["image"]
        assert image.startswith("apache/spark:"), name
        tag = _tag(image)
        assert tag.split("-")[0] == spark_version, f"{name}: {image} is not Spark {spark_version} (pyspark's)"
        assert f"scala{scala}" in tag and "java17" in tag, f"{name}: {image} must be Scala {scala}, Java 17"


def test_the_airflow_base_image_satisfies_the_project_pins():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    airflow_pin = next(dep for dep in project["dependencies"] if re.match(r"apache-airflow[<>=]", dep))
    bases = _dockerfile_bases(REPO / "docker" / "airflow.Dockerfile")
    assert len(bases) == 1 and bases[0].startswith("apache/airflow:"), bases
    match = re.fullmatch(r"(\d+\.\d+\.\d+)-python(\d+\.\d+)", _tag(bases[0]))
    assert match, f"{bases[0]}: expected apache/airflow:<version>-python<major.minor>"
    assert Version(match.group(1)) in SpecifierSet(airflow_pin.removeprefix("apache-airflow"))
    assert Version(match.group(2)) in SpecifierSet(project["requires-python"])


# ---- MirrorMaker 2 and the pair config agree with the sandbox --------------------------------------------


def test_mirrormaker_settings_equal_the_sandbox(services):
    mounted = dict(_volumes(services["mirrormaker"]))
    host_path = next(source for source, target in mounted.items() if target.endswith("mm2.properties"))
    config_arg = _argv(services["mirrormaker"], "command")[-1]
    assert mounted[host_path] == config_arg, "MirrorMaker 2 must start with the mounted properties"
    sandbox = _sandbox_mirrormaker(services)
    assert _property_lines((REPO / host_path).read_text()) == _property_lines(sandbox.properties())


def test_bootstrap_addresses_in_mm2_match_service_listeners(services, mm2):
    aliases = [alias.strip() for alias in mm2["clusters"].split(",")]
    for alias in aliases:
        assert mm2[f"{alias}.bootstrap.servers"] == _internal_bootstrap(services, _cluster_service(alias))


def test_pair_config_replicates_like_mirrormaker(services, mm2, pairs):
    mirrormaker = _sandbox_mirrormaker(services)
    assert pairs, "docker/pairs.yaml has no pair"
    for pair in pairs.values():
        aliases = [pair.clusters[name].alias for name in (pair.primary, pair.standby)]
        assert aliases == [alias.strip() for alias in mm2["clusters"].split(",")], pair.name
        assert aliases == list(mirrormaker.bootstraps), pair.name
        assert POLICY_CLASSES[pair.replication.policy] == mm2["replication.policy.class"], pair.name
        assert pair.replication.separator == mm2.get("replication.policy.separator", "."), pair.name
        assert pair.replication.offset_syncs_location == mm2["offset-syncs.topic.location"], pair.name
        flows = [(pair.clusters[src].alias, pair.clusters[dst].alias) for src, dst in pair.replication.flows]
        assert sorted(flows) == sorted(mirrormaker.flows()), pair.name
        assert all(mm2.get(f"{src}->{dst}.enabled") == "true" for src, dst in flows), pair.name
        assert re.fullmatch(mm2["groups"], pair.bookkeeping_group), "MM2 groups miss the bookkeeping group"
        assert mm2["sync.group.offsets.enabled"] == "false"
        for topic in pair.topics:
            assert re.fullmatch(mm2["topics"], topic), f"MM2 does not replicate {topic}"


def test_pair_config_uses_the_example_pair_topics_aliases_and_policy(pairs):
    example = load_pairs(REPO / "examples" / "pairs.yaml")
    for name, pair in pairs.items():
        reference = example.get(name)
        assert reference is not None, f"docker/pairs.yaml pair {name!r} is not in examples/pairs.yaml"
        assert pair.topics == reference.topics
        assert pair.primary == reference.primary
        aliases = {name: cluster.alias for name, cluster in pair.clusters.items()}
        assert aliases == {name: cluster.alias for name, cluster in reference.clusters.items()}
        assert pair.replication.policy == reference.replication.policy
        assert pair.replication.flows == reference.replication.flows


# ---- Airflow: connections, config, shared folders --------------------------------------------------------


def _connection(service: dict, conn_id: str) -> dict:
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    raw = service["environment"].get(variable)
    assert raw is not None, f"{variable} is not set: the pair config names connection {conn_id!r}"
    return json.loads(raw)


def test_airflow_services_mount_the_dags_and_the_pair_config(services):
    for name in AIRFLOW_SERVICES:
        service = services[name]
        mounts = {target: source for source, target in _volumes(service)}
        assert mounts.get("/opt/airflow/dags") == "./dags" and (REPO / "dags" / "kafka_failover.py").is_file()
        config_path = service["environment"]["AKF_PAIRS_CONFIG"]
        assert mounts.get(config_path) == "./docker/pairs.yaml", f"{name}: AKF_PAIRS_CONFIG is {config_path}"


def test_connections_cover_every_id_of_the_pair_config(services, pairs):
    for name in AIRFLOW_SERVICES:
        service = services[name]
        for pair in pairs.values():
            for cluster in pair.clusters.values():
                conn = _connection(service, cluster.connection)
                assert conn["conn_type"] == "kafka", cluster.connection
                expected = _internal_bootstrap(services, _cluster_service(cluster.name))
                assert conn["extra"]["bootstrap.servers"] == expected, cluster.connection
            spark = _connection(service, pair.job.spark_connection)
            assert spark["conn_type"] == "spark"
            assert spark["extra"]["deploy-mode"] == "client", "standalone runs Python drivers in client mode"
            master = _argv(services["spark-master"], "command")
            assert "org.apache.spark.deploy.master.Master" in master
            assert spark["host"] == f"spark://{_option(master, '--host')}"
            assert str(spark["port"]) == _option(master, "--port")
            worker = _argv(services["spark-worker"], "command")
            assert worker[-1] == f"{spark['host']}:{spark['port']}", "the worker joins another master"


def test_job_folders_are_on_a_volume_the_spark_worker_shares(services, pairs):
    scheduler = dict(_volumes(services["airflow-scheduler"]))
    worker = dict(_volumes(services["spark-worker"]))
    shared = [
        target
        for source, target in scheduler.items()
        if not _is_bind(source) and worker.get(source) == target
    ]
    assert shared, "the scheduler (where the driver runs) and the Spark worker share no volume"
    for pair in pairs.values():
        job = pair.job
        for path in (job.sink_root, job.checkpoint_root, job.run_root, job.fencing_marker):
            assert any(Path(path).is_relative_to(root) for root in shared), f"{pair.name}: {path} not shared"


def test_driver_host_is_the_scheduler_and_uids_match_the_spark_image(services, pairs):
    for pair in pairs.values():
        assert pair.job.spark_conf.get("spark.driver.host") == services["airflow-scheduler"]["hostname"]
    # The Spark image runs as its `spark` user (uid 185); driver and executors write the same files.
    for name in AIRFLOW_SERVICES:
        assert services[name]["user"] == "185:0", name
    init_script = " ".join(_argv(services["airflow-init"], "command"))
    assert "chown -R 185:0 /opt/kafka-failover" in init_script


def test_init_migrates_and_creates_the_switch_pools(services, pairs):
    init = services["airflow-init"]
    script = " ".join(_argv(init, "command"))
    assert "airflow db migrate" in script
    for pair in pairs.values():
        if pair.switch.pool:
            assert f"airflow pools set {pair.switch.pool} 1 " in script, f"no pool {pair.switch.pool}"
    for name in AIRFLOW_SERVICES:
        condition = services[name]["depends_on"]["airflow-init"]["condition"]
        assert condition == "service_completed_successfully", name


def test_producer_writes_a_topic_of_the_pair_that_topics_creates_on_both_clusters(services, pairs):
    producer = _argv(services["producer"], "command")
    assert _argv(services["producer"], "entrypoint")[-1] == "akf_devtools.sandbox.producer"
    topic, partitions = _option(producer, "--topic"), _option(producer, "--partitions")
    assert any(topic in pair.topics for pair in pairs.values())
    assert _option(producer, "--bootstrap") == _internal_bootstrap(services, "kafka-a")
    script = " ".join(_argv(services["topics"], "command"))
    assert f"--topic {topic} --partitions {partitions} " in script
    for service in ("kafka-a", "kafka-b"):
        assert _internal_bootstrap(services, service) in script, f"{topic} is not created on {service}"


def test_the_producer_entry_point_rejects_bad_arguments(capsys):
    from akf_devtools.sandbox.producer import main

    for argv, message in (
        (["--bootstrap", "nohostport", "--topic", "t"], "host:port"),
        (["--bootstrap", "h:1", "--topic", "t", "--rate", "0"], "> 0"),
        (["--bootstrap", "h:1", "--topic", "t", "--partitions", "x"], ">= 1"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


# ---- the compose specification ---------------------------------------------------------------------------


def compose_spec_errors(*paths: Path) -> str | None:
    """check-jsonschema's findings for ``paths`` against the compose-spec schema; None when all are valid.

    :param paths: compose files, checked in one run (each finding starts with its file's path).
    """
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]
        + [str(path) for path in paths],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode in (0, 1), f"check-jsonschema did not run: {result.stderr or result.stdout}"
    return None if result.returncode == 0 else result.stdout + result.stderr


def test_docker_compose_file_follows_the_compose_spec():
    errors = compose_spec_errors(REPO / "docker-compose.yml")
    assert errors is None, errors


INVALID_SERVICES = {
    "misspelt-key": ({"image": "nginx:1.27", "prots": ["80:80"]}, "'prots' was unexpected"),
    "unknown-condition": (
        {"image": "nginx:1.27", "depends_on": {"db": {"condition": "service_ready"}}},
        "service_ready",
    ),
    "ports-not-a-list": (
        {"image": "nginx:1.27", "ports": {"80": 80}},
        "web.ports: {'80': 80} is not of type 'array'",
    ),
}


@pytest.fixture(scope="module")
def invalid_findings(tmp_path_factory) -> dict[str, list[str]]:
    """Each invalid file's findings, from one run of the checker over all of them."""
    folder = tmp_path_factory.mktemp("invalid-compose")
    paths = {}
    for name, (service, _) in INVALID_SERVICES.items():
        paths[name] = folder / f"{name}.yml"
        paths[name].write_text(yaml.safe_dump({"services": {"web": service, "db": {"image": "postgres:16"}}}))
    errors = compose_spec_errors(*paths.values()) or ""
    return {name: [line for line in errors.splitlines() if str(path) in line] for name, path in paths.items()}


@pytest.mark.parametrize("name", sorted(INVALID_SERVICES))
def test_the_compose_spec_check_refuses_an_invalid_file(invalid_findings, name):
    finding = INVALID_SERVICES[name][1]
    assert any(finding in line for line in invalid_findings[name]), invalid_findings[name]


# ---- the real parser, where there is one -----------------------------------------------------------------


def _compose_client_problem() -> str | None:
    """Why ``docker compose`` cannot check the file here, or None when it can."""
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    probe = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, text=True, check=False, timeout=30
    )
    if probe.returncode != 0:
        output = (probe.stderr or probe.stdout).strip().splitlines() or ["no output"]
        return f"`docker compose version` fails: {output[0][:200]}"
    return None


def test_docker_compose_config_parses_offline():
    problem = _compose_client_problem()
    if problem:
        pytest.skip(f"docker compose cannot parse the file here ({problem})")
    result = subprocess.run(
        ["docker", "compose", "-f", str(REPO / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr

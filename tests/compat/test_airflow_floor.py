"""The compatibility lane: the provider with every part at its floor. The lowest Airflow it supports
(``.venv-compat``, made by ``scripts/setup.sh --compat`` from ``tests/compat/requirements.in`` and
``constraints-compat.txt``); the oldest Spark and Delta its job side supports, on a driver without Airflow
(``.venv-compat-driver``, from ``requirements-driver.in`` and ``constraints-compat-driver.txt``); the oldest
Kafka brokers and MirrorMaker 2 (``jvm/compat/``, resolved into ``.jars-compat``).

Each test drives those environments from the outside, as a deployment would run them:

- the built wheel installs into a fresh virtualenv with that Airflow and no pyspark, Airflow's own
  command line lists the provider and every trigger it ships, and the installer refuses the wheel beside
  an Airflow below the floor;
- the job side's own distribution (``airflow-kafka-failover-job``: ``jobs/``, ``run_format/`` and ``core/``)
  builds, and
  installs from its sdist with its ``spark`` and ``delta`` extras on the oldest Spark and Delta, on a
  driver without Airflow (docs/jobs.md);
- the unit tests of the Airflow side (hooks, I/O, switching, triggers, operators, sensors, DAG factory, the
  bad-input suite and the command line) pass there;
- the end-to-end story of ``tests/integration/test_stateful_switch.py`` (the start DAG, a crash of A and the
  failover DAG, A's restart and the failback DAG, with the user's stateful job, whose state each switch
  carries in Spark 3.5's checkpoint format; its Delta table equal to the counts of the acknowledged
  records) runs on the oldest stack.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import zipfile
from pathlib import Path

import pytest

from airflow_kafka_failover.get_provider_info import get_provider_info
from tests.compat.lanes import run_outside, run_switch_story
from tests.conftest import AIRFLOW_SIDE
from tests.packaging import COMPAT_DRIVER, UV, built_wheel, floor_release, fresh_venv, pinned

REPO = Path(__file__).resolve().parents[2]
JOB_SIDE = ("jobs", "run_format", "core")
"""The provider's subpackages the job distribution ships (scripts/build_job_distribution.py)."""
COMPAT = REPO / ".venv-compat"
CONSTRAINTS = REPO / "constraints-compat.txt"
COMPAT_DRIVER_CONSTRAINTS = REPO / "constraints-compat-driver.txt"

pytestmark = [pytest.mark.slow, pytest.mark.compat]


def declared_floor() -> str:
    """The lowest Airflow the provider's metadata accepts (``pyproject.toml``)."""
    (floor,) = re.findall(r'"apache-airflow>=([0-9.]+),', (REPO / "pyproject.toml").read_text())
    return floor


@pytest.fixture(scope="module")
def compat_python() -> Path:
    python = COMPAT / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{COMPAT} is missing: run 'scripts/setup.sh --compat' (make test does)")
    return python


def test_the_lane_runs_the_lowest_airflow_the_metadata_accepts(compat_python):
    release = floor_release()
    assert release.rsplit(".", 1)[0] == declared_floor(), (
        f"the lane runs Airflow {release}, the metadata's floor is {declared_floor()}: move them together"
    )
    done = run_outside([str(compat_python), "-c", "import airflow; print(airflow.__version__)"], timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == release


def test_the_built_wheel_installs_on_the_lowest_airflow_without_pyspark(tmp_path):
    wheel = built_wheel(tmp_path / "dist")
    venv = tmp_path / "venv"
    python = fresh_venv(venv)
    installed = run_outside(
        [str(UV), "pip", "install", "-q", "--python", str(python), "-c", str(CONSTRAINTS)]
        + [f"apache-airflow=={floor_release()}", str(wheel)],
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    listed = run_outside([str(UV), "pip", "list", "--python", str(python), "--format", "json"], timeout=120)
    packages = {entry["name"]: entry["version"] for entry in json.loads(listed.stdout)}
    assert packages["apache-airflow"] == floor_release()
    assert "pyspark" not in packages, "the Airflow side pulled in pyspark (it is the `spark` extra)"
    # Beside an Airflow below the floor, the installer refuses from the metadata alone.
    below = run_outside(
        [str(UV), "pip", "install", "--dry-run", "--python", str(python)]
        + ["apache-airflow==3.0.6", str(wheel)],
        timeout=300,
    )
    assert below.returncode != 0 and f"apache-airflow>={declared_floor()},<4" in below.stderr, below.stderr

    airflow = str(venv / "bin" / "airflow")
    home = {"AIRFLOW_HOME": str(tmp_path / "home"), "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    providers = run_outside([airflow, "providers", "list", "--output", "json"], timeout=300, **home)
    assert providers.returncode == 0, providers.stderr[-3000:]
    assert "airflow-kafka-failover" in {entry["package_name"] for entry in _json_of(providers.stdout)}

    triggers = run_outside([airflow, "providers", "triggers", "--output", "json"], timeout=300, **home)
    assert triggers.returncode == 0, triggers.stderr[-3000:]
    ours = {
        entry["class"]
        for entry in _json_of(triggers.stdout)
        if entry.get("package_name") == "airflow-kafka-failover"
    }
    modules = {module for group in get_provider_info()["triggers"] for module in group["python-modules"]}
    assert ours == modules, f"airflow providers triggers lists {sorted(ours)}, the provider ships {modules}"
    classes = run_outside(
        [str(python), "-c", _TRIGGER_CLASSES, *sorted(modules)], timeout=300, **home
    )  # each module imports on that Airflow and defines its triggers
    assert classes.returncode == 0, classes.stderr[-3000:]
    assert set(json.loads(classes.stdout.strip().splitlines()[-1])) == _trigger_classes_here(modules)


def test_the_job_distribution_installs_on_a_driver_without_airflow(tmp_path):
    """docs/jobs.md's driver install: airflow-kafka-failover-job, built by
    ``scripts/build_job_distribution.py`` and installed from its source distribution (so that the sdist
    builds too) with the ``spark`` and ``delta`` extras, pinned to the oldest Spark and Delta lines
    (``constraints-compat-driver.txt``). It ships exactly the provider's ``jobs/``, ``run_format/`` and
    ``core/``, depends on
    no Airflow, declares what they import, and every module imports there without bringing in Airflow."""
    built = run_outside(
        [
            sys.executable,
            str(REPO / "scripts" / "build_job_distribution.py"),
            "--out",
            str(tmp_path / "dist"),
        ],
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("airflow_kafka_failover_job-*.whl")
    (sdist,) = (tmp_path / "dist").glob("airflow_kafka_failover_job-*.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if name.endswith(".py")}
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith("dist-info/METADATA")))
    package = REPO / "airflow_kafka_failover"
    job_side = {
        path.relative_to(REPO).as_posix() for sub in JOB_SIDE for path in (package / sub).rglob("*.py")
    } | {"airflow_kafka_failover/__init__.py"}
    assert shipped == job_side, shipped ^ job_side
    requires = re.findall(r"^Requires-Dist: ([A-Za-z0-9_.-]+)", metadata.decode(), flags=re.MULTILINE)
    # Import names to distributions: delta is delta-spark's, py4j comes with pyspark.
    imported = {{"delta": "delta-spark", "py4j": "pyspark"}.get(m, m) for m in _third_party_imports(package)}
    assert set(requires) == imported == {"pydantic", "pyarrow", "pyspark", "delta-spark"}, (
        requires,
        imported,
    )

    python = fresh_venv(tmp_path / "venv")
    wheelhouse = Path(
        os.environ.get("AKF_WHEELHOUSE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "airflow-kafka-failover"
        / "wheels"
    )
    done = run_outside(
        [str(UV), "pip", "install", "-q", "--python", str(python), "-c", str(COMPAT_DRIVER_CONSTRAINTS)]
        + ["--find-links", str(wheelhouse), f"airflow-kafka-failover-job[spark,delta] @ {sdist.as_uri()}"],
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    listed = run_outside([str(UV), "pip", "list", "--python", str(python), "--format", "json"], timeout=120)
    packages = {entry["name"]: entry["version"] for entry in json.loads(listed.stdout)}
    assert not {name for name in packages if name.startswith("apache-airflow")}, sorted(packages)
    assert packages["pyspark"] == pinned(COMPAT_DRIVER_CONSTRAINTS, "pyspark"), packages
    assert packages["delta-spark"] == pinned(COMPAT_DRIVER_CONSTRAINTS, "delta-spark"), packages
    imported = run_outside([str(python), "-c", _IMPORT_JOB_SIDE], timeout=300)
    assert imported.returncode == 0, imported.stderr[-3000:]
    report = json.loads(imported.stdout.strip().splitlines()[-1])
    assert report["failed"] == {}, report["failed"]
    assert report["modules"] >= 20, report
    assert report["airflow"] == [], f"the job side imported Airflow: {report['airflow']}"


def _third_party_imports(package: Path) -> set[str]:
    """The top-level modules outside the standard library that the job side's packages import."""
    found = set()
    for sub in JOB_SIDE:
        for path in (package / sub).rglob("*.py"):
            found |= set(re.findall(r"^\s*(?:from|import) ([A-Za-z_][A-Za-z0-9_]*)", path.read_text(), re.M))
    return found - set(sys.stdlib_module_names) - {"airflow_kafka_failover", "__future__"}


_IMPORT_JOB_SIDE = """
import importlib, json, pkgutil, sys
import airflow_kafka_failover.core, airflow_kafka_failover.jobs, airflow_kafka_failover.run_format
failed, count = {}, 0
for package in (airflow_kafka_failover.core, airflow_kafka_failover.jobs, airflow_kafka_failover.run_format):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        count += 1
        try:
            importlib.import_module(module.name)
        except Exception as exc:
            failed[module.name] = repr(exc)
airflow = sorted(name for name in sys.modules if name == "airflow" or name.startswith("airflow."))
print(json.dumps({"failed": failed, "modules": count, "airflow": airflow}))
"""


_TRIGGER_CLASSES = """
import importlib, inspect, json, sys
from airflow.triggers.base import BaseTrigger
found = []
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    found += [n for n, c in inspect.getmembers(module, inspect.isclass)
              if issubclass(c, BaseTrigger) and c.__module__ == name]
print(json.dumps(found))
"""


def _trigger_classes_here(modules: set[str]) -> set[str]:
    from airflow.triggers.base import BaseTrigger

    found: set[str] = set()
    for name in modules:
        module = importlib.import_module(name)
        found |= {
            attribute
            for attribute, value in vars(module).items()
            if isinstance(value, type) and issubclass(value, BaseTrigger) and value.__module__ == name
        }
    assert len(found) >= 4, found
    return found


def _json_of(output: str) -> list[dict]:
    """The JSON list Airflow printed, after any log lines before it."""
    start = output.index("[")
    return json.loads(output[start:])


def test_the_airflow_side_passes_its_unit_tests_on_the_lowest_airflow(compat_python, tmp_path):
    """The same unit tests as on the newest Airflow, marked ``airflow`` by tests/conftest.py, plus the
    suites of the top-level modules that drive the Airflow side."""
    done = run_outside(
        [str(compat_python), "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
        + ["-m", "not (sandbox or spark)", "--basetemp", str(tmp_path / "t")]
        + [str(REPO / "tests" / "unit" / name) for name in _AIRFLOW_SIDE],
        timeout=1200,
        AIRFLOW_HOME=str(tmp_path / "home"),
        HYPOTHESIS_PROFILE="fast",
    )
    print(done.stdout[-1500:])
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]


_AIRFLOW_SIDE = (
    *AIRFLOW_SIDE,
    "test_bad_input_suite.py",
    "test_cli.py",
    "test_get_provider_info.py",
    "test_getting_started.py",
    "test_without_pyspark.py",
    "test_fleet_parse.py",
)


@pytest.mark.sandbox
@pytest.mark.spark
def test_the_switch_story_runs_on_the_oldest_stack(compat_python, tmp_path):
    """The end-to-end story of ``tests/integration/test_stateful_switch.py`` (the start DAG, a crash of A and
    the failover DAG, A's restart and the failback DAG, each carrying the job's state; the table equal to the
    counts of the acknowledged records) with every part at its floor: the DAGs run by ``dag.test()`` on the
    lowest Airflow; the job, the user's stateful job of ``examples/jobs/order_counts_to_delta`` (a Delta
    upsert), on the oldest Spark and Delta (``.venv-compat-driver``, chosen
    with ``SPARK_HOME`` and ``PYSPARK_PYTHON`` as a deployment would); the oldest Kafka brokers and
    MirrorMaker 2 (``jvm/compat/``, resolved into ``.jars-compat``)."""
    jvm, jars = REPO / "jvm" / "compat", REPO / ".jars-compat"
    story = run_switch_story(compat_python, COMPAT_DRIVER, jvm, jars, tmp_path)
    assert story.passed(), story.failure()
    print("figures:", (story.results / "stateful_switch_figures.json").read_text())
    # The stack really was the oldest one: the drivers' and brokers' own words.
    spark, delta = (pinned(COMPAT_DRIVER_CONSTRAINTS, name) for name in ("pyspark", "delta-spark"))
    assert story.spark_versions() == {spark}
    assert f"delta-spark_2.12-{delta}.jar" in story.job_logs()
    for artifact_set, jar in (("kafka", "kafka_2.13"), ("mirrormaker", "connect-mirror")):
        pom = (jvm / artifact_set / "pom.xml").read_text()
        (kafka,) = re.findall(r"<kafka.version>(\S+)</kafka.version>", pom)
        assert list((jars / artifact_set).glob(f"{jar}-{kafka}.jar")), (artifact_set, kafka)

"""Building and installing the provider as a user would, for the tests that inspect or install it: the
wheel, a fresh virtualenv, the Airflow release the compatibility lane runs, and the lanes' Spark drivers
(the oldest and the newest Spark the job side supports)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
UV = Path(sys.executable).with_name("uv")
COMPAT_REQUIREMENTS = REPO / "tests" / "compat" / "requirements.in"
COMPAT_DRIVER = REPO / ".venv-compat-driver"
"""The lane's job side: pyspark 3.5 and delta-spark 3.3 without Airflow (``scripts/setup.sh --compat``)."""
NEWEST_DRIVER = REPO / ".venv-newest-driver"
"""The job side on the newest Spark line it supports: pyspark 4.2 and delta-spark 4.4 without Airflow
(``scripts/setup.sh --compat``), the Spark of ``tests/integration/test_switch_dags.py``'s jobs."""
NEWEST_DRIVER_CONSTRAINTS = REPO / "constraints-newest-driver.txt"


def built_wheel(folder: Path) -> Path:
    """Build the provider's wheel (pip, without its dependencies) into ``folder``; return its path."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = folder.glob("airflow_kafka_failover-*.whl")
    return wheel


def fresh_venv(venv: Path) -> Path:
    """An empty virtualenv at ``venv`` on this run's base interpreter; return its Python."""
    interpreter = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run([str(UV), "venv", "-q", "--python", str(interpreter), str(venv)], check=True, timeout=120)
    return venv / "bin" / "python"


def pinned(requirements: Path, package: str) -> str:
    """The version ``requirements`` (a requirements or constraints file) pins ``package`` to."""
    (version,) = re.findall(rf"^{re.escape(package)}==(\S+)$", requirements.read_text(), flags=re.MULTILINE)
    return version


def floor_release() -> str:
    """The Airflow release the compatibility lane runs: the one ``tests/compat/requirements.in`` pins."""
    return pinned(COMPAT_REQUIREMENTS, "apache-airflow")


def lane_driver(venv: Path) -> tuple[Path, str]:
    """A lane's driver Python (:data:`COMPAT_DRIVER`, :data:`NEWEST_DRIVER`) and the ``SPARK_HOME`` of its
    pyspark (the folder pyspark installs into).

    Fails the test, naming the command, when ``venv`` is missing.
    """
    python = venv / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{venv} is missing: run 'scripts/setup.sh --compat' (make test does)")
    found = subprocess.run(
        [str(python), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr[-2000:]
    return python, found.stdout.strip().splitlines()[-1]


@dataclass(frozen=True)
class JobSpark:
    """The Spark a story's jobs run on when it is not the test run's own: a driver Python without Airflow,
    its ``SPARK_HOME``, and the job jars (Spark's Kafka source, Delta, the record-id jar) for that Spark."""

    python: Path
    spark_home: str
    jars: tuple[Path, ...]
    spark_version: str
    delta_version: str

    def run_env(self) -> dict[str, str]:
        """The environment of the DAG runs whose jobs run on this Spark, chosen as a deployment chooses it:
        ``SPARK_HOME`` (whose spark-submit launches them), ``PYSPARK_PYTHON`` and the provider's
        ``job_jars`` option."""
        from akf_devtools.sandbox.jars import JOB_JARS_ENV

        return {
            "SPARK_HOME": self.spark_home,
            "PYSPARK_PYTHON": str(self.python),
            "PYSPARK_DRIVER_PYTHON": str(self.python),
            JOB_JARS_ENV: ",".join(str(jar) for jar in self.jars),
        }


def newest_job_spark() -> JobSpark:
    """The newest Spark and Delta the job side supports (:data:`NEWEST_DRIVER`), with the jars of
    ``jvm/newest-spark/`` resolved into ``.jars-newest-spark`` (resolving them first if ``make test``'s setup
    has not; the record-id jar is compiled against that Spark's own jars)."""
    from akf_devtools.sandbox.jars import job_jars

    python, spark_home = lane_driver(NEWEST_DRIVER)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_HOME", spark_home)
        patch.setenv("AKF_POMS_DIR", str(REPO / "jvm" / "newest-spark"))
        patch.setenv("AKF_JARS_DIR", str(REPO / ".jars-newest-spark"))
        jars = tuple(job_jars(delta=True))
    return JobSpark(
        python,
        spark_home,
        jars,
        pinned(NEWEST_DRIVER_CONSTRAINTS, "pyspark"),
        pinned(NEWEST_DRIVER_CONSTRAINTS, "delta-spark"),
    )

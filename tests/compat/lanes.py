"""What the compatibility lane runs outside this pytest run: a command with another interpreter, and the
stateful switch story of ``tests/integration/test_stateful_switch.py`` on a Spark driver of another
virtualenv."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.integration.switch_story import job_logs, spark_versions
from tests.packaging import lane_driver

REPO = Path(__file__).resolve().parents[2]

OUTER_RUN_ONLY = ("VIRTUAL_ENV", "AIRFLOW__KAFKA_FAILOVER__JOB_JARS", "AKF_TEST_TIMELINE")
"""Variables of this pytest run that a lane's own runs must not inherit: the job jars the integration tests
set for the suite's stack (Scala 2.13 jars on a Spark 3.5 driver fail with ``NoClassDefFoundError:
scala/collection/SeqOps``; Spark 4.0's Kafka source on a Spark 4.2 driver is the wrong release); a lane's
story fills its own from its jars folder. The suite's timeline (tests/conftest.py) holds the lane's test,
not the tests of the pytest run inside it."""

STORY_FILE = REPO / "tests" / "integration" / "test_stateful_switch.py"
"""The switch story a lane runs: the stateful example job (``examples/jobs/order_counts_to_delta``), whose
state the switches carry in the checkpoint format of the lane's Spark."""
STORY_STEPS = "test_start or crash_fails_over or restart_fails_back or table_equals"
"""The steps of the story a lane runs: the start DAG, a crash of A and the failover DAG, A's restart and the
failback DAG (each carrying the state), and the table compared with the counts of the acknowledged records."""


def run_outside(command: list[str], timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with this run's environment minus :data:`OUTER_RUN_ONLY`, plus ``env``."""
    environment = {**os.environ, **env}
    for name in OUTER_RUN_ONLY:
        environment.pop(name, None)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment)


@dataclass(frozen=True)
class StoryRun:
    """The outcome of :func:`run_switch_story`: the inner pytest's output and where its files are."""

    done: subprocess.CompletedProcess[str]
    basetemp: Path
    results: Path

    def passed(self) -> bool:
        return self.done.returncode == 0 and f"{STORY_STEPS.count(' or ') + 1} passed" in self.done.stdout

    def failure(self) -> str:
        return self.done.stdout[-8000:] + self.done.stderr[-3000:]

    def spark_versions(self) -> set[str]:
        """The Spark versions the story's drivers logged."""
        return spark_versions(self.job_logs())

    def job_logs(self) -> str:
        return job_logs(self.basetemp)


def run_switch_story(
    airflow_python: Path, driver_venv: Path, poms: Path, jars: Path, tmp_path: Path
) -> StoryRun:
    """Run :data:`STORY_STEPS` under ``airflow_python`` (its Airflow runs the DAGs), the job on the Spark of
    ``driver_venv`` (chosen with ``SPARK_HOME`` and ``PYSPARK_PYTHON`` as a deployment would), the brokers,
    MirrorMaker 2, Spark's Kafka source and Delta from the poms under ``poms`` resolved into ``jars``."""
    driver, spark_home = lane_driver(driver_venv)
    basetemp, results = tmp_path / "t", tmp_path / "results"
    done = run_outside(
        [str(airflow_python), "-m", "pytest", "-q", "-s", "-p", "no:randomly", "-p", "no:cacheprovider"]
        + ["--basetemp", str(basetemp), str(STORY_FILE)]
        + ["-k", STORY_STEPS],
        timeout=1200,
        AKF_POMS_DIR=str(poms),
        AKF_JARS_DIR=str(jars),
        AKF_RESULTS_DIR=str(results),
        SPARK_HOME=spark_home,
        PYSPARK_PYTHON=str(driver),
        PYSPARK_DRIVER_PYTHON=str(driver),
    )
    print(done.stdout[-3000:])
    return StoryRun(done, basetemp, results)

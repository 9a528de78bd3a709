"""docs/getting-started.md walked as a new user would, from outside the checkout, up to its first failover.

The built wheel goes into a fresh virtualenv with the lowest Airflow the provider supports and no pyspark
(the page's step 1, without the ``spark`` extra): its jobs run on a Spark of their own, chosen with
``SPARK_HOME`` and ``PYSPARK_PYTHON`` (the compatibility lane's driver, ``.venv-compat-driver``: Spark 3.5
and the job side without Airflow, as docs/jobs.md says). Then the page's own blocks, in order: its pair
config, its DAG file, its ``airflow connections add`` and ``airflow pools set`` lines (into the metadata
database of a fresh Airflow home), its ``kafka-failover plan`` and ``status`` lines (which must find those
connections there), the start, its forced failover line and ``kafka-failover history``.

What the test changes in the blocks, and only that: the clusters' addresses (the sandbox's), the shared
folder (``/shared`` becomes a temporary one), the topic (``orders`` gets a suffix: other modules share the
sandbox), the Kafka source's coordinates (Scala 2.12 and the driver's Spark 3.5), and ``airflow dags
trigger`` becomes ``airflow dags test`` (no scheduler runs here; the page's "trigger the start DAG" from
the UI becomes the same ``dags test``). The blocks are read from the page on
every run, so an edit of the page is walked again.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from akf_devtools.sandbox.kafka_io import create_topic
from akf_devtools.sandbox.producer import SteadyProducer

from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.jobs.sink import read_sink
from airflow_kafka_failover.run_format.layout import PROCESS_NAME
from tests.packaging import COMPAT_DRIVER, UV, built_wheel, floor_release, fresh_venv, lane_driver

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "getting-started.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
CONSTRAINTS = REPO / "constraints-compat.txt"

pytestmark = [pytest.mark.slow, pytest.mark.sandbox, pytest.mark.spark, pytest.mark.compat]


def page_blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(PAGE.read_text()) if lang == language]


class Walk:
    """The user's shell: the fresh virtualenv's bin first on PATH, the Airflow home, the pair config."""

    def __init__(self, root: Path, venv: Path, driver: Path, spark_home: str) -> None:
        self.root = root
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AKF_", "VIRTUAL_ENV"))},
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "AIRFLOW_HOME": str(root / "home"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AKF_PAIRS_CONFIG": str(root / "pairs.yaml"),
            "SPARK_HOME": spark_home,
            "PYSPARK_PYTHON": str(driver),
            "PYSPARK_DRIVER_PYTHON": str(driver),
        }
        self.transcript: list[str] = []

    def run(self, line: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run one command line of the page (in the folder that holds ``pairs.yaml``)."""
        started = time.monotonic()
        done = subprocess.run(
            shlex.split(line), cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        self.transcript.append(f"$ {line}  # exit {done.returncode} in {time.monotonic() - started:.1f} s")
        print(self.transcript[-1], flush=True)
        if check:
            assert done.returncode == 0, f"{line}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        return done


@pytest.fixture(scope="module")
def walk(tmp_path_factory) -> Walk:
    driver, spark_home = lane_driver(COMPAT_DRIVER)
    root = tmp_path_factory.mktemp("walk")
    wheel = built_wheel(root / "dist")
    venv = root / "venv"
    installed = subprocess.run(
        [str(UV), "pip", "install", "-q", "--python", str(fresh_venv(venv)), "-c", str(CONSTRAINTS)]
        + [f"apache-airflow=={floor_release()}", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert not (venv / "bin" / "spark-submit").exists(), "the Airflow side brought its own spark-submit"
    return Walk(root, venv, driver, spark_home)


def _pair_config(root: Path, topic: str) -> str:
    (config,) = page_blocks("yaml")
    assert "topics: [orders]" in config, "the page's pair no longer reads topic orders: update this test"
    spark = subprocess.run(
        [str(COMPAT_DRIVER / "bin" / "python"), "-c", "import pyspark; print(pyspark.__version__)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    (coordinates,) = re.findall(r'packages: "(org\.apache\.spark:spark-sql-kafka-0-10_[^"]+)"', config)
    return (
        config.replace("/shared/", f"{root / 'shared'}/")
        .replace(coordinates, f"org.apache.spark:spark-sql-kafka-0-10_2.12:{spark}")
        .replace("topics: [orders]", f"topics: [{topic}]")
    )


def _stop_jobs(run_root: Path) -> None:
    for local_dir in run_root.glob("*/*/epoch-*"):
        ManagedProcess(PROCESS_NAME, local_dir).stop(timeout=10)


def test_the_getting_started_page_reaches_a_first_failover(walk, sandbox):
    root = walk.root
    topic = f"orders-{uuid.uuid4().hex[:6]}"  # the page's orders, apart from other modules' on this sandbox
    for cluster in ("A", "B"):  # on A and (the job on B reads it too) on B
        create_topic(sandbox.client_config(cluster), topic, 1)
    (root / "pairs.yaml").write_text(_pair_config(root, topic))
    walk.run("airflow db migrate", timeout=600)  # an existing deployment has done this long ago

    (dag_file,) = page_blocks("python")
    (root / "home" / "dags").mkdir(parents=True, exist_ok=True)
    (root / "home" / "dags" / "kafka_failover.py").write_text(dag_file)

    connections, checks, drill = page_blocks("bash")[1:4]
    addresses = {"a1:9092,a2:9092": sandbox.bootstrap("A"), "b1:9092,b2:9092": sandbox.bootstrap("B")}
    for line in connections.strip().splitlines():
        for documented, real in addresses.items():
            line = line.replace(documented, real)
        walk.run(line)

    bootstraps = {"A": sandbox.bootstrap("A"), "B": sandbox.bootstrap("B")}
    producer = SteadyProducer(bootstraps, topic, lambda: "A", rate=20, partitions=1).start()
    try:
        plan_line, status_line = checks.strip().splitlines()
        assert """'{"orders": """ in plan_line, plan_line
        plan_line = plan_line.replace("""'{"orders": """, f"""'{{"{topic}": """)
        _wait_for_copy(walk, plan_line)
        status = walk.run(status_line, check=False)  # exit 4: a pair that needs a person (no job yet)
        assert status.returncode == 4 and "no job is recorded" in status.stdout, status.stdout[-3000:]

        started = walk.run("airflow dags test kafka_failover_orders_start", timeout=900)
        assert "success" in started.stdout[-3000:].lower(), started.stdout[-6000:]

        trigger_line, history_line = drill.strip().splitlines()
        assert trigger_line.startswith("airflow dags trigger kafka_failover_orders_failover ")
        walk.run(trigger_line.replace("airflow dags trigger", "airflow dags test", 1), timeout=900)
        history = walk.run(history_line + " --json")
        shown = json.loads(history.stdout[history.stdout.index("{") :])
        assert (shown["active"], shown["epoch"]) == ("B", 1), shown
        assert [(s["kind"], s["to"], s["epoch"]) for s in shown["switches"]] == [("failover", "B", 1)], shown
        (switch,) = shown["switches"]
        assert switch["reason"] == "first failover drill" and switch["forced"] is True, switch

        # The job on B goes on from where A's stopped: every id A acknowledged reaches the sink.
        acked = set(producer.acked_ids)
        assert acked, "the producer wrote nothing"
        sink = str(root / "shared" / "kafka-failover" / "sink" / "orders")
        deadline = time.monotonic() + 180
        while (missing := acked - read_sink(sink).record_ids) and time.monotonic() < deadline:
            time.sleep(3)
        assert not missing, f"{len(missing)} of {len(acked)} acknowledged ids are not in the sink"
        status = walk.run(status_line, check=False)
        assert "active B at epoch 1" in status.stdout, status.stdout[-3000:]
    finally:
        producer.stop()
        _stop_jobs(root / "shared" / "kafka-failover" / "runs")
    print("\n".join(walk.transcript))


def _wait_for_copy(walk: Walk, plan_line: str, timeout: float = 120) -> None:
    """The page's plan, once MirrorMaker 2 has copied the new topic to B (it finds topics every few
    seconds here; a deployment's MM2 has copied them long before)."""
    deadline = time.monotonic() + timeout
    while True:
        done = walk.run(plan_line, check=False)
        if done.returncode == 0 or time.monotonic() > deadline:
            assert done.returncode == 0, f"{plan_line}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
            return
        time.sleep(5)

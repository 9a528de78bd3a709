"""docs/getting-started.md walked as a new user would, from outside the checkout, up to its first failover.

The built wheel goes into a fresh virtualenv with the lowest Airflow the provider supports and no pyspark
(the page's step 1, without the ``spark`` extra): its jobs run on a Spark of their own, chosen with
``SPARK_HOME`` and ``PYSPARK_PYTHON`` (the compatibility lane's driver, ``.venv-compat-driver``: Spark 3.5
and the job side without Airflow, as docs/jobs.md says). Then the page itself: its pair config, its DAG
file, and every line of its shell blocks in order (tests/getting_started_page.py says what kind of step
each is; a line of a kind this walk does not know fails it), with nothing done for the user in between.

The clusters stand in for the user's: the sandbox's two, fresh for the walk's topic, which exists on
neither until the page's ``kafka-topics.sh`` lines create it, and whose MirrorMaker 2 runs what the page's
``properties`` block asks (checked first). So a step the page leaves out (the topic on B, a flow) makes the
page's ``kafka-failover check`` refuse, and the walk fails there; the check is asked once before the
topics exist, and must refuse naming them.

What the walk changes, and only that: the clusters' addresses (the sandbox's), the shared folder
(``/shared`` becomes a temporary one), the topic (``orders`` gets a suffix: other modules share the
sandbox), the Kafka source's coordinates (Scala 2.12 and the driver's Spark 3.5), and ``airflow dags
trigger`` becomes ``airflow dags test`` (no scheduler runs here; the page's "trigger the start DAG" from
the UI becomes the same ``dags test``, before the block that holds the trigger). The install lines are
done by the fixture (above), ``airflow db migrate`` stands for the deployment's own, and Kafka's
``kafka-topics.sh`` is a stand-in on PATH (the sandbox ships no Kafka scripts) that does what the line's
options say through Kafka's Admin API and refuses any other option. The page's ``check`` is run again until
it passes, as the page says to while MirrorMaker 2 makes its copies. The page is read on every run, so an
edit of it is walked again.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from akf_devtools.sandbox.producer import SteadyProducer

from airflow_kafka_failover.core.process_group import ManagedProcess
from airflow_kafka_failover.jobs.sink import read_sink
from airflow_kafka_failover.run_format.layout import PROCESS_NAME
from tests.getting_started_page import (
    block_lines,
    blocks,
    mm2_settings,
    page_mm2_settings,
    regex_covers,
    shell_lines,
    step_kind,
    words,
)
from tests.packaging import COMPAT_DRIVER, UV, built_wheel, floor_release, fresh_venv, lane_driver

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "constraints-compat.txt"
CHECK_TIMEOUT_S = 180
"""How long the walk runs the page's ``check`` again while MirrorMaker 2 makes its copies (it looks for new
topics every 2 s in the sandbox; a deployment's default is 600 s)."""

pytestmark = [pytest.mark.slow, pytest.mark.sandbox, pytest.mark.spark, pytest.mark.compat]

KAFKA_TOPICS = '''#!{python}
"""kafka-topics.sh --create through Kafka's Admin API: the walk's stand-in for Kafka's own script."""
import argparse
import sys

from confluent_kafka.admin import AdminClient, NewTopic

parser = argparse.ArgumentParser(prog="kafka-topics.sh")
parser.add_argument("--bootstrap-server", required=True)
parser.add_argument("--create", action="store_true", required=True)
parser.add_argument("--if-not-exists", action="store_true")
parser.add_argument("--topic", required=True)
parser.add_argument("--partitions", type=int, required=True)
parser.add_argument("--replication-factor", type=int, default=-1)
args = parser.parse_args()
admin = AdminClient({{"bootstrap.servers": args.bootstrap_server}})
if args.if_not_exists and args.topic in admin.list_topics(timeout=30).topics:
    sys.exit(0)
admin.create_topics([NewTopic(args.topic, args.partitions, args.replication_factor)])[args.topic].result(30)
print(f"Created topic {{args.topic}}.")
'''


class Walk:
    """The user's shell: the fresh virtualenv's bin first on PATH, the Airflow home, the pair config."""

    def __init__(self, root: Path, venv: Path, driver: Path, spark_home: str) -> None:
        self.root = root
        tools = root / "tools"
        tools.mkdir(exist_ok=True)
        script = tools / "kafka-topics.sh"
        script.write_text(KAFKA_TOPICS.format(python=venv / "bin" / "python"))
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AKF_", "VIRTUAL_ENV"))},
            "PATH": os.pathsep.join([str(venv / "bin"), str(tools), os.environ["PATH"]]),
            "AIRFLOW_HOME": str(root / "home"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AKF_PAIRS_CONFIG": str(root / "pairs.yaml"),
            "SPARK_HOME": spark_home,
            "PYSPARK_PYTHON": str(driver),
            "PYSPARK_DRIVER_PYTHON": str(driver),
        }
        self.transcript: list[str] = []

    def run(self, line: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run one command line of the page (in the folder that holds ``pairs.yaml``); a line with a pipe
        runs in bash, failing when any part of the pipe fails."""
        started = time.monotonic()
        argv = ["bash", "-o", "pipefail", "-c", line] if " | " in line else shlex.split(line)
        done = subprocess.run(
            argv, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout
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
    (config,) = blocks("yaml")
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


def _replicates_as_the_page_says(sandbox, topic: str) -> None:
    """The sandbox's MirrorMaker 2 runs every setting of the page's ``properties`` block (its ``topics`` and
    ``groups`` regexes covering the walk's topic and the pair's bookkeeping group)."""
    running = mm2_settings(sandbox.mirrormaker.config_path.read_text())
    for key, value in page_mm2_settings().items():
        if key == "topics":
            assert regex_covers(running[key], topic), f"the sandbox's MirrorMaker 2 does not copy {topic}"
        elif key == "groups":
            assert regex_covers(running[key], "airflow-kafka-failover.orders"), running[key]
        else:
            assert running.get(key) == value, f"the sandbox's MirrorMaker 2 has {key} = {running.get(key)}"


def _as_walked(line: str, addresses: dict[str, str], topic: str) -> str:
    """The page's line with the sandbox's addresses and the walk's topic."""
    for documented, real in addresses.items():
        line = line.replace(documented, real)
    line = line.replace("--topic orders ", f"--topic {topic} ").replace(
        """'{"orders": """, f"""'{{"{topic}": """
    )
    return line.replace("airflow dags trigger ", "airflow dags test ", 1)


def _stop_jobs(run_root: Path) -> None:
    for local_dir in run_root.glob("*/*/epoch-*"):
        ManagedProcess(PROCESS_NAME, local_dir).stop(timeout=10)


class Page:
    """The page's kafka-failover lines as the walk takes them, and what it expects of each."""

    def __init__(self, walk: Walk, topic: str) -> None:
        self.walk, self.topic = walk, topic
        self.started = False

    def kafka_failover(self, line: str) -> None:
        command = words(line)[1]
        if command == "check":
            return self._check(line)
        if command == "status":
            status = self.walk.run(line, check=False)
            if not self.started:  # exit 4: a pair that needs a person (no job yet)
                assert status.returncode == 4 and "no job is recorded" in status.stdout, status.stdout[-3000:]
            return None
        if command == "history":
            return self._history(line)
        done = self.walk.run(line)
        if command == "validate":
            for cluster, copy in (("A", f"B.{self.topic}"), ("B", f"A.{self.topic}")):
                assert f"on {cluster} the job reads" in done.stdout and f"    {copy}: made by" in done.stdout
        return None

    def refused_before_the_topics(self, check_line: str) -> None:
        """The page's check on clusters that do not hold the topic yet: exit 3, naming what is missing."""
        refused = self.walk.run(check_line, check=False)
        assert refused.returncode == 3, f"{refused.stdout[-2000:]}\n{refused.stderr[-2000:]}"
        for cluster, missing in (("A", self.topic), ("A", f"B.{self.topic}"), ("B", self.topic)):
            assert f"topic {missing} does not exist on {cluster} " in refused.stderr, refused.stderr[-3000:]

    def _check(self, line: str) -> None:
        deadline = time.monotonic() + CHECK_TIMEOUT_S
        while True:
            done = self.walk.run(line, check=False)
            if done.returncode == 0:
                return
            assert done.returncode == 3, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            assert time.monotonic() < deadline, f"{line} still refuses:\n{done.stdout}\n{done.stderr[-3000:]}"
            time.sleep(5)

    def _history(self, line: str) -> None:
        history = self.walk.run(line + " --json")
        shown = json.loads(history.stdout[history.stdout.index("{") :])
        assert (shown["active"], shown["epoch"]) == ("B", 1), shown
        assert [(s["kind"], s["to"], s["epoch"]) for s in shown["switches"]] == [("failover", "B", 1)], shown
        (switch,) = shown["switches"]
        assert switch["reason"] == "first failover drill" and switch["forced"] is True, switch


def test_the_getting_started_page_reaches_a_first_failover(walk, sandbox):
    root = walk.root
    topic = f"orders-{uuid.uuid4().hex[:6]}"  # the page's orders, apart from other modules' on this sandbox
    _replicates_as_the_page_says(sandbox, topic)
    (root / "pairs.yaml").write_text(_pair_config(root, topic))
    walk.run("airflow db migrate", timeout=600)  # an existing deployment has done this long ago

    (dag_file,) = blocks("python")
    (root / "home" / "dags").mkdir(parents=True, exist_ok=True)
    (root / "home" / "dags" / "kafka_failover.py").write_text(dag_file)

    addresses = {"a1:9092,a2:9092": sandbox.bootstrap("A"), "b1:9092,b2:9092": sandbox.bootstrap("B")}
    bootstraps = {"A": sandbox.bootstrap("A"), "B": sandbox.bootstrap("B")}
    page, producer = Page(walk, topic), None
    (check_line,) = [line for line in shell_lines() if words(line)[:2] == ["kafka-failover", "check"]]
    (status_line,) = {line for line in shell_lines() if words(line)[:2] == ["kafka-failover", "status"]}
    try:
        for block in blocks("bash"):
            lines = block_lines(block)
            kinds = [step_kind(line) for line in lines]
            if "kafka-topics" in kinds:
                page.refused_before_the_topics(_as_walked(check_line, addresses, topic))
            if "trigger" in kinds:  # the page's prose before this block: unpause, trigger the start DAG
                started = walk.run("airflow dags test kafka_failover_orders_start", timeout=900)
                assert "success" in started.stdout[-3000:].lower(), started.stdout[-6000:]
                page.started = True
            for line, kind in zip(lines, kinds, strict=True):
                walked = _as_walked(line, addresses, topic)
                if kind in ("build", "install"):
                    continue  # the fixture built the wheel and installed it (see the module's docstring)
                if kind == "kafka-failover":
                    page.kafka_failover(walked)
                else:
                    walk.run(walked, timeout=900)
            if "kafka-topics" in kinds:  # A's producers, from the moment the topic exists
                producer = SteadyProducer(bootstraps, topic, lambda: "A", rate=20, partitions=3).start()
        assert page.started, "the page has no `airflow dags trigger` line: the walk never started the job"

        # The job on B goes on from where A's stopped: every id A acknowledged reaches the sink.
        assert producer is not None, "the page created no topic"
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
        if producer is not None:
            producer.stop()
        _stop_jobs(root / "shared" / "kafka-failover" / "runs")
    print("\n".join(walk.transcript))

"""``make airflow``'s launcher with several pairs (the fleet benchmark's deployment): the config it writes."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from akf_devtools.local_airflow import (
    PAIR,
    connection_env,
    dag_ids,
    pair_names,
    sandbox_pair_config,
)

from airflow_kafka_failover.domain.config import load_pairs

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pairs.yaml"


def test_one_pair_is_the_example_pair_alone():
    assert pair_names() == [PAIR]
    assert dag_ids() == [
        f"kafka_failover_{PAIR}_{kind}" for kind in ("start", "failover", "failback", "keeper")
    ]


def test_a_fleet_gives_each_pair_its_topic_group_sink_and_fence(tmp_path):
    names = pair_names(3)
    assert names == [PAIR, f"{PAIR}_02", f"{PAIR}_03"]
    config = sandbox_pair_config(
        EXAMPLE,
        True,
        tmp_path / "home",
        {"switch": {"wake": "event"}},
        names,
        {f"{PAIR}_03": {"job": {"application": "/jobs/light.py"}}},
    )
    path = tmp_path / "pairs.yaml"
    path.write_text(yaml.safe_dump(config))
    pairs = load_pairs(path)  # the provider's own parser accepts it
    assert list(pairs) == names
    for name, pair in pairs.items():
        assert pair.topics == (name,) or list(pair.topics) == [name]
        assert pair.bookkeeping_group == f"airflow-kafka-failover.{name}"
        assert str(pair.job.fencing_marker).endswith(f"fencing/{name}")
        assert str(pair.job.sink_root).endswith(f"sink/{name}")
        assert pair.switch.wake == "event"
    assert str(pairs[f"{PAIR}_03"].job.application) == "/jobs/light.py"
    assert pairs[PAIR].job.application is None
    assert len(dag_ids(names)) == 12


def test_connections_are_shared_and_carry_extra_client_options(tmp_path):
    config = sandbox_pair_config(EXAMPLE, False, tmp_path, pairs=pair_names(2))
    env = connection_env(
        config, {"A": "127.0.0.1:1", "B": "127.0.0.1:2"}, kafka_extra={"client.id": "akf-airflow"}
    )
    extra_a = json.loads(env["AIRFLOW_CONN_KAFKA_A"])["extra"]
    assert extra_a == {"bootstrap.servers": "127.0.0.1:1", "client.id": "akf-airflow"}
    assert json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])["host"] == "local[2]"


def test_standby_warm_asks_the_keeper_for_a_warm_driver(tmp_path, monkeypatch):
    import akf_devtools.sandbox.jars as jars
    from akf_devtools import local_airflow

    launched = []
    monkeypatch.setattr(local_airflow, "run", lambda airflow: launched.append(airflow) or 0)
    monkeypatch.setattr(jars, "use_job_jars", lambda delta: None)
    assert local_airflow.main(["--run-dir", str(tmp_path), "--port", "18080", "--standby", "warm"]) == 0
    assert launched[0].pair_settings == {"switch": {"standby": "warm"}}
    config = sandbox_pair_config(EXAMPLE, False, tmp_path / "home", launched[0].pair_settings)
    path = tmp_path / "pairs.yaml"
    path.write_text(yaml.safe_dump(config))
    assert str(load_pairs(path)[PAIR].switch.standby) == "warm"
    assert local_airflow.main(["--run-dir", str(tmp_path), "--port", "18080"]) == 0
    assert launched[1].pair_settings == {}

"""The Airflow side's stores: connections checked by name, and the driver's S3A settings from an ``aws``
connection (the stores themselves run in tests/integration/test_state_on_s3.py and test_fault_matrix.py)."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.storage import store
from airflow_kafka_failover.hooks import storage


@pytest.fixture(autouse=True)
def clean_registry():
    store.forget_all()
    yield
    store.forget_all()


def aws_connection(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "aws", **fields}))


def test_a_missing_connection_is_named_with_its_store(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_NOWHERE", raising=False)
    with pytest.raises(ConfigError) as err:
        storage.open_remote_store("hdfs://nn:8020", "nowhere", 5)
    assert str(err.value) == (
        "Airflow connection 'nowhere' for hdfs://nn:8020 does not exist: create it (type 'webhdfs'), or name "
        "another one in job.storage_connections"
    )


def test_a_connection_of_the_wrong_type_is_refused(monkeypatch):
    aws_connection(monkeypatch, "not_hdfs")
    with pytest.raises(ConfigError, match=r"'not_hdfs' for hdfs://nn:8020 is of type 'aws', not 'webhdfs'"):
        storage.open_remote_store("hdfs://nn:8020", "not_hdfs", 5)


def test_the_driver_gets_the_connections_keys_endpoint_and_path_style(monkeypatch):
    aws_connection(
        monkeypatch,
        "state_s3",
        login="AKIAEXAMPLE",
        password="s3cret",
        extra={
            "endpoint_url": "http://127.0.0.1:9000",
            "region_name": "eu-west-1",
            "config_kwargs": {"s3": {"addressing_style": "path"}},
        },
    )
    properties = storage.spark_store_properties(
        ["s3a://state/ckpt", "/local/sink", "hdfs://nn:8020/x"], {"s3a": "state_s3"}
    )
    assert properties == {
        "spark.hadoop.fs.s3a.access.key": "AKIAEXAMPLE",
        "spark.hadoop.fs.s3a.secret.key": "s3cret",
        "spark.hadoop.fs.s3a.aws.credentials.provider": (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        ),
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
    }


def test_without_keys_the_driver_keeps_its_own_credential_chain(monkeypatch):
    aws_connection(monkeypatch, "role_s3", extra={"region_name": "eu-west-1"})
    properties = storage.spark_store_properties(["s3a://state/ckpt"], {"s3a": "role_s3"})
    assert properties == {"spark.hadoop.fs.s3a.endpoint.region": "eu-west-1"}


def test_stores_are_registered_once_per_store_and_connection(monkeypatch):
    registered = []
    real = store.register
    monkeypatch.setattr(
        storage, "register", lambda root, factory: registered.append(root) or real(root, factory)
    )
    paths = ["s3a://state/ckpt", "s3a://state/runs", "/local/sink", "hdfs://nn:8020/fence"]
    storage.use_storage(paths, {}, 10)
    storage.use_storage(paths, {}, 10)
    assert registered == ["s3a://state", "hdfs://nn:8020"]
    storage.use_storage(paths, {"s3a": "other"}, 10)
    assert registered[-1] == "s3a://state"

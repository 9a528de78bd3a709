"""The test stores' settings, without their processes (those run in tests/integration/test_stores.py)."""

from __future__ import annotations

import json
import stat

import pytest
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.hdfs import FAIL_FAST_HDFS, HdfsCluster
from akf_devtools.sandbox.s3 import FAIL_FAST_S3A, S3Credentials, S3Server
from akf_devtools.sandbox.scram import write_private


def started_s3(tmp_path) -> S3Server:
    """An S3Server whose port and credentials files exist, as after a start."""
    server = S3Server(tmp_path)
    write_private(server.port_file, json.dumps({"port": 45678}))
    write_private(server.credentials_file, json.dumps({"access_key": "AKIAEXAMPLE", "secret_key": "s3cr3t"}))
    return server


def test_generated_credentials_are_random_and_keep_the_secret_out_of_repr():
    first, second = S3Credentials.generate(), S3Credentials.generate()
    assert first != second
    assert first.access_key.startswith("AKIA") and len(first.access_key) == 20
    assert first.secret_key not in repr(first)


def test_s3a_properties_reach_the_server_path_style_without_tls(tmp_path):
    server = started_s3(tmp_path)
    properties = server.hadoop_properties()
    assert properties["fs.s3a.endpoint"] == "http://127.0.0.1:45678"
    assert properties["fs.s3a.path.style.access"] == "true"
    assert properties["fs.s3a.connection.ssl.enabled"] == "false"
    assert properties["fs.s3a.secret.key"] == "s3cr3t"
    assert FAIL_FAST_S3A.items() <= properties.items()
    assert not FAIL_FAST_S3A.keys() & server.hadoop_properties(fail_fast=False).keys()
    assert server.spark_properties()["spark.hadoop.fs.s3a.access.key"] == "AKIAEXAMPLE"
    assert server.uri("ckpt", "/orders/") == "s3a://akf-test/ckpt/orders"
    assert server.client_config() == {
        "endpoint_url": "http://127.0.0.1:45678",
        "aws_access_key_id": "AKIAEXAMPLE",
        "aws_secret_access_key": "s3cr3t",
        "region_name": "us-east-1",
    }


def test_the_spark_properties_file_is_owner_only(tmp_path):
    server = started_s3(tmp_path)
    path = server.write_spark_properties(tmp_path / "spark.properties", {"spark.ui.enabled": "false"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = path.read_text().splitlines()
    assert "spark.hadoop.fs.s3a.secret.key s3cr3t" in lines
    assert "spark.ui.enabled false" in lines


def test_a_server_never_started_says_so(tmp_path):
    with pytest.raises(SandboxError, match="was never started; call start"):
        _ = S3Server(tmp_path).endpoint_url
    with pytest.raises(SandboxError, match="credentials .* are unreadable"):
        S3Server(tmp_path).credentials()
    with pytest.raises(SandboxError, match="HDFS in .* was never started"):
        _ = HdfsCluster(tmp_path).uri
    with pytest.raises(SandboxError, match="not running"):
        HdfsCluster(tmp_path).freeze()


def test_hdfs_uris_come_from_its_kept_ports(tmp_path):
    cluster = HdfsCluster(tmp_path)
    write_private(cluster.ports_file, json.dumps({"rpc": 41001, "http": 41002}))
    assert cluster.uri == "hdfs://127.0.0.1:41001"
    assert cluster.path("stores", "ckpt") == "hdfs://127.0.0.1:41001/stores/ckpt"
    assert cluster.webhdfs_url == "http://127.0.0.1:41002/webhdfs/v1"
    assert cluster.webhdfs_uri == "webhdfs://127.0.0.1:41002"
    assert FAIL_FAST_HDFS.items() <= cluster.hadoop_properties().items()
    assert cluster.env == {"HADOOP_CONF_DIR": str(cluster.conf_dir)}

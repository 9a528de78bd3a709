"""Storage locations: which are accepted, how they are joined and named."""

from __future__ import annotations

import pytest

from airflow_kafka_failover.core.storage import locations


@pytest.mark.parametrize(
    ("text", "scheme", "root"),
    [
        ("/data/ckpt", None, ""),
        ("relative/x", None, ""),
        ("file:///data/x", None, ""),
        ("s3a://bucket/ckpt", "s3a", "s3a://bucket"),
        ("hdfs://nn:8020/a/b", "hdfs", "hdfs://nn:8020"),
        ("HDFS://nn:8020/a", "hdfs", "hdfs://nn:8020"),
    ],
)
def test_scheme_and_store_root(text, scheme, root):
    assert locations.scheme(text) == scheme
    assert locations.is_remote(text) is (scheme is not None)
    assert locations.store_root(text) == root


def test_check_normalises_what_it_accepts():
    assert locations.check_location(" /data/x ") == "/data/x"
    assert locations.check_location("file:///data/x") == "/data/x"
    assert locations.check_location("s3a://bucket/ckpt/") == "s3a://bucket/ckpt"
    assert locations.check_location("S3A://bucket") == "s3a://bucket"
    assert locations.check_location("abfss://c@account.dfs.core.windows.net/x") == (
        "abfss://c@account.dfs.core.windows.net/x"
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("s3://b/x", "uses the unsupported scheme s3://; Hadoop's S3 connector is s3a://: write s3a://b/x"),
        ("webhdfs://nn:9870/x", "name HDFS by its file system URI, hdfs://namenode:rpc-port/"),
        ("file://relative", "a file:// URI needs an absolute path"),
        ("gs:///x", "names no bucket"),
    ],
)
def test_check_refuses_naming_the_value_and_what_to_do(text, says):
    with pytest.raises(ValueError) as err:
        locations.check_location(text)
    assert repr(text) in str(err.value) and says in str(err.value)


def test_join_parent_and_name_keep_the_store():
    assert locations.join("s3a://b/ckpt", "orders", "A") == "s3a://b/ckpt/orders/A"
    assert locations.join("s3a://b/ckpt/", "/x/") == "s3a://b/ckpt/x"
    assert locations.join("/ckpt", "orders") == "/ckpt/orders"
    assert locations.parent("hdfs://nn:8020/a/b/c.json") == "hdfs://nn:8020/a/b"
    assert locations.parent("s3a://bucket/top.json") == "s3a://bucket"
    assert locations.parent("/a/b") == "/a"
    assert locations.name("s3a://b/a/epoch-0000000001.json") == "epoch-0000000001.json"
    assert locations.path_in_store("s3a://b/a/x") == "/a/x"

"""The driver's store through Spark's Hadoop FileSystem: a missing object is a plain answer, not a Java
exception (pyspark classifies each one with a dozen class lookups across Py4J, and the fence check meets a
missing marker before every batch)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


@pytest.fixture
def java_errors(monkeypatch):
    """How many Java exceptions reached Python (Py4J builds a Py4JJavaError for each)."""
    from py4j.protocol import Py4JJavaError

    made: list[str] = []
    original = Py4JJavaError.__init__

    def counting(self, *args, **kwargs):
        made.append(str(args[0]) if args else "")
        original(self, *args, **kwargs)

    monkeypatch.setattr(Py4JJavaError, "__init__", counting)
    return made


def test_a_missing_object_is_not_found_without_a_java_exception(spark, tmp_path, java_errors):
    from airflow_kafka_failover.jobs.hadoop_store import HadoopStore

    store = HadoopStore(spark, "file:///")
    (tmp_path / "marker.json").write_bytes(b'{"epoch": 3}')
    (tmp_path / "folder").mkdir()

    with pytest.raises(FileNotFoundError):
        store.read(f"file://{tmp_path}/epoch-4.json")
    with pytest.raises(FileNotFoundError):  # a folder holds no object to read
        store.read(f"file://{tmp_path}/folder")
    assert java_errors == []
    assert store.read(f"file://{tmp_path}/marker.json") == b'{"epoch": 3}'

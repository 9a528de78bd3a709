"""The store operations over an fsspec file system (fsspec's in-memory one here; S3 and HDFS run in the
integration tests against real servers)."""

from __future__ import annotations

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from airflow_kafka_failover.core.storage.fsspec_store import FsspecStore, describe_problem
from airflow_kafka_failover.core.storage.store import StoreUnavailable


@pytest.fixture
def store():
    fs = MemoryFileSystem(skip_instance_cache=True)
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")
    return FsspecStore(fs, "s3a://bucket")


def test_paths_map_to_the_file_system_with_the_bucket(store):
    assert store.fs_path("s3a://bucket/fence/orders/epoch-1.json") == "bucket/fence/orders/epoch-1.json"


def test_operations(store):
    where = "s3a://bucket/fence/orders/epoch-0000000001.json"
    with pytest.raises(FileNotFoundError):
        store.read(where)
    assert store.create(where, b"one") is True
    assert store.create(where, b"two") is False
    assert store.read(where) == b"one" and store.exists(where)
    store.replace(where, b"three")
    assert store.read(where) == b"three"
    assert store.names("s3a://bucket/fence/orders") == ["epoch-0000000001.json"]
    assert store.names("s3a://bucket/nothing") == []
    store.delete(where)
    store.delete(where)
    assert not store.exists(where)


class Broken:
    """A file system whose every call fails the way a store that does not answer does."""

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise ConnectionError("Could not connect to the endpoint URL: http://127.0.0.1:9")

        return fail


@pytest.mark.parametrize(
    "call",
    [
        lambda s, w: s.read(w),
        lambda s, w: s.replace(w, b"x"),
        lambda s, w: s.create(w, b"x"),
        lambda s, w: s.exists(w),
        lambda s, w: s.names(w),
        lambda s, w: s.delete(w),
    ],
)
def test_a_store_that_does_not_answer_is_unavailable_naming_the_location(call):
    where = "s3a://bucket/runs/orders/A/epoch-1/status.json"
    with pytest.raises(StoreUnavailable) as err:
        call(FsspecStore(Broken(), "s3a://bucket"), where)
    assert str(err.value).startswith(f"{where}: the store cannot be used (ConnectionError: Could not connect")


def test_an_error_without_text_keeps_its_type():
    assert describe_problem(TimeoutError()) == "TimeoutError"

"""The local store's operations and the registry that finds a location's store."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.storage import store
from airflow_kafka_failover.core.storage.store import LOCAL, StoreUnavailable, open_store


@pytest.fixture(autouse=True)
def clean_registry():
    store.forget_all()
    yield
    store.forget_all()


def test_local_read_replace_create_list_delete(tmp_path):
    target = str(tmp_path / "a" / "b.json")
    with pytest.raises(FileNotFoundError):
        LOCAL.read(target)
    assert LOCAL.create(target, b"first") is True
    assert LOCAL.create(target, b"second") is False
    assert LOCAL.read(target) == b"first"
    LOCAL.replace(target, b"third")
    assert LOCAL.read(target) == b"third"
    assert LOCAL.names(str(tmp_path / "a")) == ["b.json"]  # no temporary file left
    assert LOCAL.names(str(tmp_path / "missing")) == []
    LOCAL.delete(target)
    LOCAL.delete(target)
    assert not LOCAL.exists(target)


def test_a_private_replace_is_owner_only(tmp_path):
    target = tmp_path / "settings.json"
    LOCAL.replace(str(target), b"{}", private=True)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_create_only_has_one_winner_among_threads(tmp_path):
    target = str(tmp_path / "marker")
    start = threading.Barrier(16)
    won = []

    def create(n: int) -> None:
        start.wait()
        if LOCAL.create(target, str(n).encode()):
            won.append(n)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and LOCAL.read(target) == str(won[0]).encode()
    assert os.listdir(tmp_path) == ["marker"]


def test_an_unreadable_location_is_unavailable_not_absent(tmp_path):
    (tmp_path / "folder").mkdir()
    with pytest.raises(StoreUnavailable) as err:
        LOCAL.read(str(tmp_path / "folder"))
    assert str(tmp_path / "folder") in str(err.value) and "a folder, not a file" in str(err.value)


def test_local_paths_get_the_local_store_and_remote_ones_what_is_registered():
    assert open_store("/x/y") is LOCAL
    with pytest.raises(ConfigError, match=r"no store is set up for s3a://bucket/x in this process"):
        open_store("s3a://bucket/x")
    opened = []
    store.register("s3a://bucket", lambda root: opened.append(root) or LOCAL)
    assert open_store("s3a://bucket/x") is LOCAL and open_store("s3a://bucket/y") is LOCAL
    assert opened == ["s3a://bucket"]  # opened once, on first use
    store.register("hdfs://", lambda root: opened.append(root) or LOCAL)
    open_store("hdfs://nn:8020/a")
    assert opened[-1] == "hdfs://nn:8020"


def test_a_store_that_fails_to_open_is_tried_again_next_time():
    attempts = []

    def flaky(root: str):
        attempts.append(root)
        if len(attempts) == 1:
            raise StoreUnavailable(root, "connection refused")
        return LOCAL

    store.register("s3a://b", flaky)
    with pytest.raises(StoreUnavailable, match="s3a://b: the store cannot be used"):
        open_store("s3a://b/x")
    assert open_store("s3a://b/x") is LOCAL and len(attempts) == 2

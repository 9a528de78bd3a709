"""The one atomic writer: mode, replacement, stale temporaries, and a failed write keeps the old file."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from airflow_kafka_failover.core import atomic_file
from airflow_kafka_failover.core.atomic_file import (
    OWNER_ONLY,
    READABLE_BY_ALL,
    STALE_TEMPORARY_SECONDS,
    remove_stale_temporaries,
    write_atomically,
    write_json_atomically,
)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_creates_the_folder_and_the_file_with_the_default_mode_whatever_the_umask(tmp_path):
    target = tmp_path / "deep" / "er" / "status.json"
    previous = os.umask(0o077)
    try:
        assert write_atomically(target, "hello") == target
    finally:
        os.umask(previous)
    assert target.read_text() == "hello"
    assert mode_of(target) == READABLE_BY_ALL
    assert leftovers(target.parent) == []


def test_owner_only_narrows_an_existing_wider_file(tmp_path):
    target = tmp_path / "secret.properties"
    target.write_text("old")
    target.chmod(0o666)
    write_atomically(target, "password=x", OWNER_ONLY)
    assert target.read_text() == "password=x"
    assert mode_of(target) == OWNER_ONLY


def test_replaces_the_content_and_the_inode(tmp_path):
    target = tmp_path / "marker"
    write_atomically(target, b"\x00first")
    reader = target.open("rb")  # a reader holding the old file keeps reading the old content
    write_atomically(target, "second")
    assert reader.read() == b"\x00first"
    reader.close()
    assert target.read_text() == "second"


def test_json_is_sorted_and_readable_back(tmp_path):
    target = tmp_path / "settings.json"
    write_json_atomically(target, {"b": 1, "a": [1, 2]}, OWNER_ONLY)
    assert json.loads(target.read_text()) == {"a": [1, 2], "b": 1}
    assert target.read_text().index('"a"') < target.read_text().index('"b"')
    assert mode_of(target) == OWNER_ONLY
    write_json_atomically(target, {"B": 1, "A": 2}, sort_keys=False)
    assert list(json.loads(target.read_text())) == ["B", "A"]


def test_stale_temporaries_of_a_crashed_writer_are_removed_fresh_ones_and_others_kept(tmp_path):
    target = tmp_path / "status.json"
    stale = tmp_path / ".status.json.12345.tmp"  # the name older versions used
    stale_random = tmp_path / ".status.json.k2j3h4.tmp"
    fresh = tmp_path / ".status.json.777.tmp"  # a writer at work right now
    other = tmp_path / ".settings.json.1.tmp"  # another target's
    long_ago = time.time() - STALE_TEMPORARY_SECONDS - 60
    for path in (stale, stale_random, fresh, other):
        path.write_text("half")
    for path in (stale, stale_random, other):
        os.utime(path, (long_ago, long_ago))
    write_atomically(target, "{}")
    assert leftovers(tmp_path) == sorted([fresh.name, other.name])
    assert remove_stale_temporaries(tmp_path / "settings.json") == 1
    assert remove_stale_temporaries(target, older_than=0) == 1  # the fresh one, once old enough
    assert leftovers(tmp_path) == []


def test_a_failing_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "fence"
    write_json_atomically(target, {"epoch": 3})

    def disk_full(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_file.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_json_atomically(target, {"epoch": 4})
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"epoch": 3}
    assert leftovers(tmp_path) == []


def test_an_unserialisable_value_fails_before_the_file_is_touched(tmp_path):
    target = tmp_path / "fence"
    write_json_atomically(target, {"epoch": 3})
    before = target.stat().st_ino
    with pytest.raises(TypeError):
        write_json_atomically(target, {"epoch": object()})
    assert target.stat().st_ino == before
    assert json.loads(target.read_text()) == {"epoch": 3}


def test_a_target_that_is_a_folder_fails_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "taken"
    target.mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomically(target, "x")
    assert target.is_dir() and leftovers(tmp_path) == []

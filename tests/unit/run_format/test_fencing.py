from __future__ import annotations

import json
import multiprocessing
import os
import stat
from datetime import datetime
from pathlib import Path

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError
from airflow_kafka_failover.run_format.fencing import (
    FencedError,
    FenceState,
    FencingMarker,
    epoch_marker_name,
    parse_fence,
)


@pytest.fixture
def marker(tmp_path: Path) -> FencingMarker:
    return FencingMarker(str(tmp_path / "fence" / "orders"), "orders")


@pytest.fixture
def strict_umask():
    previous = os.umask(0o077)
    yield
    os.umask(previous)


def test_read_without_marker_is_none(marker):
    assert marker.read() is None
    assert marker.epochs() == []
    assert marker.newer_than(0) is None


def test_advance_creates_a_marker_per_epoch(marker):
    first = marker.advance(None, 0, "A")
    assert (first.pair, first.epoch, first.cluster) == ("orders", 0, "A")
    assert datetime.fromisoformat(first.written_at).tzinfo is not None
    second = marker.advance(0, 1, "B")
    assert marker.read() == second
    assert marker.epochs() == [0, 1]
    assert sorted(os.listdir(marker.path)) == [epoch_marker_name(0), epoch_marker_name(1)]
    assert json.loads(Path(marker.marker(1)).read_text()) == {
        "pair": "orders",
        "epoch": 1,
        "cluster": "B",
        "written_at": second.written_at,
    }


def test_epoch_names_sort_in_epoch_order():
    assert sorted(epoch_marker_name(n) for n in (10, 9, 100)) == [
        epoch_marker_name(9),
        epoch_marker_name(10),
        epoch_marker_name(100),
    ]


def test_newer_than_is_one_read_of_the_next_epoch(marker):
    marker.advance(None, 3, "A")
    assert marker.newer_than(3) is None
    marker.advance(3, 4, "B")
    assert marker.newer_than(3) == marker.read_epoch(4)
    assert marker.newer_than(4) is None


def test_markers_are_world_readable_even_under_a_strict_umask(marker, strict_umask):
    marker.advance(None, 1, "A")
    assert stat.S_IMODE(Path(marker.marker(1)).stat().st_mode) == 0o644


def test_advance_leaves_no_temporary_file(marker):
    marker.advance(None, 1, "A")
    marker.advance(1, 2, "B")
    marker.advance(1, 2, "B")
    assert sorted(os.listdir(marker.path)) == [epoch_marker_name(1), epoch_marker_name(2)]


def test_advance_is_idempotent_for_the_same_cluster(marker):
    first = marker.advance(2, 3, "B")
    text = Path(marker.marker(3)).read_text()
    again = marker.advance(2, 3, "B")
    assert again == first
    assert Path(marker.marker(3)).read_text() == text


def test_advance_to_an_epoch_taken_by_another_cluster_is_fenced(marker):
    marker.advance(2, 3, "B")
    with pytest.raises(FencedError) as err:
        marker.advance(2, 3, "A")
    assert str(err.value) == (
        f"fencing folder {marker.path} of pair 'orders' is at epoch 3 for cluster 'B', not 'A': another "
        "switch moved it; re-read the active record"
    )
    assert isinstance(err.value, FailoverError)
    assert marker.read().cluster == "B"


def test_advance_behind_a_newer_epoch_is_fenced(marker):
    marker.advance(None, 4, "B")
    marker.advance(4, 5, "A")
    with pytest.raises(FencedError, match=r"is already at epoch 5 \(cluster 'A'\), past 4"):
        marker.advance(3, 4, "B")
    assert marker.read().epoch == 5


@pytest.mark.parametrize(("expected", "new"), [(3, 3), (3, 2), (0, 0)])
def test_advance_only_moves_forward(marker, expected, new):
    with pytest.raises(ConfigError) as err:
        marker.advance(expected, new, "B")
    assert str(err.value) == f"a fence only moves forward: {expected} -> {new} is not an advance"
    assert marker.read() is None


def _race(folder: str, cluster: str, start, results) -> None:
    start.wait()
    try:
        FencingMarker(folder, "orders").advance(6, 7, cluster)
        results.put((cluster, "won"))
    except FencedError:
        results.put((cluster, "fenced"))


def test_processes_racing_for_one_epoch_leave_one_winner(marker):
    """Eight processes create epoch 7 for four clusters at once: one cluster wins, every process of it
    succeeds (the same switch), every other one is fenced, and the marker names the winner."""
    ctx = multiprocessing.get_context("fork")
    start, results = ctx.Event(), ctx.Queue()
    clusters = ["A", "B", "C", "D"] * 2
    procs = [ctx.Process(target=_race, args=(str(marker.path), c, start, results)) for c in clusters]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(30)
    outcomes = [results.get(timeout=5) for _ in procs]
    winners = {cluster for cluster, outcome in outcomes if outcome == "won"}
    assert len(winners) == 1
    (winner,) = winners
    assert sorted(outcome for cluster, outcome in outcomes if cluster == winner) == ["won", "won"]
    assert all(outcome == "fenced" for cluster, outcome in outcomes if cluster != winner)
    assert marker.read().cluster == winner


def test_a_marker_whose_content_disagrees_with_its_name_is_refused(marker):
    marker.advance(None, 1, "A")
    Path(marker.marker(1)).write_text('{"pair": "orders", "epoch": 9, "cluster": "A"}')
    with pytest.raises(ConfigError, match=r"says epoch 9; its name says 1"):
        marker.read()


def test_read_refuses_the_marker_of_another_pair(marker):
    FencingMarker(marker.path, "payments").advance(None, 1, "A")
    with pytest.raises(ConfigError) as err:
        marker.read()
    assert str(err.value) == (
        f"fencing marker {marker.marker(1)} belongs to pair 'payments', not 'orders'; "
        "each pair needs its own fencing folder (job.fencing_marker)"
    )


# ---------------------------------------------------------------- parse_fence


def test_parse_fence_full():
    text = '{"pair": "orders", "epoch": 7, "cluster": "A", "written_at": "2024-01-01T00:00:00+00:00"}'
    assert parse_fence(text, "m.json", "orders") == FenceState("orders", 7, "A", "2024-01-01T00:00:00+00:00")


def test_parse_fence_defaults_and_no_pair_check():
    assert parse_fence('{"pair": "x", "epoch": 0}', "m.json") == FenceState("x", 0, "", "")


@pytest.mark.parametrize("text", ["", "not json", '{"epoch": 1'])
def test_parse_fence_refuses_bad_json(text):
    with pytest.raises(
        ConfigError, match=r"^fencing marker m\.json is not valid JSON \(.+\); it was damaged"
    ):
        parse_fence(text, "m.json")


@pytest.mark.parametrize(("text", "shown"), [("[1]", "[1]"), ("3", "3"), ('"x"', "'x'"), ("null", "None")])
def test_parse_fence_needs_an_object(text, shown):
    with pytest.raises(ConfigError) as err:
        parse_fence(text, "m.json")
    assert str(err.value) == f"fencing marker m.json must hold a JSON object, got {shown}"


@pytest.mark.parametrize(
    ("epoch", "shown"), [(-1, "-1"), ("2", "'2'"), (True, "True"), (1.5, "1.5"), (None, "None")]
)
def test_parse_fence_refuses_bad_epoch(epoch, shown):
    with pytest.raises(ConfigError) as err:
        parse_fence(json.dumps({"pair": "orders", "epoch": epoch}), "m.json", "orders")
    assert str(err.value) == f"fencing marker m.json has an invalid epoch {shown}"


def test_parse_fence_missing_epoch():
    with pytest.raises(ConfigError, match=r"has an invalid epoch None$"):
        parse_fence('{"pair": "orders"}', "m.json")


@pytest.mark.parametrize(("data", "shown"), [({"pair": "payments"}, "'payments'"), ({}, "None")])
def test_parse_fence_refuses_another_pair(data, shown):
    with pytest.raises(ConfigError) as err:
        parse_fence(json.dumps({**data, "epoch": 1}), "m.json", "orders")
    assert str(err.value) == (
        f"fencing marker m.json belongs to pair {shown}, not 'orders'; each pair needs its own fencing "
        "folder (job.fencing_marker)"
    )


def test_a_fencing_path_that_is_a_file_is_refused_by_name(tmp_path):
    path = tmp_path / "fence"
    path.write_text("{}")
    marker = FencingMarker(str(path), "orders")
    for call in (marker.read, lambda: marker.advance(None, 1, "B")):
        with pytest.raises(
            ConfigError, match=f"fencing folder {path} of pair 'orders' is a file, not a folder"
        ):
            call()
    assert path.read_text() == "{}"

from __future__ import annotations

import json
import os
import stat
from datetime import datetime
from pathlib import Path

import pytest

from airflow_kafka_failover.exceptions import ConfigError, FailoverError
from airflow_kafka_failover.jobs.fencing import (
    MARKER_MODE,
    FencedError,
    FenceState,
    FencingMarker,
    parse_fence,
)


@pytest.fixture
def marker(tmp_path: Path) -> FencingMarker:
    return FencingMarker(tmp_path / "fence" / "orders.json", "orders")


@pytest.fixture
def strict_umask():
    previous = os.umask(0o077)
    yield
    os.umask(previous)


def test_read_without_marker_is_none(marker):
    assert marker.read() is None


def test_write_then_read_round_trips(marker):
    written = marker.write(4, "B")
    assert (written.pair, written.epoch, written.cluster) == ("orders", 4, "B")
    assert datetime.fromisoformat(written.written_at).tzinfo is not None
    assert marker.read() == written
    assert json.loads(marker.path.read_text()) == {
        "pair": "orders",
        "epoch": 4,
        "cluster": "B",
        "written_at": written.written_at,
    }


def test_marker_is_world_readable_even_under_a_strict_umask(marker, strict_umask):
    marker.write(1, "A")
    assert MARKER_MODE == 0o644
    assert stat.S_IMODE(marker.path.stat().st_mode) == 0o644


def test_write_leaves_no_temporary_file(marker):
    marker.write(1, "A")
    marker.write(2, "B")
    assert sorted(p.name for p in marker.path.parent.iterdir()) == ["orders.json"]


def test_read_of_a_directory_is_a_config_error(tmp_path):
    (tmp_path / "orders.json").mkdir()
    with pytest.raises(ConfigError, match=r"fencing marker .*orders\.json cannot be read: Is a directory"):
        FencingMarker(tmp_path / "orders.json", "orders").read()


def test_read_refuses_the_marker_of_another_pair(marker):
    FencingMarker(marker.path, "payments").write(1, "A")
    with pytest.raises(ConfigError) as err:
        marker.read()
    assert str(err.value) == (
        f"fencing marker {marker.path} belongs to pair 'payments', not 'orders'; "
        "each pair needs its own marker path"
    )


# ---------------------------------------------------------------- advance


def test_advance_from_no_marker(marker):
    state = marker.advance(None, 0, "A")
    assert (state.pair, state.epoch, state.cluster) == ("orders", 0, "A")
    assert marker.read() == state


def test_advance_moves_forward(marker):
    marker.advance(None, 1, "A")
    state = marker.advance(1, 2, "B")
    assert (state.epoch, state.cluster) == (2, "B")
    assert marker.read().epoch == 2


def test_advance_fails_when_another_switch_moved_the_marker(marker):
    marker.write(5, "B")
    with pytest.raises(FencedError) as err:
        marker.advance(3, 4, "A")
    assert str(err.value) == (
        f"fencing marker {marker.path} of pair 'orders' holds epoch 5, not the expected 3: "
        "another switch moved it; re-read the active record"
    )
    assert isinstance(err.value, FailoverError)
    assert marker.read().epoch == 5


def test_advance_from_none_fails_when_a_marker_exists(marker):
    marker.write(0, "A")
    with pytest.raises(FencedError, match=r"holds epoch 0, not the expected None"):
        marker.advance(None, 1, "B")


def test_advance_with_expected_epoch_fails_without_marker(marker):
    with pytest.raises(FencedError, match=r"holds epoch None, not the expected 2"):
        marker.advance(2, 3, "A")
    assert marker.read() is None


def test_advance_is_idempotent_when_already_there(marker):
    marker.write(2, "A")
    first = marker.advance(2, 3, "B")
    text = marker.path.read_text()
    again = marker.advance(2, 3, "B")
    assert again == first
    assert marker.path.read_text() == text


def test_advance_to_the_same_epoch_for_another_cluster_is_fenced(marker):
    marker.write(2, "A")
    marker.advance(2, 3, "B")
    with pytest.raises(FencedError, match=r"holds epoch 3, not the expected 2"):
        marker.advance(2, 3, "A")
    assert marker.read().cluster == "B"


@pytest.mark.parametrize(("expected", "new"), [(3, 3), (3, 2), (0, 0)])
def test_advance_only_moves_forward(marker, expected, new):
    marker.write(expected, "A")
    with pytest.raises(ConfigError) as err:
        marker.advance(expected, new, "B")
    assert str(err.value) == f"a fence only moves forward: {expected} -> {new} is not an advance"
    assert marker.read().cluster == "A"


# ---------------------------------------------------------------- parse_fence


def test_parse_fence_full():
    text = '{"pair": "orders", "epoch": 7, "cluster": "A", "written_at": "2024-01-01T00:00:00+00:00"}'
    assert parse_fence(text, "m.json", "orders") == FenceState("orders", 7, "A", "2024-01-01T00:00:00+00:00")


def test_parse_fence_defaults_and_no_pair_check():
    assert parse_fence('{"pair": "x", "epoch": 0}', "m.json") == FenceState("x", 0, "", "")


@pytest.mark.parametrize("text", ["", "not json", '{"epoch": 1'])
def test_parse_fence_refuses_bad_json(text):
    with pytest.raises(ConfigError, match=r"^fencing marker m\.json is not valid JSON \(.+\); restore it"):
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
        f"fencing marker m.json belongs to pair {shown}, not 'orders'; each pair needs its own marker path"
    )

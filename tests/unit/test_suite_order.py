"""The suite's order under ``make test`` and the timeline that measures it (tests/conftest.py,
scripts/suite_timeline.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest

REPO = Path(__file__).resolve().parents[2]


def _timeline_script():
    spec = importlib.util.spec_from_file_location("timeline_script", REPO / "scripts" / "suite_timeline.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _summary_of(tmp_path, capsys, entries: list[dict]) -> str:
    """What scripts/suite_timeline.py prints for a timeline of ``entries``."""
    timeline = tmp_path / "timeline.jsonl"
    timeline.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    assert _timeline_script().main([str(timeline)]) == 0
    return capsys.readouterr().out


def test_each_longest_first_entry_names_a_test_file():
    missing = [name for name in conftest.LONGEST_FIRST if not (REPO / "tests" / name).is_file()]
    assert not missing, f"LONGEST_FIRST names files that are not under tests/: {missing}"


def test_xdist_keeps_the_collection_order_of_files():
    config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True))
    conftest.pytest_configure(config)  # type: ignore[arg-type]
    assert config.option.loadscopereorder is False


def test_the_timeline_shows_each_workers_busy_time_and_idle_tail(tmp_path, capsys):
    entries = [
        {"worker": "gw0", "test": "tests/a.py::one", "began": 100.0, "ended": 160.0},
        {"worker": "gw1", "test": "tests/b.py::one", "began": 100.0, "ended": 130.0},
        {"worker": "gw1", "test": "tests/b.py::two", "began": 130.0, "ended": 140.0},
    ]
    out = _summary_of(tmp_path, capsys, entries)
    assert "3 tests, 60 s from the first start to the last end" in out
    assert "gw0: 1 tests, from +0 s to +60 s, busy 60 s, idle at the end 0 s" in out
    assert "gw1: 2 tests, from +0 s to +40 s, busy 40 s, idle at the end 20 s, last file tests/b.py" in out
    assert out.index("tests/a.py") < out.rindex("tests/b.py")


def test_a_timeline_line_that_is_not_an_entry_is_refused_by_its_number(tmp_path):
    timeline = tmp_path / "timeline.jsonl"
    timeline.write_text('{"worker": "gw0", "test": "t", "began": 1, "ended": 2}\n{"worker": "gw0"}\n')
    with pytest.raises(SystemExit, match=r"timeline.jsonl:2 is not a timeline entry"):
        _timeline_script().main([str(timeline)])


def test_tests_run_inside_another_test_are_left_out(tmp_path, capsys):
    entries = [
        {"worker": "gw0", "test": "tests/compat/lane.py::unit_run", "began": 0.0, "ended": 100.0},
        {"worker": "gw0", "test": "tests/unit/a.py::inner", "began": 10.0, "ended": 20.0},
        {"worker": "gw1", "test": "tests/unit/a.py::outer", "began": 10.0, "ended": 20.0},
    ]
    out = _summary_of(tmp_path, capsys, entries)
    assert "2 tests, 100 s from the first start to the last end (1 tests run inside another" in out
    assert "gw0: 1 tests, from +0 s to +100 s, busy 100 s" in out


def test_the_shared_sandbox_stops_after_the_last_file_that_uses_it(monkeypatch):
    """A worker gets files in collection order, so after the last file that checks out the shared sandbox
    nothing would use the one it holds: that file's hand-back stops it, every earlier file keeps it."""
    from tests.integration import conftest as integration

    monkeypatch.setattr(integration, "_pool_needed_after", set())  # this run's own is left as it was

    def item(name: str, *fixtures: str) -> SimpleNamespace:
        return SimpleNamespace(path=Path(name), fixturenames=list(fixtures))

    items = [
        item("a.py", "own_sandbox"),
        item("b.py", "tmp_path"),
        item("c.py", "sandbox", "own_sandbox"),
        item("c.py", "tmp_path"),
        item("d.py"),
    ]
    integration._note_pool_files(items)
    assert integration._pool_needed_after == {"a.py", "b.py"}
    integration._note_pool_files([item("d.py")])
    assert integration._pool_needed_after == set()

"""The demo's report: rates per cluster, counts per batch, text, plot, and the command's argument checks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from akf_devtools.demo import report
from akf_devtools.demo.__main__ import main

T0 = 1_000_000.0


def line(cluster: str, epoch: int, batch: int, at: float, records: int) -> dict:
    return {"cluster": cluster, "epoch": epoch, "batch_id": batch, "written_at": T0 + at, "records": records}


def test_consumption_is_binned_per_cluster_with_empty_bins_as_zero():
    progress = [line("A", 0, 0, 0.5, 10), line("A", 0, 1, 1.5, 6), line("B", 1, 0, 6.1, 8)]
    series = report.consumption_series(progress, T0, bin_seconds=2.0)
    assert series["A"] == ([0.0, 2.0, 4.0, 6.0], [8.0, 0.0, 0.0, 0.0])
    assert series["B"][1] == [0.0, 0.0, 0.0, 4.0]


def test_a_batch_logged_twice_is_consumed_once():
    progress = [line("A", 0, 0, 1, 10), line("A", 0, 0, 2, 10), line("A", 2, 0, 3, 5), line("B", 1, 0, 4, 7)]
    assert report.consumed_per_cluster(progress) == {"A": 15, "B": 7}


def test_history_becomes_switch_events():
    record = {
        "history": [
            {"at": "2026-11-22T10:00:00+00:00", "kind": "failover", "from": "A", "to": "B", "epoch": 1}
        ]
    }
    [(at, kind, text)] = report.history_events(record)
    assert kind == "switch" and "failover committed: A -> B, epoch 1" in text
    assert at == 1795341600.0  # 2026-11-22T10:00:00Z


def test_render_and_plot(tmp_path):
    timeline = report.Timeline(T0)
    timeline.add(T0 + 30, "fault", "A crashed")
    timeline.add(T0 + 10, "info", "job on A")
    counts = {"produced": 100, "rows": 104, "unique": 100, "duplicates": 4, "lost": 0, "without_id": 0}
    text = report.render(
        [
            {
                "switch": "failover",
                "detection_s": 3.5,
                "rto_s": 30.1,
                "steps": {"fence_and_stop": 0.4, "plan": 1},
            }
        ],
        counts,
        {"A": 60, "B": 44},
        timeline,
    )
    assert text.index("job on A") < text.index("A crashed")  # events sorted by time
    assert "+  30.0 s  A crashed" in text and "RTO  30.1 s" in text and "60 / 44" in text
    assert "after the verdict: fence_and_stop 0.4 s, plan 1 s" in text
    png = report.plot(
        report.consumption_series([line("A", 0, 0, 1, 10)], T0), timeline, tmp_path / "p.png", "title"
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--rate", "0"], "--rate must be between 1 and 5000 records per second, got 0"),
        (["--partitions", "100"], "--partitions must be between 1 and 64, got 100"),
        (["--rate", "fast"], "invalid float value: 'fast'"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_command_documents_itself():
    result = subprocess.run(
        [sys.executable, "-m", "akf_devtools.demo", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--rate" in result.stdout and "crashed" in result.stdout

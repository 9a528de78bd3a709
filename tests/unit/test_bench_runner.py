"""The benchmark runner's assembly of results: JSON lines in, table rows and the JSON document out.

Canned outputs only: no benchmark runs here, and no timing is asserted.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[2] / "benchmarks" / "run_all.py"


@pytest.fixture(scope="module")
def run_all():
    spec = importlib.util.spec_from_file_location("bench_run_all", RUNNER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


REDELIVERY = {
    "rate_achieved": 1000,
    "ours_redelivered": 540,
    "ours_lost": 0,
    "mm2_redelivered": 2966,
    "mm2_lost": 0,
    "latest_lost": 4200,
    "lost_in_replication": 0,
}


def outcome(run_all, name, result=None, error=None):
    return run_all.Outcome(
        name, "failed" if error else "ok", 12.5, f"/logs/{name}.log", ["python", name], result, error
    )


def test_the_last_json_object_of_the_output_is_the_result(run_all):
    output = "\n".join(
        [
            "[10:00:00] machine: vm 2 cores",
            json.dumps({"early": 1}),
            "[10:00:01] " + json.dumps({"in a log line": True}),
            json.dumps({"detection_crash_median_s": 6.1}),
            "[1, 2]",
            "INFO atexit: stopping",
        ]
    )
    assert run_all.last_json_object(output) == {"detection_crash_median_s": 6.1}
    assert run_all.last_json_object("no json\n{broken") is None


def test_rows_check_targets_against_numbers_json_and_other_figures(run_all):
    by_name = {b.name: b for b in run_all.BENCHMARKS}
    rows = {
        row["key"]: row
        for row in run_all.figure_rows(by_name["redelivery"], outcome(run_all, "redelivery", REDELIVERY))
    }
    assert rows["ours_redelivered"]["met"] is True
    assert rows["ours_redelivered"]["target"] == "<= mm2_redelivered (2966)"
    assert rows["ours_lost"]["met"] is True and rows["mm2_redelivered"]["met"] is None
    worse = run_all.figure_rows(
        by_name["redelivery"], outcome(run_all, "redelivery", {**REDELIVERY, "ours_redelivered": 3000})
    )
    assert [row["met"] for row in worse if row["key"] == "ours_redelivered"] == [False]
    parsed = {"parse_ms_median": 310.5, "heavy_imports": []}
    parse = run_all.figure_rows(by_name["dag_parse"], outcome(run_all, "dag_parse", parsed))
    assert [(row["value"], row["met"]) for row in parse] == [(310.5, None), ([], True)]


def test_missing_figures_show_a_dash_and_labels_take_fields_of_the_result(run_all):
    by_name = {b.name: b for b in run_all.BENCHMARKS}
    rows = run_all.figure_rows(
        by_name["detection"], outcome(run_all, "detection", {"false_alarms": 0, "blips": 10})
    )
    alarms = next(row for row in rows if row["key"] == "false_alarms")
    assert alarms["figure"] == "false alarms over 10 hangs of 2 s" and alarms["met"] is True
    crash = next(row for row in rows if row["key"] == "detection_crash_median_s")
    assert crash["value"] is None and crash["met"] is None
    assert "detection_crash_median_s" not in run_all.render_table(rows)
    assert " - " in run_all.render_table(rows)


def test_a_failed_benchmark_is_one_row_with_its_log_and_the_document_says_so(run_all):
    outcomes = [
        outcome(run_all, "redelivery", REDELIVERY),
        outcome(run_all, "rto", error="exit code 1"),
        outcome(run_all, "dag_parse", {"parse_ms_median": 300.0, "heavy_imports": ["pyspark"]}),
    ]
    machine = {"cores": 2, "ram_gib": 23.4, "cpu_model": "Some CPU", "python": "3.11.7"}
    document = run_all.assemble(
        outcomes, machine, False, "2026-11-22T10:00:00+00:00", "2026-11-22T11:00:00+00:00"
    )
    assert document["machine"] == machine and document["all_ran"] is False
    assert document["targets_met"] is False  # pyspark imported while parsing
    assert document["benchmarks"]["rto"]["status"] == "failed"
    assert document["benchmarks"]["redelivery"]["result"] == REDELIVERY
    failed = [row for row in document["figures"] if row["benchmark"] == "rto"]
    assert failed == [
        {
            "benchmark": "rto",
            "figure": "FAILED: exit code 1",
            "value": None,
            "unit": "",
            "target": "",
            "met": None,
            "log": "/logs/rto.log",
        }
    ]
    table = run_all.render_table(document["figures"])
    lines = table.splitlines()
    assert lines[0].split() == ["benchmark", "figure", "value", "unit", "target", "met?"]
    assert any("FAILED: exit code 1" in line and "log: /logs/rto.log" in line for line in lines)
    assert any(
        line.startswith("redelivery") and "re-delivered per switch: our plan" in line and "yes" in line
        for line in lines
    )
    json.dumps(document)  # the file is JSON


def test_only_names_known_benchmarks(run_all):
    assert [b.name for b in run_all.select("rto, redelivery")] == ["rto", "redelivery"]
    assert len(run_all.select(None)) == len(run_all.BENCHMARKS)
    with pytest.raises(SystemExit, match="unknown benchmark"):
        run_all.select("rto,nope")


def test_every_benchmark_script_exists(run_all):
    for benchmark in run_all.BENCHMARKS:
        assert (RUNNER.parent / benchmark.script).is_file(), benchmark.script

"""The Delta sink on a real local Spark with Delta Lake: idempotent per batch in both modes, the merge
window, and bad inputs refused before anything is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

SCENARIOS = Path(__file__).with_name("delta_sink_scenarios.py")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict:
    from akf_devtools.sandbox.jars import delta_jars

    work = tmp_path_factory.mktemp("delta")
    jars = ",".join(str(jar) for jar in delta_jars())
    done = subprocess.run(
        [sys.executable, str(SCENARIOS), str(work), jars], capture_output=True, text=True, timeout=600
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("SCENARIOS ")), None)
    assert line is not None, f"the scenarios did not finish (exit {done.returncode}):\n{done.stderr[-4000:]}"
    return json.loads(line.removeprefix("SCENARIOS "))


def test_append_mode_writes_a_replayed_batch_once_and_the_next_epochs_batch_0(outcomes):
    assert outcomes["append_replayed"] == 2
    assert outcomes["append_next_epoch"] == 4  # at least once across a switch: b twice


def test_merge_mode_inserts_each_key_once_across_epochs(outcomes):
    assert outcomes["merge_next_epoch"] == ["a", "b", "c"]


def test_the_merge_window_bounds_what_a_merge_looks_at(outcomes):
    # k (2026-11-01) is outside the 2-day window of a batch from 2026-11-20, so it is not found and is
    # inserted again; n within the window is found and not inserted twice.
    assert outcomes["window"] == ["k", "k", "n"]


def test_a_folder_that_is_not_a_delta_table_is_refused_and_left_alone(outcomes):
    assert "is not a Delta table but is not empty" in outcomes["not_a_table"]
    assert "plain_parquet" in outcomes["not_a_table"]
    assert outcomes["not_a_table_unchanged"] and "_delta_log" not in outcomes["not_a_table_unchanged"]


def test_a_merge_key_the_dataframe_lacks_is_refused_by_name(outcomes):
    assert "customer_id" in outcomes["missing_key"] and "does not have" in outcomes["missing_key"]


def test_an_unknown_mode_is_refused_by_name(outcomes):
    assert "'upsert'" in outcomes["bad_mode"]

"""The job-side API before Spark starts: settings it refuses, and the Delta sink's arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.jobs.api import FailoverStream
from airflow_kafka_failover.jobs.delta_sink import DeltaSink
from airflow_kafka_failover.run_format.fencing import FencingMarker
from airflow_kafka_failover.run_format.settings import JobSettings


def settings_file(tmp_path: Path, **changes) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    settings = JobSettings(
        pair="orders",
        cluster="A",
        epoch=2,
        bootstrap_servers="a1:9092",
        checkpoint=str(tmp_path / "ckpt"),
        sink_root=str(tmp_path / "sink"),
        bookkeeping_group="bk-orders",
        fencing_marker=str(tmp_path / "fence"),
        run_dir=str(run_dir),
        topics=("orders",),
    )
    data = {**settings.model_dump(mode="json"), **changes}
    path = run_dir / "settings.json"
    path.write_text(json.dumps(data))
    return path


def refusal(path: Path) -> str:
    with pytest.raises(SystemExit) as exit_:
        FailoverStream.from_args(["--settings", str(path)])
    assert exit_.value.code == 2
    status = json.loads((path.parent / "status.json").read_text())
    assert status["state"] == "refused"
    return status["reason"]


def test_a_settings_file_of_a_newer_major_is_refused_naming_both_versions(tmp_path):
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, 2, "A")
    reason = refusal(settings_file(tmp_path, schema_version="4.0"))
    assert "'4.0'" in reason and "a newer provider release" in reason and "3.1" in reason
    assert not (tmp_path / "ckpt").exists(), "the refused run claimed the checkpoint"


def test_a_fence_at_another_epoch_is_refused_before_spark_starts(tmp_path):
    FencingMarker(str(tmp_path / "fence"), "orders").advance(None, 3, "B")
    assert "is at epoch 3; this run is for epoch 2" in refusal(settings_file(tmp_path))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "replace"}, "'replace' is not one of append, merge, upsert"),
        ({"mode": "merge"}, "'merge' needs merge_on"),
        ({"mode": "upsert"}, "'upsert' needs merge_on"),
        ({"mode": "append", "merge_on": "id"}, "apply to modes 'merge' and 'upsert' only"),
        ({"mode": "merge", "merge_on": "id", "merge_window": ("d", "two days")}, "merge_window must be"),
        ({"mode": "merge", "merge_on": "id", "merge_window": ("d",)}, "merge_window must be"),
    ],
)
def test_delta_sink_arguments_are_checked_by_name(kwargs, message):
    arguments = {"merge_on": None, "partition_by": None, "merge_window": None, **kwargs}
    with pytest.raises(ConfigError, match=message):
        DeltaSink(None, "/lake/orders", app_id="akf-orders-A-epoch-2", **arguments)


def test_a_merge_window_in_days_hours_or_weeks_is_taken():
    for interval in ("2 days", "36 hours", "1 week"):
        sink = DeltaSink(
            None,
            "/t",
            mode="merge",
            merge_on="id",
            partition_by=None,
            merge_window=("d", interval),
            app_id="x",
        )
        assert sink.merge_window == ("d", interval)


@pytest.mark.parametrize("write", ["write_stream", "write_delta"])
def test_writers_that_need_the_observation_refuse_a_source_read_without_it(write):
    from types import SimpleNamespace

    stream = object.__new__(FailoverStream)  # past from_args: a run whose source was read unobserved
    stream._run = SimpleNamespace(source_observed=False)
    with pytest.raises(
        ConfigError, match=rf"{write} needs the Kafka source observed .* read_kafka\(observe=False\)"
    ):
        getattr(stream, write)(*(["writer"] if write == "write_stream" else ["df", "/lake/orders"]))

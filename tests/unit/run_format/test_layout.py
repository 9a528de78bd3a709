from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_kafka_failover.core.atomic_file import write_json_atomically
from airflow_kafka_failover.core.exceptions import CheckpointError
from airflow_kafka_failover.run_format.layout import (
    OWNER_FILE,
    RunLayout,
    claim_checkpoint,
    mark_killed,
    read_status,
    status_file,
    stop_request_file,
)

OWNER = {"pair": "orders", "cluster": "A", "epoch": 2}


def claim(checkpoint: Path, **overrides) -> bool:
    owner = {**OWNER, **overrides}
    return claim_checkpoint(checkpoint, owner["pair"], owner["cluster"], owner["epoch"], "a1:9092")


def add_batch(checkpoint: Path, batch: int = 0) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch)).write_text('v1\n{}\n{"orders":{"0":1}}')


def test_run_layout_paths():
    layout = RunLayout("orders", "B", 4, "/ckpt", "/runs")
    assert layout.checkpoint == "/ckpt/orders/B/epoch-4"
    assert layout.run_dir == "/runs/orders/B/epoch-4"
    assert layout.settings_file == "/runs/orders/B/epoch-4/settings.json"
    assert layout.local_dir == "/runs/orders/B/epoch-4"


def test_run_layout_on_a_store_keeps_the_scheme_and_needs_a_local_root():
    layout = RunLayout("orders", "B", 4, "hdfs://nn:8020/ckpt", "s3a://bucket/runs", "/var/akf")
    assert layout.checkpoint == "hdfs://nn:8020/ckpt/orders/B/epoch-4"
    assert layout.run_dir == "s3a://bucket/runs/orders/B/epoch-4"
    assert layout.local_dir == "/var/akf/orders/B/epoch-4"
    with pytest.raises(
        CheckpointError, match=r"run_root s3a://bucket/runs is remote and no local_root is set"
    ):
        _ = RunLayout("orders", "B", 4, "/ckpt", "s3a://bucket/runs").local_dir


def test_run_files():
    assert status_file("/runs/x") == "/runs/x/status.json"
    assert stop_request_file("s3a://b/runs/x") == "s3a://b/runs/x/stop-request"


# ---------------------------------------------------------------- claim_checkpoint


def test_claim_of_a_new_directory_writes_the_owner(tmp_path):
    checkpoint = tmp_path / "orders" / "A" / "epoch-2"
    assert claim(checkpoint) is False
    assert json.loads((checkpoint / OWNER_FILE).read_text()) == {**OWNER, "bootstrap_servers": "a1:9092"}
    assert sorted(p.name for p in checkpoint.iterdir()) == [OWNER_FILE]


def test_claim_again_without_batches_is_false(tmp_path):
    claim(tmp_path)
    assert claim(tmp_path) is False


def test_claim_again_with_batches_resumes(tmp_path):
    claim(tmp_path)
    add_batch(tmp_path)
    assert claim(tmp_path) is True


def test_claim_with_empty_offsets_dir_and_no_owner_is_new(tmp_path):
    (tmp_path / "offsets").mkdir()
    assert claim(tmp_path) is False
    assert (tmp_path / OWNER_FILE).is_file()


@pytest.mark.parametrize("other", [{"cluster": "B"}, {"epoch": 3}, {"pair": "payments"}])
def test_claim_refuses_a_checkpoint_of_another_run(tmp_path, other):
    claim(tmp_path)
    owner_text = (tmp_path / OWNER_FILE).read_text()
    wanted = {**OWNER, **other}
    with pytest.raises(CheckpointError) as err:
        claim(tmp_path, **other)
    assert str(err.value).startswith(f"checkpoint {tmp_path} belongs to {OWNER}, not to {wanted}: ")
    assert (tmp_path / OWNER_FILE).read_text() == owner_text


def test_claim_refuses_batches_without_owner(tmp_path):
    add_batch(tmp_path, 7)
    with pytest.raises(CheckpointError) as err:
        claim(tmp_path)
    assert str(err.value) == (
        f"checkpoint {tmp_path} holds batches but no {OWNER_FILE}: it was not written by this provider for "
        f"{OWNER}; give this run a new checkpoint directory"
    )
    assert not (tmp_path / OWNER_FILE).exists()


@pytest.mark.parametrize("text", ["", "{not json", '{"pair": "orders"'])
def test_claim_refuses_an_unreadable_owner_file(tmp_path, text):
    (tmp_path / OWNER_FILE).write_text(text)
    expected = r"_owner\.json: unreadable owner file \(.+\); use a new checkpoint"
    with pytest.raises(CheckpointError, match=expected):
        claim(tmp_path)


def test_claim_refuses_an_owner_file_that_is_not_an_object(tmp_path):
    (tmp_path / OWNER_FILE).write_text("[1, 2]")
    with pytest.raises(CheckpointError, match=r"belongs to \[1, 2\], not to "):
        claim(tmp_path)


def test_claim_ignores_extra_owner_fields(tmp_path):
    (tmp_path / OWNER_FILE).write_text(json.dumps({**OWNER, "bootstrap_servers": "old:9092", "note": "x"}))
    add_batch(tmp_path)
    assert claim(tmp_path) is True


# ---------------------------------------------------------------- status


def test_read_status_without_file(tmp_path):
    assert read_status(tmp_path) == {}
    assert read_status(tmp_path / "missing") == {}


@pytest.mark.parametrize("text", ["", "{half", "[1]", '"running"'])
def test_read_status_of_a_corrupt_or_odd_file(tmp_path, text):
    Path(status_file(tmp_path)).write_text(text)
    assert read_status(tmp_path) == {}


def test_status_written_atomically_is_read_back(tmp_path):
    write_json_atomically(status_file(tmp_path / "run"), {"state": "running", "batch": 3})
    assert read_status(tmp_path / "run") == {"state": "running", "batch": 3}
    assert Path(status_file(tmp_path / "run")).read_text() == '{"batch": 3, "state": "running"}'
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["status.json"]


@pytest.mark.parametrize("last", ["stopped", "fenced", "failed", "refused", "killed"])
def test_mark_killed_keeps_a_final_state_the_job_wrote(tmp_path, last):
    write_json_atomically(status_file(tmp_path), {"state": last, "reason": "its own words"})
    assert not mark_killed(tmp_path, "terminated")
    assert read_status(tmp_path) == {"state": last, "reason": "its own words"}


@pytest.mark.parametrize("last", [None, "starting", "running"])
def test_mark_killed_replaces_a_live_state(tmp_path, last):
    if last is not None:
        write_json_atomically(status_file(tmp_path), {"state": last, "pid": 42})
    assert mark_killed(tmp_path, "did not stop within 30 s")
    status = read_status(tmp_path)
    assert (status["state"], status["reason"], status["state_before"]) == (
        "killed",
        "did not stop within 30 s",
        last,
    )
    assert status.get("pid") == (42 if last else None)

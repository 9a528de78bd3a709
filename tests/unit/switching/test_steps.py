"""Every step of a switch acts on the active record as it is when the step runs, never on the gate's view.

A switch run may watch for minutes between its gate and its verdict. Here the gate's view is the pair's
initial record (A active at epoch 0, no job), and before each step something else commits: the start DAG
its job, another switch the next epoch. The record backend is a dict standing in for the Variable; the fence,
the record markers and the checkpoints are real files on the local store; the job hook and the planner's
Kafka reads are replaced by recorders (the sandbox tests run the same steps against real clusters).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.core.exceptions import CheckpointError
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import parse_pair
from airflow_kafka_failover.domain.switch_gate import FAILOVER, NotApplicable, SwitchParams
from airflow_kafka_failover.domain.translation.plan import TranslationPlan
from airflow_kafka_failover.io import record_store
from airflow_kafka_failover.run_format.fencing import FencedError
from airflow_kafka_failover.run_format.layout import SETTINGS_FILE
from airflow_kafka_failover.run_format.settings import JobSettings, SwitchPlan
from airflow_kafka_failover.switching import steps
from airflow_kafka_failover.switching.job_request import JobRequest
from airflow_kafka_failover.switching.old_run import old_run
from tests.unit.hooks.test_streaming_job import checked_without_kafka  # noqa: F401 - a fixture


class Variables:
    """The Variable backend (``get``/``set``) of one task process."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class JobHook:
    """Records what the steps stop."""

    def __init__(self) -> None:
        self.stopped: list[dict[str, Any]] = []
        self.modes: list[tuple[float, bool]] = []  # (seconds given to the stop request, killed at once)

    def stop(self, handle: dict[str, Any], timeout: float, at_once: bool = False) -> str:
        self.stopped.append(handle)
        self.modes.append((timeout, at_once))
        return "stopped"


@pytest.fixture
def pair(tmp_path):
    return parse_pair(
        "orders",
        {
            "clusters": {"A": {"connection": "kafka_a"}, "B": {"connection": "kafka_b"}},
            "primary": "A",
            "topics": ["orders"],
            "job": {
                "sink_root": str(tmp_path / "sink"),
                "checkpoint_root": str(tmp_path / "checkpoints"),
                "run_root": str(tmp_path / "runs"),
                "fencing_marker": str(tmp_path / "fence"),
            },
        },
    )


@pytest.fixture
def world(pair, monkeypatch):
    """The Variable, the job hook and the planner's inputs of one switch, recorded."""
    from airflow_kafka_failover import version_compat
    from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook

    variables, hook, planned = Variables(), JobHook(), []
    monkeypatch.setattr(version_compat, "Variable", variables)
    monkeypatch.setattr(StreamingJobHook, "for_options", classmethod(lambda cls, options: hook))
    monkeypatch.setattr(steps, "_hook_if_reachable", lambda *args, **kwargs: None)

    def build_plan(pair, source, target, position, hooks) -> TranslationPlan:
        planned.append(position)
        return TranslationPlan.create(source, target, [], {"A.orders": 1, "orders": 1})

    monkeypatch.setattr(steps, "build_plan", build_plan)
    return {"variables": variables, "hook": hook, "planned": planned}


def job_of(pair, cluster: str, epoch: int, committed_offset: int | None = 5) -> dict[str, Any]:
    """The handle of the run (cluster, epoch), with a checkpoint whose last committed batch ends at
    ``committed_offset`` (None: a checkpoint with no committed batch)."""
    request = JobRequest.for_pair(pair, cluster, epoch, "earliest")
    checkpoint = Path(request.layout.checkpoint)
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    offsets = json.dumps({"orders": {"0": committed_offset or 3}})
    (checkpoint / "offsets" / "0").write_text(f"v1\n{{}}\n{offsets}")
    if committed_offset is not None:
        (checkpoint / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    return {
        "pair": pair.name,
        "cluster": cluster,
        "epoch": epoch,
        "deploy_mode": "local",
        "master": "local[2]",
        "run_dir": request.layout.run_dir,
        "checkpoint": str(checkpoint),
        "sink_root": str(request.sink_root),
        "local_dir": request.layout.local_dir,
    }


def start_commits(pair, job: dict[str, Any]) -> ActiveRecord:
    """What the start DAG's commit does: the job of epoch 0 into the record."""
    record = record_store.load_record(pair)
    return record_store.commit_record(pair, record.epoch, record.with_job(job, job["checkpoint"]))


def publish(world, record: ActiveRecord) -> None:
    """Write the Variable as a commit whose store write raced the fence would have left it."""
    world["variables"].set(record_store.variable_key(record.pair), json.dumps(record.to_dict()))


GATE_VIEW = ActiveRecord.initial("orders", "A")


def test_fence_and_stop_stops_the_job_committed_after_the_gate(pair, world):
    job = job_of(pair, "A", 0)
    start_commits(pair, job)
    fenced = steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)
    assert fenced["epoch"] == 1 and fenced["stop"] == "stopped"
    assert [stopped["run_dir"] for stopped in world["hook"].stopped] == [job["run_dir"]]
    assert fenced["old_run"]["run_dir"] == job["run_dir"]


@pytest.mark.parametrize(
    ("kind", "forced", "mode", "judged_down"),
    [
        (FAILOVER, False, (0.0, True), True),  # the down verdict: no grace for a job whose brokers are gone
        (FAILOVER, True, (5.0, True), False),  # forced: its source may answer; 5 s to finish its batch
        ("failback", False, (60.0, False), False),  # the job on B serves: stop_timeout_seconds, then SIGTERM
    ],
)
def test_how_long_the_old_job_is_given_depends_on_the_switch(pair, world, kind, forced, mode, judged_down):
    if kind == "failback":
        record_store.fencing_marker(pair).advance(None, 1, "B")
        on_b = GATE_VIEW.switched(
            to="B", job=job_of(pair, "B", 1), checkpoint="c", entry={"kind": "failover"}, watermarks={}
        )
        record_store.commit_record(pair, 0, on_b)
    else:
        start_commits(pair, job_of(pair, "A", 0))
    fenced = steps.fence_and_stop(pair, kind, None, forced=forced)
    assert world["hook"].modes == [mode]
    assert fenced["source_judged_down"] is judged_down


@pytest.mark.parametrize(("forced", "probed_clusters"), [(False, []), (True, ["A"])])
def test_a_plan_after_the_down_verdict_does_not_probe_the_source_again(
    pair, world, monkeypatch, forced, probed_clusters
):
    probed: list[str] = []
    monkeypatch.setattr(steps, "_hook_if_reachable", lambda pair, cluster, timeout: probed.append(cluster))
    start_commits(pair, job_of(pair, "A", 0))
    steps.plan_after_fence(pair, FAILOVER, steps.fence_and_stop(pair, FAILOVER, GATE_VIEW, forced=forced))
    assert probed == probed_clusters


def test_fence_and_stop_finds_a_started_job_the_record_does_not_name_yet(pair, world):
    job = job_of(pair, "A", 0)  # the start DAG submitted it and waits for its first batch: no commit yet
    Path(job["run_dir"]).mkdir(parents=True)
    (Path(job["run_dir"]) / "settings.json").write_text("{}")
    fenced = steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)
    assert [stopped["run_dir"] for stopped in world["hook"].stopped] == [job["run_dir"]]
    assert fenced["old_run"]["checkpoint"] == job["checkpoint"]


def test_fence_and_stop_ends_the_run_when_another_switch_committed_since_the_gate(pair, world):
    moved = GATE_VIEW.switched(
        to="B", job=job_of(pair, "B", 1), checkpoint="c", entry={"kind": "failover"}, watermarks={}
    )
    record_store.fencing_marker(pair).advance(None, 1, "B")
    record_store.commit_record(pair, 0, moved)
    with pytest.raises(NotApplicable, match="B is already active at epoch 1.*changed since the gate"):
        steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)
    assert record_store.fencing_marker(pair).epochs() == [1]  # the fence did not move
    assert world["hook"].stopped == []


def test_plan_reads_the_record_when_it_acts_and_plans_from_its_job(pair, world):
    fenced = steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)  # nothing ran yet: nothing to stop
    assert fenced["old_run"] is None and world["hook"].stopped == []
    job = job_of(pair, "A", 0, committed_offset=42)
    publish(world, GATE_VIEW.with_job(job, job["checkpoint"]))  # the start's commit raced the fence
    payload = steps.plan_after_fence(pair, FAILOVER, fenced)
    assert [stopped["run_dir"] for stopped in world["hook"].stopped] == [job["run_dir"]]
    (position,) = world["planned"]
    assert {str(tp): offset for tp, offset in position.offsets.items()} == {"orders-0": 42}
    assert payload["old_run"]["run_dir"] == job["run_dir"]


def test_plan_reads_the_checkpoint_of_a_record_that_names_no_job(pair, world, tmp_path):
    """A record whose job was cleared (by hand, say) but whose checkpoint was kept: the plan starts from it,
    not from ``translation.initial_position``."""
    job = job_of(pair, "A", 0, committed_offset=17)
    elsewhere = tmp_path / "kept-checkpoint"
    Path(job["checkpoint"]).rename(elsewhere)
    record = replace(GATE_VIEW, checkpoint=str(elsewhere))
    publish(world, record)
    fenced = steps.fence_and_stop(pair, FAILOVER, record)
    steps.plan_after_fence(pair, FAILOVER, fenced)
    (position,) = world["planned"]
    assert position is not None, (
        "the record's checkpoint was ignored: every partition would start at earliest"
    )
    assert {str(tp): offset for tp, offset in position.offsets.items()} == {"orders-0": 17}


def test_plan_refuses_a_recorded_job_whose_checkpoint_holds_no_committed_batch(pair, world):
    job = job_of(pair, "A", 0, committed_offset=None)
    publish(world, GATE_VIEW.with_job(job, job["checkpoint"]))
    fenced = steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)
    with pytest.raises(CheckpointError, match=f"its checkpoint {job['checkpoint']} holds no committed batch"):
        steps.plan_after_fence(pair, FAILOVER, fenced)
    assert world["planned"] == []


def test_plan_of_a_fenced_switch_stops_when_another_switch_committed(pair, world):
    fenced = steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)
    other = GATE_VIEW.switched(
        to="B", job=job_of(pair, "B", 1), checkpoint="c", entry={"kind": "failover"}, watermarks={}
    )
    publish(world, other)
    with pytest.raises(FencedError, match="another switch committed since"):
        steps.plan_after_fence(pair, FAILOVER, fenced)


def test_a_dry_run_plans_from_the_record_as_it_is(pair, world):
    job = job_of(pair, "A", 0, committed_offset=7)
    start_commits(pair, job)
    steps.dry_run_plan(pair, FAILOVER, GATE_VIEW)
    (position,) = world["planned"]
    assert {str(tp): offset for tp, offset in position.offsets.items()} == {"orders-0": 7}
    assert record_store.fencing_marker(pair).epochs() == [] and world["hook"].stopped == []


def commit_of(pair, fenced, payload, new_job) -> ActiveRecord:
    return steps.commit_after_first_batch(
        pair, FAILOVER, fenced, new_job, payload, SwitchParams(reason="test"), "manual"
    )


def test_commit_reads_the_record_when_it_acts(pair, world):
    job = job_of(pair, "A", 0)
    start_commits(pair, job)
    fenced = steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)
    payload = steps.plan_after_fence(pair, FAILOVER, fenced)
    new_job = job_of(pair, "B", 1)
    committed = commit_of(pair, fenced, payload, new_job)
    assert (committed.active, committed.epoch, committed.job) == ("B", 1, new_job)
    assert committed.history[-1].plan["max_duplicates"] == 0
    assert commit_of(pair, fenced, payload, new_job) == committed  # a retried commit writes nothing


def test_a_batch_in_flight_when_the_fence_moved_counts_in_the_duplicate_bound(pair, world):
    """A batch the old job planned before the fence moved may still commit after the plan read the
    position (a job the stop cannot reach): the new job then reads its records again."""
    job = job_of(pair, "A", 0, committed_offset=5)
    (Path(job["checkpoint"]) / "offsets" / "1").write_text('v1\n{}\n{"orders": {"0": 12}}')
    start_commits(pair, job)
    fenced = steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)
    summary = steps.plan_after_fence(pair, FAILOVER, fenced)["summary"]
    assert (summary["in_flight_offsets"], summary["max_duplicates"]) == (7, 7)


def started_with(pair, handle: dict[str, Any], plan: dict[str, Any] | None) -> None:
    """Write the run's settings as the submit that launched it did, with ``plan`` as its switch plan."""
    switch_plan = None if plan is None else {"summary": plan["summary"], "gap_records": plan["gap_records"]}
    JobSettings(
        pair=pair.name,
        cluster=handle["cluster"],
        epoch=handle["epoch"],
        bootstrap_servers="localhost:9092",
        checkpoint=handle["checkpoint"],
        sink_root=handle["sink_root"],
        bookkeeping_group="g",
        fencing_marker=pair.job.fencing_marker,
        run_dir=handle["run_dir"],
        topics=("orders",),
        switch_plan=switch_plan,
    ).write(str(Path(handle["run_dir"]) / SETTINGS_FILE))


def test_a_run_that_adopted_the_job_of_a_racing_run_records_the_plan_that_job_started_from(
    pair, world, caplog
):
    """Two switch runs fence the same epoch; the first submits the job from its plan, the second plans
    later (after the old job's batch in flight committed: a smaller bound), adopts that job and commits
    first. The history must hold the plan the job started from: it re-reads what that plan says."""
    job = job_of(pair, "A", 0, committed_offset=5)
    (Path(job["checkpoint"]) / "offsets" / "1").write_text('v1\n{}\n{"orders": {"0": 12}}')
    start_commits(pair, job)
    fenced = steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)
    first = steps.plan_after_fence(pair, FAILOVER, fenced)  # the batch of 7 offsets in flight counts
    (Path(job["checkpoint"]) / "commits" / "1").write_text('v1\n{"nextBatchWatermarkMs":0}')
    second = steps.plan_after_fence(pair, FAILOVER, fenced)  # it committed: nothing in flight any more
    assert (first["summary"]["max_duplicates"], second["summary"]["max_duplicates"]) == (7, 0)
    new_job = job_of(pair, "B", 1)
    started_with(pair, new_job, first)
    committed = commit_of(pair, fenced, second, new_job)
    assert committed.history[-1].plan == first["summary"]
    assert "started from another plan" in caplog.text and "duplicates <= 7" in caplog.text


@pytest.mark.parametrize("started", ["own plan", "no switch plan", "no settings"])
def test_commit_records_its_own_plan_when_the_job_was_not_started_from_another(pair, world, started, caplog):
    job = job_of(pair, "A", 0)
    start_commits(pair, job)
    fenced = steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)
    payload = steps.plan_after_fence(pair, FAILOVER, fenced)
    new_job = job_of(pair, "B", 1)
    if started != "no settings":
        started_with(pair, new_job, payload if started == "own plan" else None)
    committed = commit_of(pair, fenced, payload, new_job)
    assert committed.history[-1].plan == payload["summary"]
    assert "started from another plan" not in caplog.text
    assert ("cannot read the plan the run was started with" in caplog.text) == (started == "no settings")


class Launcher:
    """A job hook whose submit records the settings it would launch the run with."""

    def __init__(self) -> None:
        self.launched: list[JobSettings] = []

    def submit(self, settings, layout, application, startup_timeout):
        self.launched.append(settings)
        return JobHandle(
            pair=settings.pair,
            cluster=settings.cluster,
            epoch=settings.epoch,
            deploy_mode="local",
            master="local[2]",
            run_dir=settings.run_dir,
            checkpoint=settings.checkpoint,
            sink_root=settings.sink_root,
        )


def test_the_switch_plan_goes_with_the_run_and_stays_when_a_later_submit_resumes_it(
    pair,
    monkeypatch,
    checked_without_kafka,  # noqa: F811 - the fixture imported above
):
    """The submit of a switch writes its plan into the run's settings; a later submit of the same run
    (the keeper restarting it, a rerun) resumes its checkpoint from the first start's offsets, so the plan
    of that start is kept, not replaced by the later one's."""
    from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook

    launcher = Launcher()
    monkeypatch.setattr(StreamingJobHook, "for_options", classmethod(lambda cls, options: launcher))

    first = {"summary": {"max_duplicates": 209}, "gap_records": 0, "starting_offsets": "{}"}
    later = {"summary": {"max_duplicates": 7}, "gap_records": 1, "starting_offsets": "{}"}
    handle = steps.submit(pair, "B", 1, "earliest", first)
    assert launcher.launched[-1].switch_plan == SwitchPlan(summary={"max_duplicates": 209}, gap_records=0)
    launcher.launched[-1].write(str(Path(handle["run_dir"]) / SETTINGS_FILE))  # what the hook's launch does
    steps.submit(pair, "B", 1, "earliest", later)  # no batch yet: the later plan is what the run starts from
    assert launcher.launched[-1].switch_plan.summary == {"max_duplicates": 7}
    (Path(handle["checkpoint"]) / "offsets").mkdir(parents=True)
    (Path(handle["checkpoint"]) / "offsets" / "0").write_text('v1\n{}\n{"orders": {"0": 3}}')
    steps.submit(pair, "B", 1, "earliest", later)
    assert launcher.launched[-1].switch_plan.summary == {"max_duplicates": 209}


def test_commit_refuses_a_record_whose_job_is_not_the_one_planned_from(pair, world):
    fenced = steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)
    payload = steps.plan_after_fence(pair, FAILOVER, fenced)  # planned from no run at all
    job = job_of(pair, "A", 0)
    publish(world, GATE_VIEW.with_job(job, job["checkpoint"]))  # a start's commit that raced every step
    before = world["variables"].values.copy()
    with pytest.raises(FencedError, match="not the one this failover stopped and planned from"):
        commit_of(pair, fenced, payload, job_of(pair, "B", 1))
    assert world["variables"].values == before
    assert not list(Path(pair.job.fencing_marker).glob("*.record.json"))


def test_the_old_run_is_the_newest_cluster_mode_submission_of_the_recorded_run(pair, tmp_path):
    recorded = {
        **job_of(pair, "A", 0),
        "deploy_mode": "cluster",
        "master": "yarn",
        "application_id": "application_1_0001",
    }
    restarted = {**recorded, "application_id": "application_1_0002", "submitted_at": "later"}
    Path(recorded["run_dir"]).mkdir(parents=True)
    (Path(recorded["run_dir"]) / "cluster_handle.json").write_text(json.dumps(restarted))
    found = old_run(pair, GATE_VIEW.with_job(recorded, recorded["checkpoint"]))
    assert found.handle is not None and found.handle["application_id"] == "application_1_0002"
    assert found.named_by_record


@pytest.mark.parametrize(
    ("params", "triggered_by", "reason"),
    [
        (SwitchParams(), "manual by admin", "manual failover"),
        (SwitchParams(), "asset_triggered", "automatic failover"),
        (SwitchParams(), "keeper (finished an interrupted switch)", "automatic failover"),
        (SwitchParams(force=True), "manual", "forced"),
        (SwitchParams(reason="planned maintenance of A"), "manual", "planned maintenance of A"),
    ],
)
def test_the_history_entry_says_why_and_a_run_by_hand_is_not_called_automatic(
    pair, world, params, triggered_by, reason
):
    job = job_of(pair, "A", 0)
    start_commits(pair, job)
    fenced = steps.fence_and_stop(pair, FAILOVER, GATE_VIEW)
    payload = steps.plan_after_fence(pair, FAILOVER, fenced)
    committed = steps.commit_after_first_batch(
        pair, FAILOVER, fenced, job_of(pair, "B", 1), payload, params, triggered_by
    )
    entry = committed.history[-1]
    assert (entry.reason, entry.triggered_by) == (reason, triggered_by)

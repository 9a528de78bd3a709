"""Start the job where the active record says, at the record's epoch (the start DAG's steps)."""

from __future__ import annotations

import logging
from typing import Any

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.cluster_managers.kubernetes_pods import UnknownDriverPod
from airflow_kafka_failover.cluster_managers.registry import job_alive
from airflow_kafka_failover.domain.config import PairConfig
from airflow_kafka_failover.io.record_store import commit_record, describe, load_record
from airflow_kafka_failover.switching.steps import submit

log = logging.getLogger(__name__)


def start_job(pair: PairConfig) -> dict[str, Any]:
    """Submit the job on the active cluster unless the recorded job is running; return record and handle."""

    record = load_record(pair)
    if record.job and _recorded_job_runs(JobHandle.from_dict(record.job)):
        log.info(
            "the recorded job is running (%s); nothing to start", JobHandle.from_dict(record.job).describe()
        )
        return {"epoch": record.epoch, "job": record.job, "started": False}
    initial = pair.translation.initial_position
    log.info(
        "starting the job of pair %s on %s at epoch %s (a new checkpoint starts at %s; an existing one of "
        "this epoch is resumed)",
        pair.name,
        record.active,
        record.epoch,
        initial,
    )
    handle = submit(pair, record.active, record.epoch, initial)
    return {"epoch": record.epoch, "job": handle, "started": True}


def _recorded_job_runs(handle: JobHandle) -> bool:
    """Whether the record's job runs (through its cluster manager; the Kubernetes API for a driver pod).

    A Kubernetes driver pod the API server does not have is not taken for dead here either: the submit
    then looks for a live driver of the run by its label, and adopts it or submits one (this is how a
    person restarts a job whose pod was deleted).
    """

    try:
        return bool(job_alive(handle))
    except UnknownDriverPod as exc:
        log.warning("%s; looking for a live driver of the run by its label before submitting", exc)
        return False


def record_job(pair: PairConfig, started: dict[str, Any]) -> dict[str, Any]:
    """Store the started job in the record (compare-and-set on the epoch it was started for)."""

    record = load_record(pair)
    handle = started["job"]
    new = commit_record(pair, started["epoch"], record.with_job(handle, handle["checkpoint"]))
    return describe(new)

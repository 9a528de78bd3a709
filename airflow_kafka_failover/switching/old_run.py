"""The run of the job a switch moves away from, found when a step acts (never from an older view).

A switch stops the job of the record's epoch on the record's cluster and plans from its checkpoint. That run
is named by the record once the start DAG (or the last switch) committed it; until then it may still exist:
a start DAG that submitted the job and is waiting for its first batch has not committed it yet. Every run of
a (pair, cluster, epoch) has fixed folders (``run_format/layout.py``), so a record without a job is completed
from the run folder and the checkpoint of its epoch: whatever ran there is stopped, and its committed batches
are its position. A cluster-mode handle is refreshed from the run folder's newest submission
(``cluster_handle.json``), which a restart in place rewrites with the new application or pod.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from airflow_kafka_failover.cluster_managers.handle import JobHandle
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import open_store, read_json
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import PairConfig
from airflow_kafka_failover.hooks.streaming_job import CLUSTER_HANDLE_FILE
from airflow_kafka_failover.io.record_store import RUN_IDENTITY, same_run
from airflow_kafka_failover.run_format.options import DeployMode
from airflow_kafka_failover.switching.job_request import JobRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OldRun:
    """The run of the record's epoch on the record's active cluster.

    :param handle: its job handle (JSON form); None when nothing of that run exists.
    :param checkpoint: its checkpoint directory; None when it has none.
    :param named_by_record: whether the active record names it (a run the record does not name was found in
        its epoch's folders: a start that has not committed yet).
    """

    handle: dict[str, Any] | None
    checkpoint: str | None
    named_by_record: bool

    @property
    def identity(self) -> dict[str, Any] | None:
        """What makes it one run (``record_store.RUN_IDENTITY``), for comparing views across steps."""
        if self.handle is None:
            return None
        return {key: self.handle.get(key) for key in RUN_IDENTITY}

    def is_run(self, identity: dict[str, Any] | None) -> bool:
        """Whether ``identity`` (an :attr:`identity` of another step's view) names this same run."""
        return same_run(self.identity, identity)

    def describe(self) -> str:
        if self.handle is None:
            return "no job"
        where = "named by the record" if self.named_by_record else "found in its run folder, not the record"
        return f"the job of epoch {self.handle.get('epoch')} on {self.handle.get('cluster')} ({where})"


def old_run(pair: PairConfig, record: ActiveRecord) -> OldRun:
    """The run of ``record``'s epoch on its active cluster, as its record and folders show it now.

    :param pair: the pair.
    :param record: the active record, read when the calling step acts.
    """
    if record.job is not None:
        handle = _newest_submission(record.job)
        return OldRun(handle, record.checkpoint or handle.get("checkpoint"), named_by_record=True)
    found = _unrecorded_run(pair, record)
    if record.checkpoint:
        # A record that keeps a checkpoint without a job (its job was cleared by hand, say): the switch still
        # plans from that checkpoint, and stops whatever of the epoch's run is found.
        log.info("the record names no job but the checkpoint %s; planning from it", record.checkpoint)
        return OldRun(found.handle, record.checkpoint, named_by_record=True)
    return found


def _newest_submission(recorded: dict[str, Any]) -> dict[str, Any]:
    """The recorded handle, or the run folder's newer cluster-mode submission of the same run."""
    if recorded.get("deploy_mode") != DeployMode.CLUSTER.value or not recorded.get("run_dir"):
        return recorded
    where = locations.join(str(recorded["run_dir"]), CLUSTER_HANDLE_FILE)
    try:
        newest = JobHandle.from_dict(read_json(where)).to_dict()
    except Exception as exc:  # the record's handle is the fallback: the fence stops the job in any case
        log.info("no newer submission of the recorded run in %s (%s); using the record's handle", where, exc)
        return recorded
    if not same_run(newest, recorded) or newest == recorded:
        return recorded
    log.info(
        "the recorded run was submitted again (a restart in place): %s names %s instead of the record's %s",
        where,
        newest.get("application_id") or newest.get("driver_id"),
        recorded.get("application_id") or recorded.get("driver_id"),
    )
    return newest


def _unrecorded_run(pair: PairConfig, record: ActiveRecord) -> OldRun:
    """A run of the record's epoch that the record does not name (the start DAG has not committed it)."""
    request = JobRequest.for_pair(pair, record.active, record.epoch, pair.translation.initial_position)
    layout = request.layout
    checkpoint = layout.checkpoint
    has_checkpoint = open_store(checkpoint).exists(locations.join(checkpoint, "offsets"))
    has_run = open_store(layout.settings_file).exists(layout.settings_file)
    if not (has_checkpoint or has_run):
        return OldRun(None, None, named_by_record=False)
    handle = request.starting_handle().to_dict()
    log.warning(
        "the record of pair %s names no job at epoch %s, but that epoch's run on %s exists (%s%s): a start "
        "that has not committed it yet; the switch stops it and plans from its checkpoint",
        pair.name,
        record.epoch,
        record.active,
        layout.run_dir if has_run else "no run folder",
        f", checkpoint {checkpoint}" if has_checkpoint else "",
    )
    return OldRun(handle, checkpoint if has_checkpoint else None, named_by_record=False)

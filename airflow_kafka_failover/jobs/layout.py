"""Where one run of the job keeps its files: checkpoint, settings, status, stop request, log.

One run = one (pair, cluster, epoch). Its checkpoint directory is never used by another run: Spark's
checkpoint does not know which cluster it read, so reusing it after a switch would resume from offsets of
the wrong cluster. An owner file in the checkpoint (``_owner.json``) records the run it belongs to, and
both the operator and the job refuse a checkpoint owned by another cluster or epoch.

::

    <checkpoint_root>/<pair>/<cluster>/epoch-<n>/        Spark checkpoint + progress.jsonl + _owner.json
    <run_root>/<pair>/<cluster>/epoch-<n>/settings.json  the job's settings (owner-only)
    <run_root>/<pair>/<cluster>/epoch-<n>/status.json    written by the job: starting/running/stopped/...;
                                                         ``killed`` by the provider after a forced stop
    <run_root>/<pair>/<cluster>/epoch-<n>/stop-request   asks the job to finish its batch and stop
    <run_root>/<pair>/<cluster>/epoch-<n>/logs/job.log   spark-submit's output (local and client mode)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_kafka_failover.atomic_file import write_json_atomically
from airflow_kafka_failover.exceptions import CheckpointError

OWNER_FILE = "_owner.json"
PROCESS_NAME = "job"


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run.

    :param pair: the pair's name.
    :param cluster: the cluster the run reads.
    :param epoch: the run's epoch.
    :param checkpoint_root: root of all checkpoints.
    :param run_root: root of all run folders.
    """

    pair: str
    cluster: str
    epoch: int
    checkpoint_root: str
    run_root: str

    @property
    def checkpoint(self) -> Path:
        return Path(self.checkpoint_root) / self.pair / self.cluster / f"epoch-{self.epoch}"

    @property
    def run_dir(self) -> Path:
        return Path(self.run_root) / self.pair / self.cluster / f"epoch-{self.epoch}"

    @property
    def settings_file(self) -> Path:
        return self.run_dir / "settings.json"


def status_file(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / "status.json"


def stop_request_file(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / "stop-request"


def read_status(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The job's last status (``{"state": ...}``); ``{}`` when it wrote none yet."""
    try:
        data = json.loads(status_file(run_dir).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


LIVE_STATES = ("starting", "running")
"""States a job writes while it runs; any other state is its last word."""


def mark_killed(run_dir: str | os.PathLike[str], reason: str) -> bool:
    """Record in ``status.json`` that the job was killed, when its last word says it still runs.

    A job killed by force cannot write its own last state, so without this ``status.json`` would say
    ``running`` for ever. A final state the job wrote itself (``stopped``, ``fenced``...) is kept.

    :param run_dir: the job's run folder.
    :param reason: what killed it, e.g. ``did not stop within 30 s of the stop request``.
    :return: whether the status was rewritten.
    """
    last = read_status(run_dir)
    if last.get("state", "starting") not in LIVE_STATES:
        return False
    write_json_atomically(
        status_file(run_dir),
        {
            **last,
            "state": "killed",
            "reason": reason,
            "state_before": last.get("state"),
            "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )
    return True


def claim_checkpoint(
    checkpoint: str | os.PathLike[str], pair: str, cluster: str, epoch: int, bootstrap_servers: str
) -> bool:
    """Make sure ``checkpoint`` belongs to this run; write the owner file for a new checkpoint.

    :return: True when the checkpoint already holds batches of this run (Spark will resume it).
    :raises CheckpointError: when it belongs to another pair, cluster or epoch, or has batches but no owner.
    """
    root = Path(checkpoint)
    owner_path = root / OWNER_FILE
    wanted = {"pair": pair, "cluster": cluster, "epoch": epoch}
    has_batches = (root / "offsets").is_dir() and any((root / "offsets").iterdir())
    if owner_path.exists():
        try:
            owner = json.loads(owner_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CheckpointError(
                f"{owner_path}: unreadable owner file ({exc}); use a new checkpoint directory"
            ) from None
        found = {key: owner.get(key) for key in wanted} if isinstance(owner, dict) else owner
        if found != wanted:
            raise CheckpointError(
                f"checkpoint {root} belongs to {found}, not to {wanted}: a checkpoint is never reused across "
                "clusters or epochs (Spark would resume from another cluster's offsets); give this run its "
                "own checkpoint directory"
            )
        return has_batches
    if has_batches:
        raise CheckpointError(
            f"checkpoint {root} holds batches but no {OWNER_FILE}: it was not written by this provider for "
            f"{wanted}; give this run a new checkpoint directory"
        )
    write_json_atomically(owner_path, {**wanted, "bootstrap_servers": bootstrap_servers})
    return False

"""Where one run of the job keeps its files: checkpoint, settings, status, stop request, log.

One run = one (pair, cluster, epoch). Its checkpoint directory is never used by another run: Spark's
checkpoint does not know which cluster it read, so reusing it after a switch would resume from offsets of
the wrong cluster. An owner file in the checkpoint (``_owner.json``) records the run it belongs to, and
both the operator and the job refuse a checkpoint owned by another cluster or epoch.

::

    <checkpoint_root>/<pair>/<cluster>/epoch-<n>/        Spark checkpoint + progress/ + _owner.json
    <run_root>/<pair>/<cluster>/epoch-<n>/settings.json  the job's settings (owner-only)
    <run_root>/<pair>/<cluster>/epoch-<n>/status.json    written by the job: starting/running/stopped/...;
                                                         ``killed`` by the provider after a forced stop
    <run_root>/<pair>/<cluster>/epoch-<n>/stop-request   asks the job to finish its batch and stop
    <local_root>/<pair>/<cluster>/epoch-<n>/logs/job.log spark-submit's output (local and client mode), and
                                 .../pids/job.json       its process, on the host that started it

Every root may be a local path or a store URI (``hdfs://``, ``s3a://``): these files are read and written
through ``core/storage``, never with ``open``. The local root holds what only the host that runs
spark-submit needs (its process and its output); it is the run root itself when that is local.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_failover.core.exceptions import CheckpointError, ConfigError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import (
    StoreUnavailable,
    open_store,
    read_json,
    replace_json,
)
from airflow_kafka_failover.run_format.progress_log import batch_numbers

OWNER_FILE = "_owner.json"
PROCESS_NAME = "job"
SETTINGS_FILE = "settings.json"


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run.

    :param pair: the pair's name.
    :param cluster: the cluster the run reads.
    :param epoch: the run's epoch.
    :param checkpoint_root: root of all checkpoints.
    :param run_root: root of all run folders.
    :param local_root: root of the host-local folders (None: ``run_root``, which must then be local).
    """

    pair: str
    cluster: str
    epoch: int
    checkpoint_root: str
    run_root: str
    local_root: str | None = None

    @property
    def _run_part(self) -> tuple[str, str, str]:
        return self.pair, self.cluster, f"epoch-{self.epoch}"

    @property
    def checkpoint(self) -> str:
        return locations.join(self.checkpoint_root, *self._run_part)

    @property
    def run_dir(self) -> str:
        return locations.join(self.run_root, *self._run_part)

    @property
    def local_dir(self) -> str:
        """The run's folder on the host that starts spark-submit: its process file and its output."""
        root = self.local_root or self.run_root
        if locations.is_remote(root):
            raise CheckpointError(
                f"run_root {self.run_root} is remote and no local_root is set: the process and the output of "
                "spark-submit need a folder on the host that starts it (job.local_root)"
            )
        return locations.join(root, *self._run_part)

    @property
    def settings_file(self) -> str:
        return locations.join(self.run_dir, SETTINGS_FILE)


def status_file(run_dir: str) -> str:
    return locations.join(str(run_dir), "status.json")


def stop_request_file(run_dir: str) -> str:
    return locations.join(str(run_dir), "stop-request")


def read_status(run_dir: str) -> dict[str, Any]:
    """The job's last status (``{"state": ...}``); ``{}`` when it wrote none yet (or an unreadable one).

    :raises StoreUnavailable: the run folder's store cannot be reached (never taken for "no status").
    :raises ConfigError: the run folder's store cannot be opened (no connection, no such bucket).
    """
    try:
        data = read_json(status_file(run_dir))
    except (StoreUnavailable, ConfigError):
        raise
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def request_stop(run_dir: str) -> str:
    """Write the stop request of a run (the job finishes its batch and stops); return its location."""
    where = stop_request_file(run_dir)
    open_store(where).replace(where, datetime.now(UTC).isoformat().encode())
    return where


def stop_requested(run_dir: str) -> bool:
    """Whether a stop was requested of a run."""
    where = stop_request_file(run_dir)
    return open_store(where).exists(where)


def clear_run_state(run_dir: str) -> None:
    """Remove a run's stop request and status before it starts again."""
    for where in (stop_request_file(run_dir), status_file(run_dir)):
        open_store(where).delete(where)


LIVE_STATES = ("starting", "running")
"""States a job writes while it runs; any other state is its last word."""


def mark_killed(run_dir: str, reason: str) -> bool:
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
    replace_json(
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


def claim_checkpoint(checkpoint: str, pair: str, cluster: str, epoch: int, bootstrap_servers: str) -> bool:
    """Make sure ``checkpoint`` belongs to this run; write the owner file for a new checkpoint.

    :return: True when the checkpoint already holds batches of this run (Spark will resume it); the batch a
        carried checkpoint starts after (``carried_from`` in its owner file) is not one of them.
    :raises CheckpointError: when it belongs to another pair, cluster or epoch, or has batches but no owner.
    """
    root = str(checkpoint)
    owner_path = locations.join(root, OWNER_FILE)
    wanted = {"pair": pair, "cluster": cluster, "epoch": epoch}
    store = open_store(root)
    has_batches = bool(store.names(locations.join(root, "offsets")))
    try:
        owner = read_json(owner_path)
    except FileNotFoundError:
        owner = None
    except (StoreUnavailable, ConfigError):
        raise
    except (OSError, ValueError) as exc:
        raise CheckpointError(
            f"{owner_path}: unreadable owner file ({exc}); use a new checkpoint directory"
        ) from None
    if owner is not None:
        found = {key: owner.get(key) for key in wanted} if isinstance(owner, dict) else owner
        if found != wanted:
            raise CheckpointError(
                f"checkpoint {root} belongs to {found}, not to {wanted}: a checkpoint is never reused across "
                "clusters or epochs (Spark would resume from another cluster's offsets); give this run its "
                "own checkpoint directory"
            )
        carried = owner.get("carried_from")
        if has_batches and isinstance(carried, dict) and isinstance(carried.get("batch_id"), int):
            return any(
                batch > carried["batch_id"] for batch in batch_numbers(locations.join(root, "offsets"))
            )
        return has_batches
    if has_batches:
        raise CheckpointError(
            f"checkpoint {root} holds batches but no {OWNER_FILE}: it was not written by this provider for "
            f"{wanted}; give this run a new checkpoint directory"
        )
    replace_json(owner_path, {**wanted, "bootstrap_servers": bootstrap_servers})
    return False

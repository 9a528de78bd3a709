"""The active record of a pair: which cluster is active, at which epoch, with which job, and its history.

Pure data (JSON in an Airflow Variable, see :mod:`record_store`). A switch builds the next record with
:meth:`ActiveRecord.switched`; the history only grows.

Fields::

    {"schema_version": 1, "pair": "orders", "active": "B", "epoch": 1,
     "job": {...job handle...} | null, "checkpoint": "/.../orders/B/epoch-1" | null,
     "watermarks": {"A": {"orders-0": 1234, ...}, "B": {...}},
     "history": [{"at": "...", "kind": "failover", "from": "A", "to": "B", "epoch": 1, "reason": "...",
                  "triggered_by": "...", "forced": false, "plan": {...}, "gap_records": 0}],
     "updated_at": "..."}

``watermarks[X]`` holds, per ``topic-partition`` of cluster X, the highest offset X is known to have held
while it was active (its high watermarks when it could be read, and at least the job's position on it).
A recovered X with a lower high watermark lost data, and failing back to it is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_failover.exceptions import ConfigError

SCHEMA_VERSION = 1


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class ActiveRecord:
    """See the module docstring for the fields."""

    pair: str
    active: str
    epoch: int = 0
    job: dict[str, Any] | None = None
    checkpoint: str | None = None
    watermarks: dict[str, dict[str, int]] = field(default_factory=dict)
    history: tuple[dict[str, Any], ...] = ()
    updated_at: str = ""
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def initial(cls, pair: str, primary: str) -> ActiveRecord:
        """The record of a pair that never switched: the primary is active at epoch 0, no job yet."""
        return cls(pair=pair, active=primary, updated_at=_now())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "pair": self.pair,
            "active": self.active,
            "epoch": self.epoch,
            "job": self.job,
            "checkpoint": self.checkpoint,
            "watermarks": self.watermarks,
            "history": list(self.history),
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, data: Any, clusters: tuple[str, ...], where: str) -> ActiveRecord:
        """Validate a stored record; ``where`` (the Variable key) is named in errors."""
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: the active record must be a JSON object, got {type(data).__name__}")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ConfigError(
                f"{where}: schema_version {version!r} is not {SCHEMA_VERSION}; this provider "
                "release cannot read it (upgrade the provider, or restore the record)"
            )
        if data.get("active") not in clusters:
            raise ConfigError(
                f"{where}: active cluster {data.get('active')!r} is not one of {list(clusters)}"
            )
        epoch = data.get("epoch")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ConfigError(f"{where}: epoch {epoch!r} is not an integer >= 0")
        history = data.get("history", [])
        if not isinstance(history, list) or not all(isinstance(entry, dict) for entry in history):
            raise ConfigError(f"{where}: history must be a list of objects")
        watermarks = data.get("watermarks") or {}
        if not isinstance(watermarks, dict) or not all(isinstance(v, dict) for v in watermarks.values()):
            raise ConfigError(f"{where}: watermarks must map clusters to {{'topic-partition': offset}}")
        job = data.get("job")
        if job is not None and not isinstance(job, dict):
            raise ConfigError(f"{where}: job must be a job handle object or null")
        return cls(
            pair=str(data.get("pair")),
            active=data["active"],
            epoch=epoch,
            job=job,
            checkpoint=data.get("checkpoint"),
            watermarks=watermarks,
            history=tuple(history),
            updated_at=str(data.get("updated_at", "")),
        )

    def with_job(self, job: dict[str, Any], checkpoint: str) -> ActiveRecord:
        """The same epoch with its job recorded (the first start of a pair, or a restart)."""
        return replace(self, job=job, checkpoint=checkpoint, updated_at=_now())

    def switched(
        self,
        *,
        to: str,
        job: dict[str, Any],
        checkpoint: str,
        entry: dict[str, Any],
        watermarks: dict[str, dict[str, int]],
    ) -> ActiveRecord:
        """The record after a switch to ``to`` at ``epoch + 1``; ``entry`` is appended to the history."""
        epoch = self.epoch + 1
        merged = {cluster: dict(marks) for cluster, marks in self.watermarks.items()}
        for cluster, marks in watermarks.items():
            known = merged.setdefault(cluster, {})
            for key, offset in marks.items():
                known[key] = max(offset, known.get(key, offset))
        full_entry = {"at": _now(), "from": self.active, "to": to, "epoch": epoch, **entry}
        return replace(
            self,
            active=to,
            epoch=epoch,
            job=job,
            checkpoint=checkpoint,
            watermarks=merged,
            history=(*self.history, full_entry),
            updated_at=_now(),
        )

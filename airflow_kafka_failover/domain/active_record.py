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

:class:`ActiveRecord` and its history entries (:class:`SwitchEntry`) are typed models (pydantic
dataclasses) that read and write the JSON shape above.
"""

from __future__ import annotations

from dataclasses import field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from airflow_kafka_failover.core.exceptions import ConfigError

SCHEMA_VERSION = 1


class SwitchKind(StrEnum):
    """What moved the job: a failover (primary -> standby), a failback (back), or the pair's first start."""

    FAILOVER = "failover"
    FAILBACK = "failback"
    START = "start"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class SwitchEntry(BaseModel):
    """One switch in the record's history.

    Keys a later release adds are kept (``extra="allow"``), so an older provider rewrites them unchanged.

    :param at: when the switch was committed (ISO 8601).
    :param kind: failover or failback.
    :param from_: the cluster the job left (``from`` in JSON).
    :param to: the cluster it moved to.
    :param epoch: the epoch the switch reached.
    :param reason: free text given when triggering, or why it was automatic.
    :param triggered_by: the DAG run that made it.
    :param forced: whether it skipped the down/recovered verdict.
    :param plan: the translation plan's summary.
    :param gap_records: offsets possibly missing on the target when it switched (see the plan).
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    at: str
    kind: SwitchKind
    from_: str = Field(alias="from")
    to: str = ""
    epoch: StrictInt = 0
    reason: str = ""
    triggered_by: str = ""
    forced: StrictBool = False
    plan: dict[str, Any] = Field(default_factory=dict)
    gap_records: StrictInt = 0


@dataclass(frozen=True)
class ActiveRecord:
    """See the module docstring for the fields."""

    pair: str
    active: str
    epoch: StrictInt = Field(default=0, ge=0)
    job: dict[str, Any] | None = None
    checkpoint: str | None = None
    watermarks: dict[str, dict[str, StrictInt]] = field(default_factory=dict)
    history: tuple[SwitchEntry, ...] = ()
    updated_at: str = ""
    schema_version: StrictInt = SCHEMA_VERSION

    @classmethod
    def initial(cls, pair: str, primary: str) -> ActiveRecord:
        """The record of a pair that never switched: the primary is active at epoch 0, no job yet."""
        return cls(pair=pair, active=primary, updated_at=_now())

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON form (``from`` keys in the history, plain JSON types)."""
        data: dict[str, Any] = _ACTIVE_RECORD.dump_python(self, mode="json", by_alias=True)
        return data

    @classmethod
    def from_dict(cls, data: Any, clusters: tuple[str, ...], where: str) -> ActiveRecord:
        """Validate a stored record; ``where`` (the Variable key) is named in errors.

        :param data: the decoded JSON.
        :param clusters: the pair's cluster names; the active one must be among them.
        :param where: e.g. ``Variable kafka_failover.orders.active_record``.
        :raises ConfigError: naming the bad field and what to do.
        """
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
        stored = {**data, "watermarks": data.get("watermarks") or {}, "pair": str(data.get("pair"))}
        try:
            return _ACTIVE_RECORD.validate_python(stored)
        except ValidationError as err:
            raise ConfigError(f"{where}: {_explain(err)}") from None

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
            history=(*self.history, SwitchEntry.model_validate(full_entry)),
            updated_at=_now(),
        )


_ACTIVE_RECORD = TypeAdapter(ActiveRecord)

_FIELD_PROBLEMS = {
    "epoch": "epoch {value!r} is not an integer >= 0",
    "history": "history must be a list of objects",
    "watermarks": "watermarks must map clusters to {{'topic-partition': offset}}",
    "job": "job must be a job handle object or null",
}


def _explain(err: ValidationError) -> str:
    """The first bad field, in the words the record's readers have always used, and what to do."""
    problems = []
    for error in err.errors():
        loc = [str(part) for part in error["loc"]]
        template = _FIELD_PROBLEMS.get(loc[0]) if loc else None
        if template is not None and (loc[0] != "history" or len(loc) <= 2):
            problems.append(template.format(value=error.get("input")))
        else:
            problems.append(f"{'.'.join(loc) or 'record'}: {error['msg']} (got {error.get('input')!r})")
    return "; ".join(dict.fromkeys(problems)) + (
        "; fix the record (restore it from a backup, or rewrite the field with the value the pair's fencing "
        "marker and running job show)"
    )

"""``kafka-failover status`` and ``history`` as text for a terminal, and ``status`` as JSON for tools."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from airflow_kafka_failover.domain.status.assembly import exit_code
from airflow_kafka_failover.domain.status.fleet import Trouble, fleet_counts, fleet_rows, trouble_of
from airflow_kafka_failover.domain.status.model import (
    FenceAgreement,
    JobState,
    JobView,
    PairHistory,
    PairStatus,
    ReplicationView,
    SwitchRow,
)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "    ") -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    return [
        indent + "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (headers, *rows)
    ]


def _cell(value: Any) -> str:
    return "?" if value is None else str(value)


def switch_table(rows: Sequence[SwitchRow], indent: str = "    ") -> list[str]:
    """The switches as a fixed-width table, one line each.

    :param rows: the switches, in the order to show.
    :param indent: put before every line.
    """
    headers = (
        "at",
        "kind",
        "from -> to",
        "epoch",
        "forced",
        "gap_records",
        "max_duplicates",
        "state",
        "by",
        "reason",
    )
    cells = [
        (
            row.at,
            row.kind,
            f"{row.from_cluster} -> {row.to}",
            str(row.epoch),
            "yes" if row.forced else "no",
            str(row.gap_records),
            "unbounded" if row.max_duplicates is None else str(row.max_duplicates),
            row.state or "-",
            row.triggered_by or "-",
            row.reason or "-",
        )
        for row in rows
    ]
    return _table(headers, cells, indent)


def _fence_line(status: PairStatus) -> str:
    if status.fence is None and status.fence_agreement is FenceAgreement.UNKNOWN:
        return f"fence:    {status.fence_path or '?'}: no marker read (agreement with the record unknown)"
    if status.fence is None:
        return f"fence:    no marker at {status.fence_path or '?'} ({status.fence_agreement})"
    fence = status.fence
    written = f", written {fence.written_at}" if fence.written_at else ""
    return f"fence:    epoch {fence.epoch}, cluster {fence.cluster}{written}: {status.fence_agreement}"


def _job_lines(job: JobView) -> list[str]:
    if job.state in (JobState.NONE, JobState.UNKNOWN) and job.epoch is None:
        return [f"job:      {job.state}" + (f" ({job.detail})" if job.detail else "")]
    where = ", ".join(part for part in (job.deploy_mode, job.where) if part)
    lines = [
        f"job:      {job.state} on {job.cluster} at epoch {job.epoch}"
        + (f" ({where})" if where else "")
        + (f": {job.detail}" if job.detail else "")
    ]
    if job.last_batch_id is None:
        lines.append("          last committed batch: none yet")
    else:
        lines.append(
            f"          last committed batch: {job.last_batch_id} at {job.last_batch_at or '?'}"
            + (f" ({job.last_batch_age_seconds:g} s ago)" if job.last_batch_age_seconds is not None else "")
            + f", {job.records} records in all"
        )
    if job.state_operators:
        operators = f"{job.state_operators} stateful operator{'' if job.state_operators == 1 else 's'}"
        rows = job.state_rows if job.state_rows is not None else "?"
        lines.append(f"          state: {operators}, {rows} rows (a switch carries it: job.state)")
    return lines


def _lag_lines(status: PairStatus) -> list[str]:
    if not status.active_lag:
        return [f"lag on {status.active}: not read"]
    total = status.total_lag
    head = f"lag on {status.active}: {_cell(total)} records behind the end in all"
    rows = [
        (row.partition, _cell(row.end_offset), _cell(row.committed), _cell(row.lag))
        for row in status.active_lag
    ]
    return [head, *_table(("partition", "end", "committed", "lag"), rows)]


def _replication_lines(replication: ReplicationView | None) -> list[str]:
    if replication is None:
        return []
    lags = ", ".join(f"{key} {_cell(lag)}" for key, lag in replication.lags.items()) or "not measured"
    age = replication.heartbeat_age_seconds
    beat = f"{age:g} s old" if age is not None else "age unknown"
    return [
        f"replication {replication.source} -> {replication.target} (MirrorMaker 2): lag {lags}",
        f"          heartbeats {replication.heartbeats_topic} on {replication.target}: newest {beat}",
    ]


def _head(status: PairStatus) -> str:
    if status.active is None:
        return f"pair {status.pair}: active record unreadable"
    stored = f", record updated {status.record_updated_at}" if status.record_updated_at else ""
    if not status.record_stored:
        stored = ", no record stored yet"
    return f"pair {status.pair}: active {status.active} at epoch {status.epoch}{stored}"


def to_text(status: PairStatus) -> str:
    """The status of one pair as text for a terminal.

    :param status: the pair's status.
    """
    lines = [_head(status)]
    fence = status.fence
    if status.fence_agreement is FenceAgreement.AHEAD and fence is not None:
        lines.append(
            f"  !! INTERRUPTED SWITCH: the fence (epoch {fence.epoch}, {fence.cluster}) is ahead of the "
            "record "
            f"(epoch {status.epoch}, {status.active}); see ACTION NEEDED below"
        )
    body = [_fence_line(status), *_job_lines(status.job)]
    body += _lag_lines(status) if status.active is not None else []
    body += _replication_lines(status.replication)
    if status.standby is not None:
        warm = status.standby
        state = f"waiting (pid {warm.pid})" if warm.ready and warm.state == "waiting" else "none waiting"
        body.append(f"warm standby for {warm.cluster}: {state}, slot {warm.slot}")
    if status.recent_switches:
        body.append(f"last switches ({len(status.recent_switches)} of {status.switches_total}):")
        body += switch_table(status.recent_switches)
    else:
        body.append("last switches: none yet")
    body += [f"ACTION NEEDED: {problem.what}\n    -> {problem.action}" for problem in status.problems]
    body += [f"could not read: {item}" for item in status.unread]
    body += [f"warning: {item}" for item in status.warnings]
    lines += ["  " + line for line in body]
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f} s"


def _clipped(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def fleet_to_text(statuses: Sequence[PairStatus], config: str) -> str:
    """Several pairs as text: a count by trouble, one table row per pair (the ones in trouble first, with
    the start of their first problem, unread part or warning), then the full status of each pair that is not
    ``ok``.

    :param statuses: the status of every pair shown.
    :param config: the config file, for the line that says how to see one pair.
    """
    counts = ", ".join(f"{count} {label}" for label, count in fleet_counts(statuses).items() if count)
    headers = (
        "pair",
        "active",
        "epoch",
        "job",
        "last batch",
        "lag",
        "replication lag",
        "heartbeat",
        "trouble",
    )
    rows = [
        (
            row.pair,
            _cell(row.active),
            _cell(row.epoch),
            row.job,
            _seconds(row.last_batch_age_seconds),
            _cell(row.lag),
            _cell(row.replication_lag),
            _seconds(row.heartbeat_age_seconds),
            f"{row.trouble}: {_clipped(row.first)}" if row.first else row.trouble,
        )
        for row in fleet_rows(statuses)
    ]
    lines = [f"{len(statuses)} pairs: {counts}", *_table(headers, rows, indent="  ")]
    in_trouble = sorted(
        (status for status in statuses if trouble_of(status) is not Trouble.OK),
        key=lambda status: (trouble_of(status), status.pair),
    )
    details = [to_text(status) for status in in_trouble]
    hint = f"one pair in full: kafka-failover status --config {config} --pair NAME"
    return "\n\n".join(["\n".join(lines), *details, hint])


def statuses_to_json(statuses: Sequence[PairStatus]) -> str:
    """Every pair's status as one JSON document ``{"pairs": [...], "fleet": [...], "exit_code": n}``.

    ``pairs`` in the config's order; ``fleet`` one row per pair in trouble order (see
    :mod:`~airflow_kafka_failover.domain.status.fleet`).

    :param statuses: the status of every pair shown.
    """
    document = {
        "pairs": [status.model_dump(mode="json") for status in statuses],
        "fleet": [row.model_dump(mode="json") for row in fleet_rows(statuses)],
        "exit_code": exit_code(statuses),
    }
    return json.dumps(document, indent=2)


def history_to_text(history: PairHistory) -> str:
    """The history as text: a head line and a table (or a line saying there is none).

    :param history: the pair's history view.
    """
    head = f"pair {history.pair}: active {history.active} at epoch {history.epoch}"
    if not history.switches:
        stored = "" if history.record_stored else " (no record stored yet)"
        return f"{head}; no switches yet{stored}"
    shown = f"the last {len(history.switches)} of " if len(history.switches) < history.switches_total else ""
    return "\n".join(
        [f"{head}; {shown}{history.switches_total} switch(es):", *switch_table(history.switches, "  ")]
    )

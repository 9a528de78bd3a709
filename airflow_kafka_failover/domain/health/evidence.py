"""What one health probe of a Kafka cluster saw, in a form that survives JSON and reads well in a log.

Also the wording shared by every health reason: clock times, partition lists, exception names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

# Wide enough for a typical "KafkaError{code=_TRANSPORT,...}" head, narrow enough for one log line.
_ERROR_WIDTH = 48
PARTITIONS_IN_REASON = 5
"""Reasons name at most this many partitions; the full list stays in ``waiting_on`` / ``data_loss``."""


class ProbeResult(BaseModel):
    """Evidence from one probe of one cluster; a trigger-event and XCom payload.

    Every probe is exactly one of ``ok``, ``degraded`` or ``failed``. ``model_dump(mode="json")`` gives
    JSON types only (tuples become lists) and ``model_validate`` rebuilds the probe, refusing unknown keys.

    A degraded probe is one of two kinds, which the verdict weighs differently
    (:func:`~airflow_kafka_failover.domain.health.verdict.judge`): the cluster's own metadata says the job's
    partitions cannot be served (``partitions_down``: no leader, or fewer in-sync replicas than
    ``min.insync.replicas`` where that check is on), or the probe's own attempt to read failed
    (``reads_failing``: a leader the metadata names did not answer, or the canary round trip failed), which
    also happens for a few seconds while Kafka moves the leaders of a lost broker.

    :param cluster: alias of the probed cluster (the MM2 alias, e.g. ``"A"``).
    :param at: unix seconds when the probe *started*; durations between probes are therefore not
        stretched by probes that ran into their timeout.
    :param reachable: whether the cluster answered a metadata request within the probe timeout.
    :param latency_s: how long the metadata answer took, or None when there was none.
    :param broker_count: brokers listed in the metadata answer.
    :param leaderless_partitions: configured topic-partitions reported without a leader (or whose topic is
        missing).
    :param under_min_isr_partitions: configured topic-partitions whose ISR is below
        ``min.insync.replicas`` (only where the probe was asked to check it).
    :param canary_ok: outcome of a produce/consume round trip on a canary topic, None if not tried.
    :param error: why the probe failed, for the operator; None when the cluster answered.
    :param unreadable_partitions: configured topic-partitions whose leader, as the metadata names it, did
        not answer a ListOffsets request: ``"orders-1 (leader 2: <why>)"``.
    :param under_replicated_partitions: configured topic-partitions with fewer in-sync replicas than
        replicas (a broker is lost or behind); evidence for the log only, never a failure.
    :param partitions_checked: how many configured topic-partitions the probe judged (0: a metadata-only
        probe, or none of the topics exists).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster: str
    at: float
    reachable: bool
    latency_s: float | None
    broker_count: int
    leaderless_partitions: tuple[str, ...] = ()
    under_min_isr_partitions: tuple[str, ...] = ()
    canary_ok: bool | None = None
    error: str | None = None
    unreadable_partitions: tuple[str, ...] = ()
    under_replicated_partitions: tuple[str, ...] = ()
    partitions_checked: int = 0

    @property
    def failed(self) -> bool:
        """The cluster did not serve: unreachable, or a metadata answer that lists no broker."""
        return not self.reachable or self.broker_count < 1

    @property
    def partitions_down(self) -> bool:
        """The cluster answered, and its metadata says some configured partitions cannot be served: no
        leader (or the topic is missing), or, where checked, fewer in-sync replicas than required."""
        return not self.failed and bool(self.leaderless_partitions or self.under_min_isr_partitions)

    @property
    def reads_failing(self) -> bool:
        """The cluster answered, but the probe could not read: a leader the metadata names did not answer
        (it died and Kafka has not moved its partitions yet, or cannot), or the canary round trip failed."""
        return not self.failed and bool(self.unreadable_partitions or self.canary_ok is False)

    @property
    def degraded(self) -> bool:
        """The cluster answered but cannot fully serve the configured topics.

        It never counts as healthy. Whether it counts toward "down" is the verdict's to say: partitions the
        metadata says are down count like a failed probe, failing reads once they outlast Kafka's own
        leader failover (``leader_failover_seconds``).
        """
        return self.partitions_down or self.reads_failing

    @property
    def ok(self) -> bool:
        """The cluster answered and every check the probe made passed."""
        return not self.failed and not self.degraded

    @property
    def outcome(self) -> str:
        """One word for logs and tables: ``ok``, ``degraded`` or ``FAILED``."""
        if self.failed:
            return "FAILED"
        return "degraded" if self.degraded else "ok"


def in_time_order(history: Iterable[ProbeResult]) -> list[ProbeResult]:
    """Return one cluster's probes oldest first; every rule reads a history in this order.

    :param history: the probes, in any order.
    :raises ValueError: when the history mixes clusters.
    """
    probes = sorted(history, key=lambda probe: probe.at)
    clusters = {probe.cluster for probe in probes}
    if len(clusters) > 1:
        raise ValueError(f"probe history mixes clusters {sorted(clusters)}; judge one cluster at a time")
    return probes


def list_partitions(partitions: Sequence[str]) -> str:
    """Name at most :data:`PARTITIONS_IN_REASON` partitions for a reason, and count the rest.

    :param partitions: partition keys or descriptions, in the order to show them.
    """
    shown = ", ".join(partitions[:PARTITIONS_IN_REASON])
    more = len(partitions) - PARTITIONS_IN_REASON
    return f"{shown} and {more} more" if more > 0 else shown


def describe_exception(exc: BaseException) -> str:
    """Name an exception for a reason or a log line: ``Type: text``, or the type alone when the text is empty.

    :param exc: the exception.
    """
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def format_clock(at: float) -> str:
    """Format unix seconds as ``HH:MM:SS.s`` in UTC, the time format of every health log line.

    :param at: unix seconds.
    """
    moment = datetime.fromtimestamp(at, tz=UTC)
    return f"{moment:%H:%M:%S}.{moment.microsecond // 100_000}"


def _canary_cell(canary_ok: bool | None) -> str:
    if canary_ok is None:
        return "-"
    return "ok" if canary_ok else "FAIL"


def _error_cell(error: str | None) -> str:
    if not error:
        return "-"
    # Broker errors can span lines; a table row must stay one line.
    one_line = " ".join(error.split())
    if len(one_line) <= _ERROR_WIDTH:
        return one_line
    return one_line[: _ERROR_WIDTH - 3] + "..."


_COLUMNS = (
    ("time (UTC)", 10, "<"),
    ("cluster", 7, "<"),
    ("outcome", 8, "<"),
    ("reach", 5, "<"),
    ("brokers", 7, ">"),
    ("latency ms", 10, ">"),
    ("checked", 7, ">"),
    ("leaderless", 10, ">"),
    ("unreadable", 10, ">"),
    ("under isr", 9, ">"),
    ("under rep", 9, ">"),
    ("canary", 6, "<"),
    ("error", 0, "<"),
)


def _row(cells: Iterable[str]) -> str:
    parts = [f"{cell:{align}{width}}" for cell, (_, width, align) in zip(cells, _COLUMNS, strict=True)]
    return "  ".join(parts).rstrip()


def format_probe_table(history: Iterable[ProbeResult]) -> str:
    """Render probes as a fixed-width table, oldest first, for a log record.

    :param history: the probes, in any order.
    """
    probes = sorted(history, key=lambda probe: probe.at)
    lines = [_row(title for title, _, _ in _COLUMNS)]
    if not probes:
        lines.append("(no probes)")
    for probe in probes:
        latency = "-" if probe.latency_s is None else f"{probe.latency_s * 1000:.1f}"
        lines.append(
            _row(
                (
                    format_clock(probe.at),
                    probe.cluster,
                    probe.outcome,
                    "yes" if probe.reachable else "no",
                    str(probe.broker_count),
                    latency,
                    str(probe.partitions_checked),
                    str(len(probe.leaderless_partitions)),
                    str(len(probe.unreadable_partitions)),
                    str(len(probe.under_min_isr_partitions)),
                    str(len(probe.under_replicated_partitions)),
                    _canary_cell(probe.canary_ok),
                    _error_cell(probe.error),
                )
            )
        )
    return "\n".join(lines)


def format_partition_evidence(probe: ProbeResult) -> str:
    """Name, one per line, every configured partition the probe found in trouble and what the trouble was.

    The table of :func:`format_probe_table` counts them per probe; this lists them, for the newest probe of
    a verdict, so that the log says which partitions a decision stands on. Empty when there is nothing.

    :param probe: the probe.
    """
    kinds = (
        ("no leader", probe.leaderless_partitions),
        ("leader does not answer", probe.unreadable_partitions),
        ("under min.insync.replicas", probe.under_min_isr_partitions),
        ("under-replicated (not a failure)", probe.under_replicated_partitions),
    )
    lines = [f"  {partition}: {kind}" for kind, partitions in kinds for partition in partitions]
    if probe.canary_ok is False:
        lines.append(f"  canary: the round trip failed ({probe.error or 'no error text'})")
    if not lines:
        return ""
    head = f"Partitions of cluster {probe.cluster} at {format_clock(probe.at)} UTC ({probe.outcome}):"
    return "\n".join([head, *lines])

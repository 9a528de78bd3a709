"""The provider's metrics, sent through Airflow's own ``Stats`` (StatsD or OpenTelemetry, as Airflow is set).

Names are fixed and the pair, kind or connection travel as tags, as Airflow 3 names its own metrics
(``[metrics] statsd_datadog_enabled`` or OpenTelemetry carry tags; plain StatsD drops them).
``docs/runbook.md`` lists what to alert on.

==================================  =======  =====================================  ==================
name                                type     value                                  tags
==================================  =======  =====================================  ==================
``kafka_failover.down_detection``   timer    first failed probe -> down decision    connection, cluster
``kafka_failover.recovered``        counter  the recovered sensor decided "back"    connection, cluster
``kafka_failover.switch``           counter  a switch committed                     pair, kind, forced
``kafka_failover.switch_duration``  timer    fence written -> switch committed      pair, kind, forced
``kafka_failover.gap_records``      gauge    records not on the target at switch    pair, kind, forced
``kafka_failover.max_duplicates``   gauge    planned bound on re-delivered records  pair, kind, forced
                                             (sent only when bounded)
``kafka_failover.job_lag``          gauge    records the job is behind the end of   pair, cluster
                                             the active cluster (keeper, each look)
``kafka_failover.seconds_since_``   gauge    seconds since the job's last           pair, cluster
``last_batch``                               committed batch (keeper, each look)
``kafka_failover.keeper_restarts``  counter  the keeper restarted a dead job in      pair, cluster, outcome
                                             place (outcome ``started``/``failed``)
``kafka_failover.keeper_alert``     counter  the keeper raised an alert             pair, finding
``kafka_failover.standby_ready``    gauge    1 when a warm standby driver waits,    pair, cluster
                                             0 when none (keeper, each look; only
                                             with ``switch.standby: warm``)
``kafka_failover.standby_starts``   counter  the keeper started a warm standby      pair, cluster
                                             driver
==================================  =======  =====================================  ==================

Sending a metric never fails a task: a backend that errors is logged and ignored.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from airflow_kafka_failover.version_compat import Stats

log = logging.getLogger(__name__)

PREFIX = "kafka_failover"


def _send(kind: str, name: str, value: Any, tags: dict[str, str]) -> None:
    try:
        if kind == "incr":
            Stats.incr(f"{PREFIX}.{name}", tags=tags)
        elif kind == "gauge":
            Stats.gauge(f"{PREFIX}.{name}", value, tags=tags)
        else:
            Stats.timing(f"{PREFIX}.{name}", value, tags=tags)
    except Exception as exc:  # metrics are best effort; the switch or decision stands
        log.warning("could not send metric %s.%s: %s", PREFIX, name, exc)


def down_detected(kafka_config_id: str, cluster: str, failing_since: float | None, now: float) -> None:
    """The down sensor decided ``cluster`` is down; time it from the first failed probe.

    :param kafka_config_id: the watched cluster's connection, as a tag.
    :param cluster: its alias, as a tag.
    :param failing_since: unix seconds of the first failed probe of the run that decided, if known.
    :param now: unix seconds of the decision.
    """
    if failing_since is None:
        return
    seconds = max(0.0, now - failing_since)
    _send(
        "timing",
        "down_detection",
        timedelta(seconds=seconds),
        {"connection": kafka_config_id, "cluster": cluster},
    )


def recovered(kafka_config_id: str, cluster: str) -> None:
    """The recovered sensor decided ``cluster`` is stable, caught up and lost nothing."""
    _send("incr", "recovered", 1, {"connection": kafka_config_id, "cluster": cluster})


def switch_committed(
    pair: str,
    kind: str,
    forced: bool,
    fenced_at: float | None,
    gap_records: int,
    max_duplicates: int | None,
    now: float | None = None,
) -> None:
    """A switch of ``pair`` committed: count it, time it from its fence, and report its gap and bound.

    :param pair: the pair's name.
    :param kind: ``failover`` or ``failback``.
    :param forced: whether a person forced it.
    :param fenced_at: unix seconds when its fence was written, if known.
    :param gap_records: records that were not on the target when it switched.
    :param max_duplicates: the plan's bound on re-delivered records, or None when unbounded.
    :param now: unix seconds of the commit (default: now).
    """
    now = time.time() if now is None else now
    tags = {"pair": pair, "kind": kind, "forced": str(forced).lower()}
    _send("incr", "switch", 1, tags)
    if fenced_at is not None:
        _send("timing", "switch_duration", timedelta(seconds=max(0.0, now - fenced_at)), tags)
    _send("gauge", "gap_records", gap_records, tags)
    if max_duplicates is not None:
        _send("gauge", "max_duplicates", max_duplicates, tags)


def job_looked(
    pair: str,
    cluster: str,
    lag: int | None,
    seconds_since_batch: float | None,
    standby_ready: bool | None = None,
) -> None:
    """The keeper looked at the job of ``pair`` on ``cluster``: its lag and the age of its last batch.

    :param pair: the pair's name.
    :param cluster: the active cluster.
    :param lag: records behind the end of the active cluster (None: not measured, not sent).
    :param seconds_since_batch: seconds since its last committed batch (None: unknown, not sent).
    :param standby_ready: a warm standby driver waits (None: the pair wants none, not sent).
    """
    tags = {"pair": pair, "cluster": cluster}
    if lag is not None:
        _send("gauge", "job_lag", lag, tags)
    if seconds_since_batch is not None:
        _send("gauge", "seconds_since_last_batch", round(seconds_since_batch, 1), tags)
    if standby_ready is not None:
        _send("gauge", "standby_ready", int(standby_ready), tags)


def standby_started(pair: str, cluster: str) -> None:
    """The keeper started a warm standby driver of ``pair`` for ``cluster``."""
    _send("incr", "standby_starts", 1, {"pair": pair, "cluster": cluster})


def keeper_restarted(pair: str, cluster: str, started: bool) -> None:
    """The keeper restarted the dead job of ``pair`` in place; ``started``: it reported running."""
    _send(
        "incr",
        "keeper_restarts",
        1,
        {"pair": pair, "cluster": cluster, "outcome": "started" if started else "failed"},
    )


def keeper_alerted(pair: str, finding: str) -> None:
    """The keeper raised an alert (``stalled``, ``lagging``, ``gave_up``) for ``pair``."""
    _send("incr", "keeper_alert", 1, {"pair": pair, "finding": finding})

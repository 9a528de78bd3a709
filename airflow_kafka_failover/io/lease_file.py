"""The switch lease: how a switch that moved the fence shows it is still alive.

Between ``fence_and_stop`` and ``commit`` the fence is one epoch ahead of the active record. That is either a
switch at work (planning, submitting, waiting for the first batch) or a switch that died (its worker was
killed, a step failed): the keeper must wait for the first and finish the second. The lease tells them
apart without asking Airflow, whose view of a killed task lags by minutes: every step of a switch holds it
(renewed from a thread every third of its duration while the step runs), so a lease that expired means
nobody has worked on the switch for a whole lease.

File: JSON ``{"pair", "epoch", "cluster", "holder", "until", "renewed_at"}`` in the fencing folder
(``<fencing folder>/switch-lease.json``), replaced atomically through the folder's store. It holds no secret
and decides nothing by itself: the fence
and the record's compare-and-set keep two switches from both committing; the lease only keeps the keeper
from finishing a switch that is still running.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import (
    StoreUnavailable,
    open_store,
    read_json,
    replace_json,
)
from airflow_kafka_failover.domain.switch_lease import SwitchLease

log = logging.getLogger(__name__)


LEASE_FILE = "switch-lease.json"


def lease_path(fencing_marker: str) -> str:
    """The lease file in a pair's fencing folder."""
    return locations.join(str(fencing_marker), LEASE_FILE)


def read_lease(fencing_marker: str, pair: str) -> SwitchLease | None:
    """The pair's switch lease; None when there is none (or it is unreadable: it then protects nothing).

    :raises ConfigError: the file belongs to another pair (two pairs share a fencing folder).
    :raises StoreUnavailable: the store cannot be read (an unknown lease must not look expired).
    :raises ConfigError: the fencing folder's store cannot be opened.
    """
    path = lease_path(fencing_marker)
    try:
        data = read_json(path)
        lease = SwitchLease(
            str(data["pair"]),
            int(data["epoch"]),
            str(data["cluster"]),
            str(data.get("holder", "")),
            float(data["until"]),
            float(data.get("renewed_at", 0.0)),
        )
    except FileNotFoundError:
        return None
    except (StoreUnavailable, ConfigError):
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("switch lease %s is unreadable (%s); treating it as absent", path, exc)
        return None
    if lease.pair != pair:
        raise ConfigError(
            f"switch lease {path} belongs to pair {lease.pair!r}, not {pair!r}: each pair needs its own "
            "fencing folder (job.fencing_marker)"
        )
    return lease


def write_lease(
    fencing_marker: str, pair: str, epoch: int, cluster: str, holder: str, seconds: float
) -> SwitchLease:
    """Take or renew the lease for ``seconds`` from now."""
    now = time.time()
    lease = SwitchLease(pair, epoch, cluster, holder, now + seconds, now)
    replace_json(lease_path(fencing_marker), asdict(lease))
    return lease


def release_lease(fencing_marker: str, pair: str, epoch: int) -> None:
    """Remove the lease of ``epoch`` (the switch committed); a lease of another epoch is left alone."""
    lease = read_lease(fencing_marker, pair)
    if lease is not None and lease.epoch == epoch:
        path = lease_path(fencing_marker)
        open_store(path).delete(path)


@contextmanager
def holding_lease(
    fencing_marker: str, pair: str, epoch: int, cluster: str, holder: str, seconds: float
) -> Iterator[SwitchLease]:
    """Hold the lease while the block runs: take it now, renew it every ``seconds / 3`` from a thread.

    The thread dies with the process, so a killed step stops renewing and the lease expires ``seconds``
    later. Leaving the block does not release it: the next step of the switch takes it over, and a switch
    that ends without committing leaves it to expire.
    """
    lease = write_lease(fencing_marker, pair, epoch, cluster, holder, seconds)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(seconds / 3):
            try:
                write_lease(fencing_marker, pair, epoch, cluster, holder, seconds)
            except OSError as exc:  # the next renewal tries again; an expiry only lets the keeper finish
                log.warning("could not renew the switch lease of pair %s: %s", pair, exc)

    thread = threading.Thread(target=renew, name=f"switch-lease-{pair}", daemon=True)
    thread.start()
    try:
        yield lease
    finally:
        stop.set()
        thread.join(timeout=5)

"""The switch lease: who works on the switch to the newest epoch, and until when (pure data).

Its file, ``<fencing folder>/switch-lease.json``, is read and written by
:mod:`airflow_kafka_failover.io.lease_file`, whose docstring says what the lease is for.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SwitchLease:
    """Who works on the switch to ``epoch``, and until when.

    :param pair: the pair.
    :param epoch: the epoch the switch fenced.
    :param cluster: the cluster it moves the job to.
    :param holder: what holds it (``failover``/``failback`` step, or ``keeper``), for logs.
    :param until: unix seconds when it expires unless renewed.
    :param renewed_at: unix seconds of the last renewal.
    """

    pair: str
    epoch: int
    cluster: str
    holder: str
    until: float
    renewed_at: float

    def valid_at(self, now: float) -> bool:
        return now < self.until

    def describe(self, now: float) -> str:
        left = self.until - now
        state = f"valid for {left:.0f} s more" if left > 0 else f"expired {-left:.0f} s ago"
        return f"switch lease of epoch {self.epoch} ({self.cluster}) held by {self.holder}, {state}"

"""The pair's warm standby driver (``switch.standby: warm``): where it waits, and starting one.

The warm driver waits on the cluster the job does not read, for the next switch (``jobs/standby.py`` is its
side, ``cluster_managers/standby_handover.py`` the launching side). The keeper starts it when it is
missing; a switch's submit hands it the new run when it waits with the pair's current launch.
"""

from __future__ import annotations

import logging
from pathlib import Path

from airflow_kafka_failover.domain.config import PairConfig, StandbyMode
from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.jobs.standby import StandbySlot, standby_dir
from airflow_kafka_failover.switching.job_request import JobRequest

log = logging.getLogger(__name__)


def wants_standby(pair: PairConfig) -> bool:
    return pair.switch.standby == StandbyMode.WARM


def standby_slot(pair: PairConfig, cluster: str) -> StandbySlot:
    """The slot of the pair's warm driver for ``cluster`` (beside that cluster's run folders, host-local)."""
    layout = JobRequest.for_pair(pair, cluster, 0, "earliest").layout
    return StandbySlot(standby_dir(str(Path(layout.local_dir).parents[2]), pair.name, cluster))


def start_standby(pair: PairConfig, cluster: str, epoch: int) -> int | None:
    """Start the pair's warm driver for ``cluster`` unless one holds its slot; return its pid (None: one
    was there). It rehearses a start on the settings of the run a switch to ``cluster`` from ``epoch`` would
    start.

    :raises ConfigError: the job's options or the cluster's connection cannot make a run (cluster deploy mode
        included).
    """
    request = JobRequest.for_pair(pair, cluster, epoch + 1, pair.translation.initial_position)
    hook = StreamingJobHook.for_options(pair.job)
    return hook.start_standby(request.settings(), request.layout, request.application)

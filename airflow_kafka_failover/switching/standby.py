"""The pair's warm standby driver (``switch.standby: warm``): where it waits, and starting one.

The warm driver waits on the cluster the job does not read, for the next switch (``run_format/standby.py`` is
its side, ``cluster_managers/standby_handover.py`` the launching side, ``io/standby_slot.py`` where it waits).
The keeper starts it when it is missing; a switch's submit hands it the new run when it waits with the
pair's current launch.
"""

from __future__ import annotations

from airflow_kafka_failover.domain.config import PairConfig
from airflow_kafka_failover.hooks.streaming_job import StreamingJobHook
from airflow_kafka_failover.switching.job_request import JobRequest


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

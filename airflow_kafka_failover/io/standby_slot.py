"""Where a pair's warm standby driver waits (``switch.standby: warm``; ``run_format/standby.py``)."""

from __future__ import annotations

from airflow_kafka_failover.core.exceptions import CheckpointError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.domain.config import PairConfig, StandbyMode
from airflow_kafka_failover.run_format.standby import StandbySlot, standby_dir


def wants_standby(pair: PairConfig) -> bool:
    return pair.switch.standby == StandbyMode.WARM


def standby_slot(pair: PairConfig, cluster: str) -> StandbySlot:
    """The slot of the pair's warm driver for ``cluster``: beside that cluster's run folders, host-local.

    :raises CheckpointError: the run root is remote and no local root is set (where the run folders' local
        part lives: ``job.local_root``).
    """
    root = pair.job.local_root or pair.job.run_root
    if root is None or locations.is_remote(str(root)):
        raise CheckpointError(
            f"run_root {pair.job.run_root} is remote and no local_root is set: a warm standby driver's slot "
            "needs a folder on the host that starts it (job.local_root)"
        )
    return StandbySlot(standby_dir(str(root), pair.name, cluster))

"""Builders the tests share: one run's settings and folders."""

from __future__ import annotations

import socket
from pathlib import Path

from airflow_kafka_failover.run_format.layout import RunLayout
from airflow_kafka_failover.run_format.settings import JobSettings


def run_of(
    root: Path, epoch: int = 1, cluster: str = "B", pair: str = "orders", bootstrap: str = "b:9092"
) -> tuple[JobSettings, RunLayout]:
    """The settings and folders of the run (``pair``, ``cluster``, ``epoch``), all under ``root``.

    :param root: the folder holding its checkpoint (``ckpt``), runs, sink and fence.
    :param bootstrap: the cluster's ``bootstrap.servers`` the settings name.
    """
    layout = RunLayout(pair, cluster, epoch, str(root / "ckpt"), str(root / "runs"))
    settings = JobSettings(
        pair=pair,
        cluster=cluster,
        epoch=epoch,
        bootstrap_servers=bootstrap,
        checkpoint=str(layout.checkpoint),
        sink_root=str(root / "sink"),
        bookkeeping_group="g",
        fencing_marker=str(root / "fence"),
        run_dir=str(layout.run_dir),
        topics=(pair,),
    )
    return settings, layout


def closed_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago): connections to it are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])

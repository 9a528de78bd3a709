"""The start, failover, failback and keeper DAGs of every pair in the config file.

The file is found through ``$AKF_PAIRS_CONFIG`` (required; ``examples/pairs.yaml`` is an example).
Parsing reads that file and nothing else: no Variable, connection or network access.
"""

from __future__ import annotations

from airflow_kafka_failover.workflows.factory import build_dags

globals().update(build_dags())

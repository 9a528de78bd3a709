"""What differs between the Airflow releases the provider runs on, in one module (the official providers keep
theirs in ``version_compat.py``): every other module imports these names from here.

- ``conf``, ``Stats`` and ``Variable`` come through ``apache-airflow-providers-common-compat``'s ``sdk``
  module, which maps each to where the running Airflow keeps it (``Variable`` is the Task SDK's: inside a
  task it asks the API server, outside one only environment variables and secrets backends).
- :func:`metastore_variable` is Airflow's own ``Variable`` model, for code that runs outside a task (the
  command line), which reads the metadata database as ``airflow variables get`` does; imported on first use,
  since it loads the ORM.
- ``AIRFLOW_VERSION`` and the ``AIRFLOW_V_*_PLUS`` flags, for behaviour that depends on the release.
"""

from __future__ import annotations

from typing import Any

from airflow import __version__ as _airflow_version
from airflow.providers.common.compat.sdk import Stats, Variable, conf
from packaging.version import Version

AIRFLOW_VERSION = Version(Version(_airflow_version).base_version)
"""The running Airflow's release, without pre-release or local parts."""
AIRFLOW_V_3_1_PLUS = AIRFLOW_VERSION >= Version("3.1.0")
AIRFLOW_V_3_2_PLUS = AIRFLOW_VERSION >= Version("3.2.0")

__all__ = [
    "AIRFLOW_VERSION",
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "Stats",
    "Variable",
    "conf",
    "metastore_variable",
]


def metastore_variable() -> Any:
    """Airflow's ``Variable`` model (secrets backends, environment, then the metadata database)."""
    from airflow.models import Variable as MetastoreVariable

    return MetastoreVariable

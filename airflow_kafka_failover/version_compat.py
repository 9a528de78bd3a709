"""What differs between the Airflow releases the provider runs on, in one module (the official providers keep
theirs in ``version_compat.py``): every other module imports these names from here.

- ``conf``, ``Stats``, ``Variable`` and the exceptions a task raises (``AirflowFailException``,
  ``AirflowSkipException``, ``TaskDeferred``, ...; Airflow 3.1 keeps them in ``airflow.exceptions``, 3.3 in
  ``airflow.sdk.exceptions``) come through ``apache-airflow-providers-common-compat``'s ``sdk`` module, which
  maps each to where the running Airflow keeps it (``Variable`` is the Task SDK's: inside a task it asks the
  API server, outside one only environment variables and secrets backends).
- :func:`metastore_variable` is Airflow's own ``Variable`` model, for code that runs outside a task (the
  command line), which reads the metadata database as ``airflow variables get`` does; imported on first use,
  since it loads the ORM.
- :func:`airflow_cli_context` makes connection lookups of a command outside a task read what ``airflow
  connections get`` reads (the metadata database as well as the environment and secrets backends).
- ``AIRFLOW_VERSION`` and the ``AIRFLOW_V_*_PLUS`` flags, for behaviour that depends on the release.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from airflow import __version__ as _airflow_version
from airflow.providers.common.compat.sdk import (
    AirflowException,
    AirflowFailException,
    AirflowNotFoundException,
    AirflowSensorTimeout,
    AirflowSkipException,
    ParamValidationError,
    Stats,
    TaskDeferred,
    Variable,
    conf,
)
from airflow.sdk import get_parsing_context
from packaging.version import Version

AIRFLOW_VERSION = Version(Version(_airflow_version).base_version)
"""The running Airflow's release, without pre-release or local parts."""
AIRFLOW_V_3_1_PLUS = AIRFLOW_VERSION >= Version("3.1.0")
AIRFLOW_V_3_2_PLUS = AIRFLOW_VERSION >= Version("3.2.0")

__all__ = [
    "AIRFLOW_VERSION",
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "ParamValidationError",
    "TaskDeferred",
    "Stats",
    "Variable",
    "airflow_cli_context",
    "conf",
    "get_parsing_context",
    "metastore_variable",
]


def metastore_variable() -> Any:
    """Airflow's ``Variable`` model (secrets backends, environment, then the metadata database)."""
    from airflow.models import Variable as MetastoreVariable

    return MetastoreVariable


_PROCESS_CONTEXT = "_AIRFLOW_PROCESS_CONTEXT"


@contextlib.contextmanager
def airflow_cli_context() -> Iterator[None]:
    """Look connections up as Airflow's own command line does, for the duration of a command.

    Outside a task the Task SDK chooses its secrets backends by the process context: unknown processes get
    only environment variables and configured secrets backends, so a connection made in the UI or with
    ``airflow connections add`` (stored in the metadata database) would not be found. ``airflow connections
    get`` declares itself a server process (``_AIRFLOW_PROCESS_CONTEXT=server``), whose chain ends with the
    metadata database; this does the same and restores the variable afterwards. A context the caller set
    is kept.
    """
    previous = os.environ.get(_PROCESS_CONTEXT)
    if previous is None:
        os.environ[_PROCESS_CONTEXT] = "server"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(_PROCESS_CONTEXT, None)

"""The one place that reaches into the Spark provider's ``SparkSubmitHook`` beyond its public API.

``SparkSubmitHook.submit()`` waits for the application to end, which a streaming job never does, and it
exposes neither the connection it resolved (master, deploy mode) nor the ids it parsed from
spark-submit's output except the driver id that ``submit()`` returns. The streaming job's hook needs those,
so it reads them here and nowhere else: when a provider release renames one, only this module changes.

``tests/unit/airflow_parts/test_spark_submit_compat.py`` checks every name in :data:`PRIVATE_ATTRIBUTES`
and :data:`CONNECTION_KEYS` on the installed provider, which ``pyproject.toml`` pins to a range of
versions (``apache-airflow-providers-apache-spark>=6.3,<7``); raise that bound only once the test passes
on the new major.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

PRIVATE_ATTRIBUTES: dict[str, str] = {
    "_connection": "the connection the hook resolved: master, deploy mode, Kubernetes namespace",
    "_build_spark_submit_command": "the spark-submit command, run detached in local and client mode",
    "_driver_id": "the standalone driver id parsed from spark-submit's output (cluster mode)",
    "_yarn_application_id": "the YARN application id parsed from spark-submit's output (cluster mode)",
    "_kubernetes_driver_pod": "the Kubernetes driver pod parsed from spark-submit's output (cluster mode)",
}
"""Each private attribute this module reads, with what it holds."""

CONNECTION_KEYS = ("master", "deploy_mode", "namespace")
"""The keys of ``SparkSubmitHook._connection`` this module reads."""


def master_and_deploy_mode(hook: SparkSubmitHook) -> tuple[str, str | None]:
    """The Spark master URL and deploy mode the hook resolved from its connection and arguments.

    :param hook: a configured ``SparkSubmitHook``.
    """
    connection: dict[str, Any] = hook._connection
    return connection["master"], connection["deploy_mode"]


def spark_submit_command(hook: SparkSubmitHook, application: str) -> list[str]:
    """The full spark-submit command line for ``application``, without running it.

    :param hook: a configured ``SparkSubmitHook``.
    :param application: the application file, followed in the command by the hook's application arguments.
    """
    command: list[str] = hook._build_spark_submit_command(application)
    return command


def add_submit_options(hook: SparkSubmitHook, options: list[str]) -> None:
    """Make the hook's spark-submit commands carry ``options`` too (before the application), for spark-submit
    flags the hook has no parameter for (``--load-spark-defaults``). Both the detached runs and the hook's
    own ``submit()`` build their command with it.

    :param hook: a configured ``SparkSubmitHook``.
    :param options: flags to add.
    """
    build = hook._build_spark_submit_command

    def build_with_options(application: str) -> list[str]:
        command: list[str] = build(application)
        at = command.index(application) if application in command else len(command)
        return command[:at] + options + command[at:]

    hook._build_spark_submit_command = build_with_options  # type: ignore[method-assign]


def submitted_ids(hook: SparkSubmitHook, returned_driver_id: str | None) -> tuple[str | None, str | None]:
    """The driver and the application a cluster-mode ``submit()`` started, as spark-submit reported them.

    :param hook: the ``SparkSubmitHook`` whose ``submit()`` just returned.
    :param returned_driver_id: what ``submit()`` returned (the standalone driver id, public since 6.x).
    :return: ``(driver, application_id)``: the driver is a standalone driver id or ``<namespace>:<pod>`` on
        Kubernetes; the application id is YARN's; each None when spark-submit did not report it.
    """
    driver = returned_driver_id or hook._driver_id
    pod = hook._kubernetes_driver_pod
    if not driver and pod:
        namespace = hook._connection.get("namespace") or "default"
        driver = f"{namespace}:{pod}"
    return driver, hook._yarn_application_id

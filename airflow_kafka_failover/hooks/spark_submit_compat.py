"""The one place that reaches into the Spark provider's ``SparkSubmitHook`` beyond its public API.

``SparkSubmitHook.submit()`` waits for the application to end, which a streaming job never does, and it
exposes neither the connection it resolved (master, deploy mode, Kubernetes namespace) nor the YARN
application id it parsed from spark-submit's output. The streaming job's hook needs those, so it reads them
here and nowhere else: when a provider release renames one, only this module changes.

What the provider offers publicly is used instead: the standalone driver id is what ``submit()`` returns,
and a Kubernetes driver pod is named by the provider itself (``spark.kubernetes.driver.pod.name``) and read
through the cncf-kubernetes provider (``cluster_managers/kubernetes.py``), so neither ``_driver_id`` nor
``_kubernetes_driver_pod`` is read.

``tests/unit/hooks/test_spark_submit_compat.py`` checks every name in :data:`PRIVATE_ATTRIBUTES`
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
    "_build_spark_submit_command": "the spark-submit command, run detached in local and client mode, and "
    "wrapped to add flags the hook has no parameter for",
    "_yarn_application_id": "the YARN application id parsed from spark-submit's output (cluster mode)",
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


def kubernetes_namespace(hook: SparkSubmitHook) -> str | None:
    """The namespace the hook submits a Kubernetes driver to: its connection's extra ``namespace``, or the
    conf's ``spark.kubernetes.namespace`` (None: neither, Spark's ``default``).

    :param hook: a configured ``SparkSubmitHook``.
    """
    namespace = hook._connection.get("namespace")
    return str(namespace) if namespace else None


def yarn_application_id(hook: SparkSubmitHook) -> str | None:
    """The YARN application id spark-submit reported in cluster mode (None: it reported none).

    :param hook: the ``SparkSubmitHook`` whose ``submit()`` just returned.
    """
    application_id: str | None = hook._yarn_application_id
    return application_id

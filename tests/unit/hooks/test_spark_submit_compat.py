"""The private parts of SparkSubmitHook that spark_submit_compat reads exist on the installed provider.

The provider is pinned in pyproject.toml to a range with an upper bound; these tests run against the
version installed from it (constraints.txt). A failure names the attribute and the module to update.
"""

from __future__ import annotations

import json
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from airflow_kafka_failover.hooks import spark_submit_compat

PROVIDER = "apache-airflow-providers-apache-spark"
COMPAT_MODULE = "airflow_kafka_failover/hooks/spark_submit_compat.py"
REPO = Path(__file__).resolve().parents[3]


def declared_provider_requirement() -> Requirement:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for line in project["dependencies"]:
        requirement = Requirement(line)
        if requirement.name == PROVIDER:
            return requirement
    raise AssertionError(f"pyproject.toml does not declare {PROVIDER}")


def test_the_provider_range_has_an_upper_bound_and_holds_the_installed_version():
    requirement = declared_provider_requirement()
    assert any(spec.operator in ("<", "<=", "==", "~=") for spec in requirement.specifier), (
        f"{requirement} has no upper bound: a new major may rename the private attributes that "
        f"{COMPAT_MODULE} reads"
    )
    installed = Version(version(PROVIDER))
    assert requirement.specifier.contains(installed, prereleases=True), (
        f"{PROVIDER} {installed} is installed, outside the declared {requirement.specifier}: "
        "reinstall with 'make setup' (constraints.txt) or widen the range once these tests pass on it"
    )


@pytest.fixture
def spark_hook(monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_COMPAT",
        json.dumps(
            {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster", "namespace": "ns"}}
        ),
    )
    return SparkSubmitHook(conn_id="spark_compat", name="compat", application_args=["--settings", "s.json"])


@pytest.mark.parametrize("attribute", sorted(spark_submit_compat.PRIVATE_ATTRIBUTES))
def test_every_private_attribute_the_compat_module_reads_exists(spark_hook, attribute):
    if not hasattr(spark_hook, attribute):
        pytest.fail(
            f"SparkSubmitHook of {PROVIDER} {version(PROVIDER)} has no attribute {attribute!r} "
            f"({spark_submit_compat.PRIVATE_ATTRIBUTES[attribute]}): update {COMPAT_MODULE} to what this "
            "version offers (read its hooks/spark_submit.py), then the range in pyproject.toml"
        )


@pytest.mark.parametrize("key", spark_submit_compat.CONNECTION_KEYS)
def test_every_connection_key_the_compat_module_reads_exists(spark_hook, key):
    if key not in spark_hook._connection:
        pytest.fail(
            f"SparkSubmitHook._connection of {PROVIDER} {version(PROVIDER)} has no key {key!r} "
            f"(keys: {sorted(spark_hook._connection)}): update {COMPAT_MODULE}"
        )


def test_the_compat_functions_read_the_resolved_connection_and_build_the_command(spark_hook):
    assert spark_submit_compat.master_and_deploy_mode(spark_hook) == ("yarn", "cluster")
    command = spark_submit_compat.spark_submit_command(spark_hook, "/app/job.py")
    assert command[0].endswith("spark-submit")
    assert command[command.index("--master") + 1] == "yarn"
    assert command[-3:] == ["/app/job.py", "--settings", "s.json"]


def test_the_parsed_yarn_id_and_the_resolved_namespace(spark_hook):
    assert spark_submit_compat.yarn_application_id(spark_hook) is None
    spark_hook._yarn_application_id = "application_1_0042"
    assert spark_submit_compat.yarn_application_id(spark_hook) == "application_1_0042"
    assert spark_submit_compat.kubernetes_namespace(spark_hook) == "ns"
    spark_hook._connection["namespace"] = None
    assert spark_submit_compat.kubernetes_namespace(spark_hook) is None


def test_what_the_provider_offers_publicly_is_not_read_privately():
    """submit() returns the standalone driver id, and the provider names the Kubernetes driver pod itself:
    neither is read from the hook's private attributes any more."""
    assert not {"_driver_id", "_kubernetes_driver_pod"} & set(spark_submit_compat.PRIVATE_ATTRIBUTES)

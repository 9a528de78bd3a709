"""The provider's metadata lists every module that defines a hook, an operator, a sensor or a trigger."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from airflow.sdk import BaseHook, BaseOperator, BaseSensorOperator
from airflow.triggers.base import BaseTrigger

import airflow_kafka_failover
from airflow_kafka_failover.get_provider_info import get_provider_info

KINDS = {
    "hooks": (BaseHook,),
    "operators": (BaseOperator,),
    "sensors": (BaseSensorOperator,),
    "triggers": (BaseTrigger,),
}


def defining_modules(package: str, bases: tuple[type, ...]) -> list[str]:
    """The modules of ``airflow_kafka_failover.<package>`` that define a subclass of ``bases``."""
    found = []
    root = importlib.import_module(f"airflow_kafka_failover.{package}")
    for info in pkgutil.iter_modules(root.__path__, root.__name__ + "."):
        module = importlib.import_module(info.name)
        classes = inspect.getmembers(module, inspect.isclass)
        if any(issubclass(cls, bases) and cls.__module__ == info.name for _name, cls in classes):
            found.append(info.name)
    return sorted(found)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_module_of_a_kind_is_listed(kind):
    listed = get_provider_info()[kind]
    assert len(listed) == 1 and listed[0]["integration-name"] == "Kafka Failover"
    expected = defining_modules(kind, KINDS[kind])
    assert sorted(listed[0]["python-modules"]) == expected


def test_no_connection_type_is_defined_here():
    assert "connection-types" not in get_provider_info()
    assert get_provider_info()["versions"] == [airflow_kafka_failover.__version__]

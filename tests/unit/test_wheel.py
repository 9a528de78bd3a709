"""The provider's wheel holds the provider and nothing else (no sandbox, demo or local Airflow)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.packaging import built_wheel

pytestmark = pytest.mark.slow  # builds the wheel with pip


def test_the_wheel_holds_only_the_provider(tmp_path):
    wheel = built_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    package = [name for name in names if not name.startswith("airflow_kafka_failover-")]
    assert package, names
    outside = [name for name in package if not name.startswith("airflow_kafka_failover/")]
    assert outside == [], f"files outside the provider package: {outside}"
    for tool in ("sandbox/", "demo/", "local_airflow", "akf_devtools"):
        assert not [name for name in package if tool in name], f"{tool} is in the wheel"
    suffixes = {Path(name).suffix for name in package}
    assert suffixes <= {".py", ".properties", ".typed"}, suffixes
    assert "airflow_kafka_failover/py.typed" in package
    assert "airflow_kafka_failover/jobs/log4j2.properties" in package
    assert "airflow_kafka_failover/jobs/stream_job.py" in package
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "kafka-failover = airflow_kafka_failover.cli:main" in text
    assert "akf-dev" not in text
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names), "the wheel lacks LICENSE"
    metadata = (
        zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    )
    for line in (
        "License-Expression: Apache-2.0",
        "Classifier: Framework :: Apache Airflow :: Provider",
        "Author: The airflow-kafka-failover developers",
    ):
        assert line in metadata.splitlines(), f"the wheel's METADATA lacks {line!r}"
    # pyspark only with the `spark` extra (and the development one): the Airflow side does not need it.
    pyspark = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: pyspark")]
    assert pyspark and all('; extra == "' in line for line in pyspark), pyspark
    assert 'Requires-Dist: pyspark==4.0.0; extra == "spark"' in pyspark, pyspark
    # The test and lint tools are pyproject.toml's `dev` dependency group, which the metadata does not carry.
    extras = {line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Provides-Extra:")}
    assert extras == {"spark", "delta", "s3", "kubernetes"}, extras
    for tool in ("pytest", "ruff", "mypy", "moto", "playwright", "hypothesis"):
        assert not [line for line in metadata.splitlines() if line.startswith(f"Requires-Dist: {tool}")], tool
    print(f"{wheel.name}: {len(package)} files in the provider package")

"""docs/reference.md's option tables and the JSON Schemas are generated from the models and committed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_kafka_failover.domain.config import ClusterSpec, PairConfig, PairsFile, load_pairs
from airflow_kafka_failover.domain.health.verdict import HealthThresholds
from airflow_kafka_failover.jobs.options import JobOptions
from airflow_kafka_failover.jobs.settings import JobSettings

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gen_reference.py"


def generator():
    spec = importlib.util.spec_from_file_location("gen_reference", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_reference_and_schemas_are_the_generated_ones():
    stale = [
        str(path.relative_to(REPO))
        for path, content in generator().expected_files().items()
        if not path.exists() or path.read_text() != content
    ]
    assert not stale, f"{stale} differ from the models: run `make reference` and commit the result"


def test_the_check_mode_fails_naming_the_command(tmp_path, monkeypatch):
    module = generator()
    reference = tmp_path / "reference.md"
    reference.write_text(module.REFERENCE.read_text().replace("| `primary` |", "| `primery` |"))
    monkeypatch.setattr(module, "REFERENCE", reference)
    for name in ("PAIR_CONFIG_SCHEMA", "JOB_SETTINGS_SCHEMA"):
        monkeypatch.setattr(module, name, tmp_path / Path(getattr(module, name)).name)
    monkeypatch.setattr(module, "ROOT", tmp_path)
    assert module.main(["--check"]) == 1
    assert "`primery`" in reference.read_text(), "--check must not write"
    assert module.main([]) == 0
    assert "`primery`" not in reference.read_text() and module.main(["--check"]) == 0


@pytest.mark.slow
def test_the_script_runs_as_the_makefile_runs_it():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr


def test_every_field_has_a_description():
    models = [PairsFile, PairConfig, ClusterSpec, HealthThresholds, JobOptions, JobSettings]
    models += [model for _, model in generator()._models()["pair-config"]]
    undocumented = [
        f"{m.__name__}.{name}"
        for m in models
        for name, info in m.model_fields.items()
        if not info.description
    ]
    assert not undocumented


def test_the_example_file_is_valid_against_the_exported_json_schema():
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    schema = json.loads((REPO / "docs" / "pair-config.schema.json").read_text())
    example = yaml.safe_load((REPO / "examples" / "pairs.yaml").read_text())
    jsonschema.validate(example, schema)
    load_pairs(REPO / "examples" / "pairs.yaml")
    bad = {"pairs": {"orders": {**example["pairs"]["orders"], "colour": "blue"}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    remote = {"pairs": {"orders": {**example["pairs"]["orders"], "job": {"sink_root": "s3://bucket/x"}}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(remote, schema)

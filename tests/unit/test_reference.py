"""docs/reference.md's option tables and the JSON Schemas are generated from the models and committed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from airflow_kafka_failover.domain.config import ClusterSpec, PairConfig, PairsFile, load_pairs
from airflow_kafka_failover.domain.health.verdict import HealthThresholds
from airflow_kafka_failover.run_format.options import JobOptions
from airflow_kafka_failover.run_format.settings import JobSettings

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


def _model_in(annotation: object) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _not_shown(model: type[BaseModel], shown: object, path: str) -> Iterator[str]:
    """The options of ``model`` that ``shown`` (the example's section) lacks or shows with a value other than
    the default. Fields filled from a key (``exclude``) are not options; a default of null that the config
    derives (``flows``, ``methods``) may be shown as its derived value."""
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        where = f"{path}.{name}"
        if not isinstance(shown, dict) or name not in shown:
            yield f"{where} is missing"
            continue
        nested = _model_in(field.annotation)
        if typing.get_origin(field.annotation) is dict and nested is not None:
            for key, value in shown[name].items():
                yield from _not_shown(nested, value, f"{where}.{key}")
        elif nested is not None:
            yield from _not_shown(nested, shown[name], where)
        elif not field.is_required():
            default = field.get_default(call_default_factory=True)
            value = shown[name]
            if default is not None and getattr(default, "value", default) != value and default != value:
                yield f"{where} shows {value!r}, the default is {default!r}"


def test_the_example_file_shows_every_option_with_its_default():
    """examples/pairs.yaml says it shows every option with its default: a new option must be added there."""
    import yaml

    example = yaml.safe_load((REPO / "examples" / "pairs.yaml").read_text())
    problems = list(_not_shown(PairConfig, example["pairs"]["orders"], "pairs.orders"))
    assert not problems, "examples/pairs.yaml: " + "; ".join(problems)

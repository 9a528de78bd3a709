"""Regenerate the option tables of docs/reference.md and the JSON Schemas from the provider's models.

    .venv/bin/python scripts/gen_reference.py           # rewrite the files (`make reference`)
    .venv/bin/python scripts/gen_reference.py --check   # exit 1 naming the files that are out of date

The tables sit between ``<!-- generated:<name> -->`` and ``<!-- end generated -->`` in docs/reference.md;
everything outside the markers is hand-written and kept. Each table lists a model's fields with their type,
default and ``Field(description=...)``; each section starts with the model's docstring (before ``:param``).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference.md"
PAIR_CONFIG_SCHEMA = ROOT / "docs" / "pair-config.schema.json"
JOB_SETTINGS_SCHEMA = ROOT / "docs" / "job-settings.schema.json"
_BLOCK = re.compile(
    r"(<!-- generated:(?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL
)


def _models() -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from airflow_kafka_failover.domain.config import (
        ClusterSpec,
        HealthSpec,
        KeeperSpec,
        PairConfig,
        PairsFile,
        ReplicationSpec,
        SwitchSpec,
        TranslationSpec,
    )
    from airflow_kafka_failover.run_format.options import JobOptions
    from airflow_kafka_failover.run_format.settings import JobSettings

    return {
        "pair-config": [
            ("Pair (`pairs.<name>`)", PairConfig),
            ("`clusters.<name>`", ClusterSpec),
            ("`replication`", ReplicationSpec),
            ("`translation`", TranslationSpec),
            ("`health`", HealthSpec),
            ("`job`", JobOptions),
            ("`switch`", SwitchSpec),
            ("`keeper`", KeeperSpec),
        ],
        "job-settings": [("The settings file (`<run_dir>/settings.json`)", JobSettings)],
        "schemas": {PAIR_CONFIG_SCHEMA: PairsFile, JOB_SETTINGS_SCHEMA: JobSettings},
    }


def documented_fields(model: type[BaseModel]) -> dict[str, Any]:
    """The fields a file gives (excluded ones are filled from the enclosing key)."""
    return {name: info for name, info in model.model_fields.items() if not info.exclude}


def _prose(model: type[BaseModel]) -> str:
    """The model's docstring up to its ``:param`` lines, in Markdown."""
    text = inspect.cleandoc(model.__doc__ or "").split("\n:param", 1)[0].strip()
    text = re.sub(r":(?:class|meth|func|attr):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _type_of(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        return _type_of(target, defs) if "enum" in target else "mapping (below)"
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    if "anyOf" in schema:
        kinds = [_type_of(option, defs) for option in schema["anyOf"] if option.get("type") != "null"]
        nullable = any(option.get("type") == "null" for option in schema["anyOf"])
        return " or ".join(kinds) + (" or null" if nullable else "")
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        if items and items.get("pattern") == "^.+->.+$":
            return 'list of `"X->Y"`'
        return f"list of {_type_of(items, defs)}" if items else "list"
    if kind == "object":
        values = schema.get("additionalProperties")
        if isinstance(values, dict) and values:
            return f"mapping of name to {_type_of(values, defs)}"
        return "mapping"
    bounds = [f">= {schema['minimum']:g}" if "minimum" in schema else ""]
    bounds.append(f"> {schema['exclusiveMinimum']:g}" if "exclusiveMinimum" in schema else "")
    if schema.get("pattern", "").startswith("^(?!"):
        return "local path"
    name = {"number": "number", "integer": "integer", "string": "string", "boolean": "boolean"}.get(
        kind or ""
    )
    return " ".join(part for part in [name or "any", *bounds] if part)


def _default_of(info: Any) -> str:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    if "x-default" in extra:
        return str(extra["x-default"])
    if info.default_factory is not None:
        value = info.default_factory()
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "see below"
    if value is None:
        return "null"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    if isinstance(value, tuple | list):
        return f"`{json.dumps([getattr(v, 'value', v) for v in value])}`"
    return f"`{json.dumps(value) if isinstance(value, dict) else value}`"


def table(model: type[BaseModel]) -> str:
    """The Markdown table of a model's fields."""
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for name, info in documented_fields(model).items():
        kind = _type_of(schema["properties"][name], defs)
        meaning = (info.description or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{name}` | {kind} | {_default_of(info)} | {meaning} |")
    return "\n".join(lines)


def block(sections: list[tuple[str, type[BaseModel]]]) -> str:
    """One generated block: a section per model, with its prose and table."""
    parts = []
    for title, model in sections:
        parts.append(f"### {title}\n\n{_prose(model)}\n\n{table(model)}\n")
    return "\n".join(parts) + "\n"


def reference(text: str, blocks: dict[str, str]) -> str:
    """``text`` with every generated block replaced; unknown block names are an error."""

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in blocks:
            raise SystemExit(f"{REFERENCE}: unknown generated block {name!r}; known: {sorted(blocks)}")
        return f"{match.group(1)}{blocks[name]}{match.group(4)}"

    missing = sorted(set(blocks) - {match.group("name") for match in _BLOCK.finditer(text)})
    if missing:
        raise SystemExit(f"{REFERENCE}: no <!-- generated:NAME --> marker for {missing}")
    return _BLOCK.sub(replace, text)


def json_schema(model: type[BaseModel]) -> str:
    """The JSON Schema of a model, as committed."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **model.model_json_schema()}
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def expected_files() -> dict[Path, str]:
    """Every generated file with the content it must have."""
    models = _models()
    blocks = {name: block(models[name]) for name in ("pair-config", "job-settings")}
    files = {REFERENCE: reference(REFERENCE.read_text(), blocks)}
    files.update({path: json_schema(model) for path, model in models["schemas"].items()})
    return files


def main(argv: list[str] | None = None, write: Callable[[Path, str], Any] = Path.write_text) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report files that are out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, content in expected_files().items():
        if path.exists() and path.read_text() == content:
            continue
        stale.append(path)
        if not args.check:
            write(path, content)
    if args.check and stale:
        names = ", ".join(str(path.relative_to(ROOT)) for path in stale)
        print(f"out of date: {names}; run `make reference` and commit the result", file=sys.stderr)
        return 1
    for path in stale:
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The architecture as docs/concepts.md draws it: the layers of the import contract, no import cycle, and a
driver package without Airflow or HTTP clients."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "airflow_kafka_failover"


def contract_layers() -> list[list[str]]:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [contract["layers"] for contract in contracts if contract["type"] == "layers"]
    return [[part.strip().removeprefix(f"{PACKAGE}.") for part in layer.split("|")] for layer in layers]


def drawn_layers() -> list[list[str]]:
    text = (REPO / "docs" / "concepts.md").read_text()
    section = text[text.index("## Architecture") :]
    picture = section[
        section.index("```text") + len("```text") : section.index("```", section.index("```text") + 7)
    ]
    layers = []
    for line in picture.strip().splitlines():
        names = re.match(r"^([a-z_]+(?: \| [a-z_]+)*)\s{2,}", line)
        assert names, f"a line of the picture that names no layer: {line!r}"
        layers.append(names.group(1).split(" | "))
    return layers


def test_the_picture_in_concepts_is_the_import_contract():
    assert drawn_layers() == contract_layers()


def test_every_module_is_in_a_layer():
    layered = {name for layer in contract_layers() for name in layer}
    package = REPO / PACKAGE
    top = {
        p.stem if p.is_file() else p.name
        for p in package.iterdir()
        if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    assert top - layered == {"__init__", "get_provider_info"}


def test_no_module_reaches_itself_through_imports():
    graph = grimp.build_graph(PACKAGE)
    cycles = [
        (module, other)
        for module in graph.modules
        for other in graph.find_modules_directly_imported_by(module)
        if graph.chain_exists(importer=other, imported=module)
    ]
    assert cycles == []


def test_the_driver_package_imports_no_http_client():
    """``urllib.request`` is named here: an import contract can forbid external packages only whole."""
    forbidden = ("urllib.request", "urllib.error", "http", "requests", "urllib3", "kubernetes", "airflow")
    found = []
    for folder in ("jobs", "run_format", "core"):
        for path in (REPO / PACKAGE / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                found += [
                    f"{path.relative_to(REPO)}: {n}"
                    for n in names
                    if n.split(".")[0] in forbidden or n in forbidden
                ]
    assert found == []

"""Claims the docs make about the code, held against the code: where ``AKF_PAIRS_CONFIG`` must be set (said
in several docs and in the DAG file's own error), the supported version ranges (stated in the getting-started
page and in limits.md, defined by pyproject.toml and the job side), the module paths the docs and
pyproject.toml name, and the defaults, bases, constructors and modules docs/reference.md quotes in prose.

Each test names the doc, the claim and what the code says, so a claim that went stale says which."""

from __future__ import annotations

import re
from pathlib import Path

from airflow_kafka_failover.workflows.factory import CONFIG_ENV, CONFIG_ENV_READERS

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _flat(path: Path) -> str:
    return " ".join(path.read_text().split())


def sentences_naming(name: str) -> list[tuple[str, str]]:
    """``(doc, sentence)`` for every sentence of README and docs/ that names ``name``."""
    found = []
    for path in DOCS:
        for sentence in re.split(r"(?<=[.:;])\s+(?=[-A-Z`(])", _flat(path)):
            if name in sentence:
                found.append((str(path.relative_to(REPO)), sentence))
    return found


def test_every_doc_that_says_where_akf_pairs_config_is_set_names_the_dag_files_own_list():
    """The DAG file's error (``CONFIG_ENV_READERS``) is the one list; a doc that says where to set the
    variable names exactly those components."""
    where = [(doc, s) for doc, s in sentences_naming(CONFIG_ENV) if "environment" in s]
    assert {"docs/getting-started.md", "docs/runbook.md", "docs/reference.md"} <= {doc for doc, _ in where}
    wrong = [
        f"{doc}: {sentence}"
        for doc, sentence in where
        if CONFIG_ENV_READERS not in sentence or "triggerer" in sentence
    ]
    assert not wrong, f"name {CONFIG_ENV_READERS!r} where {CONFIG_ENV} must be set: {wrong}"

"""Every measured figure in README's "Benchmarks" and "Tests" sections says when it was measured and with
which command, so that a reader can tell an old figure from a new one and measure it again.

A block (the text between blank lines) that states a figure (a number with a unit of time, size or rate)
must hold a date (``YYYY-MM-DD``) and a command in backticks (a benchmark script, ``make``, ``pytest``,
a Python file or one of the two command-line tools). A table may take them from the block just before it,
its caption.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTIONS = ("## Benchmarks", "## Tests")

FIGURE = re.compile(
    r"\b\d+(?:[.,]\d+)? ?(?:ms|s|min|minutes|seconds|MiB|MB|GB|records/s|CPU s/min)\b(?!-)",
)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMAND = re.compile(r"`[^`]*(?:bench_\w+\.py|\bmake\b|pytest|\.py\b|akf-dev|kafka-failover)[^`]*`")


def measured_blocks(text: str) -> list[tuple[str, str]]:
    """``(block, evidence)`` of every block of the sections that states a figure; the evidence is the block,
    with its caption for a table."""
    found = []
    for section in re.split(r"\n(?=## )", text):
        if not section.startswith(SECTIONS):
            continue
        blocks = [block.strip() for block in re.split(r"\n\s*\n", section) if block.strip()]
        for number, block in enumerate(blocks):
            if block.startswith("#") and "\n" not in block:
                continue
            if FIGURE.search(block):
                caption = blocks[number - 1] if block.startswith("|") and number else ""
                found.append((block, f"{caption}\n{block}"))
    return found


def test_every_figure_names_its_date_and_command():
    blocks = measured_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 5, "the sections were not found: did README's headings change?"
    undated = [block[:200] for block, evidence in blocks if not DATE.search(evidence)]
    uncommanded = [block[:200] for block, evidence in blocks if not COMMAND.search(evidence)]
    assert not undated, f"figures without a date (YYYY-MM-DD): {undated}"
    assert not uncommanded, f"figures without the command that measured them: {uncommanded}"


def test_the_check_finds_a_figure_without_date_or_command():
    text = "## Benchmarks\n\nFailover RTO 9.6 s on the quiet machine.\n\n## Tests\n\nNothing measured.\n"
    ((block, evidence),) = measured_blocks(text)
    assert block.startswith("Failover RTO") and not DATE.search(evidence) and not COMMAND.search(evidence)

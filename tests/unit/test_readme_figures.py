"""Every measured figure in README says when it was measured and with which command, so that a reader can
tell an old figure from a new one and measure it again.

In the "Benchmarks" and "Tests" sections, a block (the text between blank lines) that states a figure (a
number with a unit of time, size or rate) must hold a date (``YYYY-MM-DD``) and a command in backticks (a
benchmark script, ``make``, ``pytest``, a Python file or one of the two command-line tools). A table may
take them from the block just before it, its caption. Elsewhere, where most figures are settings (a 256 MiB
heap, a 2 s interval), each sentence that states a figure as measured (``about 2.2 GiB``, ``takes``,
``took``, ``resident``, ``RSS``, ``median``) must hold both itself.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTIONS = ("## Benchmarks", "## Tests")

UNITS = r"(?:ms|s|min|minutes|seconds|MiB|MB|GiB|GB|records/s|CPU s/min)"
FIGURE = re.compile(rf"\b\d+(?:[.,]\d+)? ?{UNITS}\b(?!-)")
MEASURED = re.compile(
    r"\b(?:[Aa]bout|took|takes|RSS|resident|median|in all)\b[^.;:\n]{0,30}?"
    rf"\b\d+(?:[.,]\d+)? ?{UNITS}\b(?!-)"
    rf"|\b\d+(?:[.,]\d+)? ?{UNITS} (?:of RSS|RSS|resident)\b"
)
"""A figure stated as measured, not set: outside the measured sections only these need their evidence."""
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


def measured_elsewhere(text: str) -> list[str]:
    """The sentences outside the measured sections that state a figure as measured."""
    return [
        sentence
        for section in re.split(r"\n(?=## )", text)
        if not section.startswith(SECTIONS)
        for block in re.split(r"\n\s*\n", section)
        for sentence in re.split(r"(?<=[.])\s+(?=[A-Z(\[])", " ".join(block.split()))
        if MEASURED.search(sentence)
    ]


def test_a_figure_measured_anywhere_else_names_its_date_and_command():
    """Sentence by sentence: a long paragraph of dated runs does not vouch for a bare figure inside it."""
    sentences = measured_elsewhere((REPO / "README.md").read_text(encoding="utf-8"))
    assert len(sentences) >= 3, (
        "no measured figure found outside Benchmarks and Tests: did the pattern change?"
    )
    bare = [s[:300] for s in sentences if not (DATE.search(s) and COMMAND.search(s))]
    assert not bare, f"measured figures without a date (YYYY-MM-DD) or the command that measured them: {bare}"


def test_the_check_finds_a_measured_figure_outside_the_measured_sections():
    text = (
        "## The demo\n\nOn 2026-11-28 (`make demo`) it took 100 s. With the default thresholds detection "
        "takes longer (about 6 s for a crash).\n\n"
        "## The sandbox\n\nBrokers have a 256 MiB heap; the sandbox takes about 2.2 GiB of RSS.\n\n"
        "Probes every 2 s with a timeout of 2 s.\n"
    )
    found = measured_elsewhere(text)
    assert [s[:10] for s in found] == ["On 2026-11", "With the d", "Brokers ha"]
    assert [s[:10] for s in found if not (DATE.search(s) and COMMAND.search(s))] == [
        "With the d",
        "Brokers ha",
    ]

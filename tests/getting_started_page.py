"""docs/getting-started.md as its tests read it: its code blocks in order, what each shell line of it asks a
user to do, and its MirrorMaker 2 settings.

Shared by tests/unit/test_getting_started.py (the page holds together) and
tests/integration/test_getting_started_walk.py (the page followed against real clusters): a shell line of a
kind the walk does not know fails both, so a step added to the page is walked or the tests say why not.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "getting-started.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)

STEP_KINDS = (
    ("build", re.compile(r"^python -m pip wheel ")),
    ("install", re.compile(r"^pip install ")),
    ("pipe", re.compile(r"^airflow providers \w+ \| grep ")),
    ("airflow", re.compile(r"^airflow (connections add|pools set|dags pause) ")),
    ("trigger", re.compile(r"^airflow dags trigger ")),
    ("kafka-topics", re.compile(r"^kafka-topics\.sh ")),
    ("kafka-failover", re.compile(r"^kafka-failover (validate|check|plan|status|history) ")),
)
"""What a shell line of the page does, by its first words: the walk has a way to do each kind."""


def blocks(language: str) -> list[str]:
    """The bodies of the page's code blocks of ``language`` (``bash``, ``yaml``, ...), in order."""
    return [body for lang, body in BLOCK.findall(PAGE.read_text()) if lang == language]


def block_lines(block: str) -> list[str]:
    """The command lines of one shell block, in order (comments and blank lines left out)."""
    return [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]


def shell_lines() -> list[str]:
    """Every command line of the page's ``bash`` blocks, in order."""
    return [line for block in blocks("bash") for line in block_lines(block)]


def step_kind(line: str) -> str:
    """The kind of one shell line of the page (one of :data:`STEP_KINDS`).

    :raises ValueError: a line of no known kind: a step the walk would not take.
    """
    for kind, pattern in STEP_KINDS:
        if pattern.match(line):
            return kind
    raise ValueError(
        f"docs/getting-started.md shows `{line}`, a step tests/integration/test_getting_started_walk.py does "
        "not know: teach the walk (and tests/getting_started_page.py's STEP_KINDS) to take it"
    )


def mm2_settings(text: str) -> dict[str, str]:
    """The ``key = value`` lines of MirrorMaker 2 properties; a later line wins, as Java's Properties do."""
    settings = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            settings[key.strip()] = value.strip()
    return settings


def page_mm2_settings() -> dict[str, str]:
    """The MirrorMaker 2 settings the page asks for (its one ``properties`` block)."""
    (block,) = blocks("properties")
    return mm2_settings(block)


def regex_covers(regexes: str, name: str) -> bool:
    """Whether MirrorMaker 2's ``topics`` or ``groups`` value (comma-separated regexes) matches ``name``."""
    return any(re.fullmatch(part.strip(), name) for part in regexes.split(",") if part.strip())


def words(line: str) -> list[str]:
    """A shell line split as a shell would."""
    return shlex.split(line)

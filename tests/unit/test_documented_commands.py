"""The command lines the README and docs/ show parse against the real argument parsers.

Every ``kafka-failover ...`` and ``akf-dev ...`` line (in code blocks and inline code) is split like a shell
would and given to the command's own parser; a flag that was renamed or removed, or a sub-command that no
longer exists, fails here with the file and line. Lines that show a synopsis (``[--pair NAME]``, ``...``)
rather than a command are skipped. ``benchmarks/<name>.py --flag`` and ``scripts/build_<name>.py --flag``
lines are checked against the script's ``--help``.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMAND = re.compile(r"(?:^|[\s`(])(?:\S*/)?(kafka-failover|akf-dev)( [^`|#\n]*)")
BENCHMARK = re.compile(
    r"((?:benchmarks/bench|scripts/build)_\w+\.py)((?: --?[\w-]+(?: [^\s`|#-][^\s`|#]*)?)+)"
)


def _logical_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """The file's lines, with shell continuations (a trailing backslash) joined; numbered from 1; and
    whether the line is in a shell code block (```bash, ```sh, ```shell, ```console)."""
    pending, start, fence = "", 0, None
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = None if fence is not None else line.strip().strip("`").strip()
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line, fence in ("bash", "sh", "shell", "console")
        pending = ""


def _is_synopsis(words: str) -> bool:
    return "..." in words or "[" in words or "<" in words or "COMMAND" in words or "|" in words


def _candidates(line: str, in_shell_block: bool) -> list[str]:
    """Where a command may be: the whole line in a shell block, else each inline code span."""
    return [line] if in_shell_block else re.findall(r"`([^`]+)`", line)


def documented_commands() -> list[tuple[str, str, str]]:
    found = []
    for path in DOCS:
        for number, line, in_shell_block in _logical_lines(path.read_text()):
            for text in _candidates(line, in_shell_block):
                for match in COMMAND.finditer(text):
                    program, words = match.group(1), match.group(2).strip()
                    if not words or _is_synopsis(words):
                        continue
                    found.append((f"{path.relative_to(REPO)}:{number}", program, words))
    return found


def _parser(program: str) -> argparse.ArgumentParser:
    if program == "kafka-failover":
        from airflow_kafka_failover.cli import build_parser
    else:
        from akf_devtools.cli import build_parser
    return build_parser()


def _sub_commands(parser: argparse.ArgumentParser) -> set[str]:
    return {name for action in parser._actions if action.choices for name in action.choices}


COMMANDS = documented_commands()


def test_the_docs_show_commands_of_both_tools():
    programs = {program for _, program, _ in COMMANDS}
    assert programs == {"kafka-failover", "akf-dev"}, programs
    assert len(COMMANDS) >= 20, COMMANDS


@pytest.mark.parametrize(("where", "program", "words"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_documented_command_line_parses(where, program, words, capsys):
    argv = shlex.split(words, comments=True)
    parser = _parser(program)
    if not any(word.startswith("-") for word in argv) and len(argv) == 1:
        # prose naming a sub-command ("`kafka-failover status` shows ..."): the name must exist
        assert argv[0] in _sub_commands(parser), f"{where}: `{program} {argv[0]}` is no sub-command"
        return
    try:
        parser.parse_args(argv)
    except SystemExit:
        error = capsys.readouterr().err.strip().splitlines()[-1:]
        pytest.fail(f"{where}: `{program} {words}` does not parse: {error}")


def documented_benchmark_flags() -> list[tuple[str, str, list[str]]]:
    found = []
    for path in DOCS + sorted((REPO / "benchmarks").glob("*.py")):
        for number, line, _ in _logical_lines(path.read_text()):
            for match in BENCHMARK.finditer(line):
                flags = re.findall(r"(?<![\w-])(--[a-z][\w-]*)", match.group(2))
                if flags:
                    found.append((f"{path.relative_to(REPO)}:{number}", match.group(1), flags))
    return found


@pytest.mark.slow
def test_documented_benchmark_flags_exist():
    helps: dict[str, str] = {}
    missing = []
    for where, script, flags in documented_benchmark_flags():
        if script not in helps:
            done = subprocess.run(
                [sys.executable, str(REPO / script), "--help"],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=REPO,
            )
            assert done.returncode == 0, f"{script} --help failed: {done.stderr[-500:]}"
            helps[script] = done.stdout
        missing += [f"{where}: {script} has no {flag}" for flag in flags if flag not in helps[script]]
    assert any(s.startswith("benchmarks/") for s in helps), "no benchmark command line found in the docs"
    assert any(s.startswith("scripts/") for s in helps), "no scripts/build_*.py command line in the docs"
    assert not missing, "\n".join(missing)


def _options_and_choices(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, str]]:
    """Every option string and sub-command or choice of ``parser`` and its sub-parsers, with where it is."""
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield path, name
                yield from _options_and_choices(sub, f"{path} {name}".strip())
            continue
        for option in action.option_strings:
            if option.startswith("--"):
                yield path, option
        for choice in action.choices or ():
            yield path, str(choice)


@pytest.mark.parametrize("program", ["kafka-failover", "akf-dev"])
def test_the_reference_names_every_option_of_the_command_lines(program):
    text = (REPO / "docs" / "reference.md").read_text()
    section = text[text.index("## Command line") : text.index("## Environment variables")]
    missing = sorted(
        {
            f"{where}: {name}"
            for where, name in _options_and_choices(_parser(program))
            if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", section)
        }
    )
    assert not missing, f"docs/reference.md's Command line section lacks these {program} options: {missing}"

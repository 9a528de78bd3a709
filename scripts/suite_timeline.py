"""When each pytest worker was busy, and with which files: a summary of an ``AKF_TEST_TIMELINE`` file.

    AKF_TEST_TIMELINE=/tmp/timeline.jsonl make test
    .venv/bin/python scripts/suite_timeline.py /tmp/timeline.jsonl [--top 20]

Prints, per worker, its first start, last end and busy seconds, how long it sat idle at the end while
another worker still ran, and the files that took longest (seconds of test time, to refresh
``LONGEST_FIRST`` in tests/conftest.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path


def load(path: Path) -> list[dict]:
    """The timeline's entries; a line that is not a complete entry is refused by its number."""
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            entry = json.loads(line)
            entries.append({key: entry[key] for key in ("worker", "test", "began", "ended")})
        except (ValueError, KeyError, TypeError) as error:
            raise SystemExit(f"{path}:{number} is not a timeline entry ({error}): {line[:120]!r}") from error
    if not entries:
        raise SystemExit(f"{path} holds no timeline entry: was the run made with AKF_TEST_TIMELINE={path}?")
    return entries


def outermost(entries: list[dict]) -> list[dict]:
    """The entries not run inside another entry of the same worker (a test that runs pytest in a process of
    its own, whose tests inherited the timeline before the lanes stopped passing it on)."""
    kept: list[dict] = []
    for entry in sorted(entries, key=lambda entry: (entry["worker"], entry["began"], -entry["ended"])):
        inside = kept and kept[-1]["worker"] == entry["worker"] and entry["ended"] <= kept[-1]["ended"]
        if not inside:
            kept.append(entry)
    return kept


def summary(entries: list[dict], top: int) -> str:
    nested = len(entries) - len(entries := outermost(entries))
    start = min(entry["began"] for entry in entries)
    end = max(entry["ended"] for entry in entries)
    workers: dict[str, list[dict]] = defaultdict(list)
    files: dict[str, float] = defaultdict(float)
    for entry in entries:
        workers[entry["worker"]].append(entry)
        files[entry["test"].split("::")[0]] += entry["ended"] - entry["began"]
    lines = [f"{len(entries)} tests, {end - start:.0f} s from the first start to the last end"]
    if nested:
        lines[0] += f" ({nested} tests run inside another test left out)"
    for worker, own in sorted(workers.items()):
        first = min(entry["began"] for entry in own)
        last = max(entry["ended"] for entry in own)
        busy = sum(entry["ended"] - entry["began"] for entry in own)
        lines.append(
            f"{worker}: {len(own)} tests, from +{first - start:.0f} s to +{last - start:.0f} s, "
            f"busy {busy:.0f} s, idle at the end {end - last:.0f} s, "
            f"last file {own[-1]['test'].split('::')[0]}"
        )
    lines.append("longest files (seconds of test time):")
    for name, seconds in sorted(files.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"  {seconds:7.0f}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline", type=Path, help="the file AKF_TEST_TIMELINE named")
    parser.add_argument("--top", type=int, default=20, help="how many of the longest files to list")
    args = parser.parse_args(argv)
    if not args.timeline.is_file():
        parser.error(f"no timeline file at {args.timeline}")
    print(summary(load(args.timeline), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())

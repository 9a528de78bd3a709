"""CPU and memory of a process group or tree, from ``/proc`` (Linux): the idle cost of a waiting driver, of
Airflow's components."""

from __future__ import annotations

import os
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def group_usage(pgid: int) -> tuple[float, int]:
    """(CPU seconds used so far, resident bytes now) summed over the processes of group ``pgid``."""
    cpu, rss = 0.0, 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        # After the command: state ppid pgrp ... utime(12) stime(13) ... rss(22), counted from state = 0.
        if int(fields[2]) != pgid:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / TICKS
        rss += int(fields[21]) * PAGE
    return cpu, rss


def idle_cost(pgid: int, seconds: float) -> dict[str, float]:
    """CPU seconds per minute and resident MiB of group ``pgid`` over ``seconds`` of watching."""
    cpu_before, _ = group_usage(pgid)
    started = time.monotonic()
    time.sleep(seconds)
    cpu_after, rss = group_usage(pgid)
    elapsed = time.monotonic() - started
    return {
        "cpu_s_per_min": round((cpu_after - cpu_before) * 60 / elapsed, 2),
        "rss_mib": round(rss / 2**20, 1),
        "over_s": round(elapsed, 1),
    }


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after its last ')'.
    return text[text.rindex(")") + 2 :].split()


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and its live descendants, each with its reaped children's.

    A process that left the tree (a streaming job a task started in a session of its own, reparented when
    the task ended) no longer counts.

    :param root: the tree's root pid.
    """
    children = _children()
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        fields = _stat_fields(pid)
        if fields is None:
            continue
        # utime, stime, cutime, cstime are fields 14-17 of stat(5); fields[0] here is field 3 (state).
        total += sum(int(value) for value in fields[11:15])
        todo.extend(children.get(pid, []))
    return total / TICKS

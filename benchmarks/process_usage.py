"""CPU and memory of a process group, from ``/proc`` (Linux): for the idle cost of a waiting driver."""

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

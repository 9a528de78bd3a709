"""The demo's report: a timeline, the switch figures, the record counts, and a plot of consumption.

Everything here is computed from what the run left behind (the events the demo noted, the job's progress
records, the sink), so the report can be rebuilt from a results folder's ``report.json``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

# Events drawn as markers on the plot, by the kind the demo gives them.
MARKED = {
    "fault": ("tab:red", "--"),
    "verdict": ("tab:purple", ":"),
    "switch": ("tab:green", "-."),
    "recovery": ("tab:orange", "--"),
}
COLORS = {"A": "tab:blue", "B": "tab:olive"}


@dataclass
class Timeline:
    """Events of one demo run: (epoch seconds, kind, text), in the order they happened."""

    started_at: float
    events: list[tuple[float, str, str]] = field(default_factory=list)

    def add(self, at: float, kind: str, text: str) -> None:
        self.events.append((at, kind, text))
        self.events.sort(key=lambda event: event[0])

    def lines(self) -> list[str]:
        return [f"  +{at - self.started_at:6.1f} s  {text}" for at, _kind, text in self.events]


def consumption_series(
    progress: list[dict[str, Any]], started_at: float, bin_seconds: float = 2.0
) -> dict[str, tuple[list[float], list[float]]]:
    """Records per second consumed from each cluster, per ``bin_seconds`` bin since ``started_at``.

    :param progress: the job's progress entries (``written_at``, ``records``, ``cluster``), any order.
    :return: cluster -> (bin start times in seconds since ``started_at``, records per second in that bin),
        with every bin from 0 to the last batch present (0 where nothing was consumed).
    """
    if not progress:
        return {}
    last_bin = int(max(p["written_at"] - started_at for p in progress) // bin_seconds)
    per_cluster: dict[str, list[float]] = defaultdict(lambda: [0.0] * (last_bin + 1))
    for line in progress:
        index = int((line["written_at"] - started_at) // bin_seconds)
        if index >= 0:
            per_cluster[line["cluster"]][index] += int(line.get("records") or 0) / bin_seconds
    times = [i * bin_seconds for i in range(last_bin + 1)]
    return {cluster: (times, rates) for cluster, rates in sorted(per_cluster.items())}


def consumed_per_cluster(progress: list[dict[str, Any]]) -> dict[str, int]:
    """Records each cluster's runs wrote (each batch once: a replayed batch's line counts once)."""
    batches: dict[tuple[str, int, int], int] = {}
    for line in progress:
        batches[(line["cluster"], line["epoch"], line["batch_id"])] = int(line.get("records") or 0)
    totals: dict[str, int] = defaultdict(int)
    for (cluster, _epoch, _batch), records in batches.items():
        totals[cluster] += records
    return dict(totals)


def plot(
    series: dict[str, tuple[list[float], list[float]]], timeline: Timeline, path: Path, title: str
) -> Path:
    """Draw records/s consumed per cluster with the timeline's markers; write a PNG to ``path``."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5), dpi=110)
    for cluster, (times, rates) in series.items():
        ax.step(
            times,
            rates,
            where="post",
            label=f"consumed from {cluster}",
            color=COLORS.get(cluster),
            linewidth=1.6,
        )
    top = max((max(rates) for _t, rates in series.values() if rates), default=1.0) or 1.0
    for at, kind, text in timeline.events:
        if kind not in MARKED:
            continue
        color, style = MARKED[kind]
        x = at - timeline.started_at
        ax.axvline(x, color=color, linestyle=style, linewidth=1.2)
        ax.text(x, top * 1.95, text, rotation=90, va="top", ha="right", fontsize=7, color=color)
    ax.set_xlabel("seconds since the demo started")
    ax.set_ylabel("records per second (2 s bins)")
    ax.set_ylim(0, top * 2.0)  # room above the data for the markers' labels
    ax.set_title(title)
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def history_events(record: dict[str, Any]) -> list[tuple[float, str, str]]:
    """The active record's committed switches as timeline events."""
    events = []
    for entry in record.get("history", []):
        at = datetime.fromisoformat(entry["at"]).timestamp()
        events.append(
            (
                at,
                "switch",
                f"{entry.get('kind', 'switch')} committed: {entry['from']} -> "
                f"{entry['to']}, epoch {entry['epoch']}",
            )
        )
    return events


def render(
    figures: list[dict[str, Any]], counts: dict[str, int], consumed: dict[str, int], timeline: Timeline
) -> str:
    """The report as text: timeline, switch figures, records."""
    out = ["Timeline (seconds since the demo started):", *timeline.lines(), "", "Switches:"]
    for figure in figures:
        detection = figure.get("detection_s")
        out.append(
            f"  {figure['switch']:<28} detection {detection if detection is not None else '?':>5} s"
            f"   RTO {figure['rto_s']:>5} s (fault to first committed batch on the new cluster)"
        )
        if figure.get("steps"):
            out.append(
                "    after the verdict: "
                + ", ".join(f"{step} {took} s" for step, took in figure["steps"].items())
            )
    out += [
        "",
        "Records:",
        f"  produced (acknowledged by a broker)  {counts['produced']}",
        f"  consumed from A / from B             {consumed.get('A', 0)} / {consumed.get('B', 0)}",
        f"  rows in the sink (before dedup)      {counts['rows']}",
        f"  unique record ids in the sink        {counts['unique']}",
        f"  duplicated (re-delivered) rows       {counts['duplicates']}",
        f"  lost (produced, never in the sink)   {counts['lost']}",
    ]
    return "\n".join(out)


def write(results: Path, text: str, data: dict[str, Any]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / "report.txt").write_text(text + "\n")
    (results / "report.json").write_text(json.dumps(data, indent=1, default=str))

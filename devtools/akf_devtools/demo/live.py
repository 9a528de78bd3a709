"""A status line on the terminal every few seconds while the demo runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from akf_devtools.demo.report import consumed_per_cluster


class LiveStatus:
    """Print phase, records produced and consumed per cluster, and time since the fault, every ``every`` s.

    :param story: the demo's story (its producer and progress files are read, nothing is changed).
    :param say: prints one line.
    """

    def __init__(self, story, say: Callable[[str], None], every: float = 5.0) -> None:
        self.story, self.say, self.every = story, say, every
        self.phase = "starting"
        self.fault_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-status", daemon=True)

    def start(self) -> LiveStatus:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def fault(self, phase: str) -> None:
        """A fault was injected now; show the time since it until the next ``fault``/``clear``."""
        self.phase, self.fault_at = phase, time.time()

    def clear(self, phase: str) -> None:
        self.phase, self.fault_at = phase, None

    def line(self) -> str:
        producer = self.story.producer
        produced = dict(producer.acked_per_cluster) if producer is not None else {}
        consumed = consumed_per_cluster(self.story.progress_lines())
        text = (
            f"  [{self.phase}] produced A {produced.get('A', 0)} B {produced.get('B', 0)}"
            f" | consumed A {consumed.get('A', 0)} B {consumed.get('B', 0)}"
        )
        if self.fault_at is not None:
            text += f" | {time.time() - self.fault_at:.0f} s since the fault"
        return text

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.say(self.line())
            except Exception as exc:  # a status line must never end the demo
                self.say(f"  (status unavailable: {exc})")

"""What every benchmark script shares: its final JSON line on stdout, everything else on stderr.

Airflow's and Spark's logging write to stdout; ``json_line_output()`` keeps the real stdout for the one
JSON line the runner (``run_all.py``) reads and sends the rest to stderr. SIGTERM becomes SystemExit so
that a benchmark's ``finally`` stops the processes it started.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TextIO


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # so that the clean-up in main's finally block runs


def json_line_output() -> TextIO:
    """Install the SIGTERM handler, point stdout at stderr, and return the original stdout."""
    signal.signal(signal.SIGTERM, _exit_on_signal)
    sys.stdout.flush()
    json_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return json_out

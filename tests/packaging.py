"""Building the provider's wheel as a user would, for the tests that inspect or install it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def built_wheel(folder: Path) -> Path:
    """Build the provider's wheel (pip, without its dependencies) into ``folder``; return its path."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = folder.glob("airflow_kafka_failover-*.whl")
    return wheel

"""Build airflow-kafka-failover-job, the job side as a distribution of its own (wheel and sdist).

The distribution's metadata lives in ``job-distribution/`` (its ``pyproject.toml`` and README); its code is
the provider's own ``airflow_kafka_failover/jobs``, ``airflow_kafka_failover/run_format`` and
``airflow_kafka_failover/core`` with the package's
``__init__.py`` and ``py.typed``, staged beside that metadata in a temporary folder and built there with
``uv build`` (isolated, as a package index would build the sdist). Nothing is copied into the repository.

    .venv/bin/python scripts/build_job_distribution.py [--out dist]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
METADATA = REPO / "job-distribution"
PACKAGE = REPO / "airflow_kafka_failover"
JOB_SIDE = ("jobs", "run_format", "core")
"""The provider's subpackages that run on the Spark driver (no Airflow import: the import contracts)."""
UV = Path(sys.executable).with_name("uv")


def stage(folder: Path) -> Path:
    """Lay out the distribution's source tree in ``folder`` (made here); return it."""
    folder.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(METADATA / name, folder / name)
    shutil.copy2(REPO / "LICENSE", folder / "LICENSE")
    package = folder / PACKAGE.name
    package.mkdir()
    for name in ("__init__.py", "py.typed"):
        shutil.copy2(PACKAGE / name, package / name)
    for sub in JOB_SIDE:
        shutil.copytree(PACKAGE / sub, package / sub, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return folder


def build(out: Path) -> list[Path]:
    """Build the wheel and the sdist into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="akf-job-dist-") as tmp:
        source = stage(Path(tmp) / "src")
        done = subprocess.run(
            [str(UV), "build", "-q", "--out-dir", str(out.resolve()), str(source)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise SystemExit(f"error: building the job distribution failed:\n{done.stderr[-4000:]}")
    version = re.search(r'^__version__ = "([^"]+)"', (PACKAGE / "__init__.py").read_text(), re.M)
    assert version is not None, "airflow_kafka_failover/__init__.py names no __version__"
    return sorted(out.glob(f"airflow_kafka_failover_job-{version.group(1)}[.-]*"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/build_job_distribution.py",
        description="Build the wheel and sdist of airflow-kafka-failover-job (the job side, no Airflow).",
    )
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="output folder (default: dist/)")
    args = parser.parse_args(argv)
    for path in build(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

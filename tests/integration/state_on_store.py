"""A pair whose whole state lives on a store, with no local folder shared by the Airflow side and the driver.

The Airflow side (every DAG run process and the tasks in it) works in ``<root>/airflow-side``: its working
directory, ``TMPDIR``, ``HOME`` and the job's ``local_root`` (spark-submit's process file, its output, the
owner-only store settings). The driver works in ``<root>/driver-side``: Spark's scratch space
(``spark.local.dir``), the JVM's temporary folder and Spark SQL's warehouse. The sink, the checkpoints, the
run folders and the fencing folder are on the store. :func:`assert_nothing_of_the_pair_on_local_disk` checks
afterwards that neither side holds a file of the pair's state.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from akf_devtools.demo.story import LOCAL_SPARK_CONF

STATE_FILE_NAMES = ("settings.json", "status.json", "_owner.json", "stop-request", "switch-lease.json")
"""Files of the pair's state that must only exist on the store."""
STATE_FOLDER_NAMES = ("offsets", "commits", "progress", "sources")
LOCAL_RUN_FILES = {"job.log", "job.json", "store.properties", "submit.lock"}
"""What the Airflow side may keep of a run in its local root."""


def sides(root: Path) -> tuple[Path, Path]:
    """The Airflow side's and the driver's own folders under ``root`` (created)."""
    airflow_side, driver_side = root / "airflow-side", root / "driver-side"
    for folder in (airflow_side / "tmp", airflow_side / "home", driver_side / "tmp", driver_side / "scratch"):
        folder.mkdir(parents=True, exist_ok=True)
    return airflow_side, driver_side


def story_fields(
    root: Path, state_root: str, connections: dict[str, str], spark_conf: dict[str, str]
) -> dict[str, Any]:
    """The story's fields for a pair whose state is under ``state_root`` (see the module's docstring).

    :param connections: ``job.storage_connections``.
    :param spark_conf: the store's Spark settings that are no secret (timeouts, class path).
    """
    airflow_side, driver_side = sides(root)
    java = LOCAL_SPARK_CONF["spark.driver.extraJavaOptions"]
    conf = {
        **LOCAL_SPARK_CONF,
        **spark_conf,
        "spark.local.dir": str(driver_side / "scratch"),
        "spark.sql.warehouse.dir": str(driver_side / "warehouse"),
        # the JVM's temporary files in the driver's folder; no hsperfdata in /tmp
        "spark.driver.extraJavaOptions": f"{java} -XX:-UsePerfData -Djava.io.tmpdir={driver_side / 'tmp'}",
    }
    return {
        "state_root": state_root,
        "storage_connections": connections,
        "local_root": airflow_side / "local",
        "run_env": {"TMPDIR": str(airflow_side / "tmp"), "HOME": str(airflow_side / "home")},
        "run_cwd": airflow_side,
        "job_options": {"spark_conf": conf},
    }


def assert_nothing_of_the_pair_on_local_disk(root: Path) -> dict[str, int]:
    """Neither side holds a file of the pair's state; the Airflow side's local root holds only what the
    submitting host needs. Return the count of files per side."""
    airflow_side, driver_side = sides(root)
    found: dict[str, int] = {}
    for side in (airflow_side, driver_side):
        files = [Path(folder) / name for folder, _dirs, names in os.walk(side) for name in names]
        folders = [Path(folder) / name for folder, dirs, _names in os.walk(side) for name in dirs]
        state = [f for f in files if f.name in STATE_FILE_NAMES or f.name.startswith("epoch-")]
        state += [f for f in folders if f.name in STATE_FOLDER_NAMES]
        state += [f for f in files if f.suffix == ".parquet" and "scratch" not in f.parts]
        assert state == [], f"state of the pair on the local disk of {side.name}: {state[:20]}"
        found[side.name] = len(files)
    local = airflow_side / "local"
    run_files = {f.name for f in local.rglob("*") if f.is_file()} if local.exists() else set()
    assert run_files <= LOCAL_RUN_FILES, f"unexpected files in the local root: {run_files - LOCAL_RUN_FILES}"
    assert not (root / "sink").exists() and not (root / "checkpoints").exists()
    assert not (root / "runs").exists() and not (root / "fence").exists()
    return found

"""Read back what the example jobs of ``examples/jobs/`` wrote, in the shape of the packaged sink's reader.

The Delta table is read from its transaction log with pyarrow (the files its commits add and do not remove),
which is quick enough to poll; the tests read it once more with Spark at the end. The SQLite database is
read with sqlite3.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from airflow_kafka_failover.jobs.sink import SinkContents


def delta_files(table: Path) -> list[Path]:
    """The data files of the table's current version (JSON commits only: the tests' tables are young)."""
    log = table / "_delta_log"
    live: dict[str, None] = {}
    for commit in sorted(log.glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = None
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    from urllib.parse import unquote

    return [table / unquote(path) for path in live]


def read_delta_orders(table: Path, key: str = "order_id") -> SinkContents:
    """Rows of the example's Delta table, deduplicated by ``key``."""
    import pyarrow.parquet as pq

    contents = SinkContents()
    if not (table / "_delta_log").is_dir():
        return contents
    for file in delta_files(table):
        for row in pq.read_table(file, columns=[key, "source_cluster"]).to_pylist():
            _count(contents, row[key], row["source_cluster"])
    return contents


def read_sqlite_orders(sink_root: Path) -> SinkContents:
    """Rows of the SQLite example's ``orders`` table."""
    contents = SinkContents()
    database = sink_root / "orders.sqlite"
    if not database.is_file():
        return contents
    with sqlite3.connect(database, timeout=30) as db:
        for order_id, cluster in db.execute("SELECT order_id, source_cluster FROM orders"):
            _count(contents, order_id, cluster)
    return contents


def _count(contents: SinkContents, record_id: str | None, cluster: str) -> None:
    contents.rows += 1
    contents.rows_by_cluster[cluster] += 1
    if record_id is None:
        contents.without_id += 1
    elif record_id in contents.records:
        contents.duplicates += 1
    else:
        contents.records[record_id] = {"source_cluster": cluster}

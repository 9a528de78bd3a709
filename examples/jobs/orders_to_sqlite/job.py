"""Orders from Kafka upserted into a SQLite database by a foreachBatch function of your own.

Submitted by the failover DAGs with ``--settings <file>``: set ``job.application`` to this file; the database
is ``<job.sink_root>/orders.sqlite``. The upsert keeps the first row of an order id, so a batch Spark replays
after a crash, or records re-read after a switch, change nothing: exactly once in the table.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pyspark.sql import functions as F

from airflow_kafka_failover.jobs.api import FailoverStream

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    order_id TEXT PRIMARY KEY,
    customer TEXT,
    amount REAL,
    source_cluster TEXT,
    topic TEXT,
    partition INTEGER,
    "offset" INTEGER
)
"""


class SqliteUpsert:
    """Write one micro-batch into the ``orders`` table (on the driver: small batches only)."""

    def __init__(self, database: Path) -> None:
        database.parent.mkdir(parents=True, exist_ok=True)
        self.database = database
        with sqlite3.connect(database) as db:
            db.execute(SCHEMA)

    def __call__(self, batch, batch_id: int) -> None:
        rows = [tuple(row) for row in batch.collect()]
        with sqlite3.connect(self.database, timeout=30) as db:
            db.executemany(
                "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(order_id) DO NOTHING", rows
            )


if __name__ == "__main__":
    with FailoverStream.from_args() as stream:
        order = F.from_json(F.col("value").cast("string"), "id STRING, customer STRING, amount DOUBLE")
        orders = (
            stream.read_kafka()
            .select(order.alias("o"), "topic", "partition", "offset")
            .where(F.col("o.id").isNotNull())
            .select(
                F.col("o.id").alias("order_id"),
                F.col("o.customer").alias("customer"),
                F.col("o.amount").alias("amount"),
                F.lit(stream.cluster).alias("source_cluster"),
                "topic",
                "partition",
                "offset",
            )
        )
        stream.foreach_batch(orders, SqliteUpsert(Path(stream.sink_root) / "orders.sqlite"))

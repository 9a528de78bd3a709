"""Orders counted per 10-second window and customer into a Delta table, exact across failovers.

A stateful job: it drops records a switch delivers again (by order id, within a 10-minute watermark), then
counts orders and sums their amounts per event-time window and customer. Each batch's changed counts
(``update`` output mode) are upserted into the table on (window, customer). With the pair's ``job.state:
carry`` (the default), a switch carries both operators' state to the new run, so the table after any number
of failovers and failbacks holds what the same input gives with no switch.

Submitted by the failover DAGs with ``--settings <file>``: set ``job.application`` to this file and
``job.sink_root`` to the table's location. Needs ``delta-spark`` on the driver and Delta's jars in the job's
jars, as ``orders_to_delta`` does.
"""

from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from airflow_kafka_failover.jobs.api import FailoverStream

ORDER = StructType(
    [
        StructField("id", StringType()),
        StructField("ts", LongType()),
        StructField("customer", StringType()),
        StructField("amount", DoubleType()),
    ]
)
WINDOW = "10 seconds"
REDELIVERY_WATERMARK = "10 minutes"
"""Longer than an outage plus the re-delivery after it: an order id is forgotten once the watermark passes."""


def orders(kafka):
    """Parse: event time, customer and amount, keeping ``value`` for the record id."""
    order = F.from_json(F.col("value").cast("string"), ORDER)
    return kafka.select("value", order.alias("order")).select(
        "value",
        F.timestamp_millis(F.col("order.ts")).alias("ordered_at"),
        F.col("order.customer").alias("customer"),
        F.coalesce(F.col("order.amount"), F.lit(0.0)).alias("amount"),
    )


def counts(unique):
    """Orders and their total amount per window and customer."""
    return (
        unique.groupBy(F.window("ordered_at", WINDOW).alias("window"), "customer")
        .agg(F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("amount"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "customer",
            "orders",
            "amount",
        )
    )


if __name__ == "__main__":
    with FailoverStream.from_args(delta=True) as stream:
        unique = stream.drop_redelivered(
            orders(stream.read_kafka()), event_time="ordered_at", delay=REDELIVERY_WATERMARK
        )
        stream.write_delta(
            counts(unique),
            stream.sink_root,
            mode="upsert",
            merge_on=["window_start", "customer"],
            merge_window=("window_start", "1 day"),
            output_mode="update",
        )

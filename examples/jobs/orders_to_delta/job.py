"""Orders from Kafka into a Delta table, exactly once across failovers (a MERGE on the order id).

Submitted by the failover DAGs with ``--settings <file>``: set ``job.application`` to this file and
``job.sink_root`` to the table's location in the pair config. Needs ``delta-spark`` on the driver and Delta's
jars in the job's jars (``make test``'s setup, ``python -m akf_devtools.sandbox.jars --all``, resolves them;
the tests and the benchmarks put them in the provider's ``job_jars`` option).
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


def orders(kafka):
    """Parse, filter and enrich: one row per order that has an id."""
    order = F.from_json(F.col("value").cast("string"), ORDER)
    return (
        kafka.select(order.alias("order"), "topic", "partition", "offset")
        .where(F.col("order.id").isNotNull())
        .select(
            F.col("order.id").alias("order_id"),
            F.col("order.customer").alias("customer"),
            F.coalesce(F.col("order.amount"), F.lit(0.0)).alias("amount"),
            F.when(F.col("order.amount") >= 100, "large").otherwise("small").alias("size"),
            F.timestamp_millis(F.col("order.ts")).alias("ordered_at"),
            F.to_date(F.timestamp_millis(F.col("order.ts"))).alias("order_date"),
            "topic",
            "partition",
            "offset",
        )
    )


if __name__ == "__main__":
    with FailoverStream.from_args(delta=True) as stream:
        enriched = orders(stream.read_kafka()).withColumn("source_cluster", F.lit(stream.cluster))
        stream.write_delta(
            enriched,
            stream.sink_root,
            mode="merge",
            merge_on="order_id",
            partition_by=["order_date"],
            merge_window=("order_date", "2 days"),
        )

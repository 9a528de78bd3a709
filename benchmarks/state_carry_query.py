"""``bench_state.py``'s stateful query, run under spark-submit: Kafka -> ``dropDuplicatesWithinWatermark`` on
the record id -> a count per hour of event time (update mode, ``foreachBatch``).

Every record is ``{"id": <unique string>, "ts": <epoch ms>}``. The deduplication keeps each id until the
watermark (the newest ``ts`` less ``--delay``) passes it, so with a delay longer than the run every id stays
in the state: its size grows with the records read. The count per window is the second stateful operator
(a few keys), as in a job that aggregates what it deduplicated.

The query runs with ``Trigger.AvailableNow``: it reads what the topic holds when it starts, ``--max-offsets``
records a batch, and stops. Each batch's window counts go to ``<output>`` as JSON lines (the batch id, the
window start, the count so far); ``<output>.done`` gets the summary: batches, the last batch id, the records
read, and each batch's duration from Spark's progress.

    spark-submit ... state_carry_query.py --bootstrap HOST:PORT --topic T --checkpoint DIR --output FILE
        [--starting earliest|JSON] [--max-offsets N] [--delay "1 day"]
"""

from __future__ import annotations

import argparse
import json
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

RECORD = StructType([StructField("id", StringType()), StructField("ts", LongType())])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--starting", default="earliest")
    parser.add_argument("--max-offsets", type=int, default=100_000)
    parser.add_argument("--delay", default="1 day")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    spark = SparkSession.builder.appName("bench-state-carry").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting)
        .option("failOnDataLoss", "true")
        .option("maxOffsetsPerTrigger", args.max_offsets)
        .load()
        .select(F.from_json(F.col("value").cast("string"), RECORD).alias("r"))
        .select("r.id", F.timestamp_millis("r.ts").alias("t"))
    )
    counts = (
        records.withWatermark("t", args.delay)
        .dropDuplicatesWithinWatermark(["id"])
        .groupBy(F.window("t", "1 hour"))
        .agg(F.count("*").alias("n"))
    )

    def write(batch: DataFrame, batch_id: int) -> None:
        rows = batch.select(F.col("window.start").cast("string").alias("start"), "n").collect()
        with open(args.output, "a") as handle:
            for row in rows:
                handle.write(json.dumps({"batch": batch_id, "window": row.start, "count": row.n}) + "\n")

    started = time.monotonic()
    query = (
        counts.writeStream.outputMode("update")
        .foreachBatch(write)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    progress = [entry for entry in query.recentProgress if entry.get("batchId") is not None]
    summary = {
        "seconds": round(time.monotonic() - started, 1),
        "batches": len({entry["batchId"] for entry in progress}),
        "last_batch": max((entry["batchId"] for entry in progress), default=None),
        "records": sum(entry.get("numInputRows", 0) for entry in progress),
        "batch_seconds": {
            str(entry["batchId"]): round(entry["durationMs"].get("triggerExecution", 0) / 1000, 2)
            for entry in progress
        },
        "state_rows": [op.get("numRowsTotal") for op in (progress[-1].get("stateOperators") or [])]
        if progress
        else [],
    }
    spark.stop()
    with open(args.output + ".done", "w") as handle:
        handle.write(json.dumps(summary))


if __name__ == "__main__":
    main()

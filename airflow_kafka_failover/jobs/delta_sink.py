"""Delta Lake as the job's sink, idempotent per batch in three ways.

- ``append``: each micro-batch is one Delta transaction written with ``txnAppId`` = the run's application
  id (``akf-<pair>-<cluster>-epoch-<n>``) and ``txnVersion`` = the batch id. Delta skips a write whose
  (app id, version) it has already committed, so a batch Spark replays after a crash writes nothing. The app
  id carries the epoch because a switch starts a new checkpoint whose batch ids start again at 0, which Delta
  would otherwise take for versions it has seen.
- ``merge``: ``MERGE INTO table USING batch ON key WHEN NOT MATCHED THEN INSERT *`` (the batch first made
  unique on the key). A replayed batch and a record re-delivered after a switch find their key in the table
  and are not inserted: exactly once across switches without a dedup step afterwards. Its cost grows with the
  table unless ``merge_window`` limits the rows it looks at.
- ``upsert``: ``MERGE ... WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *``: each row is the
  newest value of its key, as a stateful query writes in ``update`` output mode (a window's count per key).
  A replayed batch writes the same values again; a batch that a switch re-delivers writes what the carried
  state computes, which the re-delivered records do not change when they are dropped as duplicates ahead of
  the aggregation (``FailoverStream.drop_redelivered``; docs/jobs.md, "Stateful jobs").

Needs the ``delta-spark`` package and Delta's jars on the driver and executors.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from airflow_kafka_failover.core.exceptions import ConfigError

log = logging.getLogger("airflow_kafka_failover.job")

MODES = ("append", "merge", "upsert")
_INTERVAL = re.compile(r"[0-9]+ (?:second|minute|hour|day|week|month|year)s?", re.IGNORECASE)


class DeltaSink:
    """A ``foreachBatch`` writer into one Delta table.

    :param spark: the SparkSession (configured for Delta).
    :param path: the table's location.
    :param mode: ``append`` or ``merge``.
    :param merge_on: key column(s) for ``merge``.
    :param partition_by: partition columns when the sink creates the table.
    :param merge_window: ``(column, interval)`` bounding the table rows a merge reads.
    :param app_id: Delta's transaction app id; unique per (pair, cluster, epoch).
    """

    def __init__(
        self,
        spark: Any,
        path: str,
        *,
        mode: str,
        merge_on: str | list[str] | None,
        partition_by: list[str] | None,
        merge_window: tuple[str, str] | None,
        app_id: str,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"Delta sink mode {mode!r} is not one of {', '.join(MODES)}")
        keys = [merge_on] if isinstance(merge_on, str) else list(merge_on or [])
        if mode in ("merge", "upsert") and not keys:
            raise ConfigError(f"Delta sink mode {mode!r} needs merge_on, the key column(s) of a row")
        if mode == "append" and (keys or merge_window):
            raise ConfigError(
                "merge_on and merge_window apply to modes 'merge' and 'upsert' only; mode is 'append'"
            )
        if merge_window is not None and (
            not isinstance(merge_window, tuple | list)
            or len(merge_window) != 2
            or not _INTERVAL.fullmatch(str(merge_window[1]))
        ):
            raise ConfigError(
                f"merge_window must be (column, interval) like ('order_date', '7 days'), got {merge_window!r}"
            )
        self.spark = spark
        self.path = path
        self.mode = mode
        self.keys = keys
        self.partition_by = list(partition_by or [])
        self.merge_window = tuple(merge_window) if merge_window else None
        self.app_id = app_id

    def check(self, df: Any) -> None:
        """Refuse, before anything is read, a path that is not a Delta table or columns the sink needs."""
        try:
            from delta.tables import DeltaTable
        except ImportError:
            raise ConfigError(
                "the Delta sink needs the delta-spark package on the driver (pip install delta-spark "
                "matching Spark's version) and Delta's jars in the job's jars"
            ) from None
        columns = set(df.columns)
        needed = {*self.keys, *self.partition_by, *([self.merge_window[0]] if self.merge_window else [])}
        missing = sorted(needed - columns)
        if missing:
            raise ConfigError(
                f"the Delta sink at {self.path} needs column(s) {', '.join(missing)} that the job's "
                f"DataFrame does not have (it has {', '.join(sorted(columns))})"
            )
        if DeltaTable.isDeltaTable(self.spark, self.path):
            table_columns = set(DeltaTable.forPath(self.spark, self.path).toDF().columns)
            absent = sorted(set(self.keys) - table_columns)
            if absent:
                raise ConfigError(
                    f"the Delta table at {self.path} has no column(s) {', '.join(absent)} to merge on"
                )
            log.info("writing to the Delta table %s (mode %s)", self.path, self.mode)
            return
        if _holds_files(self.spark, self.path):
            raise ConfigError(
                f"{self.path} is not a Delta table but is not empty either; point the sink at a Delta table "
                "or at a new location (the sink creates the table there)"
            )
        log.info("the Delta table %s does not exist yet; the first batch creates it", self.path)

    def write_batch(self, batch_df: Any, batch_id: int) -> None:
        """Write one micro-batch (called under the run's fence check)."""
        if self.mode == "append":
            self._append(batch_df, batch_id)
        else:
            self._merge(batch_df, batch_id)

    def _append(self, batch_df: Any, batch_id: int) -> None:
        writer = (
            batch_df.write.format("delta")
            .mode("append")
            .option("txnAppId", self.app_id)
            .option("txnVersion", batch_id)
        )
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        writer.save(self.path)

    def _merge(self, batch_df: Any, batch_id: int) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        batch = batch_df.dropDuplicates(self.keys)
        if not DeltaTable.isDeltaTable(self.spark, self.path):
            # The first batch creates the table; the same transaction ids as append mode keep it idempotent.
            self._append(batch, batch_id)
            return
        condition = F.expr(" AND ".join(f"t.`{key}` <=> s.`{key}`" for key in self.keys))
        if self.merge_window is not None:
            column, interval = self.merge_window
            oldest = batch.agg(F.min(F.col(column)).alias("oldest")).collect()[0]["oldest"]
            if oldest is not None:  # None: an empty batch, or no row has the column (then no bound)
                # A literal bound on the table's rows, so that Delta skips the files (and partitions) before
                # it. Rows without the column are outside every window: they are merged on the key alone.
                bound = F.col(f"t.`{column}`") >= F.lit(oldest) - F.expr(f"INTERVAL {interval}")
                condition = condition & (bound | F.col(f"s.`{column}`").isNull())
        values: dict[str, str | Any] = {str(name): f"s.`{name}`" for name in batch_df.columns}
        merge = DeltaTable.forPath(self.spark, self.path).alias("t").merge(batch.alias("s"), condition)
        if self.mode == "upsert":
            merge = merge.whenMatchedUpdate(set=values)
        merge.whenNotMatchedInsert(values=values).execute()


def _holds_files(spark: Any, path: str) -> bool:
    """Whether ``path`` exists and holds anything, through Spark's Hadoop file system (any scheme)."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(hadoop_path):
        return False
    return not fs.getFileStatus(hadoop_path).isDirectory() or len(fs.listStatus(hadoop_path)) > 0

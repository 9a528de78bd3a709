"""The record id column of the job's sink: from the Kafka key, or from a JSON field of the value.

From JSON, Spark's ``get_json_object`` is the reference: it builds a Jackson parser for every record, which
made it the largest part of the job's cost over a plain Kafka-to-Parquet query (about 1.2 s per million
small records on two cores, against about 3 s for everything else). The record-id jar (built by ``make
setup``, passed with ``--jars``; see ``jvm/record-id/src/akf/jobs/JsonStringField.java``) adds a strict
single-pass reader for the common case, a top-level string field; the column is then::

    coalesce(akf_json_string_field(value, '<field>'), get_json_object(value, '$.<field>'))

The reader answers only where it is certain to agree with ``get_json_object`` and leaves every other record
(no such field, a number, nested or not strictly valid JSON) to it, so the ids are the same with or
without the jar. Field names that are JSON paths of their own (dots, brackets, wildcards) always go to
``get_json_object``.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from airflow_kafka_failover.run_format.settings import RECORD_ID_FROM_KEY

log = logging.getLogger("airflow_kafka_failover.job")

FUNCTION = "akf_json_string_field"
"""The name the job registers the reader under (a Spark SQL function of this session)."""
UDF_CLASS = "akf.jobs.JsonStringField"
"""The Java class in the record-id jar."""
TOP_LEVEL_FIELD = re.compile(r"[A-Za-z0-9_\-]+")


def register_reader(spark: Any, field: str) -> bool:
    """Register the record-id jar's reader when it applies to ``field``; say in the log which path is used.

    :returns: whether the reader is registered (the jar is on the classpath and ``field`` is a plain
        top-level name).
    """
    if field == RECORD_ID_FROM_KEY:
        log.info("record ids are the Kafka keys (record_id_field %r)", field)
        return False
    if not TOP_LEVEL_FIELD.fullmatch(field):
        log.info(
            "record ids from the JSON path $.%s with get_json_object (the fast reader handles plain "
            "top-level field names only)",
            field,
        )
        return False
    from pyspark.sql.types import StringType

    try:
        spark.udf.registerJavaFunction(FUNCTION, UDF_CLASS, StringType())
    except Exception as exc:  # py4j and Spark raise several kinds for a class that is not there
        log.warning(
            "record ids from the JSON field %r with get_json_object only: the record-id jar is not on "
            "the classpath (%s: %s); add .jars/record-id/akf-record-id.jar to the job's jars (without it "
            "each record takes about a quarter more time)",
            field,
            type(exc).__name__,
            str(exc).splitlines()[0][:200],
        )
        return False
    log.info(
        "record ids from the JSON field %r with the record-id jar's reader (get_json_object for the "
        "records it leaves)",
        field,
    )
    return True


def record_id_column(field: str, reader: bool) -> Any:
    """The record id column for ``field``; ``reader``: use the registered reader first."""
    from pyspark.sql import functions as F

    if field == RECORD_ID_FROM_KEY:
        return F.col("key").cast("string")
    value = F.col("value").cast("string")
    by_spark = F.get_json_object(value, "$." + field)
    if not reader:
        return by_spark
    return F.coalesce(F.call_function(FUNCTION, value, F.lit(field)), by_spark)

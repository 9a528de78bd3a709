"""Java classes of the driver's JVM, looked up by their full names once.

Py4J resolves ``spark._jvm.org.apache.kafka.common.TopicPartition`` one name at a time, and asks the JVM
for ``org``, ``org.apache``, ``org.apache.kafka`` ... as classes first: each miss is a
``ClassNotFoundException`` after a search of Spark's whole class path. The job's listener builds a few such
objects for every batch (the group commit's partitions and offsets), and on 2026-12-01 those misses were 14%
of an otherwise idle driver's CPU at one batch a second (async-profiler on a test driver, 20 records/s). A
:class:`JavaClasses` names each class in full, which the JVM finds in one lookup, and keeps it.
"""

from __future__ import annotations

import threading
from typing import Any


class JavaClasses:
    """The Java classes of one SparkSession's JVM, by full name: ``java("java.util.HashMap")()``.

    :param spark: the SparkSession whose JVM (Py4J gateway) the classes are of (first used on the first
        lookup).
    """

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._found: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, name: str) -> Any:
        """The class ``name`` (a Py4J ``JavaClass``: call it to construct, read its static members)."""
        found = self._found.get(name)
        if found is None:
            from py4j.java_gateway import JavaClass

            with self._lock:
                client = self._spark.sparkContext._gateway._gateway_client
                found = self._found.setdefault(name, JavaClass(name, client))
        return found

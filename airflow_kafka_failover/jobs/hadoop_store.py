"""The store operations on the Spark driver, through Spark's own Hadoop ``FileSystem`` (Py4J).

The driver reaches a remote location the way Spark itself does, with the same connectors (``hdfs://`` in
Spark's Hadoop client, ``s3a://`` from ``hadoop-aws``) and the same Hadoop configuration (``spark.hadoop.*``:
endpoint, credentials, timeouts), so a location the job's checkpoint can use, its status and progress entries
can use too.

- ``read``: ``FileSystem.open``, the whole object; ``read_tail``, its last bytes only (a Parquet footer).
- ``replace``: on an object store (``s3a``, ``gs``) one upload (``create`` with overwrite), which appears
  whole when it completes; on a file system (``hdfs``, ``abfs``) a temporary file in the same folder renamed
  over the target with ``FileContext.rename(..., OVERWRITE)``, one atomic rename on the NameNode.
- ``create`` (create-only): on a file system the same rename without ``OVERWRITE``, refused when the name
  exists. The driver never needs it on an object store (the fence and the record are created by the Airflow
  tasks), and Hadoop 3.4.1's S3A cannot do it atomically, so it is refused there.

A missing object (``read`` asks ``isFile`` first) or a ``java.io.FileNotFoundException`` is
:class:`FileNotFoundError`; any other Java error is
:class:`~airflow_kafka_failover.core.storage.store.StoreUnavailable` with the exception's class and message.
"""

from __future__ import annotations

import uuid
from typing import Any

from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import StoreUnavailable, register
from airflow_kafka_failover.jobs.java_classes import JavaClasses

_NOT_FOUND = ("java.io.FileNotFoundException",)
_EXISTS = ("org.apache.hadoop.fs.FileAlreadyExistsException",)


class HadoopStore:
    """One store (``scheme://authority``) through the SparkSession's Hadoop configuration.

    :param spark: the run's SparkSession.
    :param root: the store's ``scheme://authority``.
    """

    def __init__(self, spark: Any, root: str) -> None:
        self.root = root
        self.java = JavaClasses(spark)  # the fence check reads through it before every batch
        self.gateway = spark.sparkContext._gateway
        self.conf = spark.sparkContext._jsc.hadoopConfiguration()
        self.object_store = locations.scheme(root) in locations.OBJECT_STORE_SCHEMES
        self.fs = self._call(
            root,
            lambda: self.java("org.apache.hadoop.fs.FileSystem").get(
                self.java("java.net.URI")(root), self.conf
            ),
        )

    def _path(self, location: str) -> Any:
        return self.java("org.apache.hadoop.fs.Path")(location)

    def _call(self, location: str, action: Any) -> Any:
        from py4j.protocol import Py4JJavaError

        try:
            return action()
        except Py4JJavaError as exc:
            java = exc.java_exception
            name = str(java.getClass().getName())
            message = str(java.getMessage() or "").splitlines()[0] if java.getMessage() else ""
            if name in _NOT_FOUND:
                raise FileNotFoundError(location) from None
            if name in _EXISTS:
                raise FileExistsError(location) from None
            raise StoreUnavailable(location, f"{name}: {message}" if message else name) from None

    def read(self, location: str) -> bytes:
        def read_all() -> bytes:
            path = self._path(location)
            # Asked first rather than caught: a missing object is the usual answer of the fence check (the
            # next epoch's marker), which runs before every batch and between them, and Java's
            # FileNotFoundException costs far more across Py4J than the question (pyspark's error handler
            # classifies every Java exception with a dozen class lookups, each a search of Spark's class
            # path: 180 ms and 50 ms of the JVM's CPU per miss, against 8 to 12 ms with the question, the test
            # suite running beside it; docs/concepts.md, "What the job's own work costs"). S3A answers
            # isFile with one HEAD request, as open() would.
            if not self.fs.isFile(path):
                raise FileNotFoundError(location)
            stream = self.fs.open(path)
            try:
                return bytes(self.java("org.apache.commons.io.IOUtils").toByteArray(stream))
            finally:
                stream.close()

        data: bytes = self._call(location, read_all)
        return data

    def read_tail(self, location: str, size: int) -> bytes:
        """The last ``size`` bytes of the object (all of it when it is smaller): one ranged read."""

        def read_end() -> bytes:
            length = int(self.fs.getFileStatus(self._path(location)).getLen())
            stream = self.fs.open(self._path(location))
            try:
                stream.seek(max(0, length - size))
                return bytes(
                    self.java("org.apache.commons.io.IOUtils").toByteArray(stream, min(size, length))
                )
            finally:
                stream.close()

        data: bytes = self._call(location, read_end)
        return data

    def replace(self, location: str, data: bytes, private: bool = False) -> None:
        if self.object_store:
            self._call(location, lambda: self._write(self._path(location), data, overwrite=True))
            return
        self._write_then_rename(location, data, "OVERWRITE", private)

    def create(self, location: str, data: bytes) -> bool:
        if self.object_store:
            raise StoreUnavailable(
                location,
                "create-only is not offered on the driver for an object store (Hadoop 3.4.1's S3A cannot do "
                "it atomically); the Airflow tasks create the fence and the record",
            )
        try:
            self._write_then_rename(location, data, "NONE", False)
        except FileExistsError:
            return False
        return True

    def exists(self, location: str) -> bool:
        return bool(self._call(location, lambda: self.fs.exists(self._path(location))))

    def names(self, folder: str) -> list[str]:
        try:
            statuses = self._call(folder, lambda: self.fs.listStatus(self._path(folder)))
        except FileNotFoundError:
            return []
        return sorted(str(status.getPath().getName()) for status in statuses)

    def files(self, folder: str) -> list[str]:
        base = self._path(folder)

        def walk() -> list[str]:
            prefix = str(self.fs.makeQualified(base).toUri().getPath()).rstrip("/") + "/"
            listing = self.fs.listFiles(base, True)
            found = []
            while listing.hasNext():
                path = str(listing.next().getPath().toUri().getPath())
                if path.startswith(prefix):
                    found.append(path[len(prefix) :])
            return sorted(found)

        try:
            listed: list[str] = self._call(folder, walk)
        except FileNotFoundError:
            return []
        return listed

    def delete(self, location: str) -> None:
        self._call(location, lambda: self.fs.delete(self._path(location), False))

    def _write(self, path: Any, data: bytes, overwrite: bool) -> None:
        stream = self.fs.create(path, overwrite)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def _write_then_rename(self, location: str, data: bytes, option: str, private: bool) -> None:
        target = self._path(location)
        temporary = self._path(
            locations.join(
                locations.parent(location), f".{locations.name(location)}.{uuid.uuid4().hex[:12]}.tmp"
            )
        )
        java = self.java

        def write_and_rename() -> None:
            self._write(temporary, data, overwrite=False)
            if private:
                self.fs.setPermission(temporary, java("org.apache.hadoop.fs.permission.FsPermission")("600"))
            context = java("org.apache.hadoop.fs.FileContext").getFileContext(
                java("java.net.URI")(self.root), self.conf
            )
            rename = java("org.apache.hadoop.fs.Options$Rename")
            options = self.gateway.new_array(rename, 1)
            options[0] = getattr(rename, option)
            context.rename(temporary, target, options)

        try:
            self._call(location, write_and_rename)
        except BaseException:
            try:
                self.fs.delete(temporary, False)
            except Exception:  # the store is failing already
                pass
            raise


def use_hadoop_stores(spark: Any) -> None:
    """Register the driver's stores: every remote scheme is opened through Spark's Hadoop ``FileSystem``."""
    for scheme in locations.REMOTE_SCHEMES:
        register(f"{scheme}://", lambda root: HadoopStore(spark, root))

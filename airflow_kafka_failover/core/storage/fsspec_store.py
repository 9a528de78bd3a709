"""The store operations over an fsspec file system: the Airflow side of remote locations.

Two kinds of store, told apart by how an object is replaced and created only once:

- an **object store** (S3 through s3fs): an upload appears whole when it completes, so ``replace`` is one
  upload and ``create`` an upload with ``If-None-Match: *`` (s3fs's ``mode="create"``), which the store grants
  to one writer and refuses to the others with ``412 Precondition Failed``;
- **HDFS through WebHDFS** (fsspec's ``WebHDFS``): a file being written is visible while it grows, so both
  write a temporary file in the same folder and rename it: ``replace`` with ``renameoptions=OVERWRITE`` (one
  atomic rename on the NameNode), ``create`` with ``renameoptions=NONE``, which the NameNode refuses when the
  name exists. fsspec's WebHDFS does not offer either rename option, so :class:`WebHdfsStore` adds them with
  the file system's own request method.

Errors: a missing object is :class:`FileNotFoundError`; anything else is :class:`StoreUnavailable` naming the
location. fsspec is imported by the callers that build the file systems (``hooks/storage``); this module only
uses the instances it is given. No Airflow import.
"""

from __future__ import annotations

import posixpath
import uuid
from typing import Any

from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import StoreUnavailable

_PROBLEM_CHARS = 300


def describe_problem(exc: BaseException) -> str:
    """An exception as ``Type: text`` (an empty text never hides the type), cut to a readable length."""
    text = str(exc).strip()
    found = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return found if len(found) <= _PROBLEM_CHARS else found[: _PROBLEM_CHARS - 3] + "..."


class FsspecStore:
    """An object store (S3) behind an fsspec file system.

    :param fs: the file system (an s3fs ``S3FileSystem`` built from the Airflow connection).
    :param root: the ``scheme://authority`` it serves (``s3a://bucket``).
    """

    def __init__(self, fs: Any, root: str) -> None:
        self.fs = fs
        self.root = root

    def fs_path(self, location: str) -> str:
        """The file system's path of ``location``: ``bucket/key`` for S3."""
        authority = self.root.split("://", 1)[1]
        return authority + locations.path_in_store(location)

    def _unavailable(self, location: str, exc: BaseException) -> StoreUnavailable:
        return StoreUnavailable(location, describe_problem(exc))

    def read(self, location: str) -> bytes:
        try:
            data: bytes = self.fs.cat_file(self.fs_path(location))
            return data
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise self._unavailable(location, exc) from None

    def replace(self, location: str, data: bytes, private: bool = False) -> None:
        try:
            self.fs.pipe_file(self.fs_path(location), data)
        except Exception as exc:
            raise self._unavailable(location, exc) from None
        self._invalidate(location)

    def create(self, location: str, data: bytes) -> bool:
        try:
            self.fs.pipe_file(self.fs_path(location), data, mode="create")
        except FileExistsError:
            return False
        except Exception as exc:
            raise self._unavailable(location, exc) from None
        self._invalidate(location)
        return True

    def exists(self, location: str) -> bool:
        try:
            self._invalidate(location)
            return bool(self.fs.exists(self.fs_path(location)))
        except Exception as exc:
            raise self._unavailable(location, exc) from None

    def names(self, folder: str) -> list[str]:
        path = self.fs_path(folder).rstrip("/")
        try:
            entries = self.fs.ls(path, detail=False, refresh=True)
        except FileNotFoundError:
            return []
        except Exception as exc:
            raise self._unavailable(folder, exc) from None
        return sorted(
            posixpath.basename(str(entry).rstrip("/")) for entry in entries if str(entry).rstrip("/") != path
        )

    def files(self, folder: str) -> list[str]:
        path = self.fs_path(folder).rstrip("/")
        try:
            self._invalidate(locations.join(folder, "x"))
            found = self.fs.find(path, withdirs=False)
        except FileNotFoundError:
            return []
        except Exception as exc:
            raise self._unavailable(folder, exc) from None
        prefix = path + "/"
        return sorted(str(entry)[len(prefix) :] for entry in found if str(entry).startswith(prefix))

    def delete(self, location: str) -> None:
        try:
            self.fs.rm_file(self.fs_path(location))
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise self._unavailable(location, exc) from None
        self._invalidate(location)

    def _invalidate(self, location: str) -> None:
        # s3fs caches listings: a listing or an existence check must see what another process wrote
        invalidate = getattr(self.fs, "invalidate_cache", None)
        if invalidate is not None:
            invalidate(posixpath.dirname(self.fs_path(location)))


class WebHdfsStore(FsspecStore):
    """HDFS through fsspec's ``WebHDFS``: temporary file, then a rename the NameNode does atomically.

    :param fs: a ``fsspec.implementations.webhdfs.WebHDFS``.
    :param root: the ``hdfs://namenode:port`` it serves (the RPC address the driver uses).
    """

    def fs_path(self, location: str) -> str:
        return locations.path_in_store(location)

    def replace(self, location: str, data: bytes, private: bool = False) -> None:
        self._write_then_rename(location, data, "OVERWRITE", private)

    def create(self, location: str, data: bytes) -> bool:
        return self._write_then_rename(location, data, "NONE", False)

    def exists(self, location: str) -> bool:
        try:
            return bool(self.fs.exists(self.fs_path(location)))
        except Exception as exc:
            raise self._unavailable(location, exc) from None

    def _write_then_rename(self, location: str, data: bytes, option: str, private: bool) -> bool:
        target = self.fs_path(location)
        folder = posixpath.dirname(target)
        temporary = posixpath.join(folder, f".{posixpath.basename(target)}.{uuid.uuid4().hex[:12]}.tmp")
        try:
            self.fs.makedirs(folder, exist_ok=True)
            with self.fs.open(temporary, "wb") as handle:
                handle.write(data)
            if private:  # before the rename: the name never shows the secret to others
                self.fs.chmod(temporary, "600")
            # fsspec's WebHDFS has no rename options; its own request method sends them (op=RENAME)
            answer = self.fs._call(
                "RENAME", method="put", path=temporary, destination=target, renameoptions=option
            )
            answer.raise_for_status()
            return True
        except Exception as exc:
            self._discard(temporary)
            if option == "NONE" and self._exists_quietly(target):
                return False  # the NameNode refused the rename: the name exists (another writer won)
            raise self._unavailable(location, exc) from None

    def _exists_quietly(self, path: str) -> bool:
        try:
            return bool(self.fs.exists(path))
        except Exception:
            return False

    def _discard(self, temporary: str) -> None:
        try:
            self.fs.rm(temporary)
        except Exception:  # the store is failing already; a left temporary is named .<name>.<id>.tmp
            pass

"""The operations the provider needs from a store, the local store, and the registry that finds a store.

Every file the provider and its job share (fence, record log, lease, settings, status, stop request, progress
records, the checkpoint's owner file) is written and read through a :class:`Store`:

- ``read``: the whole object; :class:`FileNotFoundError` when absent.
- ``replace``: a reader sees the old content or the new, never part of one (a rename within one folder on
  file systems, one upload on object stores).
- ``create``: create-only: succeeds for exactly one of any number of concurrent writers and says whether this
  one won (``O_EXCL``-like ``link`` locally, a rename without overwrite on HDFS, ``If-None-Match: *`` on S3).
  The fence and the record's compare-and-set are built on it, with no lock anywhere.
- ``exists``, ``names`` (a folder's entries; ``[]`` for a missing folder), ``files`` (every file below a
  folder, as paths relative to it; ``[]`` for a missing folder), ``delete`` (missing is fine).

Any failure other than "not found" raises :class:`StoreUnavailable` naming the location, so a store that
cannot be reached is an error with its URI, never mistaken for an absent file.

The registry maps a location to its store: local paths always get :data:`LOCAL`; a remote location gets the
store registered for its ``scheme://authority`` (the Airflow side registers fsspec stores built from its
connections, the driver a store over Spark's Hadoop ``FileSystem``). A remote location with nothing registered
is a :class:`~airflow_kafka_failover.core.exceptions.ConfigError` saying so.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from airflow_kafka_failover.core.atomic_file import (
    OWNER_ONLY,
    READABLE_BY_ALL,
    remove_stale_temporaries,
    write_atomically,
)
from airflow_kafka_failover.core.exceptions import ConfigError, FailoverError
from airflow_kafka_failover.core.storage import locations


class StoreUnavailable(FailoverError, OSError):
    """A store could not be read or written (unreachable, refused, timed out): names the location."""

    def __init__(self, location: str, problem: str) -> None:
        super().__init__(
            f"{location}: the store cannot be used ({problem}); check that it is up and reachable from this "
            "host and that the credentials of its connection are valid"
        )
        self.location = location
        self.problem = problem


class Store(Protocol):
    """One store's operations, on locations (local paths or URIs) it owns."""

    def read(self, location: str) -> bytes:
        """The object's bytes. :raises FileNotFoundError: absent. :raises StoreUnavailable: otherwise."""
        ...

    def replace(self, location: str, data: bytes, private: bool = False) -> None:
        """Write ``data`` so that a reader sees the old object or the new one, never part of one.

        :param private: the object holds a secret (owner-only where the store has permissions).
        """
        ...

    def create(self, location: str, data: bytes) -> bool:
        """Create the object only if absent; True when this call created it, False when it existed."""
        ...

    def exists(self, location: str) -> bool: ...

    def names(self, folder: str) -> list[str]:
        """The names of a folder's entries; [] when the folder does not exist."""
        ...

    def files(self, folder: str) -> list[str]:
        """Every file below ``folder`` (at any depth), as sorted ``/``-separated paths relative to it; [] when
        the folder does not exist."""
        ...

    def delete(self, location: str) -> None:
        """Remove an object; an absent one is fine."""
        ...


class LocalStore:
    """The local file system (or a mounted one): atomic renames, ``link`` for create-only, ``fsync``."""

    def read(self, location: str) -> bytes:
        try:
            return Path(location).read_bytes()
        except FileNotFoundError:
            raise
        except IsADirectoryError:
            raise StoreUnavailable(location, "a folder, not a file") from None
        except OSError as exc:
            raise StoreUnavailable(location, exc.strerror or str(exc)) from None

    def replace(self, location: str, data: bytes, private: bool = False) -> None:
        try:
            write_atomically(location, data, OWNER_ONLY if private else READABLE_BY_ALL)
        except OSError as exc:
            raise StoreUnavailable(location, exc.strerror or str(exc)) from None

    def create(self, location: str, data: bytes) -> bool:
        """Write a temporary file, then ``link`` it to the name: the link fails if the name exists, so the
        object appears whole and only for one writer."""
        path = Path(location)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(path)
            descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(descriptor, "wb") as handle:
                    os.fchmod(handle.fileno(), READABLE_BY_ALL)
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                try:
                    os.link(temporary, path)
                except FileExistsError:
                    return False
            finally:
                Path(temporary).unlink(missing_ok=True)
            _fsync_folder(path.parent)
            return True
        except OSError as exc:
            raise StoreUnavailable(location, exc.strerror or str(exc)) from None

    def exists(self, location: str) -> bool:
        return Path(location).exists()

    def names(self, folder: str) -> list[str]:
        try:
            return sorted(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise StoreUnavailable(folder, exc.strerror or str(exc)) from None

    def files(self, folder: str) -> list[str]:
        found: list[str] = []

        def failed(exc: OSError) -> None:
            if not isinstance(exc, (FileNotFoundError, NotADirectoryError)):
                raise StoreUnavailable(folder, exc.strerror or str(exc))

        for top, _folders, names in os.walk(folder, onerror=failed):
            relative = os.path.relpath(top, folder)
            found.extend(name if relative == "." else f"{relative}/{name}" for name in names)
        return sorted(found)

    def delete(self, location: str) -> None:
        try:
            Path(location).unlink(missing_ok=True)
        except OSError as exc:
            raise StoreUnavailable(location, exc.strerror or str(exc)) from None


def _fsync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    except OSError as exc:  # some network mounts cannot flush a folder; the link itself is done
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(descriptor)


LOCAL = LocalStore()
"""The one local store."""

StoreFactory = Callable[[str], Store]
"""Builds the store of a ``scheme://authority`` (called once per store, on first use)."""

_factories: dict[str, StoreFactory] = {}
_opened: dict[str, Store] = {}
_lock = threading.Lock()


def register(root: str, factory: StoreFactory) -> None:
    """Register how to open the store of ``root`` (``scheme://authority``, or ``scheme://`` for every store
    of that scheme); a later registration of the same root replaces the earlier one."""
    with _lock:
        _factories[root] = factory
        _opened.pop(root, None)


def registered(root: str) -> bool:
    """Whether a factory is registered for ``root`` exactly."""
    return root in _factories


def forget_all() -> None:
    """Drop every registration and opened store (tests; a process that changes its connections)."""
    with _lock:
        _factories.clear()
        _opened.clear()


def open_store(location: str) -> Store:
    """The store of ``location``: :data:`LOCAL` for a local path, else the registered remote store.

    :raises ConfigError: no store is registered for the location's scheme and authority.
    """
    root = locations.store_root(location)
    if not root:
        return LOCAL
    with _lock:
        if root in _opened:
            return _opened[root]
        scheme_wide = root.split("://", 1)[0] + "://"
        factory = _factories.get(root) or _factories.get(scheme_wide)
        if factory is None:
            raise ConfigError(
                f"no store is set up for {location} in this process ({root}): the pair's remote locations "
                "are registered when its config is loaded (Airflow) or when the job starts (Spark driver); "
                "check that the location is one of the pair's job paths"
            )
        store = factory(root)
        _opened[root] = store
        return store


def read_text(location: str) -> str:
    """The object at ``location`` as UTF-8 text (:raises FileNotFoundError: absent)."""
    return open_store(location).read(location).decode("utf-8")


def read_json(location: str) -> Any:
    """The object at ``location`` parsed as JSON (:raises FileNotFoundError: absent; ValueError: not JSON)."""
    return json.loads(read_text(location))


def replace_json(location: str, data: Any, private: bool = False, indent: int | None = None) -> None:
    """Replace the object at ``location`` with ``data`` as JSON (serialised before the store is touched)."""
    text = json.dumps(data, indent=indent, sort_keys=True)
    open_store(location).replace(location, text.encode("utf-8"), private)


def create_json(location: str, data: Any) -> bool:
    """Create the object at ``location`` with ``data`` as JSON only if absent; True when this call made it."""
    text = json.dumps(data, sort_keys=True)
    return open_store(location).create(location, text.encode("utf-8"))

"""Replacing a file atomically: a reader sees the old file or the new one, never half of one.

The one writer of every file the provider and its job share (fencing marker, job settings, status, the
checkpoint's owner file) and of the sandbox's owner-only files. The content goes to a temporary file in
the target's folder (a rename is atomic only within one file system), is flushed to disk, renamed over
the target, and the folder is flushed too so that the rename survives a power loss. A writer that crashed
between creating its temporary file and renaming it leaves a ``.<name>.*.tmp`` file behind; the next
write to the same target removes those older than :data:`STALE_TEMPORARY_SECONDS`.

A leaf module: it imports nothing of the project, so the job on the Spark driver can use it.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

#: Readable and writable by the owner only: for files that may hold a secret.
OWNER_ONLY = 0o600
#: Readable by everyone: for files a process running as another user must read (a cluster's driver).
READABLE_BY_ALL = 0o644
#: A temporary file this old was left by a writer that crashed: no write of these small files takes
#: anywhere near this long, so removing it cannot race a live writer.
STALE_TEMPORARY_SECONDS = 300.0


def write_atomically(path: str | os.PathLike[str], content: str | bytes, mode: int = READABLE_BY_ALL) -> Path:
    """Replace ``path`` with ``content``, creating its folder when missing.

    The temporary file is created with ``mode`` before any byte is written, so a secret never sits in a
    file with a wider mode, whatever the umask.

    :param path: the file to replace.
    :param content: the new content; text is written as UTF-8.
    :param mode: the new file's permission bits (:data:`OWNER_ONLY` for secrets).
    :return: ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    descriptor, temporary = tempfile.mkstemp(prefix=_temporary_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)
    return path


def write_json_atomically(
    path: str | os.PathLike[str],
    data: Any,
    mode: int = READABLE_BY_ALL,
    indent: int | None = None,
    sort_keys: bool = True,
) -> Path:
    """Replace ``path`` with ``data`` as JSON; see :func:`write_atomically`.

    :param path: the file to replace.
    :param data: a JSON-serialisable value; serialised before the file is touched, so an unserialisable
        value leaves the old file as it was.
    :param mode: the new file's permission bits.
    :param indent: indentation for a file people read (None: one line).
    :param sort_keys: sort the keys of every object (False where their order means something).
    :return: ``path`` as a :class:`~pathlib.Path`.
    """
    return write_atomically(path, json.dumps(data, indent=indent, sort_keys=sort_keys), mode)


def remove_stale_temporaries(
    path: str | os.PathLike[str], older_than: float = STALE_TEMPORARY_SECONDS
) -> int:
    """Remove the temporary files that crashed writers of ``path`` left in its folder.

    :param path: the target file whose temporaries to look for.
    :param older_than: the age in seconds (by modification time) from which a temporary is stale.
    :return: how many were removed.
    """
    path = Path(path)
    cutoff = time.time() - older_than
    removed = 0
    for candidate in path.parent.glob(f"{glob.escape(_temporary_prefix(path))}*.tmp"):
        try:
            if candidate.stat().st_mtime < cutoff:
                candidate.unlink()
                removed += 1
        except FileNotFoundError:
            continue  # another writer removed it first
    return removed


def _temporary_prefix(path: Path) -> str:
    # Hidden, and never a valid name of the target itself (the glob of the stale sweep relies on that).
    return f".{path.name}."


def _fsync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    except OSError as exc:
        # Some file systems (a few network mounts) cannot flush a folder; the rename itself is done.
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(descriptor)

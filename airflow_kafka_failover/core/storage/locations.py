"""Storage locations: local paths, or URIs of the Hadoop-compatible stores the provider supports.

A location is a string: a local path (``/data/ckpt``) or a URI ``scheme://authority/path`` that names a store
(an HDFS NameNode, an S3 bucket). Both sides read the same string: the Airflow tasks through fsspec, the Spark
driver through Hadoop's ``FileSystem``. So only schemes both understand are accepted:

- tested here: ``hdfs://namenode:port/...`` and ``s3a://bucket/...``;
- passed through to the same code, untested: ``gs://bucket/...``, ``abfs://`` and ``abfss://container@account...``
  (each needs its Hadoop connector on the driver and its Airflow provider's file system on the workers).

``file:///x`` is the local path ``/x``. ``s3://`` and ``s3n://`` are refused with a hint: Hadoop's S3
connector is ``s3a://``. Pure module: no Airflow, no pyspark.
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import urlsplit

TESTED_SCHEMES = ("hdfs", "s3a")
"""Schemes the test suite runs the whole pair on (against a real HDFS and an S3-compatible server)."""
UNTESTED_SCHEMES = ("gs", "abfs", "abfss")
"""Schemes handled by the same code without a test here: documented as untested."""
REMOTE_SCHEMES = TESTED_SCHEMES + UNTESTED_SCHEMES
OBJECT_STORE_SCHEMES = ("s3a", "gs")
"""Stores where a written object appears whole when its upload completes (no rename needed to replace one)."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_BY_URI = (
    "name a store by its file system URI (hdfs://namenode:port/..., s3a://bucket/...), not its web address"
)
_HINTS = {
    "s3": "Hadoop's S3 connector is s3a://: write s3a://{rest}",
    "s3n": "Hadoop's S3 connector is s3a://: write s3a://{rest}",
    "http": _BY_URI,
    "https": _BY_URI,
    "webhdfs": "name HDFS by its file system URI, hdfs://namenode:rpc-port/...; the Airflow side reaches it "
    "through WebHDFS by itself (connection of type webhdfs)",
}


def scheme(location: str) -> str | None:
    """The URI scheme of ``location`` in lower case, None for a local path (``file://`` included)."""
    match = _SCHEME.match(location.strip())
    if match is None:
        return None
    found = match.group(1).lower()
    return None if found == "file" else found


def is_remote(location: str) -> bool:
    """Whether ``location`` names a remote store rather than a local path."""
    return scheme(location) is not None


def check_location(text: str) -> str:
    """Validate a configured location and return it normalised (``file://`` stripped, no trailing slash).

    :param text: a local path or a store URI.
    :raises ValueError: the scheme is not supported, or the URI names no store (message for the config error).
    """
    text = text.strip()
    match = _SCHEME.match(text)
    if match is None:
        return text
    found = match.group(1).lower()
    rest = text[match.end() :]
    if found == "file":
        path = urlsplit(text).path
        if not path.startswith("/"):
            raise ValueError(f"{text!r}: a file:// URI needs an absolute path (file:///data/...)")
        return path
    if found not in REMOTE_SCHEMES:
        hint = _HINTS.get(found, "").format(rest=rest)
        raise ValueError(
            f"{text!r} uses the unsupported scheme {found}://; "
            + (f"{hint}; " if hint else "")
            + f"supported: a local path, {', '.join(s + '://' for s in TESTED_SCHEMES)} (tested), "
            f"{', '.join(s + '://' for s in UNTESTED_SCHEMES)} (untested)"
        )
    parts = urlsplit(text)
    if not parts.netloc:
        what = "bucket" if found in OBJECT_STORE_SCHEMES else "host"
        raise ValueError(f"{text!r} names no {what}: write {found}://<{what}>/<path>")
    if parts.query or parts.fragment:
        raise ValueError(
            f"{text!r} has a query or fragment: a storage location has no query (?) or fragment (#) part"
        )
    if "@" in parts.netloc and found in ("s3a", "gs"):
        raise ValueError(
            f"{text!r} carries credentials or a user in its authority; give the bucket alone "
            "(credentials come from the Airflow connection of job.storage_connections)"
        )
    return f"{found}://{parts.netloc}{parts.path.rstrip('/')}"


def store_root(location: str) -> str:
    """``scheme://authority`` of a remote location (the store it names), or ``""`` for a local path."""
    found = scheme(location)
    if found is None:
        return ""
    return f"{found}://{urlsplit(location.strip()).netloc}"


def path_in_store(location: str) -> str:
    """The path of a remote location within its store (``/ckpt/x`` of ``s3a://bucket/ckpt/x``)."""
    return urlsplit(location.strip()).path or "/"


def join(base: str, *names: str) -> str:
    """``base`` with ``names`` appended, one folder level each, keeping its scheme and store."""
    if not names:
        return base
    if scheme(base) is None:
        return posixpath.join(base, *names)
    return base.rstrip("/") + "/" + "/".join(name.strip("/") for name in names)


def parent(location: str) -> str:
    """The folder holding ``location`` (its store's root for a top-level object)."""
    if scheme(location) is None:
        return posixpath.dirname(location.rstrip("/")) or "/"
    root = store_root(location)
    return root + (posixpath.dirname(path_in_store(location).rstrip("/")) or "/").rstrip("/")


def name(location: str) -> str:
    """The last part of ``location``."""
    return posixpath.basename(location.rstrip("/"))

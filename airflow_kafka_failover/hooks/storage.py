"""Remote stores on the Airflow side, built from Airflow connections; the same stores' settings for the
driver.

A pair whose job paths are store URIs gets, for each store (``scheme://authority``), a store registered in
:mod:`airflow_kafka_failover.core.storage.store` that opens on first use:

- ``s3a://bucket``: the file system Airflow's ``ObjectStoragePath`` uses for S3 (the Amazon provider's, s3fs),
  from an ``aws`` connection (default ``aws_default``): its keys, ``endpoint_url`` and ``region_name``, and
  its extra ``config_kwargs`` (``{"s3": {"addressing_style": "path"}}`` for a store that needs path-style
  requests). Install the extra ``airflow-kafka-failover[s3]``.
- ``hdfs://namenode:port``: fsspec's ``WebHDFS`` on the NameNode's web address, from a ``webhdfs`` connection
  (default ``webhdfs_default``): its host (default: the URI's host), port (default 9870), login (the HDFS
  user) and extra ``use_ssl``. Kerberos is not supported.
- ``gs://`` and ``abfs(s)://``: the file system Airflow registers for the scheme (its provider's), untested.

Opening a store checks it once: the connection exists and yields credentials (an S3 store reached without any
is refused, never used anonymously), the bucket exists, the store answers. Every check names the location and
the connection. Requests time out after the pair's ``job.storage_timeout_seconds``.

The driver reaches the same stores through Spark's Hadoop connectors; :func:`spark_store_properties` gives the
``spark.hadoop.*`` settings (the S3 keys among them) that the submit writes to an owner-only properties file
for spark-submit, never to a command line.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.fsspec_store import FsspecStore, WebHdfsStore, describe_problem
from airflow_kafka_failover.core.storage.store import Store, StoreUnavailable, register, registered

log = logging.getLogger(__name__)

DEFAULT_CONNECTIONS: dict[str, str] = {
    "s3a": "aws_default",
    "hdfs": "webhdfs_default",
    "gs": "google_cloud_default",
    "abfs": "wasb_default",
    "abfss": "wasb_default",
}
"""The connection a store is opened with when ``job.storage_connections`` names none for its scheme."""
CONNECTION_TYPES = {"s3a": "aws", "hdfs": "webhdfs"}
"""The connection type each tested scheme needs."""
WEBHDFS_DEFAULT_PORT = 9870
_FSSPEC_SCHEME = {"s3a": "s3", "gs": "gs", "abfs": "abfs", "abfss": "abfs"}


def connection_id(scheme: str, connections: Mapping[str, str]) -> str:
    """The connection of ``scheme``'s stores: the configured one, else :data:`DEFAULT_CONNECTIONS`'."""
    return connections.get(scheme) or DEFAULT_CONNECTIONS[scheme]


def use_storage(paths: Iterable[str], connections: Mapping[str, str], timeout_seconds: float) -> None:
    """Register the stores of the remote ``paths`` (each opens on first use with its scheme's connection).

    :param paths: the job's paths (local ones are skipped).
    :param connections: ``job.storage_connections``: scheme -> connection id.
    :param timeout_seconds: ``job.storage_timeout_seconds``.
    """
    for path in paths:
        scheme = locations.scheme(path)
        if scheme is None:
            continue
        root = locations.store_root(path)
        wanted = (connection_id(scheme, connections), float(timeout_seconds))
        if _registered.get(root) == wanted and registered(root):
            continue  # the same store with the same connection: keep it (and what it opened)
        register(root, functools.partial(open_remote_store, conn_id=wanted[0], timeout_seconds=wanted[1]))
        _registered[root] = wanted


_registered: dict[str, tuple[str, float]] = {}


def use_job_storage(job: Any) -> None:
    """Register the stores of a job's four paths (a pair's ``job`` section or the operator's options)."""
    use_storage(
        (job.sink_root, job.checkpoint_root, job.run_root, job.fencing_marker),
        job.storage_connections,
        job.storage_timeout_seconds,
    )


def open_remote_store(root: str, conn_id: str, timeout_seconds: float) -> Store:
    """Open and check the store of ``root`` (``scheme://authority``) with connection ``conn_id``.

    :raises ConfigError: the connection is missing or unusable, the bucket does not exist.
    :raises StoreUnavailable: the store does not answer.
    """
    scheme = locations.scheme(root)
    if scheme == "hdfs":
        return _webhdfs(root, conn_id, timeout_seconds)
    if scheme == "s3a":
        return _s3(root, conn_id, timeout_seconds)
    return _registered_filesystem(root, conn_id)


def _connection(conn_id: str, root: str) -> Any:
    from airflow.sdk import BaseHook

    from airflow_kafka_failover.version_compat import AirflowNotFoundException

    scheme = locations.scheme(root) or ""
    wanted = CONNECTION_TYPES.get(scheme, "")
    try:
        connection = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise ConfigError(
            f"Airflow connection {conn_id!r} for {root} does not exist: create it"
            + (f" (type {wanted!r})" if wanted else "")
            + ", or name another one in job.storage_connections"
        ) from None
    if wanted and connection.conn_type != wanted:
        raise ConfigError(
            f"Airflow connection {conn_id!r} for {root} is of type {connection.conn_type!r}, not {wanted!r}: "
            "name a connection of that type in job.storage_connections"
        )
    return connection


def _s3(root: str, conn_id: str, timeout_seconds: float) -> Store:
    _connection(conn_id, root)
    try:
        from airflow.sdk.io import get_fs

        options: dict[str, Any] = {
            "connect_timeout": timeout_seconds,
            "read_timeout": timeout_seconds,
            "retries": {"max_attempts": 2, "mode": "standard"},
        }
        fs = get_fs("s3", conn_id, options)  # type: ignore[arg-type]
    except (ImportError, ValueError) as exc:
        raise ConfigError(
            f"{root}: no S3 file system in this Airflow ({exc}); install airflow-kafka-failover[s3] (the "
            "Amazon provider with s3fs) on every worker and the triggerer"
        ) from None
    # s3fs retries a timed-out call 5 times on top of botocore's attempts: a store that does not answer
    # would hold a task for minutes. One s3fs attempt, two of botocore's: a call fails within two timeouts.
    fs.retries = 1
    if getattr(fs, "anon", False):
        raise ConfigError(
            f"Airflow connection {conn_id!r} yields no credentials for {root} (no keys in the connection, no "
            "environment or instance credentials); the provider never writes to a store anonymously: give "
            "the connection an access key and secret (login and password) or a role"
        )
    bucket = urlsplit(root).netloc
    try:
        fs.call_s3("head_bucket", Bucket=bucket)
    except (FileNotFoundError, PermissionError):
        # s3fs turns 404 (NoSuchBucket) and 403 into these; a store that does not answer raises otherwise
        raise ConfigError(
            f"bucket {bucket!r} of {root} does not exist (or connection {conn_id!r} may not see it): create "
            "it, or correct the job's paths"
        ) from None
    except Exception as exc:
        raise StoreUnavailable(root, describe_problem(exc)) from None
    return FsspecStore(fs, root)


def _webhdfs(root: str, conn_id: str, timeout_seconds: float) -> Store:
    import requests
    from fsspec.implementations.webhdfs import WebHDFS

    from airflow_kafka_failover.run_format.state_carry import COPY_THREADS

    connection = _connection(conn_id, root)
    extra = connection.extra_dejson or {}
    host = connection.host or urlsplit(root).hostname
    port = connection.port or WEBHDFS_DEFAULT_PORT
    use_ssl = str(extra.get("use_ssl", "false")).lower() in ("true", "1", "yes")
    try:
        fs = WebHDFS(
            host=host,
            port=port,
            user=connection.login or None,
            use_https=use_ssl,
            skip_instance_cache=True,
        )
    except Exception as exc:
        raise ConfigError(f"connection {conn_id!r} for {root}: {describe_problem(exc)}") from None
    # as many kept connections as the state carry has copies under way (requests keeps 10 by default and
    # drops the others with a warning each)
    adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=COPY_THREADS)
    fs.session.mount("http://", adapter)
    fs.session.mount("https://", adapter)
    # fsspec's WebHDFS sends its requests without a timeout: a NameNode that hangs would hang the task
    fs.session.request = functools.partial(fs.session.request, timeout=timeout_seconds)  # type: ignore[method-assign]
    store = WebHdfsStore(fs, root)
    try:
        fs.info("/")
    except Exception as exc:
        raise StoreUnavailable(
            root,
            f"WebHDFS at {'https' if use_ssl else 'http'}://{host}:{port} (connection {conn_id!r}): "
            + describe_problem(exc),
        ) from None
    return store


def _registered_filesystem(root: str, conn_id: str) -> Store:
    from airflow.sdk.io import get_fs

    scheme = locations.scheme(root) or ""
    try:
        fs = get_fs(_FSSPEC_SCHEME[scheme], conn_id)
    except (ImportError, ValueError) as exc:
        raise ConfigError(
            f"{root}: no file system for {scheme}:// in this Airflow ({exc}); install the Airflow provider "
            "that registers it (untested with this provider)"
        ) from None
    log.warning("%s: %s:// is not tested with this provider; see docs/limits.md", root, scheme)
    return FsspecStore(fs, root)


def spark_store_properties(paths: Iterable[str], connections: Mapping[str, str]) -> dict[str, str]:
    """The ``spark.hadoop.*`` settings the driver needs for the stores of ``paths`` (secrets included).

    S3 (``s3a://``): the connection's explicit keys (with its session token, the temporary-credentials
    provider), its ``endpoint_url``, region, and path-style requests when its ``config_kwargs`` ask for them;
    without explicit keys the driver's own credential chain applies. HDFS needs nothing (the URI names the
    NameNode).
    """
    properties: dict[str, str] = {}
    for path in paths:
        if locations.scheme(path) != "s3a":
            continue
        conn_id = connection_id("s3a", connections)
        properties.update(_s3a_properties(conn_id, locations.store_root(path)))
    return properties


def _s3a_properties(conn_id: str, root: str) -> dict[str, str]:
    _connection(conn_id, root)
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    config = S3Hook(aws_conn_id=conn_id).conn_config
    prefix = "spark.hadoop.fs.s3a."
    properties: dict[str, str] = {}
    if config.aws_access_key_id and config.aws_secret_access_key:
        properties[prefix + "access.key"] = config.aws_access_key_id
        properties[prefix + "secret.key"] = config.aws_secret_access_key
        if config.aws_session_token:
            properties[prefix + "session.token"] = config.aws_session_token
            properties[prefix + "aws.credentials.provider"] = (
                "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
            )
        else:
            properties[prefix + "aws.credentials.provider"] = (
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            )
    endpoint = config.get_service_endpoint_url("s3")
    if endpoint:
        properties[prefix + "endpoint"] = endpoint
        properties[prefix + "connection.ssl.enabled"] = str(endpoint.startswith("https")).lower()
    if config.region_name:
        properties[prefix + "endpoint.region"] = config.region_name
    s3_options = getattr(config.botocore_config, "s3", None) or {}
    if s3_options.get("addressing_style") == "path":
        properties[prefix + "path.style.access"] = "true"
    return properties

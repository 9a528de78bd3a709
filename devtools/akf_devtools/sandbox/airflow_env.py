"""Airflow next to the sandbox: connections for its clusters and a local Airflow home for ``dag.test()``.

Connections are exposed through ``AIRFLOW_CONN_<ID>`` environment variables (JSON form), which every
Airflow process started from this one inherits; nothing is written to a metadata database.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from airflow_kafka_failover.core.exceptions import FailoverError


def register_kafka_connections(
    sandbox: Any, prefix: str, overrides: dict[str, str] | None = None
) -> dict[str, str]:
    """Expose the sandbox's clusters as Airflow ``kafka`` connections.

    The extra is the cluster's confluent-kafka config: ``bootstrap.servers`` and, for a SCRAM sandbox,
    ``security.protocol``, ``sasl.mechanism``, ``sasl.username`` and ``sasl.password`` (the provider maps
    them to the Java client's options for the Spark job).

    :param sandbox: the running sandbox.
    :param prefix: connection ids become ``<prefix>_a`` and ``<prefix>_b``.
    :param overrides: cluster name -> bootstrap address to use instead of the cluster's own.
    :return: cluster name -> connection id.
    """
    ids = {}
    for name in sandbox.cluster_names:
        conn_id = f"{prefix}_{name.lower()}"
        extra = dict(sandbox.client_config(name))
        extra["bootstrap.servers"] = (overrides or {}).get(name, extra["bootstrap.servers"])
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps({"conn_type": "kafka", "extra": extra})
        ids[name] = conn_id
    return ids


def register_spark_connection(
    conn_id: str, master: str, deploy_mode: str | None = None, extra: dict[str, Any] | None = None
) -> str:
    """Expose a ``spark`` connection (``local[2]`` or ``spark://host:port``); return its id.

    :param conn_id: the connection id.
    :param master: the Spark master URL.
    :param deploy_mode: the extra's ``deploy-mode``.
    :param extra: more keys of the extra (e.g. ``standalone_master_webui_port``).
    """
    extra = {**({"deploy-mode": deploy_mode} if deploy_mode else {}), **(extra or {})}
    if master.startswith("spark://"):
        host, port = master[len("spark://") :].rsplit(":", 1)
        conn = {"conn_type": "spark", "host": f"spark://{host}", "port": int(port), "extra": extra}
    else:
        conn = {"conn_type": "spark", "host": master, "extra": extra}
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
    return conn_id


def register_s3_connection(conn_id: str, server: Any, with_keys: bool = True) -> str:
    """Expose an S3 server (``akf_devtools.sandbox.s3.S3Server``) as an Airflow ``aws`` connection: its keys
    (login and password), ``endpoint_url``, ``region_name`` and path-style requests; return its id.

    :param with_keys: False leaves the keys out (a connection that yields no credentials).
    """
    config = server.client_config()
    extra = {
        "endpoint_url": config["endpoint_url"],
        "region_name": config["region_name"],
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }
    conn: dict[str, Any] = {"conn_type": "aws", "extra": extra}
    if with_keys:
        conn.update(login=config["aws_access_key_id"], password=config["aws_secret_access_key"])
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
    return conn_id


def register_webhdfs_connection(conn_id: str, hdfs: Any, user: str | None = None) -> str:
    """Expose an HDFS (``akf_devtools.sandbox.hdfs.HdfsCluster``) as an Airflow ``webhdfs`` connection: the
    NameNode's web address and the HDFS user; return its id."""
    from urllib.parse import urlsplit

    web = urlsplit(hdfs.webhdfs_url)
    conn: dict[str, Any] = {"conn_type": "webhdfs", "host": web.hostname, "port": web.port}
    if user:
        conn["login"] = user
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
    return conn_id


def airflow_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of an Airflow process using ``home`` (its ``dags`` folder, no example DAGs)."""
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        **extra,
    }
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    return env


def prepare_airflow_home(home: Path) -> Path:
    """Create ``home`` with a ``dags`` folder and a migrated SQLite metadata DB (idempotent)."""
    (home / "dags").mkdir(parents=True, exist_ok=True)
    airflow = Path(sys.executable).with_name("airflow")
    result = subprocess.run(
        [str(airflow), "db", "migrate"], env=airflow_env(home), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-2000:]
        raise FailoverError(
            f"'airflow db migrate' failed for AIRFLOW_HOME={home} (exit {result.returncode}):\n"
            f"{tail}\nRemove {home} and try again."
        )
    return home


def read_variable(home: Path, key: str) -> Any:
    """The JSON value of Airflow Variable ``key`` in ``home``'s metadata DB, or None when it is not set.

    Read straight from the SQLite database that ``prepare_airflow_home`` migrated, decrypting with the
    home's Fernet key: ``airflow variables get`` starts all of Airflow, 5 s on a quiet 2-core machine and
    several times that while tests run, and the stories read the record after every step.
    """
    import sqlite3

    config, path = _metadata_db(home)
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as database:
        row = database.execute("SELECT val, is_encrypted FROM variable WHERE key = ?", (key,)).fetchone()
    if row is None or not row[0]:
        return None
    value, encrypted = row
    if encrypted:
        from cryptography.fernet import Fernet

        fernet_key = os.environ.get("AIRFLOW__CORE__FERNET_KEY") or config.get("core", "fernet_key")
        value = Fernet(fernet_key.encode()).decrypt(value.encode()).decode()
    return json.loads(value)


def delete_variable(home: Path, key: str) -> None:
    """Remove Airflow Variable ``key`` from ``home``'s SQLite metadata DB, if it is set (straight in the
    database, as :func:`read_variable` reads it, instead of starting ``airflow variables delete``)."""
    import sqlite3

    _config, path = _metadata_db(home)
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as database, database:
        database.execute("DELETE FROM variable WHERE key = ?", (key,))


def _metadata_db(home: Path) -> tuple[Any, str]:
    """``home``'s parsed ``airflow.cfg`` and the path of its SQLite metadata DB."""
    import configparser

    config = configparser.ConfigParser(interpolation=None)
    config.read(home / "airflow.cfg")
    url = config.get("database", "sql_alchemy_conn", fallback=f"sqlite:///{home / 'airflow.db'}")
    if not url.startswith("sqlite:///"):
        raise FailoverError(f"{home}/airflow.cfg: {url!r} is not the SQLite database of a test Airflow home")
    return config, url[len("sqlite:///") :]


def write_variable(home: Path, key: str, value: Any) -> None:
    """Set Airflow Variable ``key`` in ``home``'s metadata DB to ``value`` as JSON (an operator's repair)."""
    airflow = Path(sys.executable).with_name("airflow")
    result = subprocess.run(
        [str(airflow), "variables", "set", key, json.dumps(value)],
        env=airflow_env(home),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise FailoverError(
            f"'airflow variables set {key}' failed (exit {result.returncode}): "
            f"{(result.stdout + result.stderr)[-1000:]}"
        )

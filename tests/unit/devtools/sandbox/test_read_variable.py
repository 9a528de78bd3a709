"""Reading (and deleting) an Airflow Variable straight from a test home's SQLite metadata DB."""

from __future__ import annotations

import json
import sqlite3

import pytest
from akf_devtools.sandbox.airflow_env import delete_variable, read_variable
from cryptography.fernet import Fernet

from airflow_kafka_failover.core.exceptions import FailoverError


def _home(tmp_path, rows, url=None):
    key = Fernet.generate_key().decode()
    database = tmp_path / "airflow.db"
    (tmp_path / "airflow.cfg").write_text(
        f"[core]\nfernet_key = {key}\n[database]\nsql_alchemy_conn = {url or f'sqlite:///{database}'}\n"
    )
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE variable (key TEXT, val TEXT, is_encrypted BOOLEAN)")
        for name, value, encrypted in rows:
            text = json.dumps(value)
            stored = Fernet(key.encode()).encrypt(text.encode()).decode() if encrypted else text
            db.execute("INSERT INTO variable VALUES (?, ?, ?)", (name, stored, encrypted))
    return tmp_path


def test_encrypted_and_plain_values_and_a_missing_key(tmp_path, monkeypatch):
    monkeypatch.delenv("AIRFLOW__CORE__FERNET_KEY", raising=False)
    record = {"active": "B", "epoch": 3, "history": [{"kind": "failover"}]}
    home = _home(tmp_path, [("pair.record", record, True), ("plain", [1, 2], False)])
    assert read_variable(home, "pair.record") == record
    assert read_variable(home, "plain") == [1, 2]
    assert read_variable(home, "missing") is None


def test_a_home_on_another_database_is_refused_by_name(tmp_path):
    home = _home(tmp_path, [], url="postgresql://airflow@db/airflow")
    with pytest.raises(FailoverError, match="'postgresql://airflow@db/airflow' is not the SQLite database"):
        read_variable(home, "anything")


def test_delete_removes_the_key_alone_and_a_missing_key_is_no_error(tmp_path):
    home = _home(tmp_path, [("pair.record", {"active": "A"}, False), ("other", 1, False)])
    delete_variable(home, "pair.record")
    delete_variable(home, "never.set")
    assert read_variable(home, "pair.record") is None
    assert read_variable(home, "other") == 1

"""The operator's read-only view of a pair (``kafka-failover status`` and ``history``).

Pure: ``model`` (the typed view), ``assembly`` (readings to view, and the command's verdict), ``text`` (text
and JSON). The I/O is elsewhere: :mod:`airflow_kafka_failover.io.status_readers` gathers the readings (the
active record, the fencing marker, the job's run folder and checkpoint, both clusters).
"""

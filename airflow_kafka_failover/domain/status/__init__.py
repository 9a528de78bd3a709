"""The operator's read-only view of a pair (``kafka-failover status`` and ``history``).

Pure: :mod:`~airflow_kafka_failover.domain.status.model` (the typed view), :mod:`~airflow_kafka_failover.domain.status.
assembly` (readings to view, and the command's verdict), :mod:`~airflow_kafka_failover.domain.status.text` (text
and JSON). I/O: :mod:`~airflow_kafka_failover.io.status_readers` gathers the readings (the active record, the
fencing marker, the job's run folder and checkpoint, both clusters).
"""

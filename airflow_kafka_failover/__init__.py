"""Apache Airflow provider that moves Kafka stream consumers between clusters when one fails.

Importing this package must stay cheap: the DAG processor imports it while parsing DAG files, so
nothing heavy (pyspark, confluent-kafka, Airflow internals) is imported here.
"""

from __future__ import annotations

__version__ = "0.1.0"

"""Where the pair's state lives: local paths or URIs of Hadoop-compatible stores, and one way to use them.

- ``locations``: which locations are accepted, joining them, naming them.
- ``store``: the six operations the provider needs from a store (read, replace, create-only, exists, list,
  delete), the local implementation, and the registry that picks the store of a location.
- ``fsspec_store``: the same operations over an fsspec file system (the Airflow side: S3 through the Amazon
  provider's ``ObjectStoragePath`` file system, HDFS through WebHDFS).

The driver's implementation (Spark's Hadoop ``FileSystem``) is
:mod:`airflow_kafka_failover.jobs.hadoop_store`, and the Airflow side's connections are resolved in
:mod:`airflow_kafka_failover.hooks.storage`. Nothing here imports Airflow or pyspark.
"""

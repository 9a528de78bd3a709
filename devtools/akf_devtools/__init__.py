"""Development tools of airflow-kafka-failover: the Kafka sandbox, the demo and a local Airflow.

Installed into the repository's ``.venv`` by ``make setup``; never shipped in the provider's wheel, and the
provider never imports it.
"""

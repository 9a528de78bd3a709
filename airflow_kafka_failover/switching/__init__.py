"""A switch (failover, failback), a start and a finished interrupted switch, as plain steps the DAG tasks and
the keeper call: no Airflow operator here, only what the steps read and write (record, fence, plan, job)."""

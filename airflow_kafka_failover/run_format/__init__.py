"""The files one run of a job shares with the provider: the contract between the Airflow side and the driver.

Where a run keeps its files (:mod:`.layout`), the job's options and settings file (:mod:`.options`,
:mod:`.settings`), the fence (:mod:`.fencing`), the progress entries (:mod:`.progress_log`, :mod:`.progress`),
Spark's checkpoint as the provider reads it (:mod:`.spark_checkpoint`, :mod:`.source_offsets`) and carries it
to another cluster (:mod:`.state_carry`), and a warm standby's slot (:mod:`.standby`). Both sides import these
modules: the driver's code in ``jobs/``, and the pure rules of ``domain/`` above them. So they import nothing
but ``core/``, pydantic and the standard library: no Airflow, no Kafka client, no fsspec, no HTTP client, no
pyspark (the import-linter contracts in ``pyproject.toml``). Their files are read and written through
``core/storage``, whose stores each side registers.
"""

from __future__ import annotations

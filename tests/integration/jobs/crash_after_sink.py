"""A job of the tests: another job, unchanged, except that its sink dies right after writing one batch.

That is the crash an idempotent sink is there for: the batch's output is written, Spark has not committed
the batch, and the next run of the same checkpoint replays it. Submit this file as the job's ``application``
(``job.application``), with in the job's environment:

- ``CRASH_AFTER_SINK_BATCH=<n>``: the process ends (``os._exit(1)``, no cleanup, no status written) as soon
  as the sink returns from writing batch ``n``; unset, nothing dies and the job runs as it would alone;
- ``CRASH_JOB=<path>``: the job file to run (default: the packaged job, ``jobs/stream_job.py``).

The job file runs as spark-submit would run it (``__main__``), with the job-side API's
:class:`~airflow_kafka_failover.jobs.api.FailoverStream` replaced by :class:`CrashAfterSink`, whose
``foreach_batch`` (also under ``write_delta``) wraps the job's batch function. The job file must import
``FailoverStream`` when it runs, as the packaged job and ``examples/jobs/*/job.py`` do.
"""

from __future__ import annotations

import logging
import os
import runpy
from collections.abc import Callable
from typing import Any

from airflow_kafka_failover.jobs import api, stream_job

BATCH_VARIABLE = "CRASH_AFTER_SINK_BATCH"
JOB_VARIABLE = "CRASH_JOB"
CRASHED = "crash_after_sink: batch {batch} written; the process ends before Spark commits it"
"""The line the job's log gets just before the process ends (``{batch}`` is the batch id)."""

log = logging.getLogger("airflow_kafka_failover.job")


class CrashAfterSink(api.FailoverStream):
    """The job-side API, with a sink that ends the process right after it wrote batch :attr:`crash_after`."""

    crash_after: int | None = None

    def foreach_batch(self, df: Any, function: Callable[[Any, int], Any], **options: Any) -> int:
        # Every other option passes through untouched, so a new one of the API cannot break this job.
        return super().foreach_batch(df, self._dying(function), **options)

    def _dying(self, function: Callable[[Any, int], Any]) -> Callable[[Any, int], Any]:
        crash_after = self.crash_after
        if crash_after is None:
            return function

        def write(batch_df: Any, batch_id: int) -> Any:
            written = function(batch_df, batch_id)
            if batch_id == crash_after:
                log.error(CRASHED.format(batch=batch_id))
                os._exit(1)
            return written

        return write


def main() -> None:
    batch = os.environ.get(BATCH_VARIABLE)
    CrashAfterSink.crash_after = int(batch) if batch else None
    api.FailoverStream = CrashAfterSink
    runpy.run_path(os.environ.get(JOB_VARIABLE) or stream_job.__file__, run_name="__main__")


if __name__ == "__main__":
    main()

"""A light streaming job of the published contract (``docs/jobs.md``, "The contract") for the fleet benchmark.

Twenty or fifty Spark drivers do not fit on a 2-core machine beside Airflow and two clusters; this job does.
It is submitted like any job (spark-submit runs it as a Python application, so the JVM is only the launcher
and the job holds no Spark session) and follows the same rules as the packaged one: it refuses a checkpoint
of another run or a fence at another epoch (``refused``, exit 2), writes ``status.json``, reads with a
``read_committed`` consumer from the given starting offsets or, when its checkpoint has batches, from the
last committed one, and for each batch: checks the stop request and the fence before writing, writes
Spark's ``offsets/<b>`` before and ``commits/<b>`` after the batch's Parquet folder (the packaged job's
sink layout, so the same reader finds every record id), then the batch's progress entry and the commit to
the bookkeeping group. Between batches it stops on a stop request (``stopped``) or on the marker of a newer
epoch (``fenced``). The stop and fence checks, the progress entries and the status file are the packaged
job's own code (:class:`~airflow_kafka_failover.jobs.job_run.JobRun`); only the reading and the group commit
are librdkafka's here instead of Spark's.

Limits: the Kafka client gets ``bootstrap_servers`` and the settings' ``client.id`` only (the sandbox's
clusters need no security); ``topics`` only (no ``topic_pattern``); no warm standby (``--standby`` is
refused). A batch holds at most :data:`MAX_BATCH_RECORDS` records.

    spark-submit benchmarks/fleet_job.py --settings <run_dir>/settings.json
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import sys
import time
from typing import Any

from airflow_kafka_failover.core.exceptions import CheckpointError, ConfigError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import StoreUnavailable, open_store
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.jobs.job_run import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_STOPPED,
    JobRun,
    _nested,
    prepare,
    write_refusal,
)
from airflow_kafka_failover.jobs.sink import COMPLETE, batch_dir
from airflow_kafka_failover.run_format.settings import JobSettings
from airflow_kafka_failover.run_format.spark_checkpoint import last_committed_offsets

log = logging.getLogger("airflow_kafka_failover.job")

MAX_BATCH_RECORDS = 5000
OFFSETS_HEADER = "v1"
EARLIEST, LATEST = -2, -1


class LightRun(JobRun):
    """One run of the light job: :class:`JobRun` with a librdkafka consumer instead of a Spark query."""

    def __init__(self, settings: JobSettings) -> None:
        super().__init__(settings, spark=None)
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": settings.bootstrap_servers,
                "group.id": settings.bookkeeping_group,
                "client.id": settings.kafka_options.get("client.id", "akf-fleet-job"),
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": False,
            }
        )
        self.next_batch = 0

    # ---- where to start ----------------------------------------------------------------------------

    def start_positions(self) -> dict[TopicPartition, int]:
        """Every partition's next offset: the checkpoint's last committed batch, or the starting offsets."""
        metadata = self.consumer.list_topics(timeout=30)
        partitions = []
        for topic in self.settings.topics:
            found = metadata.topics.get(topic)
            if found is None or found.error is not None:
                raise ConfigError(f"topic {topic!r} does not exist on {self.settings.bootstrap_servers}")
            partitions += [TopicPartition(topic, p) for p in sorted(found.partitions)]
        self.partitions = partitions
        committed = last_committed_offsets(self.settings.checkpoint)
        if committed is not None:
            batch_id, offsets = committed
            self.next_batch = batch_id + 1
            log.info("resuming the checkpoint after batch %s", batch_id)
            return {tp: offsets.get(tp, EARLIEST) for tp in partitions}
        given = self.settings.starting_offsets
        if given in ("earliest", "latest"):
            return dict.fromkeys(partitions, EARLIEST if given == "earliest" else LATEST)
        wanted = json.loads(given) if isinstance(given, str) else given
        return {tp: int(wanted[tp.topic][str(tp.partition)]) for tp in partitions}

    # ---- the loop ----------------------------------------------------------------------------------

    def resolved(self, positions: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """``positions`` with earliest (-2) and latest (-1) made offsets: an offsets file names them."""
        from confluent_kafka import TopicPartition as KafkaPartition

        resolved = {}
        for tp, offset in positions.items():
            if offset in (EARLIEST, LATEST):
                low, high = self.consumer.get_watermark_offsets(
                    KafkaPartition(tp.topic, tp.partition), timeout=30
                )
                offset = low if offset == EARLIEST else high
            resolved[tp] = offset
        return resolved

    def run_light(self) -> int:
        from confluent_kafka import TopicPartition as KafkaPartition

        positions = self.resolved(self.start_positions())
        self._carried()
        self.consumer.assign(
            [KafkaPartition(tp.topic, tp.partition, offset) for tp, offset in positions.items()]
        )
        self.write_status("running", application_id=f"fleet-job-{os.getpid()}")
        log.info(
            "running on cluster %s, epoch %s, from %s", self.settings.cluster, self.settings.epoch, positions
        )
        next_offsets = dict(positions)
        while True:
            verdict = self.why_stop()
            if verdict is not None:
                state, reason = verdict
                self.write_status(state, reason=reason)
                log.info("%s: %s", state, reason)
                self.consumer.close()
                return EXIT_FAILED if state == "failed" else EXIT_STOPPED
            started = time.monotonic()
            records = self._poll(self.settings.poll_interval_seconds)
            if not records:
                continue
            for record in records:
                next_offsets[TopicPartition(record.topic(), record.partition())] = record.offset() + 1
            if self.why_stop() is not None:  # checked before writing: the batch is read again by the next run
                continue
            self._write_batch(self.next_batch, records, next_offsets, started)
            self.next_batch += 1

    def _poll(self, seconds: float) -> list[Any]:
        records: list[Any] = []
        deadline = time.monotonic() + seconds
        while len(records) < MAX_BATCH_RECORDS:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            got = self.consumer.consume(num_messages=MAX_BATCH_RECORDS - len(records), timeout=left)
            for record in got:
                if record.error() is not None:
                    raise RuntimeError(f"reading {record.topic()}: {record.error()}")
            records += got
        return records

    def _write_batch(
        self, batch_id: int, records: list[Any], next_offsets: dict[TopicPartition, int], started: float
    ) -> None:
        """Spark's order (offsets file, output, commit file), then the progress entry and the group commit."""
        end_offsets = dict(next_offsets)
        self._put(
            self._checkpoint("offsets", str(batch_id)),
            "\n".join(
                [
                    OFFSETS_HEADER,
                    json.dumps(
                        {"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000), "conf": {}}
                    ),
                    json.dumps(_nested(end_offsets)),
                ]
            ),
        )
        self._write_output(batch_id, records)
        self._put(self._checkpoint("commits", str(batch_id)), OFFSETS_HEADER + '\n{"nextBatchWatermarkMs":0}')
        newest: dict[str, dict[str, int]] = {}
        last: dict[str, dict[str, int]] = {}
        for record in records:
            partition = str(record.partition())
            last.setdefault(record.topic(), {})[partition] = record.offset()
            stamp = record.timestamp()[1]
            newest.setdefault(record.topic(), {})[partition] = max(
                stamp, newest.get(record.topic(), {}).get(partition, stamp)
            )
        self.written_stats[batch_id] = {
            "records": len(records),
            "max_timestamp_ms": newest,
            "max_offset": last,
        }
        self.write_seconds[batch_id] = time.monotonic() - started
        self.last_batch = batch_id
        self.record_batch(batch_id, {})

    def _write_output(self, batch_id: int, records: list[Any]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        folder = batch_dir(self.settings.sink_root, self.settings.epoch, batch_id)
        if open_store(folder).exists(locations.join(folder, COMPLETE)):
            return  # written before a crash: the folder is the batch's, whole
        rows = [
            {
                "record_id": self._record_id(record),
                "key": (record.key() or b"").decode("utf-8", "replace"),
                "value": (record.value() or b"").decode("utf-8", "replace"),
                "source_cluster": self.settings.cluster,
                "topic": record.topic(),
                "partition": record.partition(),
                "offset": record.offset(),
                "timestamp_ms": record.timestamp()[1],
                "epoch": self.settings.epoch,
                "batch_id": batch_id,
            }
            for record in records
        ]
        buffer = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows), buffer)
        self._put(locations.join(folder, "part-00000.parquet"), buffer.getvalue())
        self._put(locations.join(folder, COMPLETE), b"")

    def _record_id(self, record: Any) -> str | None:
        field = self.settings.record_id_field
        if field == "key":
            return None if record.key() is None else record.key().decode("utf-8", "replace")
        try:
            value = json.loads(record.value() or b"null")
        except ValueError:
            return None
        found = value.get(field) if isinstance(value, dict) else None
        return None if found is None else str(found)

    @staticmethod
    def _put(location: str, data: str | bytes) -> None:
        open_store(location).replace(location, data.encode("utf-8") if isinstance(data, str) else data)

    def _commit_group(self, end_offsets: dict[TopicPartition, int]) -> None:
        from confluent_kafka import TopicPartition as KafkaPartition

        self.consumer.commit(
            offsets=[KafkaPartition(tp.topic, tp.partition, offset) for tp, offset in end_offsets.items()],
            asynchronous=False,
        )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    parser = argparse.ArgumentParser(description="a light job of the Kafka failover job contract")
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--settings", help="the settings file written by the operator")
    given.add_argument("--standby", help="refused: the light job has no warm standby")
    args = parser.parse_args(argv)
    if args.standby:
        log.error("the fleet benchmark's light job has no warm standby; set switch.standby: none")
        return EXIT_BAD_INPUT
    try:
        settings = JobSettings.load(args.settings)
        if not settings.topics:
            raise ConfigError("the light job reads named topics only; give job.topics, not a topic pattern")
        prepare(settings)
    except (ConfigError, CheckpointError, StoreUnavailable) as exc:
        log.error("refusing to start: %s", exc)
        write_refusal(locations.parent(args.settings), str(exc))
        return EXIT_BAD_INPUT
    run = LightRun(settings)
    try:
        return run.run_light()
    except Exception as exc:  # the run's last word, then the exit code of a failure
        log.exception("the light job failed")
        run.write_status("failed", reason=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

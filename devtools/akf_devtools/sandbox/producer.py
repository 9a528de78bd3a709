"""A steady producer of records with unique ids, for the demo and the end-to-end tests.

It writes ``{"id": "<prefix>-<n>", "ts": <ms>}`` at a fixed rate to the topic on whichever cluster
``target()`` names (producers follow the active cluster, as real ones would after a failover). Only
records the broker acknowledged count as produced; an id whose delivery failed is never reused, so "lost"
means an acknowledged id that never reached the sink.

Run alone (the docker-compose demo producer)::

    python -m akf_devtools.sandbox.producer --bootstrap kafka-a:9092 --topic orders --rate 10
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import NamedTuple

log = logging.getLogger(__name__)


class Delivery(NamedTuple):
    """Where and when the broker acknowledged one record."""

    cluster: str
    partition: int
    offset: int
    acked_at: float
    produced_ms: int = 0
    """The record's own ``ts`` (its event time)."""


class SteadyProducer:
    """Produce at ``rate`` records per second until stopped.

    :param bootstraps: cluster name -> bootstrap address.
    :param topic: the topic (the same name on both clusters).
    :param target: returns the cluster to write to now.
    :param rate: records per second.
    :param prefix: record id prefix.
    :param partitions: partitions of the topic (records go round robin).
    :param security: confluent-kafka security settings for every cluster (a SCRAM sandbox's
        ``security_config()``); none by default.
    """

    def __init__(
        self,
        bootstraps: dict[str, str],
        topic: str,
        target: Callable[[], str],
        rate: float = 50.0,
        prefix: str = "r",
        partitions: int = 2,
        security: Mapping[str, str] | None = None,
    ) -> None:
        self.bootstraps, self.topic, self.target = bootstraps, topic, target
        self.security = dict(security or {})
        self.rate, self.prefix, self.partitions = rate, prefix, partitions
        self.acked: dict[str, Delivery] = {}
        self.failed = 0
        self.failed_records: dict[str, int] = {}  # id -> ts of each record whose delivery failed
        self.acked_per_cluster: Counter = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)
        self._producers: dict = {}

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def _producer(self, cluster: str):
        from confluent_kafka import Producer

        if cluster not in self._producers:
            self._producers[cluster] = Producer(
                {
                    "bootstrap.servers": self.bootstraps[cluster],
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": 5000,
                    "socket.connection.setup.timeout.ms": 2000,
                    "log_level": 0,
                    **self.security,
                }
            )
        return self._producers[cluster]

    def _run(self) -> None:
        n = 0
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            cluster = self.target()
            record_id = f"{self.prefix}-{n}"
            ts = int(time.time() * 1000)
            value = json.dumps(
                {"id": record_id, "ts": ts, "customer": f"c-{n % 50}", "amount": n % 250}
            ).encode()

            def delivered(err, msg, record_id=record_id, cluster=cluster, ts=ts) -> None:
                with self._lock:
                    if err is None:
                        self.acked[record_id] = Delivery(
                            cluster, msg.partition(), msg.offset(), time.time(), ts
                        )
                        self.acked_per_cluster[cluster] += 1
                    else:
                        self.failed += 1
                        self.failed_records[record_id] = ts

            try:
                self._producer(cluster).produce(
                    self.topic,
                    value=value,
                    key=record_id.encode(),
                    partition=n % self.partitions,
                    on_delivery=delivered,
                )
            except BufferError:
                with self._lock:
                    self.failed += 1  # never handed to the client: not in any log
            n += 1
            for producer in self._producers.values():
                producer.poll(0)
            next_at += interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self, flush_timeout: float = 10.0) -> None:
        """Stop producing and wait for outstanding deliveries (failed ones stay failed)."""
        self._stop.set()
        self._thread.join(timeout=10)
        for producer in self._producers.values():
            producer.flush(flush_timeout)

    @property
    def acked_ids(self) -> set[str]:
        with self._lock:
            return set(self.acked)

    def acked_on(self, cluster: str) -> set[str]:
        """The ids acknowledged by ``cluster`` (by where each was written, whenever its callback ran)."""
        with self._lock:
            return {record_id for record_id, delivery in self.acked.items() if delivery.cluster == cluster}

    def where(self, record_ids: set[str]) -> str:
        """Where the acknowledged ``record_ids`` were written: one line per cluster and partition with
        their offset and time ranges (what a "lost" assertion names, to find the records again)."""
        with self._lock:
            found = [self.acked[i] for i in record_ids if i in self.acked]
        groups: dict[tuple[str, int], list[Delivery]] = {}
        for delivery in found:
            groups.setdefault((delivery.cluster, delivery.partition), []).append(delivery)
        lines = []
        for (cluster, partition), deliveries in sorted(groups.items()):
            offsets = sorted(d.offset for d in deliveries)
            times = sorted(d.acked_at for d in deliveries)
            contiguous = offsets[-1] - offsets[0] + 1 == len(offsets)
            lines.append(
                f"{self.topic} on {cluster} partition {partition}: {len(offsets)} records, offsets "
                f"{offsets[0]}..{offsets[-1]}{'' if contiguous else ' (not contiguous)'}, acknowledged "
                f"{time.strftime('%H:%M:%S', time.gmtime(times[0]))}.."
                f"{time.strftime('%H:%M:%S', time.gmtime(times[-1]))} UTC"
            )
        return "\n".join(lines)


def _positive_rate(text: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        rate = -1.0
    if not rate > 0 or rate == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of records per second > 0, got {text!r}")
    return rate


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return int(text)


def _bootstrap(text: str) -> str:
    for address in text.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            raise argparse.ArgumentTypeError(f"must be host:port[,host:port...], got {text!r}")
    return text


def main(argv: list[str] | None = None) -> int:
    """Produce to one cluster until SIGINT or SIGTERM, logging the acknowledged count every 10 s."""
    parser = argparse.ArgumentParser(
        prog="python -m akf_devtools.sandbox.producer",
        description='Write {"id": "<prefix>-<n>", "ts": <ms>} records at a steady rate until stopped.',
    )
    parser.add_argument("--bootstrap", type=_bootstrap, required=True, help="the cluster, e.g. kafka-a:9092")
    parser.add_argument("--topic", required=True, help="an existing topic")
    parser.add_argument("--rate", type=_positive_rate, default=10.0, help="records per second (default: 10)")
    parser.add_argument(
        "--partitions",
        type=_positive_int,
        default=2,
        help="partitions of the topic, written round robin (default: 2)",
    )
    # Ids must stay unique across restarts of the process, or the sink would count them as duplicates.
    parser.add_argument(
        "--prefix",
        default=f"p{int(time.time())}",
        help="record id prefix (default: p<start time in seconds>)",
    )
    args = parser.parse_args(argv)
    if not args.topic.strip():
        parser.error("--topic must not be empty")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    producer = SteadyProducer(
        {"main": args.bootstrap},
        args.topic,
        lambda: "main",
        rate=args.rate,
        prefix=args.prefix,
        partitions=args.partitions,
    ).start()
    log.info(
        "producing %g records/s to %s on %s (ids %s-<n>)", args.rate, args.topic, args.bootstrap, args.prefix
    )
    while not stop.wait(10.0):
        log.info("acknowledged %d, failed %d", len(producer.acked_ids), producer.failed)
    producer.stop()
    log.info("stopped: acknowledged %d, failed %d", len(producer.acked_ids), producer.failed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A steady producer of records with unique ids, for the demo and the end-to-end tests.

It writes ``{"id": "<prefix>-<n>", "ts": <ms>}`` at a fixed rate to the topic on whichever cluster
``target()`` names (producers follow the active cluster, as real ones would after a failover). Only
records the broker acknowledged count as produced; an id whose delivery failed is never reused, so "lost"
means an acknowledged id that never reached the sink.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

log = logging.getLogger(__name__)


class SteadyProducer:
    """Produce at ``rate`` records per second until stopped.

    :param bootstraps: cluster name -> bootstrap address.
    :param topic: the topic (the same name on both clusters).
    :param target: returns the cluster to write to now.
    :param rate: records per second.
    :param prefix: record id prefix.
    :param partitions: partitions of the topic (records go round robin).
    """

    def __init__(self, bootstraps: dict[str, str], topic: str, target: Callable[[], str], rate: float = 50.0,
                 prefix: str = "r", partitions: int = 2) -> None:
        self.bootstraps, self.topic, self.target = bootstraps, topic, target
        self.rate, self.prefix, self.partitions = rate, prefix, partitions
        self.acked: dict[str, str] = {}
        self.failed = 0
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
            self._producers[cluster] = Producer({
                "bootstrap.servers": self.bootstraps[cluster], "enable.idempotence": True, "linger.ms": 5,
                "message.timeout.ms": 5000, "socket.connection.setup.timeout.ms": 2000, "log_level": 0,
            })
        return self._producers[cluster]

    def _run(self) -> None:
        n = 0
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            cluster = self.target()
            record_id = f"{self.prefix}-{n}"
            value = json.dumps({"id": record_id, "ts": int(time.time() * 1000)}).encode()

            def delivered(err, _msg, record_id=record_id, cluster=cluster) -> None:
                with self._lock:
                    if err is None:
                        self.acked[record_id] = cluster
                        self.acked_per_cluster[cluster] += 1
                    else:
                        self.failed += 1

            try:
                self._producer(cluster).produce(self.topic, value=value, key=record_id.encode(),
                                                partition=n % self.partitions, on_delivery=delivered)
            except BufferError:
                with self._lock:
                    self.failed += 1
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

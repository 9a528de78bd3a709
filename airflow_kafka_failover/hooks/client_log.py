"""librdkafka's log lines, once per change instead of once per connection attempt.

Without a logger, librdkafka writes every failed connection attempt to stderr, which Airflow shows at error
level: a cluster that is down (and already judged down) fills a triggerer's log with hundreds of
``Connect to ... failed: Connection refused`` lines per failover, and a plan task's log with dozens, hiding
the lines that matter. Every client :class:`~airflow_kafka_failover.hooks.kafka_cluster.KafkaClusterHook`
builds logs through a :class:`ClientLog` of its connection instead: a message is written once, at warning,
when it differs from the connection's previous one; repeats are counted, and the count is written when the
message changes, when the cluster answers again, or every :data:`REPEAT_SUMMARY_S` seconds while it lasts.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass

log = logging.getLogger("airflow_kafka_failover.librdkafka")

REPEAT_SUMMARY_S = 300.0
"""While one message repeats, how often the count of its repeats is written."""

_VOLATILE = re.compile(r"\(after \d+ms in state \w+\)|#producer-\d+|#consumer-\d+|\d+ms")
"""Parts of a librdkafka message that differ between repeats of the same condition."""


@dataclass
class _Repeats:
    message: str = ""
    count: int = 0
    written_at: float = 0.0


class ClientLog:
    """The ``logger`` of a connection's librdkafka clients (confluent-kafka calls :meth:`log`).

    :param connection: the Airflow connection id, named in every line.
    """

    _states: dict[str, _Repeats] = {}
    _lock = threading.Lock()

    def __init__(self, connection: str) -> None:
        self.connection = connection

    def log(self, level: int, fmt: str, *args: object) -> None:
        """One librdkafka line (``fmt % args`` is ``FAC [client] message``)."""
        text = fmt % args if args else fmt
        key = _VOLATILE.sub("", text)
        now = time.monotonic()
        with self._lock:
            state = self._states.setdefault(self.connection, _Repeats())
            if key == state.message:
                state.count += 1
                if now - state.written_at < REPEAT_SUMMARY_S:
                    return
                lines = [
                    f"the last message repeated {state.count} more times in {now - state.written_at:.0f} s"
                ]
                state.count, state.written_at = 0, now
            else:
                lines = self._summary(state) + [text]
                state.message, state.count, state.written_at = key, 0, now
        for line in lines:
            log.warning("connection %r, librdkafka: %s", self.connection, line)

    def answered(self) -> None:
        """The cluster answered a request: write the count of the repeats that ended, and forget them."""
        with self._lock:
            state = self._states.pop(self.connection, None)
            lines = self._summary(state) if state is not None else []
        for line in lines:
            log.warning("connection %r, librdkafka: %s; the cluster answers again", self.connection, line)

    @staticmethod
    def _summary(state: _Repeats) -> list[str]:
        if not state.count:
            return []
        return [f"the message before repeated {state.count} more times"]

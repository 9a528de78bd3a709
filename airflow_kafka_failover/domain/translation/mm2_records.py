"""Decode and encode the records MirrorMaker 2 writes to its internal topics.

The layouts follow ``OffsetSync.java`` and ``Checkpoint.java`` in apache/kafka
(``connect/mirror``): Kafka protocol ``Struct`` fields, big-endian, where a
STRING is an int16 byte length followed by that many UTF-8 bytes.

- OffsetSync key ``topic STRING, partition INT32``; value ``upstreamOffset INT64, offset INT64``.
- Checkpoint key ``group STRING, topic STRING, partition INT32``; value
  ``version INT16 (0), upstreamOffset INT64, offset INT64, metadata STRING``.

Decoding is stricter than MM2's own reader: trailing bytes are rejected, because
a record that does not match the documented layout exactly is more likely a
different record type (or a future format) than a valid one, and translating
offsets from a misread record could start a consumer too late.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from airflow_kafka_failover.core.exceptions import TranslationError

CHECKPOINT_VERSION = 0
"""The only checkpoint value version MirrorMaker 2 writes (``Checkpoint.VERSION``)."""

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_OFFSET_PAIR = struct.Struct(">qq")
_INT16_MAX = 32767
_HEX_PREVIEW_BYTES = 64


def describe_bytes(data: bytes) -> str:
    """Render bytes as hex for an error message, truncated so a huge record cannot flood a log.

    :param data: the raw bytes.
    """
    if len(data) <= _HEX_PREVIEW_BYTES:
        return f"{data.hex()} ({len(data)} bytes)"
    return f"{data[:_HEX_PREVIEW_BYTES].hex()}... ({len(data)} bytes, first {_HEX_PREVIEW_BYTES} shown)"


class _StructReader:
    """Read Kafka protocol Struct fields from one key or value, naming the field on failure."""

    def __init__(self, data: bytes, what: str) -> None:
        """Start reading at the first byte.

        :param data: the key or value bytes.
        :param what: e.g. ``"OffsetSync key"``, used in error messages.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TranslationError(
                f"{what} must be bytes, got {type(data).__name__} ({data!r}); "
                "a tombstone or an already-deserialised record cannot be decoded"
            )
        self._data = bytes(data)
        self._pos = 0
        self._what = what

    def _fail(self, field: str, problem: str) -> TranslationError:
        return TranslationError(
            f"malformed {self._what}: field {field!r} {problem}; bytes: {describe_bytes(self._data)}"
        )

    def _take(self, size: int, field: str) -> bytes:
        end = self._pos + size
        if end > len(self._data):
            raise self._fail(
                field,
                f"needs {size} bytes at position {self._pos} but only {len(self._data) - self._pos} remain "
                "(truncated record)",
            )
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def int16(self, field: str) -> int:
        return int(_INT16.unpack(self._take(2, field))[0])

    def int32(self, field: str) -> int:
        return int(_INT32.unpack(self._take(4, field))[0])

    def int64(self, field: str) -> int:
        return int(_INT64.unpack(self._take(8, field))[0])

    def string(self, field: str) -> str:
        length = self.int16(field)
        if length < 0:
            # Type.STRING is not nullable: -1 (null) is as invalid as any other negative length.
            raise self._fail(field, f"has negative length {length}")
        raw = self._take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise self._fail(field, f"is not valid UTF-8 ({err.reason} at byte {err.start})") from None

    def finish(self) -> None:
        extra = len(self._data) - self._pos
        if extra:
            raise TranslationError(
                f"malformed {self._what}: {extra} trailing bytes after the last field; "
                f"bytes: {describe_bytes(self._data)}"
            )


def _encode_string(value: str, field: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > _INT16_MAX:
        raise TranslationError(
            f"cannot encode field {field!r}: {len(raw)} UTF-8 bytes exceed the STRING limit of {_INT16_MAX}"
        )
    return _INT16.pack(len(raw)) + raw


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """One record of ``mm2-offset-syncs.<targetAlias>.internal``: upstream record ``upstream_offset`` of
    ``topic``/``partition`` was replicated to ``downstream_offset`` on the target.

    :param topic: the topic name on the upstream (source) cluster.
    :param partition: the partition number (same on both clusters).
    :param upstream_offset: offset of the record on the source cluster.
    :param downstream_offset: offset of the same record on the target cluster.
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        """Decode a record read from the offset-syncs topic.

        :param key: the record key bytes.
        :param value: the record value bytes.
        """
        key_reader = _StructReader(key, "OffsetSync key")
        topic = key_reader.string("topic")
        partition = key_reader.int32("partition")
        key_reader.finish()
        value_reader = _StructReader(value, "OffsetSync value")
        upstream_offset = value_reader.int64("upstreamOffset")
        downstream_offset = value_reader.int64("offset")
        value_reader.finish()
        return cls(topic, partition, upstream_offset, downstream_offset)

    def encode(self) -> tuple[bytes, bytes]:
        """Encode as MirrorMaker 2 would write it, returning ``(key, value)``."""
        try:
            key = _encode_string(self.topic, "topic") + _INT32.pack(self.partition)
            return key, _OFFSET_PAIR.pack(self.upstream_offset, self.downstream_offset)
        except struct.error as err:
            raise TranslationError(f"cannot encode {self!r}: a number is out of range ({err})") from None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One record of ``<sourceAlias>.checkpoints.internal``: MM2's translation of a consumer group's
    committed source offset to the target.

    :param group: the consumer group id.
    :param topic: the topic name on the **target** cluster (e.g. ``A.orders``).
    :param partition: the partition number.
    :param upstream_offset: the group's committed offset on the source cluster.
    :param downstream_offset: MM2's translation of it on the target cluster.
    :param metadata: the commit metadata string copied from the source.
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        """Decode a record read from a checkpoints topic.

        :param key: the record key bytes.
        :param value: the record value bytes (version header then fields).
        """
        key_reader = _StructReader(key, "Checkpoint key")
        group = key_reader.string("group")
        topic = key_reader.string("topic")
        partition = key_reader.int32("partition")
        key_reader.finish()
        value_reader = _StructReader(value, "Checkpoint value")
        version = value_reader.int16("version")
        if version != CHECKPOINT_VERSION:
            raise TranslationError(
                f"malformed Checkpoint value: field 'version' is {version}, only version "
                f"{CHECKPOINT_VERSION} is known; upgrade this provider if MirrorMaker 2 changed its format; "
                f"bytes: {describe_bytes(bytes(value))}"
            )
        upstream_offset = value_reader.int64("upstreamOffset")
        downstream_offset = value_reader.int64("offset")
        metadata = value_reader.string("metadata")
        value_reader.finish()
        return cls(group, topic, partition, upstream_offset, downstream_offset, metadata)

    def encode(self) -> tuple[bytes, bytes]:
        """Encode as MirrorMaker 2 would write it, returning ``(key, value)``."""
        try:
            key = (
                _encode_string(self.group, "group")
                + _encode_string(self.topic, "topic")
                + _INT32.pack(self.partition)
            )
            value = (
                _INT16.pack(CHECKPOINT_VERSION)
                + _OFFSET_PAIR.pack(self.upstream_offset, self.downstream_offset)
                + _encode_string(self.metadata, "metadata")
            )
        except struct.error as err:
            raise TranslationError(f"cannot encode {self!r}: a number is out of range ({err})") from None
        return key, value

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_kafka_failover.core.exceptions import TranslationError
from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint, OffsetSync, describe_bytes
from tests.property_examples import examples


def kafka_string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


# Built by hand from the layout in failover-model.md, not with the code under test.
SYNC_KEY = kafka_string("orders") + struct.pack(">i", 3)
SYNC_VALUE = struct.pack(">qq", 1000, 990)
CHECKPOINT_KEY = kafka_string("spark-bookkeeping") + kafka_string("A.orders") + struct.pack(">i", 7)
CHECKPOINT_VALUE = struct.pack(">h", 0) + struct.pack(">qq", 1234, 1200) + kafka_string("meta")


def test_offset_sync_decodes_documented_layout():
    sync = OffsetSync.decode(SYNC_KEY, SYNC_VALUE)
    assert sync == OffsetSync("orders", 3, upstream_offset=1000, downstream_offset=990)


def test_offset_sync_encodes_documented_layout():
    assert OffsetSync("orders", 3, 1000, 990).encode() == (SYNC_KEY, SYNC_VALUE)


def test_offset_sync_exact_bytes():
    key, value = OffsetSync("t", 1, 2, 3).encode()
    assert key.hex() == "0001" + "74" + "00000001"
    assert value.hex() == "0000000000000002" + "0000000000000003"


def test_checkpoint_decodes_documented_layout():
    checkpoint = Checkpoint.decode(CHECKPOINT_KEY, CHECKPOINT_VALUE)
    assert checkpoint == Checkpoint("spark-bookkeeping", "A.orders", 7, 1234, 1200, "meta")


def test_checkpoint_encodes_documented_layout():
    assert Checkpoint("spark-bookkeeping", "A.orders", 7, 1234, 1200, "meta").encode() == (
        CHECKPOINT_KEY,
        CHECKPOINT_VALUE,
    )


def test_checkpoint_with_empty_metadata_and_unicode_group():
    checkpoint = Checkpoint("grüppe-✓", "A.orders", 0, 0, 0, "")
    key, value = checkpoint.encode()
    assert value.endswith(b"\x00\x00")
    assert Checkpoint.decode(key, value) == checkpoint


def test_large_offsets_are_big_endian_int64():
    big = 2**62 + 5
    key, value = OffsetSync("x", 0, big, big - 1).encode()
    assert struct.unpack(">qq", value) == (big, big - 1)
    assert OffsetSync.decode(key, value).upstream_offset == big


texts = st.text(max_size=30)
offsets = st.integers(min_value=-(2**63), max_value=2**63 - 1)
partitions = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@settings(max_examples=examples(60), deadline=None)
@given(texts, partitions, offsets, offsets)
def test_offset_sync_round_trip(topic, partition, upstream, downstream):
    sync = OffsetSync(topic, partition, upstream, downstream)
    assert OffsetSync.decode(*sync.encode()) == sync


@settings(max_examples=examples(60), deadline=None)
@given(texts, texts, partitions, offsets, offsets, texts)
def test_checkpoint_round_trip(group, topic, partition, upstream, downstream, metadata):
    checkpoint = Checkpoint(group, topic, partition, upstream, downstream, metadata)
    assert Checkpoint.decode(*checkpoint.encode()) == checkpoint


@pytest.mark.parametrize(
    ("key", "value", "names"),
    [
        (SYNC_KEY[:1], SYNC_VALUE, ["OffsetSync key", "'topic'", "truncated"]),
        (SYNC_KEY[:5], SYNC_VALUE, ["OffsetSync key", "'topic'", "truncated"]),
        (SYNC_KEY[:-1], SYNC_VALUE, ["OffsetSync key", "'partition'", "truncated"]),
        (SYNC_KEY, SYNC_VALUE[:8], ["OffsetSync value", "'offset'", "truncated"]),
        (SYNC_KEY, SYNC_VALUE[:3], ["OffsetSync value", "'upstreamOffset'"]),
        (SYNC_KEY, b"", ["OffsetSync value", "'upstreamOffset'"]),
        (SYNC_KEY + b"\x00", SYNC_VALUE, ["OffsetSync key", "1 trailing bytes"]),
        (SYNC_KEY, SYNC_VALUE + b"\x01\x02", ["OffsetSync value", "2 trailing bytes"]),
        (struct.pack(">h", -1) + struct.pack(">i", 0), SYNC_VALUE, ["'topic'", "negative length -1"]),
        (struct.pack(">h", 2) + b"\xff\xfe" + struct.pack(">i", 0), SYNC_VALUE, ["'topic'", "UTF-8"]),
    ],
)
def test_offset_sync_malformed(key, value, names):
    with pytest.raises(TranslationError) as err:
        OffsetSync.decode(key, value)
    message = str(err.value)
    for name in names:
        assert name in message
    assert "bytes:" in message


@pytest.mark.parametrize(
    ("key", "value", "names"),
    [
        (CHECKPOINT_KEY[:10], CHECKPOINT_VALUE, ["Checkpoint key", "'group'"]),
        (CHECKPOINT_KEY[:-2], CHECKPOINT_VALUE, ["Checkpoint key", "'partition'"]),
        (kafka_string("g") + struct.pack(">h", -5), CHECKPOINT_VALUE, ["'topic'", "negative length -5"]),
        (CHECKPOINT_KEY + b"\x00", CHECKPOINT_VALUE, ["Checkpoint key", "trailing"]),
        (CHECKPOINT_KEY, CHECKPOINT_VALUE[:1], ["Checkpoint value", "'version'"]),
        (CHECKPOINT_KEY, CHECKPOINT_VALUE[:2], ["Checkpoint value", "'upstreamOffset'"]),
        (CHECKPOINT_KEY, CHECKPOINT_VALUE[:-1], ["Checkpoint value", "'metadata'", "truncated"]),
        (CHECKPOINT_KEY, CHECKPOINT_VALUE + b"\x00", ["Checkpoint value", "trailing"]),
        (CHECKPOINT_KEY, struct.pack(">h", 1) + CHECKPOINT_VALUE[2:], ["'version' is 1", "only version 0"]),
        (CHECKPOINT_KEY, struct.pack(">h", -1) + CHECKPOINT_VALUE[2:], ["'version' is -1"]),
        (
            CHECKPOINT_KEY,
            struct.pack(">hqq", 0, 1, 2) + struct.pack(">h", -1),
            ["'metadata'", "negative length"],
        ),
        (
            CHECKPOINT_KEY,
            struct.pack(">hqq", 0, 1, 2) + struct.pack(">h", 1) + b"\x80",
            ["'metadata'", "not valid UTF-8"],
        ),
    ],
)
def test_checkpoint_malformed(key, value, names):
    with pytest.raises(TranslationError) as err:
        Checkpoint.decode(key, value)
    message = str(err.value)
    for name in names:
        assert name in message
    assert "bytes:" in message


def test_malformed_message_shows_hex():
    with pytest.raises(TranslationError, match=SYNC_VALUE[:3].hex()):
        OffsetSync.decode(SYNC_KEY, SYNC_VALUE[:3])


def test_long_bytes_are_truncated_in_messages():
    data = bytes(range(256)) * 4
    text = describe_bytes(data)
    assert "1024 bytes" in text
    assert len(text) < 200
    with pytest.raises(TranslationError) as err:
        OffsetSync.decode(SYNC_KEY, data)
    assert len(str(err.value)) < 400


def test_tombstone_value_is_rejected():
    with pytest.raises(TranslationError, match="tombstone"):
        OffsetSync.decode(SYNC_KEY, None)  # type: ignore[arg-type]


def test_encode_rejects_out_of_range_values():
    with pytest.raises(TranslationError, match="out of range"):
        OffsetSync("t", 2**31, 0, 0).encode()
    with pytest.raises(TranslationError, match="STRING limit"):
        Checkpoint("g" * 40000, "t", 0, 0, 0).encode()


def test_records_are_frozen():
    sync = OffsetSync("t", 0, 1, 2)
    with pytest.raises(AttributeError):
        sync.upstream_offset = 5  # type: ignore[misc]

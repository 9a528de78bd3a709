"""The steady producer says where the records it names were written (what a "lost" assertion prints)."""

from __future__ import annotations

from akf_devtools.sandbox.producer import Delivery, SteadyProducer


def _producer_with(acked: dict[str, Delivery]) -> SteadyProducer:
    producer = SteadyProducer({"A": "unused:1", "B": "unused:2"}, "orders", lambda: "A")
    producer.acked.update(acked)
    return producer


def test_lost_ids_are_grouped_by_cluster_and_partition_with_their_offset_ranges():
    producer = _producer_with(
        {
            "r-0": Delivery("A", 0, 10, 0.0),
            "r-1": Delivery("A", 1, 10, 1.0),
            "r-2": Delivery("B", 0, 0, 2.0),
            "r-3": Delivery("B", 0, 1, 3.0),
            "r-5": Delivery("B", 0, 3, 5.0),
        }
    )
    report = producer.where({"r-2", "r-3", "r-5", "r-1", "never-acked"}).splitlines()
    assert report == [
        "orders on A partition 1: 1 records, offsets 10..10, acknowledged 00:00:01..00:00:01 UTC",
        "orders on B partition 0: 3 records, offsets 0..3 (not contiguous), acknowledged "
        "00:00:02..00:00:05 UTC",
    ]
    assert producer.where(set()) == ""

"""Data loss on a cluster that comes back: its high watermarks went backwards. Pure, no I/O."""

from __future__ import annotations

from collections.abc import Mapping


def find_data_loss(recorded_high: Mapping[str, int], current_high: Mapping[str, int]) -> dict[str, int]:
    """Compare a cluster's high watermarks now with those recorded while it was last active.

    A high watermark never goes back on a healthy cluster; when it does, the offsets in between are
    gone. A partition recorded but absent now counts as fully lost (its recorded high watermark is
    the count; the records below its low watermark then were already gone, so this is an upper bound).
    New partitions are ignored.

    :param recorded_high: ``{partition key: high watermark}`` recorded while the cluster was active.
    :param current_high: the same keys' high watermarks now.
    :returns: ``{partition key: offsets lost}`` for every partition that lost something.
    """
    loss: dict[str, int] = {}
    for key, recorded in recorded_high.items():
        current = current_high.get(key, 0)
        if recorded < 0 or current < 0:
            raise ValueError(
                f"high watermarks must be non-negative, got {recorded} recorded and {current} now for {key}"
            )
        if current < recorded:
            loss[key] = recorded - current
    return loss

"""MirrorMaker 2 heartbeat trails: advancing, stopped or unknown."""

from __future__ import annotations

from airflow_kafka_failover.domain.health.heartbeats import HeartbeatState, HeartbeatTrail
from tests.unit.domain.health.probe_histories import BASE, DEFAULTS


def test_heartbeat_trail_states() -> None:
    t, now = DEFAULTS, BASE + 100
    assert HeartbeatTrail().assess(t, now).state is HeartbeatState.UNKNOWN
    unreachable = HeartbeatTrail(unavailable_reason="cluster B is unreachable too").assess(t, now)
    assert (
        unreachable.state is HeartbeatState.UNKNOWN and "cluster B is unreachable too" in unreachable.reason
    )
    old_look = HeartbeatTrail.from_pairs([(now - 30, int(now * 1000))]).assess(t, now)
    assert old_look.state is HeartbeatState.UNKNOWN and "30.0 s old" in old_look.reason
    fresh = HeartbeatTrail.from_pairs([(now, int((now - 3) * 1000))]).assess(t, now)
    assert fresh.state is HeartbeatState.ADVANCING
    old = HeartbeatTrail.from_pairs([(now, int((now - 11) * 1000))]).assess(t, now)
    assert old.state is HeartbeatState.STOPPED


def test_heartbeat_offsets_need_watching_for_the_stale_time() -> None:
    t, now = DEFAULTS, BASE + 100
    short = HeartbeatTrail.from_pairs([(now - 4, 50), (now - 2, 50), (now, 50)], "offset").assess(t, now)
    assert short.state is HeartbeatState.UNKNOWN and short.pending and "only 4.0 s" in short.reason
    looks = [(now - 2 * i, 50) for i in range(6)]
    assert HeartbeatTrail.from_pairs(looks, "offset").assess(t, now).state is HeartbeatState.STOPPED
    rising = [(now - 2 * i, 50 - i) for i in range(6)]
    assert HeartbeatTrail.from_pairs(rising, "offset").assess(t, now).state is HeartbeatState.ADVANCING
    # A lower offset (a recreated topic) is not progress.
    falling = [(now - 2 * i, 50 + i) for i in range(6)]
    assert HeartbeatTrail.from_pairs(falling, "offset").assess(t, now).state is HeartbeatState.STOPPED


def test_an_increase_long_ago_does_not_keep_heartbeats_advancing() -> None:
    # In-flight heartbeats arrive after the cluster died; one arrival must not block failover forever.
    t, now = DEFAULTS, BASE + 100
    looks = [(now - 40, 10), (now - 38, 11)] + [(now - 2 * i, 11) for i in range(19)]
    assert HeartbeatTrail.from_pairs(looks, "offset").assess(t, now).state is HeartbeatState.STOPPED

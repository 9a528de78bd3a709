"""Issues 18 and 32 on the real sandbox: translation edge cases that block or mislabel a switch.

Each test reproduces one problem of the issue against real brokers and a real MirrorMaker 2, and asserts
the fixed behaviour:

1. Trailing transaction markers: a caught-up job on a transactional topic has no gap, whether the source
   is reachable (the planner counts the records after the newest offset sync) or not (the job's progress
   names its newest record offset), and the switch's plan step does not wait for replication.
2. Partitions with no start offset: after MM2 copied a topic twice, every partition still gets a safe start
   (older copies are kept); the CLI exits 3 when a partition has none, and labels it ``none``.
3. The re-delivery bound holds (or is unknown) when the job read both copies on B and fails back to A.
4. Forward starts in a later copy say that MM2 copied the partition more than once, and which copy is read.
5. (Issue 32) On a topic written in transactions with aborts, the reverse bound next to MM2's offset syncs
   holds and is exact; the record at the position is not one the job processed.
6. (Issue 32) A position older than every offset sync (B's log cleaner compacted them) on that topic: its gap
   is counted in records on A, and with A down it is an upper bound that does not hold a caught-up failover.
   These come last: compacting the offset syncs spoils them for the module's other topics.

The figures (gaps, re-delivered vs bound) are printed: run with ``-s`` to see them.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest
import yaml
from akf_devtools.sandbox.kafka_io import create_topic, end_offsets

from airflow_kafka_failover.core.exceptions import TranslationError
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.active_record import ActiveRecord
from airflow_kafka_failover.domain.config import parse_pair
from airflow_kafka_failover.domain.switch_gate import FAILOVER
from airflow_kafka_failover.domain.translation.plan import TranslationPlan
from airflow_kafka_failover.domain.translation.replication_policy import offset_syncs_topic
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.io.planner import build_plan, load_position
from airflow_kafka_failover.run_format.spark_checkpoint import StreamPosition
from airflow_kafka_failover.switching.steps import make_plan
from tests.integration import translation_support as data
from tests.integration.conftest import register_connections
from tests.integration.waiting import wait_for

# The double-copy test deletes MirrorMaker 2's source offsets, so MM2 copies every topic of the sandbox again.
pytestmark = [pytest.mark.sandbox, pytest.mark.spoils_sandbox]

PARTITIONS = 3
SYNCS_ON_B = offset_syncs_topic("A", "B", "target")
"""The offset syncs of flow A->B; the sandbox's MM2 keeps them on the target (B)."""
MM2_OFFSETS_ON_B = "mm2-offsets.A.internal"
"""Where the dedicated MM2's Connect worker of flow A->B stores its source offsets (on B)."""
COPIED_TWICE = re.compile(
    r"copied .* more than once"  # the syncs show the restart's backwards step: the copy is named
    r"|copied again by a MirrorMaker 2 restart|show restarts of MirrorMaker 2"  # MM2 overwrote that sync
)
BEHIND = "replication is behind"
GAP_WAIT_SECONDS = 30


def _pair_dict(conns: dict[str, str], topics: list[str], **sections) -> dict:
    return {
        "clusters": {"A": {"connection": conns["A"]}, "B": {"connection": conns["B"]}},
        "primary": "A",
        "topics": topics,
        **sections,
    }


def _warnings(plan) -> list[str]:
    return [w for t in plan.translations for w in t.warnings]


def _position(offsets: dict[TopicPartition, int], last_records: dict[TopicPartition, int]):
    """A position with the newest record offsets, and whether StreamPosition can hold them.

    Today's StreamPosition has no ``last_record_offsets``: the position is then built without them, so that
    the test still prints the plan's figures before it fails.
    """
    if "last_record_offsets" in {f.name for f in dataclasses.fields(StreamPosition)}:
        return StreamPosition(offsets=offsets, last_record_offsets=last_records), True
    return StreamPosition(offsets=offsets), False


@pytest.fixture(scope="module")
def clusters(own_sandbox):
    """Connections and hooks of the module's own sandbox."""
    conns = register_connections(own_sandbox, "edges")
    return {
        "conns": conns,
        "hooks": {name: KafkaClusterHook(conn) for name, conn in conns.items()},
        "a": own_sandbox.bootstrap("A"),
        "b": own_sandbox.bootstrap("B"),
    }


# ---- 1. trailing transaction markers ------------------------------------------------------------------


@pytest.fixture(scope="module")
def markers(clusters):
    """A topic on A written only in committed transactions, replicated; the job caught up to its end."""
    a, b = clusters["a"], clusters["b"]
    topic = f"txend-{uuid.uuid4().hex[:6]}"
    create_topic(a, topic, PARTITIONS)
    ids = [f"m-{n}" for n in range(150)]
    data.produce_committed(a, topic, ids, PARTITIONS, per_transaction=15)
    data.wait_replicated(b, f"A.{topic}", set(ids))
    on_a = data.read_ids(a, topic)
    highs = end_offsets(a, topic)
    assert highs is not None
    last = {p: items[-1][0] for p, items in on_a.items()}
    # Each partition ends with a commit marker: its last record is just before it.
    assert all(last[p] == highs[p] - 2 for p in highs), (last, highs)

    def syncs_reach_the_last_records():
        newest = data.newest_offset_syncs(b, SYNCS_ON_B, topic)
        return newest if all(newest.get(p, (-1, -1))[0] == last[p] for p in highs) else None

    # MM2 writes the sync of a partition's last record at its next offset commit (every 5 s), and none
    # for the marker after it: the state the issue describes once replication is complete.
    newest = wait_for(syncs_reach_the_last_records, 60, "MM2 offset syncs of the last records")
    pair = parse_pair(
        "edges-markers",
        _pair_dict(
            clusters["conns"],
            [topic],
            bookkeeping_group=f"edges-markers-{uuid.uuid4().hex[:6]}",
            switch={"on_gap": "wait", "gap_wait_seconds": GAP_WAIT_SECONDS},
        ),
    )
    return {
        "topic": topic,
        "ids": set(ids),
        "highs": highs,
        "last": last,
        "newest_syncs": newest,
        "pair": pair,
    }


def test_trailing_markers_no_gap_with_the_source_reachable(clusters, markers):
    """Item 1 (a): with A reachable, the records after the newest sync are counted; markers are no gap."""
    topic = markers["topic"]
    position = StreamPosition(offsets={TopicPartition(topic, p): h for p, h in markers["highs"].items()})
    plan = build_plan(markers["pair"], "A", "B", position, clusters["hooks"])
    print(
        f"\ntrailing markers, A reachable: gap {plan.total_gap_records} records (highs {markers['highs']}, "
        f"last records {markers['last']}, newest syncs {markers['newest_syncs']})\n{plan.to_table()}"
    )
    assert all(t.target_offset is not None for t in plan.translations), plan.to_table()
    assert plan.total_gap_records == 0, plan.to_table()
    assert not [w for w in _warnings(plan) if BEHIND in w], plan.to_table()
    redelivered, bound = data.check_no_loss(plan, clusters["b"], set(), markers["ids"], f"A.{topic}")
    print(f"trailing markers, A reachable: {redelivered} re-delivered, bound {bound}")
    assert bound is None or redelivered <= bound


def test_trailing_markers_no_gap_with_the_source_down(clusters, markers):
    """Item 1 (b): without A, the job's newest record offsets show the offsets after them held no record."""
    topic = markers["topic"]
    offsets = {TopicPartition(topic, p): h for p, h in markers["highs"].items()}
    last = {TopicPartition(topic, p): o for p, o in markers["last"].items()}
    position, has_last_records = _position(offsets, last)
    plan = build_plan(markers["pair"], "A", "B", position, {"A": None, "B": clusters["hooks"]["B"]})
    print(f"\ntrailing markers, A down: gap {plan.total_gap_records} records\n{plan.to_table()}")
    assert has_last_records, "StreamPosition has no last_record_offsets (the newest record per partition)"
    assert all(t.target_offset is not None for t in plan.translations), plan.to_table()
    assert plan.total_gap_records == 0, plan.to_table()
    assert not [w for w in _warnings(plan) if BEHIND in w], plan.to_table()


def test_trailing_markers_switch_plans_without_waiting(own_sandbox, clusters, markers, tmp_path):
    """Item 1 (c): the failover's plan step, A down, a caught-up job: no wait, gap 0.

    The job's checkpoint is written by hand (one committed batch at A's high watermarks, its progress entry
    naming the newest record offsets). On today's code the step re-plans for ``gap_wait_seconds`` and fails.
    """
    topic, pair = markers["topic"], markers["pair"]
    checkpoint = data.write_spark_checkpoint(tmp_path / "epoch-0", topic, markers["highs"], markers["last"])
    position = load_position(checkpoint=str(checkpoint))
    assert position is not None
    assert position.offsets == {TopicPartition(topic, p): h for p, h in markers["highs"].items()}
    record = ActiveRecord(pair=pair.name, active="A", epoch=0, checkpoint=str(checkpoint))
    own_sandbox.fault("crash", "A")
    try:
        before = build_plan(pair, "A", "B", position, {"A": None, "B": clusters["hooks"]["B"]})
        print(f"\nswitch plan step, A down: build_plan gap {before.total_gap_records} records")
        started = time.monotonic()
        try:
            payload = make_plan(pair, FAILOVER, record, dry_run=False)
        except TranslationError as exc:
            pytest.fail(f"the plan step failed after {time.monotonic() - started:.0f} s: {exc}")
        waited = time.monotonic() - started
    finally:
        own_sandbox.fault("restart", "A")
        _check_replication(own_sandbox, clusters)
    print(f"switch plan step, A down: returned in {waited:.1f} s, gap_records {payload['gap_records']}")
    assert payload["gap_records"] == 0, payload["summary"]
    assert waited < GAP_WAIT_SECONDS / 2, f"the plan step waited {waited:.0f} s for a gap that is not there"
    starts = json.loads(payload["starting_offsets"])
    assert sorted(starts[f"A.{topic}"]) == [str(p) for p in range(PARTITIONS)], starts


def _check_replication(own_sandbox, clusters) -> None:
    """After A's restart, make sure MM2 replicates A->B again (restart it if it does not), for later tests."""
    probe = f"probe-{uuid.uuid4().hex[:6]}"
    create_topic(clusters["a"], probe, 1)
    data.produce_ids(clusters["a"], probe, ["probe-0"], 1)
    try:
        data.wait_replicated(clusters["b"], f"A.{probe}", {"probe-0"}, timeout=60)
    except AssertionError:
        own_sandbox.stop_mirrormaker()
        own_sandbox.start_mirrormaker()
        data.wait_replicated(clusters["b"], f"A.{probe}", {"probe-0"}, timeout=90)


# ---- 2. the CLI's exit code ---------------------------------------------------------------------------


def test_plan_cli_exits_3_when_a_partition_has_no_start(clusters, tmp_path):
    """Item 2: a partition no method can translate, and no safe start exists -> exit 3, JSON still printed.

    Methods ``checkpoint`` only, for a group that never committed (so no checkpoint), and on B the replica's
    partition 0 no longer starts at offset 0 (records deleted): nothing proves a start there is safe.
    """
    a, b = clusters["a"], clusters["b"]
    topic = f"cli-{uuid.uuid4().hex[:6]}"
    create_topic(a, topic, 2)
    ids = [f"c-{n}" for n in range(40)]
    data.produce_ids(a, topic, ids, 2)
    data.wait_replicated(b, f"A.{topic}", set(ids))
    assert data.delete_records_before(b, f"A.{topic}", 0, 5) == 5
    on_a = data.read_ids(a, topic)
    position = json.dumps({topic: {str(p): items[-1][0] + 1 for p, items in on_a.items()}})
    group = f"never-committed-{uuid.uuid4().hex[:6]}"
    pairs = {
        "edges-cli-bad": _pair_dict(
            clusters["conns"], [topic], bookkeeping_group=group, translation={"methods": ["checkpoint"]}
        ),
        "edges-cli-good": _pair_dict(
            clusters["conns"],
            [topic],
            bookkeeping_group=group,
            translation={"methods": ["checkpoint", "offset_sync"]},
        ),
    }
    config = tmp_path / "pairs.yaml"
    config.write_text(yaml.safe_dump({"pairs": pairs}))

    def plan_cli(pair: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "airflow_kafka_failover.cli", "plan", "--config", str(config)]
        argv += ["--pair", pair, "--from", "A", "--to", "B", "--position", position, "--json"]
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)

    bad = plan_cli("edges-cli-bad")
    print(f"\nplan CLI, no start for A.{topic}-0: exit {bad.returncode}\n{bad.stdout}\n{bad.stderr[-2000:]}")
    assert bad.stdout.startswith("{"), bad.stderr[-3000:]
    translations = {
        (t["target_topic"], t["target_partition"]): t for t in json.loads(bad.stdout)["translations"]
    }
    without = translations[(f"A.{topic}", 0)]
    assert without["target_offset"] is None, without
    unlabelled = [t for t in translations.values() if t["target_offset"] is None and t["method"] != "none"]
    assert not unlabelled, (
        f"partitions without a start labelled with a method that produced nothing: {unlabelled}"
    )
    assert bad.returncode == 3, (bad.returncode, bad.stderr[-3000:])
    assert f"A.{topic}-0" in bad.stderr, bad.stderr[-3000:]

    good = plan_cli("edges-cli-good")
    assert good.returncode == 0, good.stderr[-3000:]
    assert all(t["target_offset"] is not None for t in json.loads(good.stdout)["translations"]), good.stdout


# ---- 3. MM2 copied the topic twice ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def double_copy(own_sandbox, clusters):
    """A topic MM2 copied twice into B (it forgot its source offsets), then 150 more ids copied once."""
    a, b = clusters["a"], clusters["b"]
    topic = f"twice-{uuid.uuid4().hex[:6]}"
    replica = f"A.{topic}"
    create_topic(a, topic, PARTITIONS)
    first = [f"d-{n}" for n in range(300)]
    data.produce_with_aborts(a, topic, first, PARTITIONS)
    data.wait_replicated(b, replica, set(first))
    own_sandbox.stop_mirrormaker()
    try:
        offsets_topics = data.topics_named(b, "mm2-offsets.")
        assert MM2_OFFSETS_ON_B in offsets_topics, offsets_topics
        data.delete_topic(b, MM2_OFFSETS_ON_B)
    finally:
        own_sandbox.start_mirrormaker()

    def copied_twice():
        counts = Counter(r[1] for items in data.read_ids(b, replica).values() for r in items)
        return all(counts[i] >= 2 for i in first)

    wait_for(copied_twice, 180, f"MM2 copying {topic} again from offset 0", interval=3.0)
    later = [f"e-{n}" for n in range(150)]
    data.produce_ids(a, topic, later, PARTITIONS)
    data.wait_replicated(b, replica, set(later))
    on_b = data.read_ids(b, replica)
    counts = Counter(r[1] for items in on_b.values() for r in items)
    assert {i: counts[i] for i in first} == dict.fromkeys(first, 2), "every first id copied exactly twice"
    assert {i: counts[i] for i in later} == dict.fromkeys(later, 1), "every later id copied once"
    aborted = sorted(i for i in counts if i.startswith("aborted"))
    assert not aborted, f"MM2 copied records of aborted transactions (it must read committed): {aborted[:3]}"
    pair = parse_pair(
        "edges-twice",
        _pair_dict(clusters["conns"], [topic], bookkeeping_group=f"edges-twice-{uuid.uuid4().hex[:6]}"),
    )
    return {
        "topic": topic,
        "replica": replica,
        "ids": set(first) | set(later),
        "on_a": data.read_ids(a, topic),
        "on_b": on_b,
        "pair": pair,
    }


@pytest.mark.parametrize("fraction", [0.3, 0.6, 1.0])
def test_double_copy_forward_start_says_which_copy(clusters, double_copy, fraction):
    """Items 2 and 4, forward A->B: a start in every partition, nothing lost, and the copy named."""
    topic, replica = double_copy["topic"], double_copy["replica"]
    offsets, processed, _newest = data.position_at(double_copy["on_a"], fraction)
    position = StreamPosition(offsets={TopicPartition(topic, p): o for p, o in offsets.items()})
    plan = build_plan(double_copy["pair"], "A", "B", position, clusters["hooks"])
    print(f"\nforward A->B, cut {fraction} of A's records:\n{plan.to_table()}")
    assert all(t.target_offset is not None and t.method != "none" for t in plan.translations), plan.to_table()
    redelivered, bound = data.check_no_loss(
        plan, clusters["b"], double_copy["ids"] - processed, processed, replica
    )
    print(f"forward A->B, cut {fraction}: {redelivered} re-delivered, bound {bound}")
    assert bound is None or redelivered <= bound, plan.to_table()
    # Every start with a record copied twice at or after it says so. Which wording depends on whether MM2
    # sent the sync of its restart (it overwrites a pending one); a start after every repeated record
    # reads no copy twice and need not say anything (seen in a CI-like run: cut 1.0, partition 2).
    on_b = double_copy["on_b"]
    twice = {i for i, n in Counter(r[1] for items in on_b.values() for r in items).items() if n >= 2}
    unnamed = [
        t
        for t in plan.translations
        if any(r[1] in twice and r[0] >= t.target_offset for r in on_b[t.target.partition])
        and not any(COPIED_TWICE.search(w) for w in t.warnings)
    ]
    assert not unnamed, f"starts before a record MM2 copied twice that do not say so: {unnamed}"


@pytest.mark.parametrize("fraction", [0.2, 0.7], ids=["in-first-copy", "in-second-copy"])
def test_double_copy_reverse_start_and_bound(clusters, double_copy, fraction):
    """Items 2 and 3, reverse B->A: the job read both copies on B; a start everywhere, a bound that holds."""
    topic, replica = double_copy["topic"], double_copy["replica"]
    offsets, processed, _newest = data.position_at(double_copy["on_b"], fraction)
    position = StreamPosition(offsets={TopicPartition(replica, p): o for p, o in offsets.items()})
    plan = build_plan(double_copy["pair"], "B", "A", position, clusters["hooks"])
    print(f"\nreverse B->A, cut {fraction} of B's records (positions {offsets}):\n{plan.to_table()}")
    without = [str(t.target) for t in plan.translations if t.target_offset is None]
    if without:
        print(f"reverse B->A, cut {fraction}: no start offset for {without}")
    assert not without, plan.to_table()
    assert all(t.method != "none" for t in plan.translations), plan.to_table()
    redelivered, bound = data.check_no_loss(
        plan, clusters["a"], double_copy["ids"] - processed, processed, topic
    )
    per_partition = _redelivered_per_partition(plan, clusters["a"], topic, processed)
    print(
        f"reverse B->A, cut {fraction}: {redelivered} re-delivered, bound {bound}; per partition "
        f"(re-delivered, bound): {per_partition}"
    )
    assert bound is None or redelivered <= bound, plan.to_table()
    broken = {p: v for p, v in per_partition.items() if v[1] is not None and v[0] > v[1]}
    assert not broken, f"partitions re-delivering more than their bound: {broken}"


def _redelivered_per_partition(plan, bootstrap: str, topic: str, processed: set[str]) -> dict:
    """Per target partition: (records re-delivered from the plan's start, the plan's bound)."""
    starts = {t.target.partition: t.target_offset for t in plan.translations if t.target.topic == topic}
    seen = data.read_ids(bootstrap, topic, starts)
    bounds = {t.target.partition: t.redelivery_bound for t in plan.translations if t.target.topic == topic}
    return {p: (sum(1 for r in seen[p] if r[1] in processed), bounds[p]) for p in sorted(starts)}


# ---- 5 and 6 (issue 32): a topic written in transactions with aborts -------------------------------------


@pytest.fixture(scope="module")
def aborts(clusters):
    """A topic on A written in transactions, one of them aborted after every 12 records, replicated to B.

    Each partition takes 7 offsets per 4 records (a commit marker, an aborted record and its marker), so MM2's
    offset syncs fall on every first record after an abort, and offsets on B fall behind those on A.
    """
    a, b = clusters["a"], clusters["b"]
    topic = f"aborts-{uuid.uuid4().hex[:6]}"
    create_topic(a, topic, PARTITIONS)
    ids = [f"t-{n}" for n in range(240)]
    data.produce_with_aborts(a, topic, ids, PARTITIONS, every=12)
    data.wait_replicated(b, f"A.{topic}", set(ids))
    pair = parse_pair(
        "edges-aborts",
        _pair_dict(
            clusters["conns"],
            [topic],
            bookkeeping_group=f"edges-aborts-{uuid.uuid4().hex[:6]}",
            switch={"on_gap": "wait", "gap_wait_seconds": GAP_WAIT_SECONDS},
        ),
    )
    return {"topic": topic, "replica": f"A.{topic}", "ids": set(ids), "pair": pair}


def test_reverse_bound_next_to_offset_syncs_with_aborts(clusters, aborts):
    """Issue 32, item 2: failback of a job that read the replica on B, at positions next to MM2's syncs.

    The position is the next offset the job would process. The stated bound holds at every position, and is
    exact while MM2 copied each record once. Counting the record at the position as processed too, as the
    issue did ("processed every record up to offset 91"), finds one re-delivery more than the bound.
    """
    a, b = clusters["a"], clusters["b"]
    topic, replica = aborts["topic"], aborts["replica"]
    on_a, on_b = data.read_ids(a, topic), data.read_ids(b, replica)
    # A task of MM2 that restarts (e.g. when MM2 rebalances them for a new topic) copies some records again.
    copied_once = set(Counter(r[1] for items in on_b.values() for r in items).values()) == {1}
    id_at = {p: {offset: record_id for offset, record_id, _ in items} for p, items in on_b.items()}
    syncs = data.offset_syncs_of(b, SYNCS_ON_B, topic)
    # MM2 replaces a pending sync when a newer one is due before the first was sent: under load (after the
    # double copy above) a partition can go without syncs until MM2's next offset commit. Positions at or
    # after a partition's oldest sync (before it the plan starts at offset 0, earliest), where there is one.
    near = {
        p: [
            d + delta
            for _, d in syncs[p]
            for delta in (-1, 0, 1, 2)
            if max(1, syncs[p][0][1]) <= d + delta < len(on_b[p])
        ]
        for p in syncs
    }
    near = {p: positions for p, positions in near.items() if positions}
    assert near, f"no position next to an offset sync of {topic}: {syncs}"
    rows = []
    for turn in range(6):
        offsets = {p: near[p][(turn * 7 + 3 * p) % len(near[p])] for p in near}
        position = StreamPosition(offsets={TopicPartition(replica, p): o for p, o in offsets.items()})
        plan = build_plan(aborts["pair"], "B", "A", position, clusters["hooks"])
        for t in plan.translations:
            p, start = t.target.partition, t.target_offset
            assert t.method == "offset_sync_reverse" and start is not None, plan.to_table()
            read = {id_at[p][o] for o in range(offsets[p])}
            read_through = read | {id_at[p][offsets[p]]}  # the reading: the position processed too
            after_start = [record_id for offset, record_id, _ in on_a[p] if offset >= start]
            again = sum(1 for record_id in after_start if record_id in read)
            again_through = sum(1 for record_id in after_start if record_id in read_through)
            rows.append((p, offsets[p], start, t.redelivery_bound, again, again_through))
    print("\nreverse B->A next to offset syncs: (partition, position, start, bound, re-read, re-read if the")
    print(f"record at the position counted as processed) {rows}")
    assert all(bound is not None and again <= bound for _, _, _, bound, again, _ in rows), rows
    if copied_once:  # then every offset of B before the position holds the copy of one original
        assert all(again == bound for _, _, _, bound, again, _ in rows), rows
        assert all(through == bound + 1 for _, _, _, bound, _, through in rows), rows


@pytest.fixture(scope="module")
def compacted(clusters, aborts):
    """B's log cleaner compacted the offset syncs: a job 3 records into each partition is older than them all.

    Compaction keeps one sync per partition of the syncs topic's older segments, as it does in production;
    here within seconds. One more record per partition makes MM2 write a sync, which rolls the segment.
    """
    a, b = clusters["a"], clusters["b"]
    topic, replica = aborts["topic"], aborts["replica"]
    on_a = data.read_ids(a, topic)
    positions = {p: items[3][0] for p, items in on_a.items()}
    data.compact_soon(b, SYNCS_ON_B)
    nudges = [f"n-{p}" for p in range(PARTITIONS)]
    data.produce_ids(a, topic, nudges, PARTITIONS)

    def older_than_every_sync():
        oldest = {p: syncs[0] for p, syncs in data.offset_syncs_of(b, SYNCS_ON_B, topic).items()}
        done = len(oldest) == PARTITIONS and all(oldest[p][0] > positions[p] for p in positions)
        return oldest if done else None

    oldest = wait_for(older_than_every_sync, 60, "B's log cleaner compacting the offset syncs", interval=1.0)
    data.wait_replicated(b, replica, set(nudges))
    return {
        "positions": positions,
        "last_records": {p: items[2][0] for p, items in on_a.items()},
        "processed": {r[1] for items in on_a.values() for r in items[:3]},
        "oldest": oldest,
        "ids": aborts["ids"] | set(nudges),
        "never_copied": _never_copied(a, b, topic, replica, positions, oldest),
    }


def _offsets_between(positions: dict, oldest: dict) -> int:
    """What offsets count as never copied: the offsets from each position to the oldest sync ``(u0, d0)``
    beyond the ``d0`` records below it on B (markers and aborted records included)."""
    return sum(max(0, oldest[p][0] - positions[p] - oldest[p][1]) for p in positions)


def _never_copied(a: str, b: str, topic: str, replica: str, positions: dict, oldest: dict) -> int:
    """Records of A between each position and the oldest sync that are not on B: the truth of the gap."""
    on_b = {r[1] for items in data.read_ids(b, replica).values() for r in items}
    return sum(
        1
        for p, items in data.read_ids(a, topic).items()
        for offset, record_id, _ in items
        if positions[p] <= offset < oldest[p][0] and record_id not in on_b
    )


def test_gap_before_the_oldest_sync_counted_in_records_with_the_source_reachable(clusters, aborts, compacted):
    """Issue 32, item 1 (a): every partition starts at B's offset 0 (earliest), and with A reachable its gap
    is counted in records on A: markers and aborted records are no gap."""
    topic, positions, oldest = aborts["topic"], compacted["positions"], compacted["oldest"]
    position = StreamPosition(offsets={TopicPartition(topic, p): o for p, o in positions.items()})
    plan = build_plan(aborts["pair"], "A", "B", position, clusters["hooks"])
    by_offsets = _offsets_between(positions, oldest)
    print(
        f"\ngap before the oldest sync, A reachable: stated {plan.total_gap_records} record(s), counted in "
        f"offsets {by_offsets}, never copied {compacted['never_copied']} (positions {positions}, oldest "
        f"syncs {oldest})\n{plan.to_table()}"
    )
    assert by_offsets > 0, "the offsets between the positions and the oldest syncs hold no marker"
    assert all(t.method == "earliest" and t.target_offset == 0 for t in plan.translations), plan.to_table()
    assert plan.total_gap_records == compacted["never_copied"] == 0, plan.to_table()
    assert not any(t.gap_upper_bound for t in plan.translations), plan.to_table()
    processed = compacted["processed"]
    redelivered, bound = data.check_no_loss(
        plan, clusters["b"], compacted["ids"] - processed, processed, aborts["replica"]
    )
    print(f"gap before the oldest sync, A reachable: {redelivered} re-delivered, bound {bound}")
    assert bound is not None and redelivered <= bound


def test_gap_before_the_oldest_sync_does_not_hold_a_caught_up_failover(
    own_sandbox, clusters, aborts, compacted, tmp_path
):
    """Issue 32, item 1 (b): the failover's plan step with A down (on_gap: wait). The gap is an upper bound
    in offsets, said so; the heartbeats replicated past the replica's end show replication complete, so the
    step does not wait. On the code before, it re-planned for ``gap_wait_seconds`` and failed."""
    topic, pair, positions = aborts["topic"], aborts["pair"], compacted["positions"]
    checkpoint = data.write_spark_checkpoint(
        tmp_path / "epoch-0", topic, positions, compacted["last_records"]
    )
    record = ActiveRecord(pair=pair.name, active="A", epoch=0, checkpoint=str(checkpoint))
    own_sandbox.fault("crash", "A")
    try:
        started = time.monotonic()
        try:
            payload = make_plan(pair, FAILOVER, record, dry_run=False)
        except TranslationError as exc:
            pytest.fail(f"the plan step failed after {time.monotonic() - started:.0f} s: {exc}")
        waited = time.monotonic() - started
    finally:
        own_sandbox.fault("restart", "A")
        _check_replication(own_sandbox, clusters)
    plan = TranslationPlan.from_json(payload["plan"])
    by_offsets = _offsets_between(positions, compacted["oldest"])
    print(
        f"\ngap before the oldest sync, failover with A down: returned in {waited:.1f} s, stated "
        f"{payload['gap_records']} (an upper bound in offsets: {by_offsets}), never copied "
        f"{compacted['never_copied']}\n{plan.to_table()}"
    )
    assert waited < GAP_WAIT_SECONDS / 2, f"the plan step waited {waited:.0f} s for a gap that is not there"
    assert payload["gap_records"] == by_offsets >= compacted["never_copied"]
    assert all(t.gap_upper_bound and t.replication_complete for t in plan.translations), plan.to_table()
    assert all(any("upper bound counted in offsets" in w for w in t.warnings) for t in plan.translations)
    assert plan.blocking_gaps == []

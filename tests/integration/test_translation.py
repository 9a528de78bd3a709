"""Translation against real MirrorMaker 2 with offsets that really diverge between the clusters.

On A, aborted transactions leave offsets that MM2 does not copy, and MM2 is restarted midway (it may copy
some records twice). A job position is cut on A, translated to B, and B is read from the translated
offsets: no record after the position may be missing, and re-deliveries stay within the plan's bound.
Then the job "runs on B" (records are produced on B too) and the position is translated back to A.
"""

from __future__ import annotations

import json
import uuid

import pytest
from akf_devtools.sandbox.kafka_io import create_topic, read_all

from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.domain.config import parse_pair
from airflow_kafka_failover.domain.translation.mm2_records import Checkpoint
from airflow_kafka_failover.hooks.kafka_cluster import KafkaClusterHook
from airflow_kafka_failover.io.planner import build_plan, load_position
from airflow_kafka_failover.run_format.spark_checkpoint import StreamPosition
from tests.integration import translation_support as data
from tests.integration.conftest import register_connections
from tests.integration.waiting import wait_for

TOPIC = "orders"
PARTITIONS = 3
GROUP = "bookkeeping-orders"


@pytest.fixture(scope="module")
def world(own_sandbox):
    """A diverged replica of ``orders`` on B, a job position on A, and the pair config."""
    conns = register_connections(own_sandbox, "translation")
    a, b = own_sandbox.bootstrap("A"), own_sandbox.bootstrap("B")
    create_topic(a, TOPIC, PARTITIONS)
    ids = [f"a-{n}" for n in range(900)]
    aborted = data.produce_with_aborts(a, TOPIC, ids[:300], PARTITIONS)
    data.wait_replicated(b, f"A.{TOPIC}", set(ids[:300]))
    own_sandbox.stop_mirrormaker()
    data.produce_ids(a, TOPIC, ids[300:600], PARTITIONS)
    own_sandbox.start_mirrormaker()
    data.produce_with_aborts(a, TOPIC, ids[600:], PARTITIONS)
    data.wait_replicated(b, f"A.{TOPIC}", set(ids))

    on_a = data.read_ids(a, TOPIC)
    offsets, processed, _newest = data.position_at(on_a, 0.6)
    data.commit_group(a, GROUP, TOPIC, offsets)
    pair = parse_pair(
        "orders",
        {
            "clusters": {"A": {"connection": conns["A"]}, "B": {"connection": conns["B"]}},
            "primary": "A",
            "topics": [TOPIC],
            "bookkeeping_group": GROUP,
            "translation": {"methods": ["checkpoint", "offset_sync", "offset_sync_reverse", "timestamp"]},
        },
    )
    hooks = {name: KafkaClusterHook(conn) for name, conn in conns.items()}
    return {
        "pair": pair,
        "hooks": hooks,
        "ids": ids,
        "aborted": aborted,
        "on_a": on_a,
        "offsets": offsets,
        "processed": processed,
        "a": a,
        "b": b,
    }


def test_offsets_really_diverge(world):
    replica = data.read_ids(world["b"], f"A.{TOPIC}")
    for partition, items in world["on_a"].items():
        a_offsets = [record[0] for record in items]
        b_offsets = {record[1]: record[0] for record in replica[partition]}
        assert any(b_offsets[record[1]] != record[0] for record in items), "offsets should differ"
        assert a_offsets[-1] > len(items) - 1  # aborted records and markers took offsets on A


def test_forward_translation_by_offset_syncs_loses_nothing(world):
    pair = world["pair"]
    position = StreamPosition(offsets={TopicPartition(TOPIC, p): o for p, o in world["offsets"].items()})
    plan = build_plan(pair, "A", "B", position, world["hooks"])
    assert {t.method for t in plan.translations} <= {"checkpoint", "offset_sync"}
    must_see = set(world["ids"]) - world["processed"]
    redelivered, bound = data.check_no_loss(plan, world["b"], must_see, world["processed"], f"A.{TOPIC}")
    print(f"forward: {redelivered} re-delivered, bound {bound}\n{plan.to_table()}")
    if bound is not None:
        assert redelivered <= bound
    spark = plan.to_spark_starting_offsets()
    # Every partition of every target topic; B's own orders does not exist yet and is left out.
    assert json.loads(spark).keys() == {f"A.{TOPIC}"}
    assert len(json.loads(spark)[f"A.{TOPIC}"]) == PARTITIONS


def test_checkpoint_method_matches_kafkas_own_translation(world, tmp_path):
    b = world["b"]

    def checkpoints_at_position():
        found = {}
        for record in read_all(b, "A.checkpoints.internal"):
            checkpoint = Checkpoint.decode(record.key, record.value)
            if checkpoint.group == GROUP:
                found[checkpoint.partition] = checkpoint.upstream_offset
        return found == world["offsets"]

    wait_for(checkpoints_at_position, 60, "MM2 checkpoints of the bookkeeping group at the job's position")
    # Checkpoints alone, so that every partition is translated by the method under test.
    pair = parse_pair("orders", {**_pair_dict(world), "translation": {"methods": ["checkpoint"]}})
    position = load_position(group=GROUP, group_hook=world["hooks"]["A"])
    plan = build_plan(pair, "A", "B", position, world["hooks"])
    oracle = data.run_oracle(b, "A", GROUP, tmp_path)
    by_checkpoint = [t for t in plan.translations if t.method == "checkpoint"]
    assert len(by_checkpoint) == PARTITIONS, plan.to_table()
    for translation in by_checkpoint:
        assert translation.target_offset == oracle[translation.target], (translation, oracle)


def test_failback_translation_both_routes_loses_nothing(world, own_sandbox):
    """The job ran on B reading A.orders and B's own orders; translate back to A."""
    a, b = world["a"], world["b"]
    create_topic(b, TOPIC, PARTITIONS)
    on_b_ids = [f"b-{n}" for n in range(450)]
    data.produce_with_aborts(b, TOPIC, on_b_ids, PARTITIONS, every=15)
    data.wait_replicated(a, f"B.{TOPIC}", set(on_b_ids))

    replica = data.read_ids(b, f"A.{TOPIC}")
    local = data.read_ids(b, TOPIC)
    replica_offsets, replica_done, replica_newest = data.position_at(replica, 0.8)
    local_offsets, local_done, local_newest = data.position_at(local, 0.5)
    offsets = {TopicPartition(f"A.{TOPIC}", p): o for p, o in replica_offsets.items()}
    offsets.update({TopicPartition(TOPIC, p): o for p, o in local_offsets.items()})
    # Newest processed timestamps, as the job's progress entries provide them: the fallback method.
    newest = {TopicPartition(f"A.{TOPIC}", p): ts for p, ts in replica_newest.items()}
    newest.update({TopicPartition(TOPIC, p): ts for p, ts in local_newest.items()})
    position = StreamPosition(offsets=offsets, max_timestamps_ms=newest)
    plan = build_plan(world["pair"], "B", "A", position, world["hooks"])
    assert all(t.target_offset is not None for t in plan.translations), plan.to_table()
    methods = {t.source.topic: t.method for t in plan.translations}
    assert methods[f"A.{TOPIC}"] == "offset_sync_reverse", plan.to_table()

    all_a_ids = {record[1] for items in replica.values() for record in items}
    redelivered, bound = data.check_no_loss(plan, a, all_a_ids - replica_done, replica_done, TOPIC)
    print(f"reverse: {redelivered} re-delivered, bound {bound}")
    if bound is not None:
        assert redelivered <= bound
    redelivered, bound = data.check_no_loss(plan, a, set(on_b_ids) - local_done, local_done, f"B.{TOPIC}")
    print(f"forward B->A: {redelivered} re-delivered, bound {bound}\n{plan.to_table()}")
    if bound is not None:
        assert redelivered <= bound


def test_bad_positions_are_refused_with_names(world):
    from airflow_kafka_failover.core.exceptions import ConfigError, TranslationError

    pair = world["pair"]
    other = StreamPosition(offsets={TopicPartition("payments", 0): 5})
    with pytest.raises(
        TranslationError, match=r"topics \['payments'\] that pair 'orders' does not read on cluster A"
    ):
        build_plan(pair, "A", "B", other, world["hooks"])
    wrong_count = StreamPosition(offsets={TopicPartition(TOPIC, p): 0 for p in range(PARTITIONS + 2)})
    with pytest.raises(
        TranslationError,
        match=rf"{TOPIC} has {PARTITIONS + 2} partitions on A but A.{TOPIC} has "
        rf"{PARTITIONS} on B",
    ):
        # With the source down, its partition count comes from the position itself.
        build_plan(pair, "A", "B", wrong_count, {"A": None, "B": world["hooks"]["B"]})
    with pytest.raises(ConfigError, match="negative"):
        StreamPosition.from_json('{"orders": {"0": -4}}')
    with pytest.raises(ConfigError):
        StreamPosition.from_json('{"orders": {"0": "twelve"}}')
    missing = parse_pair("orders2", {**_pair_dict(world), "topics": [f"missing-{uuid.uuid4().hex[:6]}"]})
    with pytest.raises(TranslationError, match=r"none of the topics .* exist on the target cluster B"):
        build_plan(missing, "A", "B", None, world["hooks"])


def _pair_dict(world) -> dict:
    pair = world["pair"]
    return {
        "clusters": {n: {"connection": c.connection} for n, c in pair.clusters.items()},
        "primary": "A",
        "topics": list(pair.topics),
        "bookkeeping_group": GROUP,
    }


def test_plan_cli_prints_the_plan(world, tmp_path):
    import subprocess
    import sys

    import yaml

    config = tmp_path / "pairs.yaml"
    config.write_text(yaml.safe_dump({"pairs": {"orders": _pair_dict(world)}}))
    position = json.dumps({TOPIC: {str(p): o for p, o in world["offsets"].items()}})
    cli = [
        sys.executable,
        "-m",
        "airflow_kafka_failover.cli",
        "plan",
        "--config",
        str(config),
        "--pair",
        "orders",
    ]
    result = subprocess.run(
        [*cli, "--from", "A", "--to", "B", "--position", position, "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("{"), result.stdout[:500]
    plan = json.loads(result.stdout)
    assert plan["source_cluster"] == "A" and plan["target_cluster"] == "B"
    table = subprocess.run(
        [*cli, "--from", "A", "--to", "B", "--position", position],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert "A -> B: 3 partitions translated" in table.stdout
    same = subprocess.run(
        [*cli, "--from", "A", "--to", "A", "--position", position],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert same.returncode == 1 and "--from and --to are both 'A'" in same.stderr
    unknown = subprocess.run(
        [*cli, "--from", "A", "--to", "C", "--position", position],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert unknown.returncode == 1 and "pair 'orders' has no cluster 'C'" in unknown.stderr
    corrupt = tmp_path / "ckpt"
    (corrupt / "offsets").mkdir(parents=True)
    (corrupt / "commits").mkdir()
    (corrupt / "offsets" / "0").write_text('v1\n{}\n{"orders": {"0": "x"}}\n')
    (corrupt / "commits" / "0").write_text("v1\n{}\n")
    bad = subprocess.run(
        [*cli, "--from", "A", "--to", "B", "--checkpoint", str(corrupt)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert bad.returncode == 1 and "ckpt/offsets/0:3: orders-0 has non-numeric offset 'x'" in bad.stderr, (
        bad.stderr
    )


def test_replication_behind_the_position_is_a_gap_with_its_count(world, own_sandbox):
    """MM2 stopped; the job read further on A than B holds: the plan reports the gap, never hides it."""
    a = world["a"]
    own_sandbox.stop_mirrormaker()
    try:
        late = [f"late-{n}" for n in range(150)]
        data.produce_ids(a, TOPIC, late, PARTITIONS)
        on_a = data.read_ids(a, TOPIC)
        end = {TopicPartition(TOPIC, p): items[-1][0] + 1 for p, items in on_a.items()}
        plan = build_plan(world["pair"], "A", "B", StreamPosition(offsets=end), world["hooks"])
        assert plan.has_gaps, plan.to_table()
        assert plan.total_gap_records >= len(late), plan.to_table()
        assert all("replication is behind the job" in " ".join(t.warnings) for t in plan.gaps)
    finally:
        own_sandbox.start_mirrormaker()
    data.wait_replicated(world["b"], f"A.{TOPIC}", set(late))
    caught_up = build_plan(world["pair"], "A", "B", StreamPosition(offsets=end), world["hooks"])
    assert caught_up.total_gap_records < len(late), caught_up.to_table()

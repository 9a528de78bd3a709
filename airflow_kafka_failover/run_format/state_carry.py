"""Carry a stateful query's checkpoint to the other cluster: a copy of one committed batch whose source
positions are the switch plan's start offsets on the target's topics.

A switch starts the job on a new checkpoint (``<checkpoint_root>/<pair>/<cluster>/epoch-<n>``), and
Spark reads ``startingOffsets`` only for a checkpoint with no offsets log. An empty checkpoint therefore
starts every stateful operator (windowed aggregations, ``dropDuplicates``, state stores, stream-stream joins)
empty, and the event-time watermark from nothing. A carried checkpoint keeps them.

What Spark reads when a query starts on a checkpoint that holds batches (``MicroBatchExecution``'s
``populateStartOffsets``, the same from Spark 3.5 to 4.2): ``metadata`` (the query id), the newest
``offsets/<b>``, the one before it (``offsets/<b-1>`` must exist when ``b > 0``) and the newest
``commits/<b>``. When both newest batches are ``b``, the next batch is ``b + 1``: it starts at the positions
of ``offsets/<b>``, with the watermark of ``commits/<b>`` and the session settings (shuffle partitions, state
store provider) of ``offsets/<b>``'s metadata line, and every stateful operator loads its store at version
``b + 1`` from ``state/<operator>/<partition>/``. So the new run's checkpoint gets:

- **copied unchanged**: ``commits/<b>``; every file under ``state/`` that belongs to a store
  version up to ``b + 1`` (``<v>.delta``, ``<v>.snapshot``, RocksDB's ``<v>.zip`` and ``<v>.changelog``,
  ``<v>_<id>.*`` of the second checkpoint format) or to a batch up to ``b`` (the operator metadata and schema
  files under ``_metadata/`` and ``_stateSchema/``), and the files that name no version (RocksDB's shared
  ``SSTs/``, schema files);
- **rewritten**: ``offsets/<b>`` and ``offsets/<b-1>``: the version line and the metadata line as they were,
  each Kafka source's line replaced by the start offsets of the plan under the target's topic names
  (``orders`` read on A becomes ``A.orders`` on B, and back); ``metadata`` with a new query id: the new run
  goes on from batch ``b + 1``, which the old run may have written to a sink before it was stopped, and a
  sink that keys its idempotence on (query id, batch id), as Delta's streaming sink does, would skip the new
  run's batch, records the old run's never held among them. No state depends on the query id;
- **written**: ``_carrying.json`` first (a copy under way), ``progress/<b>``, the new run's first progress
  entry (the start offsets, no records, marked ``carried``), then ``_owner.json`` with ``carried_from``, last:
  it marks the copy whole. The job refuses a checkpoint that holds batches but no owner file, so a copy that
  stopped half way is never started; the next carry into it, or the submit of a run that starts without
  state, clears it first (:func:`clear_interrupted_carry`).
- **left out**: ``sources/`` (the Kafka source's initial offsets, read only by a query without an offsets
  log; the new run's ``startingOffsets`` are the same start offsets anyway), the old run's ``progress/``
  and owner file, checksums (``.crc``) and Spark's temporaries (names starting with ``.``), and every file of
  a later batch or version (a batch the old job committed after the plan read its position is not carried:
  its records are read again, from the carried state of the batch before).

The old checkpoint is only read. Every file goes through ``core/storage``, so this works on local disk, HDFS
and S3 alike.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from airflow_kafka_failover.core.exceptions import CheckpointError
from airflow_kafka_failover.core.storage import locations
from airflow_kafka_failover.core.storage.store import (
    StoreUnavailable,
    create_json,
    open_store,
    read_json,
    replace_json,
)
from airflow_kafka_failover.core.types import TopicPartition
from airflow_kafka_failover.run_format.layout import OWNER_FILE
from airflow_kafka_failover.run_format.progress_log import PROGRESS_DIR, batch_numbers
from airflow_kafka_failover.run_format.source_offsets import kafka_offsets_from_json
from airflow_kafka_failover.run_format.spark_checkpoint import parse_offsets_file

CARRYING_FILE = "_carrying.json"
"""Written before a carry copies anything and removed once the owner file is there: the mark of a copy that
stopped half way, which the next carry or submit clears (a folder with files and neither file is left
alone)."""
STATE_DIR = "state"
"""The folder of the stateful operators' stores in a checkpoint (Spark makes it for a stateful query only)."""
COMMIT_LOG_VERSION = "v1"
"""The commit log format Spark 3.5 to 4.2 write (``commits/<b>``: ``v1``, then a JSON line)."""
SHUFFLE_PARTITIONS_CONF = "spark.sql.shuffle.partitions"
"""The session setting, fixed at the query's first batch, that gives each operator's number of partitions."""

_VERSIONED = re.compile(r"([0-9]+)(?:[._].*)?")
_OPERATOR = re.compile(r"[0-9]+")
_BATCH_INDEXED = ("_metadata", "_stateSchema")
"""Folders of an operator whose versioned files are named by batch id, not by store version."""
_UNVERSIONED_FOLDERS = ("SSTs", "logs")
"""RocksDB's folders of files shared between versions (kept whole)."""
_WHAT_TO_DO = (
    "restore the checkpoint from a backup, or set the pair's job.state: fresh to start the new run with "
    "empty state (the switch history records what is dropped)"
)


@dataclass(frozen=True)
class CheckpointState:
    """The state of one committed batch of a checkpoint, checked and ready to copy.

    :param checkpoint: the checkpoint (a local folder or a store URI).
    :param batch_id: the committed batch whose state it is (its stores are at version ``batch_id + 1``).
    :param operators: the stateful operators' ids (``state/<id>``).
    :param files: the files under ``state/`` that make up that version, relative to the checkpoint.
    """

    checkpoint: str
    batch_id: int
    operators: tuple[str, ...]
    files: tuple[str, ...]

    def describe(self) -> str:
        """``"2 stateful operators (0, 1) at batch 41 of <checkpoint>"``."""
        return (
            f"{len(self.operators)} stateful operator{'s' if len(self.operators) != 1 else ''} "
            f"({', '.join(self.operators)}) at batch {self.batch_id} of {self.checkpoint}"
        )


@dataclass(frozen=True)
class CarriedCheckpoint:
    """What a carry wrote (also kept as ``carried_from`` in the new checkpoint's owner file).

    :param checkpoint: the new run's checkpoint.
    :param source: the checkpoint it was copied from.
    :param batch_id: the carried batch (the new run's first batch is ``batch_id + 1``).
    :param operators: the stateful operators carried.
    :param files: how many files were written.
    :param bytes: how many bytes were written.
    :param seconds: how long the copy took (the first carry's figure, when a retry found it done).
    """

    checkpoint: str
    source: str
    batch_id: int
    operators: tuple[str, ...]
    files: int
    bytes: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint": self.source,
            "batch_id": self.batch_id,
            "operators": list(self.operators),
            "files": self.files,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
        }

    @classmethod
    def from_owner(cls, checkpoint: str, carried: Mapping[str, Any]) -> CarriedCheckpoint:
        return cls(
            checkpoint=checkpoint,
            source=str(carried.get("checkpoint")),
            batch_id=int(carried.get("batch_id", -1)),
            operators=tuple(str(op) for op in carried.get("operators") or ()),
            files=int(carried.get("files", 0)),
            bytes=int(carried.get("bytes", 0)),
            seconds=float(carried.get("seconds", 0.0)),
        )


def state_operators(checkpoint: str) -> list[str]:
    """The ids of a checkpoint's stateful operators (``state/<id>``), in order; [] for a stateless query."""
    folder = locations.join(str(checkpoint), STATE_DIR)
    names = open_store(folder).names(folder)
    return sorted((name for name in names if _OPERATOR.fullmatch(name)), key=int)


def carried_from(checkpoint: str) -> CarriedCheckpoint | None:
    """What the checkpoint was carried from (its owner file's ``carried_from``); None for a checkpoint that
    was not carried, or that has no owner yet."""
    where = locations.join(str(checkpoint), OWNER_FILE)
    try:
        owner = read_json(where)
    except FileNotFoundError:
        return None
    except (StoreUnavailable, CheckpointError):
        raise
    except (OSError, ValueError):
        return None
    carried = owner.get("carried_from") if isinstance(owner, dict) else None
    return CarriedCheckpoint.from_owner(str(checkpoint), carried) if isinstance(carried, dict) else None


def inspect_state(checkpoint: str, batch_id: int | None = None) -> CheckpointState | None:
    """Check that a checkpoint's state can be carried from ``batch_id`` (default: its last committed batch).

    Reads the listings and the two small log files, never a state file's contents: a store file that is
    present but corrupt is found by Spark when the new run loads it (the run then fails at its start, with
    Spark's error in its status).

    :return: None for a stateless query (no ``state/`` folder), or one that never committed a batch (the new
        run then starts where the plan's initial position says, with nothing to carry).
    :raises CheckpointError: naming the file and what to do, when the batch or its state is missing or
        damaged,
        or the logs are in a format this provider does not carry.
    """
    root = str(checkpoint)
    operators = state_operators(root)
    if not operators:
        return None
    committed = batch_numbers(locations.join(root, "commits"))
    if batch_id is None:
        if not committed:
            return None  # a first batch that never committed: its state files hold nothing processed
        batch_id = committed[-1]
    elif batch_id not in committed:
        raise CheckpointError(
            f"{locations.join(root, 'commits', str(batch_id))}: batch {batch_id}, where the switch's plan "
            f"starts, is not committed in the checkpoint; its state cannot be carried: {_WHAT_TO_DO}"
        )
    offsets = _offsets_lines(root, batch_id)
    if batch_id > 0:
        _offsets_lines(root, batch_id - 1)
    _check_commit_file(root, batch_id)
    _new_query_id(root)  # the carry writes it with a new id: a metadata it cannot use is refused here
    partitions = _shuffle_partitions(locations.join(root, "offsets", str(batch_id)), offsets[1])
    files = tuple(_state_files(root, operators, batch_id, partitions))
    return CheckpointState(root, batch_id, tuple(operators), files)


def _offsets_lines(root: str, batch_id: int) -> list[str]:
    """The lines of ``offsets/<batch_id>``, checked to be a format-1 offset log of Kafka sources."""
    where = locations.join(root, "offsets", str(batch_id))
    text = _read(where, f"the offsets of batch {batch_id}")
    try:
        parse_offsets_file(where, text)  # version, metadata and every source line (Kafka offsets or '-')
    except CheckpointError as err:
        raise CheckpointError(f"{err}; the state cannot be carried: {_WHAT_TO_DO}") from None
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _check_commit_file(root: str, batch_id: int) -> None:
    where = locations.join(root, "commits", str(batch_id))
    lines = _read(where, f"the commit of batch {batch_id}").split("\n")
    if lines[0].strip() != COMMIT_LOG_VERSION:
        raise CheckpointError(
            f"{where}:1: commit log version {lines[0]!r}; Spark 3.5 to 4.2 write {COMMIT_LOG_VERSION!r}, the "
            f"only format whose state this provider carries (was it written by another Spark?): {_WHAT_TO_DO}"
        )
    try:
        json.loads(lines[1] if len(lines) > 1 else "")
    except json.JSONDecodeError as err:
        raise CheckpointError(
            f"{where}:2: corrupt commit metadata ({err.msg} at column {err.colno}): {_WHAT_TO_DO}"
        ) from None


def _shuffle_partitions(where: str, metadata_line: str) -> int | None:
    metadata = json.loads(metadata_line)
    value = (metadata.get("conf") or {}).get(SHUFFLE_PARTITIONS_CONF)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        raise CheckpointError(
            f"{where}:2: {SHUFFLE_PARTITIONS_CONF} is {value!r}, not a number: {_WHAT_TO_DO}"
        ) from None


def _read(where: str, what: str) -> str:
    try:
        return open_store(where).read(where).decode("utf-8")
    except FileNotFoundError:
        raise CheckpointError(
            f"{where}: {what} is missing; the state cannot be carried: {_WHAT_TO_DO}"
        ) from None
    except UnicodeDecodeError as err:
        raise CheckpointError(f"{where}: not UTF-8 text ({err.reason}): {_WHAT_TO_DO}") from None


def _state_files(root: str, operators: list[str], batch_id: int, partitions: int | None) -> list[str]:
    """The files under ``state/`` the stores at version ``batch_id + 1`` need; checks each store has it."""
    version = batch_id + 1
    state = locations.join(root, STATE_DIR)
    chosen: list[str] = []
    for operator in operators:
        folder = locations.join(state, operator)
        listed = open_store(folder).files(folder)
        stores: dict[str, set[int]] = {}  # a store's folder -> the versions it holds
        for relative in listed:
            parts = relative.split("/")
            if any(part.startswith(".") for part in parts):
                continue  # checksums and Spark's temporaries
            keep, store_version = _keep(parts, batch_id)
            if not keep:
                continue
            chosen.append(f"{STATE_DIR}/{operator}/{relative}")
            if store_version is not None:
                stores.setdefault("/".join(parts[:-1]), set()).add(store_version)
        _check_stores(folder, stores, version, partitions)
    return chosen


def _keep(parts: list[str], batch_id: int) -> tuple[bool, int | None]:
    """Whether a state file belongs to batch ``batch_id`` (store version ``batch_id + 1``), and the store
    version it holds (None for a file that names none)."""
    match = _VERSIONED.fullmatch(parts[-1])
    if match is None or any(part in _UNVERSIONED_FOLDERS for part in parts[:-1]):
        return True, None
    number = int(match.group(1))
    if any(part in _BATCH_INDEXED for part in parts[:-1]):
        return number <= batch_id, None
    return number <= batch_id + 1, number


def _check_stores(folder: str, stores: dict[str, set[int]], version: int, partitions: int | None) -> None:
    """Every store of an operator holds ``version``, and the operator has one store per partition."""
    if not stores:
        raise CheckpointError(
            f"{folder}: the operator holds no state store files; the state cannot be carried: {_WHAT_TO_DO}"
        )
    missing = sorted(store for store, versions in stores.items() if version not in versions)
    if missing:
        raise CheckpointError(
            f"{locations.join(folder, missing[0])}: no file of state version {version} (the version of the "
            f"batch being carried), in {len(missing)} of the operator's {len(stores)} stores; the state "
            f"files are missing: {_WHAT_TO_DO}"
        )
    found = {store.split("/")[0] for store in stores}
    if partitions is not None:
        absent = sorted(set(map(str, range(partitions))) - found, key=int)
        if absent:
            raise CheckpointError(
                f"{locations.join(folder, absent[0])}: the state of partition {absent[0]} is missing "
                f"({len(absent)} of {partitions} partitions have no store); {_WHAT_TO_DO}"
            )


def rewrite_offsets(
    where: str,
    text: str,
    targets: Mapping[TopicPartition, TopicPartition],
    starts: Mapping[TopicPartition, int],
) -> tuple[str, dict[TopicPartition, int]]:
    """An ``offsets/<b>`` file with each Kafka source line replaced by the start offsets on the target.

    :param where: the file, named in errors.
    :param text: its contents.
    :param targets: each source partition the job read -> the partition it becomes on the target.
    :param starts: the start offset of every target partition the new run reads (resolved: no -1/-2).
    :return: the new text and the offsets it holds, merged over its sources.
    :raises CheckpointError: a source line names a partition the plan does not cover, or a target partition
        cannot be placed in a single source's line.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    parse_offsets_file(where, "\n".join(lines))
    rewritten: list[dict[TopicPartition, int]] = []
    for number, line in enumerate(lines[2:], start=3):
        if line.strip() == "-":
            rewritten.append({})
            continue
        read = kafka_offsets_from_json(json.loads(line), f"{where}:{number}")
        uncovered = sorted(tp for tp in read if tp not in targets)
        if uncovered:
            raise CheckpointError(
                f"{where}:{number}: the checkpoint's batch reads {', '.join(map(str, uncovered[:5]))}, which "
                "the switch's plan does not cover (the plan was made for other topics): re-plan for the "
                "topics the job reads, or set job.state: fresh"
            )
        absent = sorted(targets[tp] for tp in read if targets[tp] not in starts)
        if absent:
            raise CheckpointError(
                f"{where}:{number}: the state holds records of {len(absent)} partitions whose counterparts "
                f"{', '.join(map(str, absent[:5]))} the target does not have (its topics have fewer "
                "partitions than the source's): the state cannot be carried onto them; give the target's "
                "topics the source's partition counts, or set job.state: fresh"
            )
        rewritten.append({targets[tp]: starts[targets[tp]] for tp in read})
    _place_untracked(where, lines, rewritten, starts)
    body = [lines[0], lines[1]] + [
        "-" if not offsets and lines[index + 2].strip() == "-" else _offsets_json(offsets)
        for index, offsets in enumerate(rewritten)
    ]
    merged = {tp: offset for offsets in rewritten for tp, offset in offsets.items()}
    return "\n".join(body), merged


def _place_untracked(
    where: str,
    lines: list[str],
    rewritten: list[dict[TopicPartition, int]],
    starts: Mapping[TopicPartition, int],
) -> None:
    """Put each target partition no source line named (one the job never read) in the line of its topic."""
    placed = {tp for offsets in rewritten for tp in offsets}
    kafka_lines = [index for index, line in enumerate(lines[2:]) if line.strip() != "-"]
    for tp in sorted(set(starts) - placed):
        line_of_topic = [
            index for index, offsets in enumerate(rewritten) if any(t.topic == tp.topic for t in offsets)
        ]
        if len(line_of_topic) == 1:
            rewritten[line_of_topic[0]][tp] = starts[tp]
        elif len(kafka_lines) == 1:
            rewritten[kafka_lines[0]][tp] = starts[tp]
        else:
            raise CheckpointError(
                f"{where}: the new run reads {tp}, which none of the checkpoint's {len(kafka_lines)} Kafka "
                "sources read before, and its topic cannot be placed in one of them: carrying state needs "
                "each "
                "topic in one source; set job.state: fresh for this switch"
            )


def _offsets_json(offsets: Mapping[TopicPartition, int]) -> str:
    nested: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        nested.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return json.dumps(nested, separators=(",", ":"))


def carry_checkpoint(
    state: CheckpointState,
    checkpoint: str,
    owner: Mapping[str, Any],
    targets: Mapping[TopicPartition, TopicPartition],
    starts: Mapping[TopicPartition, int],
) -> CarriedCheckpoint:
    """Write the new run's checkpoint as a carried copy of ``state`` (see the module's docstring).

    Safe to run again: a checkpoint already carried from the same batch is returned as it is; one a carry
    left half way (files, no owner file) is cleared and written anew.

    :param state: the old checkpoint's state (:func:`inspect_state`, read after the old job stopped).
    :param checkpoint: the new run's checkpoint.
    :param owner: the new run's owner entry (``pair``, ``cluster``, ``epoch``, ``bootstrap_servers``).
    :param targets: each source partition -> its partition on the target.
    :param starts: the start offset of every target partition (resolved).
    :raises CheckpointError: the new checkpoint belongs to another run, or the offsets cannot be rewritten.
    :raises StoreUnavailable: the store refused a write (the owner file is not written: no half copy starts).
    """
    started = time.monotonic()
    root, source = str(checkpoint), state.checkpoint
    done = _already_carried(root, state)
    if done is not None:
        return done
    clear_interrupted_carry(root)
    if open_store(root).files(root):
        raise CheckpointError(
            f"{root} holds files but no {OWNER_FILE} and no {CARRYING_FILE}: they were not written by a "
            "carry or a run of this provider; the state is not copied over them. Remove them if nothing "
            "needs them, or give the pair another checkpoint_root"
        )
    replace_json(locations.join(root, CARRYING_FILE), {"from": source, "batch_id": state.batch_id})
    texts = {
        batch: _read(locations.join(source, "offsets", str(batch)), f"the offsets of batch {batch}")
        for batch in {state.batch_id, max(state.batch_id - 1, 0)}
    }
    rewritten = {
        batch: rewrite_offsets(locations.join(source, "offsets", str(batch)), text, targets, starts)
        for batch, text in texts.items()
    }
    start_offsets = rewritten[state.batch_id][1]
    first_progress = {
        "epoch": owner.get("epoch"),
        "batch_id": state.batch_id,
        "end_offsets": json.loads(_offsets_json(start_offsets)),
        "records": 0,
        "records_total": 0,
        "max_timestamp_ms": {},
        "max_offset": {},
        "written_at": time.time(),
        "carried": True,
    }
    written = _Copy(source, root)
    written.copy_all(
        [*state.files, f"commits/{state.batch_id}"],
        {
            "metadata": _new_query_id(source),
            **{f"offsets/{batch}": text.encode("utf-8") for batch, (text, _) in rewritten.items()},
            f"{PROGRESS_DIR}/{state.batch_id}": json.dumps(first_progress, sort_keys=True).encode("utf-8"),
        },
    )
    carried = CarriedCheckpoint(
        root,
        source,
        state.batch_id,
        state.operators,
        written.files,
        written.bytes,
        time.monotonic() - started,
    )
    if not create_json(locations.join(root, OWNER_FILE), {**owner, "carried_from": carried.to_dict()}):
        raise CheckpointError(
            f"{locations.join(root, OWNER_FILE)} appeared while the state was carried into {root}: another "
            "switch run wrote this run's checkpoint at the same time; run the switch again (it adopts the "
            "run)"
        )
    open_store(root).delete(locations.join(root, CARRYING_FILE))
    return carried


def clear_interrupted_carry(checkpoint: str) -> bool:
    """Remove what a carry left half way in ``checkpoint`` (its :data:`CARRYING_FILE` and no owner file), so
    that no run starts on part of a copy; return whether there was such a leftover.

    A run's submit calls it before the run claims its checkpoint: a switch retried with ``job.state: fresh``
    after a carry failed starts on an empty checkpoint, not on the carry's state files.
    """
    root = str(checkpoint)
    store = open_store(root)
    marker = locations.join(root, CARRYING_FILE)
    if not store.exists(marker) or store.exists(locations.join(root, OWNER_FILE)):
        return False
    for leftover in store.files(root):
        if leftover != CARRYING_FILE:
            store.delete(locations.join(root, leftover))
    store.delete(marker)  # last: a clear that stops half way is resumed by the next one
    return True


def _already_carried(root: str, state: CheckpointState) -> CarriedCheckpoint | None:
    where = locations.join(root, OWNER_FILE)
    if not open_store(where).exists(where):
        return None
    done = carried_from(root)
    if done is not None and (done.source, done.batch_id) == (state.checkpoint, state.batch_id):
        return done
    raise CheckpointError(
        f"{root} already belongs to a run "
        + (f"carried from batch {done.batch_id} of {done.source}" if done else "that started without state")
        + f", not to a carry of batch {state.batch_id} of {state.checkpoint}; a run's checkpoint is written "
        "once: give the switch a new epoch (run it again), or remove the checkpoint if its run never started"
    )


def _new_query_id(source: str) -> bytes:
    """The old checkpoint's ``metadata`` with a new query ``id`` (its other keys kept)."""
    where = locations.join(source, "metadata")
    try:
        metadata = json.loads(_read(where, "the query's metadata"))
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{where}: corrupt query metadata ({err.msg}): {_WHAT_TO_DO}") from None
    if not isinstance(metadata, dict) or "id" not in metadata:
        raise CheckpointError(f"{where}: query metadata without an id ({metadata!r}): {_WHAT_TO_DO}")
    return json.dumps({**metadata, "id": str(uuid.uuid4())}, separators=(",", ":")).encode("utf-8")


COPY_THREADS = 32
"""Files copied at once: on a remote store each file costs a few round trips (WebHDFS: 15 files took 3.3 s one
after the other) and waits for the NameNode to complete the file it closes, so the copy overlaps them (200
files of 4 kB, HDFS to HDFS on the 2-core VM's minicluster: 19.3 s 8 at a time, 11.0 s 32 at a time); on
local disk it overlaps the writes' flushes."""


class _Copy:
    """Copies files from one checkpoint to another through the stores, counting them."""

    def __init__(self, source: str, target: str) -> None:
        self.source, self.target = source, target
        self.files = 0
        self.bytes = 0
        self.lock = threading.Lock()

    def copy_all(self, relatives: Sequence[str], written: Mapping[str, bytes]) -> None:
        """Copy every file of ``relatives`` and write each of ``written`` (relative name -> contents),
        :data:`COPY_THREADS` at a time; the first failure is raised once the copies under way ended (no owner
        file is written after it: the copy stays incomplete)."""
        with ThreadPoolExecutor(max_workers=COPY_THREADS, thread_name_prefix="state-carry") as pool:
            futures = [pool.submit(self.copy, relative) for relative in relatives]
            futures += [pool.submit(self.write, relative, data) for relative, data in written.items()]
            for done in futures:
                done.result()

    def copy(self, relative: str) -> None:
        where = locations.join(self.source, *relative.split("/"))
        try:
            data = open_store(where).read(where)
        except FileNotFoundError:
            raise CheckpointError(
                f"{where} vanished while the state was copied: was the old job still running? {_WHAT_TO_DO}"
            ) from None
        self.write(relative, data)

    def write(self, relative: str, data: bytes) -> None:
        where = locations.join(self.target, *relative.split("/"))
        open_store(where).replace(where, data)
        with self.lock:
            self.files += 1
            self.bytes += len(data)


def carried_batch(checkpoint: str) -> int | None:
    """The batch a carried checkpoint starts after (its own batches are later ones); None when not carried."""
    carried = carried_from(checkpoint)
    return None if carried is None else carried.batch_id

"""Build the DAGs of every pair of a config file: start, failover (primary -> standby), failback.

Parse time stays cheap: this module imports only the Task SDK and the pure config parser; hooks, Spark
and Kafka clients are imported inside the tasks. The config file is read from disk, nothing else.

Per pair ``<p>``:

- ``kafka_failover_<p>_start``: start the job on the active cluster at the current epoch (first start, or
  a restart after the job died); manual.
- ``kafka_failover_<p>_failover``: gate -> wait_for_down (primary) -> check_target -> fence_and_stop ->
  plan -> submit -> wait_first_batch -> commit.
- ``kafka_failover_<p>_failback``: gate -> wait_for_recovery (primary) -> check_target -> fence_and_stop ->
  plan -> submit -> wait_first_batch -> commit.
- ``kafka_failover_<p>_keeper``: keep (deferrable): restarts a dead job in place, finishes a switch that was
  interrupted after it moved the fence, alerts on a stalled or lagging job.

The switch DAGs run on their own and can be triggered by hand with the Params ``force``, ``dry_run`` and
``reason``. ``switch.wake`` says how they are woken: ``continuous`` (``@continuous``, one run at a time:
each run watches for up to ``switch.watch_timeout_seconds`` and ends skipped when nothing happened) or
``event`` (scheduled on the primary's verdict asset, whose ``AssetWatcher`` runs ``ClusterVerdictTrigger`` in
the triggerer: a run starts only when the primary's verdict becomes down, or recovered). The pairs of a file
that watch the same cluster alike share that asset and its one watch (:mod:`.shared_watch`).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, AssetWatcher, Param, task

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.domain.config import PairConfig, SwitchWake, defaulted_state_options, load_pairs
from airflow_kafka_failover.sensors.job_progress import StreamingJobProgressSensor, SwitchProgressSensor
from airflow_kafka_failover.sensors.record_gate import ActiveRecordGate
from airflow_kafka_failover.sensors.switch_verdict import (
    PairDownSensor,
    PairRecoveredSensor,
    SwitchVerdictSensor,
)
from airflow_kafka_failover.workflows.shared_watch import SharedWatch, share_watches

CONFIG_ENV = "AKF_PAIRS_CONFIG"
CONFIG_ENV_READERS = "the DAG processor, the scheduler and the workers"
"""Where :data:`CONFIG_ENV` must be set and its file readable, as every doc that says so names them."""
DAG_KINDS = ("start", "failover", "failback", "keeper")
"""The DAGs of each pair, by the last part of their ids."""
START_DATE = datetime(2024, 1, 1)
RUN_FIRST = {"weight_rule": "upstream"}
"""Default arguments of the start and switch DAGs: a task's priority is the sum of its upstream tasks', so a
later step of a run goes before an earlier step of another run. When A goes down for a fleet, Airflow's
default (``downstream``: earlier steps first) moves every pair's runs one step at a time, and the first pair
is back only when the last is nearly done; with ``upstream`` the runs already under way finish first."""
SWITCH_PARAMS = {
    "force": Param(
        False,
        type="boolean",
        title="Force",
        description="Switch now, without waiting for the down (failover) or recovered (failback) verdict.",
    ),
    "dry_run": Param(
        False,
        type="boolean",
        title="Dry run",
        description="Compute and show the plan only: the record, the job and the fencing marker stay "
        "untouched.",
    ),
    "reason": Param("", type="string", title="Reason", description="Why; stored in the switch history."),
}


def default_config_path() -> Path:
    """The pair config file named by ``$AKF_PAIRS_CONFIG``; raises ConfigError when it is not set."""
    given = os.environ.get(CONFIG_ENV, "").strip()
    if not given:
        raise ConfigError(
            f"{CONFIG_ENV} is not set: set it to the pair config file (YAML, see examples/pairs.yaml in the "
            f"provider's repository) in the environment of {CONFIG_ENV_READERS}"
        )
    return Path(given)


def pair_asset(pair: str) -> Asset:
    """The asset a committed switch of ``pair`` updates; its event's extra names the active cluster, epoch."""
    return Asset(name=f"kafka_failover.{pair}", uri=f"x-kafka-failover://{pair}/active")


def verdict_asset(watch: SharedWatch, watchers: list[AssetWatcher] | None = None) -> Asset:
    """The asset whose events wake the switch DAGs of ``watch``'s pairs under ``switch.wake: event``.

    :param watch: the shared verdict watch of a cluster (down: wakes failovers; recovered: failbacks).
    :param watchers: the asset's watcher (in the DAGs scheduled on it); none to refer to it.
    """
    return Asset(name=watch.asset_name, uri=watch.asset_uri, watchers=watchers or [])


def _triggered_by(context: Any) -> str:
    run = context.get("dag_run")
    run_type = getattr(run, "run_type", "unknown")
    user = getattr(run, "triggering_user_name", None)
    return str(getattr(run_type, "value", run_type)) + (f" by {user}" if user else "")


def _gate_view(pair: PairConfig, context: Any) -> Any:
    """The record the run's gate passed on: only to say what changed since; no step acts on it."""
    from airflow_kafka_failover.domain.active_record import ActiveRecord

    return ActiveRecord.from_dict(context["ti"].xcom_pull(task_ids="gate"), tuple(pair.clusters), "gate XCom")


def _skip_when_not_applicable(step: Any, *args: Any) -> Any:
    """Run ``step(*args)``; a switch that no longer applies to the record as it is now skips its task (and the
    run's later tasks) with the reason."""
    from airflow_kafka_failover.domain.switch_gate import NotApplicable
    from airflow_kafka_failover.version_compat import AirflowSkipException

    try:
        return step(*args)
    except NotApplicable as exc:
        raise AirflowSkipException(str(exc)) from None


def _switch_tasks(config_path: str, pair: PairConfig, kind: str, gate: Any, wait: Any) -> None:
    """The steps after the gate and the verdict sensor, shared by failover and failback."""
    name, pool = pair.name, pair.switch.pool or "default_pool"

    def load():
        from airflow_kafka_failover.domain.config import load_pair

        return load_pair(config_path, name)

    @task(task_id="check_target")
    def check_target() -> None:
        from airflow_kafka_failover.switching import steps

        steps.check_target(load(), kind)

    @task(task_id="fence_and_stop", pool=pool)
    def fence_and_stop(**context: Any) -> dict[str, Any]:
        from airflow_kafka_failover.switching import steps

        if context["params"].get("dry_run"):
            return {"dry_run": True, "note": "dry run: the fence and the running job were left alone"}
        forced = bool(context["params"].get("force"))
        return _skip_when_not_applicable(
            steps.fence_and_stop, load(), kind, _gate_view(pair, context), forced
        )

    @task(task_id="plan", pool=pool)
    def plan(**context: Any) -> dict[str, Any]:
        from airflow_kafka_failover.switching import steps

        if context["params"].get("dry_run"):
            return _skip_when_not_applicable(steps.dry_run_plan, load(), kind, _gate_view(pair, context))
        return steps.plan_after_fence(load(), kind, context["ti"].xcom_pull(task_ids="fence_and_stop"))

    @task(task_id="submit", pool=pool)
    def submit(**context: Any) -> dict[str, Any]:
        from airflow_kafka_failover.switching import steps
        from airflow_kafka_failover.version_compat import AirflowSkipException

        if context["params"].get("dry_run"):
            raise AirflowSkipException(
                "dry run: the plan is in the 'plan' task's log and XCom; nothing was started"
            )
        pair_now, fenced, planned = (
            load(),
            context["ti"].xcom_pull(task_ids="fence_and_stop"),
            context["ti"].xcom_pull(task_ids="plan"),
        )
        _source, target = steps.direction(pair_now, kind)
        with steps.switch_lease(pair_now, kind, fenced["epoch"]):
            return steps.submit(pair_now, target, fenced["epoch"], planned["starting_offsets"], planned)

    progress = SwitchProgressSensor(
        task_id="wait_first_batch",
        handle="{{ ti.xcom_pull(task_ids='submit') }}",
        poke_interval=1,
        timeout=pair.job.first_batch_timeout_seconds,
        pool=pool,
        config_path=config_path,
        pair_name=name,
        kind=kind,
    )

    @task(task_id="commit", pool=pool, outlets=[pair_asset(name)])
    def commit(**context: Any) -> dict[str, Any]:
        from airflow_kafka_failover.io.record_store import describe
        from airflow_kafka_failover.switching import steps

        ti = context["ti"]
        record = steps.commit_after_first_batch(
            load(),
            kind,
            ti.xcom_pull(task_ids="fence_and_stop"),
            ti.xcom_pull(task_ids="submit"),
            ti.xcom_pull(task_ids="plan"),
            steps.SwitchParams.from_params(context["params"]),
            _triggered_by(context),
        )
        context["outlet_events"][pair_asset(name)].extra = {
            "pair": name,
            "active": record.active,
            "epoch": record.epoch,
            "kind": kind,
        }
        return describe(record)

    gate >> wait >> check_target() >> fence_and_stop() >> plan() >> submit() >> progress >> commit()


def down_corroboration(pair: PairConfig) -> dict[str, Any]:
    """Down-sensor arguments that check the primary's MM2 heartbeats on the standby, when MM2 copies them.

    Heartbeats still advancing on the standby while probes fail mean a network split between Airflow and
    a live primary: no failover. Where the heartbeats cannot be read (the standby is unreachable too, or
    the replicator is not MM2) the probes decide alone and the next task, which checks the standby,
    fails the run loudly when both clusters are down.
    """
    if pair.replication.offset_preserving or not pair.replication.has_flow(pair.primary, pair.standby):
        return {}
    from airflow_kafka_failover.domain.translation.replication_policy import remote_heartbeats_topic

    primary = pair.cluster(pair.primary)
    return {
        "peer_kafka_config_id": pair.cluster(pair.standby).connection,
        "heartbeats_topic": remote_heartbeats_topic(primary.alias, pair.replication.separator),
        "require_corroboration": False,
    }


def probe_checks(pair: PairConfig, cluster: str) -> dict[str, Any]:
    """Verdict-sensor arguments that make each probe judge the pair's own partitions on ``cluster``.

    The topics are the ones the job reads there (``PairConfig.topics_on``): a cluster is down when the job
    cannot read them (no leader, a leader that does not answer, or, with ``count_under_min_isr``, too few
    in-sync replicas), not merely when it stops answering metadata. A missing topic is evidence too, not
    a configuration error: the pair's topics are validated where they are configured.
    """
    health = pair.health
    return {
        "topics": pair.topics_on(cluster) if health.check_partitions else [],
        "canary_topic": health.canary_topic,
        "count_under_min_isr": health.count_under_min_isr,
        "missing_topics_are_evidence": True,
    }


def build_switch_dag(
    config_path: str,
    pair: PairConfig,
    kind: str,
    wait: SwitchVerdictSensor | None = None,
    watch: SharedWatch | None = None,
) -> DAG:
    """The failover or failback DAG of one pair.

    :param wait: its verdict sensor, when already built (:func:`build_dags` builds them first, to share
        the watches of a fleet); built here otherwise.
    :param watch: the shared verdict watch that wakes it under ``switch.wake: event``; the pair's own
        when not given.
    """
    source, target = (pair.primary, pair.standby) if kind == "failover" else (pair.standby, pair.primary)
    watch_timeout = pair.switch.watch_timeout_seconds
    wait = wait or _verdict_sensor(config_path, pair, kind, watch_timeout)
    schedule: Any = None
    if woken_by_events(pair):
        watch = watch or share_watches([_watch_entry(pair, kind, wait)])[(pair.name, kind)]
        wait.verdict_asset_name = watch.asset_name
        schedule = [verdict_asset(watch, [verdict_watcher(watch, wait)])]
    elif pair.switch.automatic:
        schedule = "@continuous"
    with DAG(
        dag_id=dag_id_of(pair.name, kind),
        description=f"{kind} of pair {pair.name}: move the streaming job from {source} to {target}",
        schedule=schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        params=SWITCH_PARAMS,
        render_template_as_native_obj=True,
        tags=["kafka-failover", pair.name, kind],
        doc_md=__doc__,
        default_args=RUN_FIRST,
    ) as dag:
        gate = ActiveRecordGate(
            task_id="gate",
            config_path=config_path,
            pair_name=pair.name,
            kind=kind,
            mode="reschedule",
            poke_interval=15,
            timeout=watch_timeout,
        )
        dag.add_task(wait)
        _switch_tasks(config_path, pair, kind, gate, wait)
    return dag


def woken_by_events(pair: PairConfig) -> bool:
    """Say whether the pair's switch DAGs are scheduled on verdict events (``switch.wake: event``)."""
    return pair.switch.automatic and pair.switch.wake is SwitchWake.EVENT


def _watch_entry(pair: PairConfig, kind: str, wait: SwitchVerdictSensor) -> tuple[str, str, Any, Any]:
    """What :func:`share_watches` groups by: the sensor's own watch, as the trigger would run it."""
    return pair.name, kind, wait.watch_kwargs(), pair.health.thresholds()  # type: ignore[attr-defined]


def _verdict_sensor(
    config_path: str, pair: PairConfig, kind: str, watch_timeout: float
) -> SwitchVerdictSensor:
    """The primary's down (failover) or recovered (failback) sensor of a switch DAG, outside any DAG yet."""
    primary = pair.cluster(pair.primary)
    if kind == "failover":
        return PairDownSensor(
            task_id="wait_for_down",
            kafka_config_id=primary.connection,
            cluster_alias=primary.alias,
            thresholds=pair.health.thresholds(),
            deferrable=True,
            timeout=watch_timeout,
            soft_fail=True,
            **RUN_FIRST,  # built before its DAG, whose default arguments it does not get
            **probe_checks(pair, pair.primary),
            **down_corroboration(pair),
        )
    active = pair.cluster(pair.standby)
    return PairRecoveredSensor(
        task_id="wait_for_recovery",
        watched_cluster=pair.primary,
        config_path=config_path,
        pair_name=pair.name,
        kafka_config_id=primary.connection,
        cluster_alias=primary.alias,
        active_kafka_config_id=active.connection,
        active_alias=active.alias,
        replicated_topics=list(pair.topics),
        replication_policy=pair.replication.policy,
        separator=pair.replication.separator,
        offset_syncs_location=pair.replication.offset_syncs_location,
        thresholds=pair.health.thresholds(),
        deferrable=True,
        timeout=watch_timeout,
        soft_fail=True,
        **RUN_FIRST,
        **probe_checks(pair, pair.primary),
    )


def verdict_watcher(watch: SharedWatch, sensor: SwitchVerdictSensor) -> AssetWatcher:
    """The watcher of a shared verdict asset: the sensors' watch over the union of the pairs' topics, run in
    the triggerer without end.

    The recovered watch carries no recorded watermarks here (they live in each pair's record, which changes
    with every switch, and the trigger's kwargs must not): the woken run's sensor checks for data loss.

    :param watch: the shared watch.
    :param sensor: a verdict sensor of one of its DAGs (for the kind of verdict).
    """
    from airflow_kafka_failover.triggers.verdict_change import ClusterVerdictTrigger

    return AssetWatcher(
        name=watch.watcher_name,
        trigger=ClusterVerdictTrigger(
            kind=sensor.kind,  # type: ignore[attr-defined]
            watch_kwargs=watch.watch_kwargs(),
            thresholds=watch.thresholds,
        ),
    )


def build_start_dag(config_path: str, pair: PairConfig) -> DAG:
    """The DAG that starts the job where the record says (first start, or restart of a dead job)."""
    name = pair.name

    with DAG(
        dag_id=dag_id_of(name, "start"),
        description=f"start the streaming job of pair {name}",
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        params={"reason": SWITCH_PARAMS["reason"]},
        render_template_as_native_obj=True,
        tags=["kafka-failover", name, "start"],
        default_args=RUN_FIRST,
    ) as dag:

        @task(task_id="start", pool=pair.switch.pool or "default_pool")
        def start() -> dict[str, Any]:
            from airflow_kafka_failover.domain.config import load_pair
            from airflow_kafka_failover.switching import starting

            return starting.start_job(load_pair(config_path, name))

        handle = start()
        progress = StreamingJobProgressSensor(
            task_id="wait_first_batch",
            handle="{{ ti.xcom_pull(task_ids='start')['job'] }}",
            poke_interval=1,
            timeout=pair.job.first_batch_timeout_seconds,
        )

        @task(task_id="commit", outlets=[pair_asset(name)])
        def commit(started: dict[str, Any], **context: Any) -> dict[str, Any]:
            from airflow_kafka_failover.domain.config import load_pair
            from airflow_kafka_failover.switching import starting

            record = starting.record_job(load_pair(config_path, name), started)
            context["outlet_events"][pair_asset(name)].extra = {
                "pair": name,
                "active": record["active"],
                "epoch": record["epoch"],
                "kind": "start",
            }
            return record

        # TaskFlow resolves the XComArg to the handle's dict at run time.
        handle >> progress >> commit(handle)  # type: ignore[arg-type]
    return dag


def build_keeper_dag(config_path: str, pair: PairConfig) -> DAG:
    """The DAG whose one deferrable task keeps the job of the current epoch running (see ``keeper``)."""
    from airflow_kafka_failover.operators.keeper import KeepStreamingJobOperator

    name = pair.name
    with DAG(
        dag_id=dag_id_of(name, "keeper"),
        description=f"keep the streaming job of pair {name} running: restart it in place, finish an "
        "interrupted switch, alert on a stall or lag",
        schedule="@continuous" if pair.keeper.automatic else None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        render_template_as_native_obj=True,
        params={
            "window_seconds": Param(
                None,
                type=["null", "number"],
                title="Window (seconds)",
                description="How long this run watches; empty: the pair's keeper.window_seconds.",
            )
        },
        tags=["kafka-failover", name, "keeper"],
    ) as dag:
        KeepStreamingJobOperator(task_id="keep", config_path=config_path, pair_name=name)
    return dag


SINGLE_HOST_EXECUTORS = ("LocalExecutor", "SequentialExecutor", "DebugExecutor")
"""Executors that run every task on the scheduler's host: the default state folders are shared there."""


def _executors_across_hosts() -> list[str]:
    """The configured executors (``[core] executor``, comma-separated, ``alias:module.Class`` allowed) that
    may run tasks on other hosts than the scheduler's."""
    from airflow_kafka_failover.version_compat import conf

    configured = str(conf.get("core", "executor", fallback="LocalExecutor") or "LocalExecutor")
    names = [entry.strip() for entry in configured.split(",") if entry.strip()]
    return [name for name in names if name.rsplit(":", 1)[-1].rsplit(".", 1)[-1] not in SINGLE_HOST_EXECUTORS]


def dag_id_of(pair_name: str, kind: str) -> str:
    """The id of the ``kind`` DAG (one of :data:`DAG_KINDS`) of pair ``pair_name``."""
    return f"kafka_failover_{pair_name}_{kind}"


def pairs_to_build(pairs: dict[str, PairConfig]) -> list[PairConfig]:
    """Every pair, or only the pair of the DAG whose task Airflow parses the file for.

    A task process parses the DAG file to find its own task, with Airflow's parsing context naming its DAG
    (``airflow dags test`` does the same); it needs that DAG alone, and building the four DAGs of every pair
    of a fleet for each task would cost each of its task starts about 0.1 s per pair. The dag-processor parses
    without that context and gets every DAG.
    """
    from airflow_kafka_failover.version_compat import get_parsing_context

    wanted = get_parsing_context().dag_id
    if wanted:
        for pair in pairs.values():
            if wanted in {dag_id_of(pair.name, kind) for kind in DAG_KINDS}:
                return [pair]
    return list(pairs.values())


def build_dags(config_path: str | os.PathLike[str] | None = None) -> dict[str, DAG]:
    """Every DAG of every pair in the config file, by dag id; in a task process only the DAGs of the pair
    the task belongs to (:func:`pairs_to_build`).

    The pairs' remote stores are registered here (nothing is opened while the file is parsed): the tasks run
    in a process that parsed this file, and reach the stores through the pairs' storage connections.
    """
    from airflow_kafka_failover.hooks.storage import use_job_storage

    path = str(config_path or default_config_path())
    dags: dict[str, DAG] = {}
    spread = _executors_across_hosts()
    pairs = load_pairs(path)
    for pair in pairs.values():
        if spread and (defaulted := defaulted_state_options(pair)):
            raise ConfigError(
                f"{path}: pair {pair.name!r} keeps {', '.join(f'job.{key}' for key in defaulted)} at the "
                f"default under $AIRFLOW_HOME of each host, but the executor {', '.join(spread)} runs tasks "
                "on several hosts: each would keep its own fencing marker and run folders, and a switch on "
                "one host would not fence the job another started. Set them to a store every worker reads "
                "(hdfs://..., s3a://...) or a mounted shared folder (docs/topologies.md); a path named in "
                "the config is taken as shared"
            )
        use_job_storage(pair.job)
    sensors = {
        (pair.name, kind): _verdict_sensor(path, pair, kind, pair.switch.watch_timeout_seconds)
        for pair in pairs.values()
        for kind in ("failover", "failback")
    }
    watches = share_watches(
        _watch_entry(pairs[name], kind, wait)
        for (name, kind), wait in sensors.items()
        if woken_by_events(pairs[name])
    )
    for pair in pairs_to_build(pairs):
        for dag in (
            build_start_dag(path, pair),
            *(
                build_switch_dag(path, pair, kind, sensors[(pair.name, kind)], watches.get((pair.name, kind)))
                for kind in ("failover", "failback")
            ),
            build_keeper_dag(path, pair),
        ):
            dags[dag.dag_id] = dag
    return dags

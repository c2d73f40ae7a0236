"""Running the repo's DAGs with dag.test() and reading what they left in Airflow."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DAGS = Path(__file__).resolve().parents[2] / "dags"


@dataclass
class RunResult:
    state: str
    states: dict[str, str]
    tries: dict[str, int]
    run_id: str
    seconds: float


def load_dag(dag_id: str) -> Any:
    """Parse dags/ afresh, as dag.test() does, so configuration changes apply."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert not bag.import_errors, bag.import_errors
    return bag.get_dag(dag_id)


def run_dag(dag_id: str, day: str, run_conf: dict[str, Any] | None = None) -> RunResult:
    """One run with dag.test(); the same ``day`` always gives the same run id."""
    moment = datetime.fromisoformat(day).replace(tzinfo=UTC)
    dag = load_dag(dag_id)
    # Task runs install log handlers on the streams of the moment, which a
    # test's output capture closes; later log lines would then fail.
    handlers = list(logging.root.handlers)
    started = time.monotonic()
    try:
        run = dag.test(logical_date=moment, run_after=moment, run_conf=run_conf)
    finally:
        logging.root.handlers[:] = handlers
    seconds = time.monotonic() - started
    tis = run.get_task_instances()
    return RunResult(
        state=str(run.state),
        states={t.task_id: str(t.state) for t in tis},
        tries={t.task_id: t.try_number for t in tis},
        run_id=run.run_id,
        seconds=seconds,
    )


def xcom(dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dag_id, run_id=run_id, task_id=task_id, key=key)
            .one_or_none()
        )
        return None if row is None else XComModel.deserialize_value(row)


def xcoms(dag_id: str, run_id: str) -> list[tuple[str, str, Any]]:
    """Every XCom of a run as (task id, key, value)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(XComModel).filter_by(dag_id=dag_id, run_id=run_id).all()
        return [(r.task_id, r.key, XComModel.deserialize_value(r)) for r in rows]


def rendered_fields(dag_id: str, run_id: str) -> list[Any]:
    """What the UI shows as the tasks' rendered templates."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF
    from airflow.utils.session import create_session

    with create_session() as session:
        return [
            r.rendered_fields for r in session.query(RTIF).filter_by(dag_id=dag_id, run_id=run_id)
        ]


def asset_events(uri: str) -> list[tuple[str | None, dict[str, Any]]]:
    """(partition key, extra) of every event of the asset at ``uri``."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (
            session.query(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .filter(AssetModel.uri == uri)
            .order_by(AssetEvent.id)
            .all()
        )
        return [(r.partition_key, dict(r.extra or {})) for r in rows]


def fail_orphaned_tasks(dag_id: str, run_id: str) -> list[str]:
    """Mark tasks left "running" by a killed worker as failed, as the scheduler does
    when their heartbeat times out; returns their task ids."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    with create_session() as session:
        orphans = (
            session.query(TaskInstance)
            .filter_by(dag_id=dag_id, run_id=run_id, state=TaskInstanceState.RUNNING)
            .all()
        )
        for ti in orphans:
            ti.state = TaskInstanceState.FAILED
        return [ti.task_id for ti in orphans]


def schedule_partition_runs() -> list[tuple[str, str | None]]:
    """One pass of the scheduler's step that turns partitioned asset events into runs
    of the DAGs scheduled on those partitions; (dag id, partition key) of every run."""
    from airflow.jobs.job import Job
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    runner = SchedulerJobRunner(job=Job(), executors=[])
    with create_session() as session:
        created = runner._create_dagruns_for_partitioned_asset_dags(session)
    with create_session() as session:
        return [
            (r.dag_id, r.partition_key)
            for r in session.query(DagRun).filter(DagRun.dag_id.in_(created)).all()
        ]


def unpause(dag_id: str) -> None:
    """Asset events queue runs of unpaused DAGs only. Writes the DAG folder to the
    database as dag.test() does (DAGs are created paused), then unpauses ``dag_id``."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    manager = DagBundlesManager()
    with create_session() as session:
        manager.sync_bundles_to_db(session=session)
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        bag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
        sync_bag_to_db(bag, bundle.name, bundle.version)
    with create_session() as session:
        assert (
            session.query(DagModel).filter(DagModel.dag_id == dag_id).update({"is_paused": False})
            == 1
        )


def sync_dags(*files: str) -> None:
    """Parse these files of dags/ into Airflow's database, as the DAG processor
    would: an api-server then knows their DAGs and can create their runs."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()
    for name in files:
        bag = BundleDagBag(dag_folder=str(DAGS / name), bundle_path=DAGS, bundle_name="dags-folder")
        assert not bag.import_errors, bag.import_errors
        sync_bag_to_db(bag, "dags-folder", None)

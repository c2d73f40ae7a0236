"""The Dagster front end end to end: the repository's definitions, real local Spark, real S3.

Each test checks what readers find on S3 (files, rows, pending uploads) and
the job record, not only the run's success.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.dagster.conftest import load_defs, materialize
from tests.faults import Fault, inject
from tests.helpers import pending_in_bucket, visible
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import S3Store
from zero_rename.dagster import ZeroRenameResource, commit_lifecycle_job, stage_op
from zero_rename.read import read_table

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

DAY = "2024-01-01"


def rows_of(c: Committer) -> int:
    return read_table(c.dest.url, store_config=None).num_rows


def job_files(c: Committer) -> dict[str, bytes]:
    return {k: v for k, v in visible(c).items() if not k.startswith("_")}


def test_a_materialized_day_is_committed_once_with_its_metadata(
    dagster_spark: None, daily: Committer, instance: Any
) -> None:
    defs = load_defs(daily.dest.url)
    result = materialize(defs, instance, DAY, 300)

    assert result.success
    (event,) = result.asset_materializations_for_node("daily_events")
    meta = {k: getattr(v, "value", v) for k, v in event.metadata.items()}
    job_id = meta["job_id"]
    files = job_files(daily)
    assert files and all(p.startswith(f"dt={DAY}/") and job_id in p for p in files)
    assert rows_of(daily) == 300 and meta["rows"] == 300 and meta["files"] == len(files)
    assert meta["partitions"] == 1 and meta["first_partitions"] == [f"dt={DAY}"]
    assert meta["s3_requests"] > 0 and meta["replaced_files"] == 0
    assert meta["success_file"] == f"{daily.dest.url}/_SUCCESS"
    steps = ("setup", "stage", "validate", "resolve_conflicts", "commit", "metadata", "cleanup")
    assert {f"{s}_seconds" for s in steps} <= set(meta)
    assert meta["seconds"] == pytest.approx(sum(meta[f"{s}_seconds"] for s in steps), abs=0.01)
    assert pending_in_bucket(daily) == []
    record = daily.job(job_id)
    assert record.state == "committed"
    assert list(record.steps) == [
        *("setup", "stage", "validate", "resolve_conflicts", "commit", "validate_output")
    ]
    assert record.origin == {"dagster_job": "daily_events_job", "dagster_run_id": result.run_id}
    assert daily.read_success().job_id == job_id
    assert_standard_metadata(meta, daily, rows=300, day_rows=300)

    # Both checks passed, each on what its step reported; the output check checked
    # this run's job, whose record keeps the result.
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert {name: c.passed for name, c in checks.items()} == {
        "manifests_valid": True,
        "output_valid": True,
    }
    validated = {k: getattr(v, "value", v) for k, v in checks["manifests_valid"].metadata.items()}
    assert validated == {
        **{"job_id": job_id, "tasks": meta["tasks"], "files": len(files), "rows": 300},
        "partition": DAY,
    }
    checked = {k: getattr(v, "value", v) for k, v in checks["output_valid"].metadata.items()}
    assert (checked["job_id"], checked["partition"], checked["outcome"], checked["files"]) == (
        *(job_id, DAY),
        *("valid", len(files)),
    )
    assert record.output_check is not None and record.output_check.outcome == "valid"
    assert all(c.target_materialization_data.run_id == result.run_id for c in checks.values())


def assert_standard_metadata(
    meta: dict[str, Any], daily: Committer, rows: int, day_rows: int
) -> None:
    """Dagster's own keys: the destination, the files' schema as the task manifests
    recorded it, the rows of the table and of the day as readers read them."""
    assert meta["dagster/uri"] == daily.dest.url
    assert "dagster/table_name" not in meta  # no table format names a table
    assert (meta["dagster/row_count"], meta["dagster/partition_row_count"]) == (rows, day_rows)
    columns = {c.name: c for c in meta["dagster/column_schema"].columns}
    assert list(columns) == ["id", "region", "amount", "event_time", "dt"]
    assert (columns["amount"].type, columns["dt"].type) == ("decimal128(12, 2)", "date32[day]")
    assert columns["dt"].description == "partition column"


def test_the_same_day_again_through_the_steps_job_replaces_it(
    dagster_spark: None, daily: Committer, instance: Any
) -> None:
    defs = load_defs(daily.dest.url)
    assert materialize(defs, instance, DAY, 300).success
    first = set(job_files(daily))
    # The steps job: one op per protocol step, the same job options (replace).
    result = defs.resolve_job_def("daily_events_steps").execute_in_process(
        partition_key=DAY, instance=instance, raise_on_error=False
    )

    assert result.success
    steps = ("setup_job", "stage", "validate", "resolve_conflicts", "commit", "cleanup_job")
    assert all(result.output_for_node(s) is not None for s in steps[:-1])
    second = set(job_files(daily))
    assert not first & second  # the first job's files were replaced
    assert rows_of(daily) == 1000  # the steps job writes the default day
    assert pending_in_bucket(daily) == []
    assert [j.state for j in daily.jobs()] == ["committed", "committed"]


def failing_write(context: Any, job: Any, options: dict[str, str]) -> None:
    """A Spark write whose last task fails after the others wrote their files."""
    spark = context.resources.pyspark.spark_session
    df = spark.range(0, 400, 1, 4).selectExpr(
        "id", "'2024-01-02' as dt", "assert_true(id < 390, 'injected task failure') as ok"
    )
    df.write.format("zero-rename").options(**options).mode("append").save(job.destination)


def test_a_failed_stage_ends_in_an_aborted_job_and_a_failed_run(
    dagster_spark: None, daily: Committer, instance: Any
) -> None:
    defs = load_defs(daily.dest.url)
    failing = commit_lifecycle_job(
        "failing_steps",
        daily.dest.url,
        stage_op(failing_write, required_resource_keys={"pyspark"}),
        options={"partition_columns": "dt", "conflict_mode": "replace"},
    )
    result = failing.execute_in_process(
        instance=instance,
        raise_on_error=False,
        resources=defs.resolve_job_def("daily_events_steps").resource_defs,
    )

    assert not result.success
    assert job_files(daily) == {} and pending_in_bucket(daily) == []
    (record,) = daily.jobs()
    assert record.state == "aborted"


def test_a_conflict_fails_for_good_and_the_failure_hook_aborts_the_job(
    dagster_spark: None, daily: Committer, instance: Any
) -> None:
    defs = load_defs(daily.dest.url)
    assert materialize(defs, instance, DAY, 100).success
    before = job_files(daily)
    # conflict mode fail on a day that holds files: resolve_conflicts refuses, no retry.
    steps = defs.resolve_job_def("daily_events_steps")
    strict = commit_lifecycle_job(
        "strict_steps",
        daily.dest.url,
        steps.graph.node_named("stage").definition,
        options={"partition_columns": "dt", "conflict_mode": "fail"},
        partitions_def=steps.partitions_def,
    )
    result = strict.execute_in_process(
        instance=instance, raise_on_error=False, partition_key=DAY, resources=steps.resource_defs
    )

    assert not result.success
    failed = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert [e.step_key for e in failed] == ["resolve_conflicts"]
    assert not [e for e in result.all_events if e.event_type_value == "STEP_RESTARTED"]
    assert job_files(daily) == before and pending_in_bucket(daily) == []
    states = sorted(j.state for j in daily.jobs())
    assert states == ["aborted", "committed"]
    aborted = next(j for j in daily.jobs() if j.state == "aborted")
    assert "step resolve_conflicts failed" in aborted.error and "ConflictError" in aborted.error
    # The failed step keeps its own error in the record, one line; the reason quotes it.
    (error,) = aborted.failed_steps.values()
    assert list(aborted.failed_steps) == ["resolve_conflicts"] and "\n" not in aborted.error
    assert error.startswith("ConflictError: ") and error in aborted.error


class FlakyCommitStore(ZeroRenameResource):
    """Loses every CompleteMultipartUpload from the second one on, in the first
    commit attempt only: the commit fails after its point of no return."""

    def store(self) -> S3Store:
        store = super().store()
        if not any(f.fired for f in FAULTS):
            FAULTS.append(
                inject(
                    store.client,
                    "CompleteMultipartUpload",
                    nth=2,
                    times=10**6,
                    code="InternalError",
                    status=500,
                )
            )
        return store


FAULTS: list[Fault] = []


def test_a_commit_failing_after_its_point_of_no_return_is_finished_by_the_retry(
    dagster_spark: None, daily: Committer, instance: Any
) -> None:
    defs = load_defs(daily.dest.url)
    steps = defs.resolve_job_def("daily_events_steps")
    FAULTS.clear()
    result = steps.execute_in_process(
        partition_key=DAY,
        instance=instance,
        raise_on_error=False,
        resources={**steps.resource_defs, "zero_rename": FlakyCommitStore()},
    )

    assert result.success
    assert any(f.fired for f in FAULTS)
    restarted = [e.step_key for e in result.all_events if e.event_type_value == "STEP_RESTARTED"]
    assert restarted == ["commit"]
    (record,) = daily.jobs()
    assert record.state == "committed"
    assert rows_of(daily) == 1000 and pending_in_bucket(daily) == []

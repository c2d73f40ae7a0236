"""The checks in Dagster, on the embedded S3 (no Spark): the steps job's optional output
check op, and the asset checks of an asset that commits a day.

The stage writes through the core, as an engine would, and saves its stage
manifest; the rest is the package's own ops, asset helper and checks.
"""

# No postponed annotations: Dagster reads the test assets' annotations.
from collections.abc import Iterator
from typing import Any

import pytest
from dagster import (
    AssetExecutionContext,
    AssetSelection,
    DailyPartitionsDefinition,
    Definitions,
    Failure,
    OpExecutionContext,
    asset,
    build_op_context,
    define_asset_job,
)

from tests.helpers import pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.dagster import (
    JobRef,
    ZeroRenameResource,
    commit_lifecycle_job,
    commit_partition,
    manifests_check_spec,
    output_check,
    stage_op,
    validate_output_op,
)

pytestmark = pytest.mark.dagster


def write_with_the_core(context: OpExecutionContext, job: JobRef, options: dict[str, str]) -> None:
    committer: Committer = context.resources.zero_rename.committer(job.destination)
    record = committer.job(job.job_id)
    manifest = write_task(committer, record, "00000", {"2024-03-01": b"x" * 99}, publish=False)
    assert manifest is not None
    committer.save_stage_manifest(job.job_id, [manifest], engine="test")


def test_the_output_check_op_records_its_result_and_fails_on_a_rewritten_file(
    daily: Committer, instance: Any
) -> None:
    steps = commit_lifecycle_job(
        "checked_steps",
        daily.dest.url,
        stage_op(write_with_the_core),
        options={"partition_columns": "dt", "conflict_mode": "replace"},
        validate_output=True,
    )
    resources = {"zero_rename": ZeroRenameResource()}
    result = steps.execute_in_process(instance=instance, raise_on_error=False, resources=resources)

    assert result.success
    (record,) = daily.jobs()
    assert record.state == "committed" and record.output_check is not None
    assert (record.output_check.outcome, record.output_check.files) == ("valid", 1)
    assert record.steps["validate_output"].status == "succeeded"
    (output,) = [
        e
        for e in result.all_events
        if e.event_type_value == "STEP_OUTPUT" and e.step_key == "validate_output"
    ]
    assert output.event_specific_data.metadata["output_check"].value == "valid"

    # Rewritten with other bytes of the same size: the op fails at once, not retried.
    (path,) = visible(daily)
    daily.store.put_object(daily.dest.bucket, daily.dest.dir + path, b"y" * 99)
    with pytest.raises(Failure) as failed:
        validate_output_op(
            build_op_context(resources=resources), JobRef(daily.dest.url, record.job_id)
        )
    assert failed.value.allow_retries is False
    assert f"etag {path}" in str(failed.value.description)
    assert "The job stays committed" in str(failed.value.description)
    record = daily.job(record.job_id)
    assert record.state == "committed" and record.output_check is not None
    assert record.output_check.outcome == "invalid"
    assert record.steps["validate_output"].status == "failed"


# The checks on an asset: a partitioned asset committing a day written through the
# core, and one downstream of it. Nothing here starts Spark.
DAY = "2024-03-01"


def checked_assets(destination: str, duplicate_task: bool = False) -> Definitions:
    days = DailyPartitionsDefinition(start_date=DAY)

    @asset(name="events", partitions_def=days, check_specs=[manifests_check_spec("events")])
    def events(context: AssetExecutionContext, zero_rename: ZeroRenameResource) -> Iterator[Any]:
        def write(options: dict[str, str]) -> None:
            committer = zero_rename.committer(destination)
            record = committer.job(options["job_id"])
            manifests = [write_task(committer, record, "00000", {DAY: b"x" * 99}, publish=False)]
            if duplicate_task:  # a second attempt of the same task, both in the stage
                manifests.append(
                    write_task(committer, record, "00000", {DAY: b"z" * 9}, 1, publish=False)
                )
            committer.save_stage_manifest(record.job_id, [m for m in manifests if m], "test")

        options = {"partition_columns": "dt", "conflict_mode": "replace"}
        yield from commit_partition(context, zero_rename, destination, options, write)

    @asset(name="report", partitions_def=days, deps=[events])
    def report() -> None:
        return None

    output = output_check(events, destination)
    return Definitions(
        assets=[events, report],
        asset_checks=[output],
        jobs=[
            define_asset_job("daily", selection=[events, report]),
            define_asset_job(
                "recheck", selection=AssetSelection.checks(output) | AssetSelection.assets(report)
            ),
        ],
        resources={"zero_rename": ZeroRenameResource()},
    )


def run(defs: Definitions, job: str, instance: Any) -> Any:
    return defs.resolve_job_def(job).execute_in_process(
        partition_key=DAY, instance=instance, raise_on_error=False
    )


def evaluations(result: Any) -> dict[str, Any]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def values(evaluation: Any) -> dict[str, Any]:
    return {k: getattr(v, "value", v) for k, v in evaluation.metadata.items()}


def test_invalid_manifests_fail_their_check_abort_the_job_and_block_downstream(
    daily: Committer, instance: Any
) -> None:
    result = run(checked_assets(daily.dest.url, duplicate_task=True), "daily", instance)

    assert not result.success
    (failed,) = evaluations(result).values()
    assert (failed.check_name, failed.passed, failed.blocking) == ("manifests_valid", False, True)
    checked = values(failed)
    assert checked["problems"] == 2 and checked["first_problems"][0] == "task 00000 has 2 manifests"
    started = {e.step_key for e in result.all_events if e.event_type_value == "STEP_START"}
    assert started == {"events"}  # neither the output check nor report ran
    assert result.asset_materializations_for_node("events") == []
    (record,) = daily.jobs()
    assert record.state == "aborted" and "has 2 manifests" in record.error
    assert visible(daily) == {} and pending_in_bucket(daily) == []


def test_a_rewritten_file_fails_the_output_check_and_blocks_downstream(
    daily: Committer, instance: Any
) -> None:
    defs = checked_assets(daily.dest.url)
    first = run(defs, "daily", instance)
    assert first.success
    assert {n: e.passed for n, e in evaluations(first).items()} == {
        "manifests_valid": True,
        "output_valid": True,
    }
    assert [m.asset_key.path for m in first.get_asset_materialization_events()] == [
        ["events"],
        ["report"],
    ]

    # Rewritten with other bytes of the same size; the check, run again on its own
    # (its job: the one _SUCCESS names), fails and report is not materialized again.
    (path,) = [p for p in visible(daily) if not p.startswith("_")]
    daily.store.put_object(daily.dest.bucket, daily.dest.dir + path, b"y" * 99)
    again = run(defs, "recheck", instance)

    assert not again.success
    (failed,) = evaluations(again).values()
    assert (failed.check_name, failed.passed) == ("output_valid", False)
    checked = values(failed)
    (record,) = daily.jobs()
    assert (checked["job_id"], checked["outcome"], checked["problems"]) == (
        record.job_id,
        "invalid",
        1,
    )
    assert checked["first_problems"][0]["kind"] == "etag"
    assert "The job stays committed" in (failed.description or "")
    assert again.get_asset_materialization_events() == []
    assert record.state == "committed" and record.output_check is not None
    assert record.output_check.outcome == "invalid"

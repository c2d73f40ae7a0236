"""The steps' OpenLineage facets, built from summaries and records (no server), each
event checked against OpenLineage's schema; and the operators without the provider.
The events of real DAG runs are checked in test_daily_dag.py."""

from __future__ import annotations

import base64
import importlib
import sys
import uuid
from typing import Any

import pyarrow as pa
import pytest
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.serde import Serde

from tests.airflow.lineage import validate
from zero_rename.airflow import lineage
from zero_rename.core import JobRecord, JobSummary, OutputCheck, TableCommit, parse_options

pytestmark = pytest.mark.unit

DEST = "s3://warehouse/daily_events"
JOB = "5df2fa30-3f4e-56c1-8ce6-7fecdb15bcbe"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us"))])


class FakeCommitter:
    """What the commit's lineage asks of a committer: its destination, the files' schema."""

    def __init__(self, schema: pa.Schema | None = SCHEMA) -> None:
        self.schema = schema

        class Dest:
            url = DEST

        self.dest = Dest()

    def table_schema(self, record: JobRecord) -> str:
        if self.schema is None:
            return ""
        return base64.b64encode(self.schema.serialize().to_pybytes()).decode()


def record(conflict_mode: str = "replace", **extra: Any) -> JobRecord:
    options = parse_options({"partition_columns": "dt", "conflict_mode": conflict_mode, **extra})
    return JobRecord(job_id=JOB, destination=DEST, options=options, state="committed")


def committed(**extra: Any) -> JobSummary:
    fields = {"files": 12, "bytes": 34567, "rows": 500, "partitions": ("dt=2024-01-01",)}
    return JobSummary(job_id=JOB, destination=DEST, state="committed", **{**fields, **extra})


def event(found: Any, state: RunState = RunState.COMPLETE) -> dict[str, Any]:
    """The lineage as the provider's listener puts it in an event, as JSON."""
    run = Run(runId=str(uuid.uuid4()), facets=found.run_facets)
    job = Job(namespace="default", name="daily_partitioned_write.commit")
    body = RunEvent(
        eventType=state,
        eventTime="2024-01-02T01:02:03.456789+00:00",
        run=run,
        job=job,
        producer="https://example.com/zero-rename",
        inputs=found.inputs,
        outputs=found.outputs,
    )
    document: dict[str, Any] = Serde.to_dict(body)
    assert validate(document) == []
    return document


def test_a_replace_commit_names_the_destination_with_what_it_made_visible() -> None:
    found = event(lineage.commit_lineage(FakeCommitter(), committed(), record()))  # type: ignore[arg-type]

    (output,) = found["outputs"]
    assert (output["namespace"], output["name"]) == ("s3://warehouse", "daily_events")
    assert output["outputFacets"]["outputStatistics"] | {"_producer": "", "_schemaURL": ""} == {
        "rowCount": 500,
        "size": 34567,
        "fileCount": 12,
        "_producer": "",
        "_schemaURL": "",
    }
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    fields = [(f["name"], f["type"]) for f in output["facets"]["schema"]["fields"]]
    assert fields == [
        ("id", "int64"),
        ("name", "string"),
        ("ts", "timestamp[us]"),
        ("dt", "string"),
    ]
    assert output["facets"]["version"]["datasetVersion"] == JOB  # _SUCCESS's job
    assert "symlinks" not in output["facets"]
    facet = found["run"]["facets"]["zeroRename"]
    assert (facet["step"], facet["jobId"], facet["state"], facet["rows"]) == (
        "commit",
        JOB,
        "committed",
        500,
    )
    assert facet["options"] == {"conflict_mode": "replace", "partition_columns": "dt"}
    assert "tableCommit" not in facet and "outputCheck" not in facet


def test_an_append_is_no_overwrite_and_a_table_format_is_a_symlink_and_the_version() -> None:
    iceberg = record("append", table_format="iceberg", iceberg_table="daily.events").model_copy(
        update={"table_commit": TableCommit(format="iceberg", table="daily.events", id="8061")}
    )
    (output,) = event(lineage.commit_lineage(FakeCommitter(), committed(), iceberg))["outputs"]  # type: ignore[arg-type]
    assert "lifecycleStateChange" not in output["facets"]
    ((identifier),) = output["facets"]["symlinks"]["identifiers"]
    assert identifier == {
        "namespace": "iceberg://zero_rename",
        "name": "daily.events",
        "type": "TABLE",
    }
    assert output["facets"]["version"]["datasetVersion"] == "8061"

    delta = record(table_format="delta").model_copy(
        update={"table_commit": TableCommit(format="delta", table=DEST, id="3")}
    )
    (output,) = event(lineage.commit_lineage(FakeCommitter(None), committed(), delta))["outputs"]  # type: ignore[arg-type]
    ((identifier),) = output["facets"]["symlinks"]["identifiers"]
    assert identifier == {"namespace": "s3://warehouse", "name": "daily_events", "type": "TABLE"}
    assert "schema" not in output["facets"]  # the writer gave none


def test_a_commit_that_did_not_commit_has_no_output() -> None:
    failed = lineage.commit_lineage(FakeCommitter(), None, None)  # type: ignore[arg-type]
    found = event(failed, RunState.FAIL)
    assert found["outputs"] == [] and found["run"]["facets"]["zeroRename"]["step"] == "commit"
    rolled_back = committed().model_copy(update={"state": "aborted"})
    assert lineage.commit_lineage(FakeCommitter(), rolled_back, record()).outputs == []  # type: ignore[arg-type]


def test_the_other_steps_name_no_dataset_and_say_what_they_read_or_decided() -> None:
    aborted = JobSummary(job_id=JOB, destination=DEST, state="aborted", aborted_uploads=3)
    found = event(lineage.step_lineage("abort", DEST, JOB, aborted), RunState.FAIL)
    assert found["inputs"] == found["outputs"] == []
    facet = found["run"]["facets"]["zeroRename"]
    assert (facet["state"], facet["abortedUploads"], facet["files"]) == ("aborted", 3, 0)

    resolved = committed(replaced_files=7).model_copy(update={"state": "setup"})
    facet = event(lineage.step_lineage("resolve_conflicts", DEST, JOB, resolved))["run"]["facets"]
    assert facet["zeroRename"]["replacedFiles"] == 7
    # Before setup found the job, a templated id renders "None": no job yet.
    facet = event(lineage.step_lineage("setup", DEST, "None"))["run"]["facets"]["zeroRename"]
    assert facet["jobId"] == "" and "options" not in facet


def test_the_output_check_reads_the_destination_and_asserts_its_outcome() -> None:
    for outcome, success in (("valid", True), ("invalid", False)):
        check = OutputCheck(outcome=outcome, files=12, problem_count=0 if success else 1)
        (read,) = event(lineage.output_check_lineage(DEST, JOB, check))["inputs"]
        ((assertion),) = read["facets"]["dataQualityAssertions"]["assertions"]
        assert (read["name"], assertion["success"]) == ("daily_events", success)
    superseded = OutputCheck(outcome="superseded", superseded_by="later-job")
    found = event(lineage.output_check_lineage(DEST, JOB, superseded))
    assert "dataQualityAssertions" not in found["inputs"][0]["facets"]
    assert found["run"]["facets"]["zeroRename"]["outputCheck"]["outcome"] == "superseded"


def test_an_s3a_destination_is_named_as_s3() -> None:
    assert lineage.dataset_name("s3a://lake/tables/events/") == ("s3://lake", "tables/events")


def test_the_schema_check_catches_a_wrong_event() -> None:
    found = event(lineage.commit_lineage(FakeCommitter(), committed(), record()))  # type: ignore[arg-type]
    found["eventType"] = "DONE"
    found["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] = "500"
    found["run"]["facets"]["zeroRename"]["files"] = -1
    problems = validate(found)
    assert any("eventType" in p for p in problems)
    assert any("outputStatistics" in p and "rowCount" in p for p in problems)
    assert any("zeroRename" in p and "files" in p for p in problems)


# Imported afresh with the provider and the OpenLineage client hidden, as if not
# installed (the Spark provider's operator too: it looks for the provider at import).
FRESH = (
    "zero_rename.airflow.",
    "airflow.providers.apache.spark.",
    "airflow.providers.common.compat.",
)
HIDDEN = ("airflow.providers.openlineage", "openlineage")


def test_the_operators_import_and_run_without_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n.startswith(FRESH + HIDDEN)]:
        monkeypatch.delitem(sys.modules, name)
        # A package's attribute would hand the old module to `from package import name`.
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            monkeypatch.delattr(sys.modules[parent], child, raising=False)
    for name in HIDDEN:
        monkeypatch.setitem(sys.modules, name, None)
    operators = importlib.import_module("zero_rename.airflow.operators")
    spark = importlib.import_module("zero_rename.airflow.spark")

    stage = spark.SparkStageSubmitOperator(
        task_id="stage", application="app.py", destination=DEST, job_id=JOB
    )
    assert stage.destination == DEST
    cleanup = operators.CleanupJobOperator(task_id="cleanup", destination=DEST)
    assert cleanup.execute({}) is None  # no job: nothing to clean up, no S3 asked
    assert [n for n in sys.modules if n.startswith(HIDDEN) and sys.modules[n]] == []
    with pytest.raises(ImportError):  # only the provider's listener asks for lineage
        cleanup.get_openlineage_facets_on_start()

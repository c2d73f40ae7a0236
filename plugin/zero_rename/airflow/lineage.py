"""OpenLineage for the commit protocol's steps, for Airflow's OpenLineage provider.

The provider's listener asks each task's operator what it read and wrote when the
task starts, completes and fails (``get_openlineage_facets_on_start``,
``_on_complete``, ``_on_failure``); the operators answer from here. The commit is
where readers' data changes, so it alone names the destination as an output:

* ``commit``: the destination as its output dataset, named as the amazon provider
  names S3 data (namespace ``s3://bucket``, name the key prefix), with what the
  commit made visible (``outputStatistics``: rows, bytes, files), the files' schema
  from the task manifests (``schema``), the table format's table as a ``symlinks``
  identifier and its commit as the dataset's ``version`` (else the job id), and
  ``lifecycleStateChange`` OVERWRITE for conflict mode ``replace``. A commit that
  did not finish reports no output.
* ``validate_output``: the destination as its input, with the output check's
  outcome as a data-quality assertion.
* every step (setup, the Spark stage, validation, conflict resolution, commit,
  abort, cleanup): a ``zeroRename`` run facet saying what it read or decided: the
  job, its state, the counts of its summary (an abort: the uploads it aborted),
  the options setup fixed, the table format's commit.

Only the protocol's metadata is reported (paths, counts, names), never a
credential or an endpoint. Nothing imports this module but those calls, which
the provider makes only when it is installed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.openlineage.facet import (
    Identifier,
    InputDataset,
    LifecycleStateChange,
    LifecycleStateChangeDatasetFacet,
    OutputDataset,
    OutputStatisticsOutputDatasetFacet,
    RunFacet,
    SchemaDatasetFacet,
    SchemaDatasetFacetFields,
    SymlinksDatasetFacet,
)
from airflow.providers.openlineage.extractors import OperatorLineage
from attrs import Factory, define
from openlineage.client.generated.data_quality_assertions_dataset import (
    Assertion,
    DataQualityAssertionsDatasetFacet,
)
from openlineage.client.generated.dataset_version_dataset import DatasetVersionDatasetFacet

from zero_rename.core import (
    Destination,
    JobRecord,
    JobSummary,
    OutputCheck,
    files_schema,
    states,
)
from zero_rename.errors import ZeroRenameError

if TYPE_CHECKING:
    import pyarrow as pa

    from zero_rename.core import Committer

log = logging.getLogger(__name__)

# The run facet's key in an event's ``run.facets``.
RUN_FACET = "zeroRename"
# A step names at most this many partitions (the summary's own bound is larger).
PARTITIONS_NAMED = 20
# PyIceberg's name for the embedded catalog (core/tables/iceberg_catalog.py).
EMBEDDED_CATALOG = "zero_rename"
# What the output check asserts of the committed files.
OUTPUT_ASSERTION = "committed files match _SUCCESS (sizes and ETags)"


@define
class ZeroRenameRunFacet(RunFacet):
    """What one step of a zero-rename job read or decided (schema: ZeroRenameRunFacet.json
    beside this module). Counts are those of the step's summary: for ``stage``,
    ``validate`` and ``resolve_conflicts`` the job's pending files, for ``commit``
    those it made visible, for ``abort`` and ``cleanup`` the uploads they aborted."""

    step: str
    destination: str
    jobId: str = ""  # camelCase, as OpenLineage's facets are
    state: str = ""
    tasks: int = 0
    files: int = 0
    bytes: int = 0
    rows: int = 0
    partitions: list[str] = Factory(list)
    partitionCount: int = 0
    replacedFiles: int = 0
    abortedUploads: int = 0
    # Left out of the event where the step has none.
    options: dict[str, str] | None = None
    tableCommit: dict[str, str | int] | None = None
    outputCheck: dict[str, str | int] | None = None


def dataset_name(destination: str) -> tuple[str, str]:
    """(namespace, name) of a destination, as the amazon provider's S3 operators name
    S3 data: ``s3://bucket`` and the key prefix, without its slashes."""
    dest = Destination.parse(destination)
    return f"s3://{dest.bucket}", dest.prefix


def run_facet(
    step: str,
    destination: str,
    job_id: str | None = None,
    summary: JobSummary | None = None,
    record: JobRecord | None = None,
) -> ZeroRenameRunFacet:
    """The step's run facet: the job, and what its summary and record say."""
    # A templated job id renders a missing XCom as "None": no job yet.
    job = "" if job_id in (None, "", "None") else str(job_id)
    facet = ZeroRenameRunFacet(step=step, destination=destination, jobId=job)
    if summary is not None:
        facet.jobId, facet.state = summary.job_id, str(summary.state)
        facet.tasks, facet.files = summary.tasks, summary.files
        facet.bytes, facet.rows = summary.bytes, summary.rows
        facet.partitions = list(summary.partitions[:PARTITIONS_NAMED])
        facet.partitionCount = max(summary.partition_count, len(summary.partitions))
        facet.replacedFiles, facet.abortedUploads = summary.replaced_files, summary.aborted_uploads
    if record is not None:
        facet.jobId, facet.state = record.job_id, facet.state or str(record.state)
        facet.options = job_options(record) or None
        if record.table_commit is not None:
            facet.tableCommit = record.table_commit.model_dump(mode="json")
    return facet


def job_options(record: JobRecord) -> dict[str, str]:
    """The options that say what the job does to its destination; not its tuning."""
    options = record.options
    shown = {
        "conflict_mode": options.conflict_mode,
        "partition_columns": ",".join(options.partition_columns),
        "table_format": options.table_format,
    }
    return {k: str(v) for k, v in shown.items() if v and v != "none"}


def step_lineage(
    step: str,
    destination: str,
    job_id: str | None = None,
    summary: JobSummary | None = None,
    record: JobRecord | None = None,
) -> OperatorLineage:
    """A step that publishes nothing: no dataset, its run facet only."""
    return OperatorLineage(
        run_facets={RUN_FACET: run_facet(step, destination, job_id, summary, record)}
    )


def commit_lineage(
    committer: Committer, summary: JobSummary | None, record: JobRecord | None
) -> OperatorLineage:
    """The commit: the destination as its output, when the job is committed; else
    (the commit failed, or never got as far) its run facet alone."""
    destination = committer.dest.url
    lineage = step_lineage("commit", destination, None, summary, record)
    if summary is None or record is None or summary.state != states.COMMITTED:
        return lineage
    lineage.outputs = [committed_dataset(destination, summary, record, _schema(committer, record))]
    return lineage


def committed_dataset(
    destination: str, summary: JobSummary, record: JobRecord, schema: pa.Schema | None
) -> OutputDataset:
    """The destination as the commit changed it."""
    namespace, name = dataset_name(destination)
    facets: dict[str, Any] = {}
    if schema is not None:
        facets["schema"] = schema_facet(schema, record.options.partition_columns)
    table = record.table_commit
    if table is not None:
        facets["symlinks"] = SymlinksDatasetFacet(identifiers=[table_identifier(record)])
    # Readers' version of the dataset: the table format's commit, else the job's _SUCCESS.
    facets["version"] = DatasetVersionDatasetFacet(
        datasetVersion=table.id if table is not None else record.job_id
    )
    if record.options.conflict_mode == "replace":
        # The written partitions' files replaced, as Spark reports a dynamic overwrite.
        facets["lifecycleStateChange"] = LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=LifecycleStateChange.OVERWRITE
        )
    statistics = OutputStatisticsOutputDatasetFacet(
        rowCount=summary.rows, size=summary.bytes, fileCount=summary.files
    )
    return OutputDataset(
        namespace=namespace,
        name=name,
        facets=facets,
        outputFacets={"outputStatistics": statistics},
    )


def table_identifier(record: JobRecord) -> Identifier:
    """The table the job was published to: an Iceberg table by its catalog's name and
    identifier (the catalog's URI may carry credentials: not reported), or the Delta
    table at the destination."""
    table = record.table_commit
    assert table is not None
    if table.format == "iceberg":
        catalog = getattr(record.options, "iceberg_catalog", "") or EMBEDDED_CATALOG
        return Identifier(namespace=f"iceberg://{catalog}", name=table.table, type="TABLE")
    namespace, name = dataset_name(table.table)
    return Identifier(namespace=namespace, name=name, type="TABLE")


def schema_facet(schema: pa.Schema, partition_columns: tuple[str, ...]) -> SchemaDatasetFacet:
    """The columns with their Arrow types as the writer recorded them; a partition
    column it lacks (readers take it from the paths) as a string."""
    fields = [SchemaDatasetFacetFields(name=f.name, type=str(f.type)) for f in schema]
    fields += [
        SchemaDatasetFacetFields(name=c, type="string", description="partition column")
        for c in partition_columns
        if c not in schema.names
    ]
    return SchemaDatasetFacet(fields=fields)


def _schema(committer: Committer, record: JobRecord) -> pa.Schema | None:
    """The files' schema from the job's plan; None (no schema facet) when it cannot be read."""
    try:
        return files_schema(committer.table_schema(record))
    except (ZeroRenameError, OSError):
        log.warning("job %s: no schema for its lineage", record.job_id, exc_info=True)
        return None


def output_check_lineage(
    destination: str, job_id: str | None, check: OutputCheck | None
) -> OperatorLineage:
    """The output check: the destination as its input, with the check's outcome as a
    data-quality assertion (none for a job a later one superseded: not checked)."""
    facet = run_facet("validate_output", destination, job_id)
    namespace, name = dataset_name(destination)
    facets: dict[str, Any] = {}
    if check is not None:
        facet.outputCheck = {
            "outcome": check.outcome,
            "files": check.files,
            "problems": check.problem_count,
        }
        if check.outcome != "superseded":
            assertion = Assertion(assertion=OUTPUT_ASSERTION, success=check.outcome == "valid")
            facets["dataQualityAssertions"] = DataQualityAssertionsDatasetFacet(
                assertions=[assertion]
            )
    return OperatorLineage(
        inputs=[InputDataset(namespace=namespace, name=name, facets=facets)],
        run_facets={RUN_FACET: facet},
    )

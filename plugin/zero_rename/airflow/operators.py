"""The commit protocol's steps as Airflow operators, one task per step.

Each operator is a thin layer over :class:`~zero_rename.core.committer.Committer`:
it builds the committer from the AWS connection, runs one step, logs what
happened and pushes the step's summary (files, bytes, rows, partitions, S3
requests, seconds) to XCom under ``summary``. Every step is idempotent, so
Airflow's retries, and clearing a whole run, finish the job instead of
starting a second one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, BaseOperator, Context, TriggerRule
from airflow.sdk.exceptions import AirflowFailException

from zero_rename.airflow.failures import protocol_errors
from zero_rename.airflow.hooks import DEFAULT_POOL_SIZE, ZeroRenameHook
from zero_rename.airflow.links import CommitsLink
from zero_rename.airflow.xcom import SUMMARY_KEY, xcom_summary
from zero_rename.core import (
    Committer,
    JobRecord,
    JobSummary,
    OutputCheck,
    StepRunner,
    failure_reason,
    partition_key,
)
from zero_rename.errors import JobNotFoundError, ZeroRenameError

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

# Rendered templates show a missing XCom as the text "None".
_NO_JOB = (None, "", "None")


class JobStepOperator(BaseOperator):
    """Shared parts: destination, job id, the AWS connection and the summary push.

    :param destination: ``s3://bucket/table`` of the job.
    :param job_id: the job's id, usually ``{{ ti.xcom_pull(task_ids='setup_job') }}``.
    :param aws_conn_id: AWS connection; ``endpoint_url`` in its extra for S3-compatible stores.
    :param pool_size: HTTP connections to S3; at least the job's ``threads`` option.
    """

    template_fields: Sequence[str] = ("destination", "job_id", "aws_conn_id")
    operator_extra_links = (CommitsLink(),)
    ui_color = "#d6eaf8"
    step = ""
    # Whether a step given one of its run's jobs goes on with the run's newest.
    follows_run = True

    def __init__(
        self,
        *,
        destination: str,
        job_id: str | None = None,
        aws_conn_id: str | None = "aws_default",
        pool_size: int = DEFAULT_POOL_SIZE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.destination = destination
        self.job_id = job_id
        self.aws_conn_id = aws_conn_id
        self.pool_size = pool_size
        # What the step found, for its lineage (zero_rename.airflow.lineage).
        self.step_summary: JobSummary | None = None
        self.job_record: JobRecord | None = None

    @cached_property
    def hook(self) -> ZeroRenameHook:
        return ZeroRenameHook(aws_conn_id=self.aws_conn_id, pool_size=self.pool_size)

    @cached_property
    def committer(self) -> Committer:
        return self.hook.committer(self.destination)

    @property
    def job(self) -> str:
        if self.job_id in _NO_JOB:
            raise AirflowFailException(f"{self.task_id}: no job id; did the setup task run?")
        return str(self.job_id)

    def steps(self, context: Context) -> StepRunner:
        """The core's step runner for this DAG run's jobs."""
        return StepRunner(self.committer, self.dag_id, context["run_id"])

    def pre_execute(self, context: Context) -> None:
        """The run's job: a job of this run aborted so that its stage could run again
        as the run's next job (a retried stage whose application was lost) is
        followed to that one."""
        super().pre_execute(context)
        if self.follows_run and self.job_id not in _NO_JOB:
            with protocol_errors():
                self.job_id = self.steps(context).successor(str(self.job_id))

    def unless_decided(self, context: Context, step: Callable[[str], JobSummary]) -> JobSummary:
        """Run a pre-commit step, or report the job as it is once it was decided."""
        with protocol_errors():
            return self.steps(context).before_commit(self.job, step)

    def report(
        self, context: Context, summary: JobSummary, extra: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Log and push the step's summary (and ``extra``); returns it as pushed."""
        self.log.info(
            "%s of job %s at %s: %s file(s), %s byte(s), %s row(s), %s partition(s), "
            "%s task(s), %s S3 request(s), %.3f s",
            self.step,
            summary.job_id,
            summary.destination,
            summary.files,
            summary.bytes,
            summary.rows,
            len(summary.partitions),
            summary.tasks,
            summary.requests,
            summary.seconds,
        )
        pushed = {**xcom_summary(summary, self.step), **(extra or {})}
        context["ti"].xcom_push(key=SUMMARY_KEY, value=pushed)
        self.step_summary = summary
        return pushed

    # OpenLineage, asked by Airflow's provider when it is installed: what the step
    # read or decided, as a run facet; the commit and the output check override.
    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        from zero_rename.airflow import lineage

        return lineage.step_lineage(self.step, self.destination, self.job_id)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        from zero_rename.airflow import lineage

        return lineage.step_lineage(
            self.step, self.destination, self.job_id, self.step_summary, self.job_record
        )

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        # What the step got as far as: an abort that failed the run on purpose
        # still says what it aborted.
        return self.get_openlineage_facets_on_complete(task_instance)


class CommitJobSetupOperator(JobStepOperator):
    """Job setup; returns the job id (XCom ``return_value``).

    Without ``job_id`` the id is derived from the DAG id, the run id and the
    destination, so a retry, or a cleared run, finds the same job again.

    :param options: job options (``partition_columns``, ``conflict_mode``,
        ``committer``, ``threads``...); they must match those the writer uses.
    """

    template_fields: Sequence[str] = (*JobStepOperator.template_fields, "options")
    template_fields_renderers = {"options": "json"}
    step = "setup"
    follows_run = False  # it sets up the run's job

    def __init__(self, *, options: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        threads = str((options or {}).get("threads", ""))
        if "pool_size" not in kwargs and threads.isdigit():
            kwargs["pool_size"] = int(threads)
        super().__init__(**kwargs)
        self.options = dict(options or {})

    def execute(self, context: Context) -> str:
        with protocol_errors():
            # Where the Commits page links the job back to.
            origin = {
                "airflow_dag_id": self.dag_id,
                "airflow_run_id": context["run_id"],
                "airflow_task_id": self.task_id,
            }
            if self.job_id in _NO_JOB:
                record = self.steps(context).setup(self.options, origin)
            else:
                record = self.committer.setup_job(
                    self.options, job_id=str(self.job_id), origin=origin
                )
        # Read back by the Commits link when the task finishes.
        self.job_id = record.job_id
        self.job_record = record
        self.report(
            context,
            JobSummary(
                job_id=record.job_id, destination=self.committer.dest.url, state=record.state
            ),
        )
        return record.job_id


class ValidateTaskManifestsOperator(JobStepOperator):
    """Validates the job's task manifests (from the stage manifest); changes nothing."""

    step = "validate"

    def execute(self, context: Context) -> dict[str, Any]:
        return self.report(context, self.unless_decided(context, self.committer.validate))


class ResolvePartitionConflictsOperator(JobStepOperator):
    """Applies the job's conflict mode: fails early for ``fail``, lists what ``replace``
    replaces."""

    step = "resolve_conflicts"

    def execute(self, context: Context) -> dict[str, Any]:
        return self.report(context, self.unless_decided(context, self.committer.resolve_conflicts))


class CommitJobOperator(JobStepOperator):
    """Job commit: publishes every file of the job, resumably.

    A retry after any failure, even a killed worker, finishes the interrupted
    commit; a retry after success reports the committed job again. A job with a
    ``table_format`` is published to it as one commit, before it is recorded
    committed; the summary then carries ``table_commit`` (format, table, the
    snapshot id or Delta version, files added and removed).

    :param asset: the destination as an asset; the commit emits an event for it
        with the committed partitions as partition keys (their values: ``2024-01-01``
        for ``dt=2024-01-01``, ``2024-01-01/eu`` for two columns)
        and the summary as extra.
    """

    step = "commit"

    def __init__(self, *, asset: Asset | None = None, **kwargs: Any) -> None:
        if asset is not None:
            kwargs["outlets"] = [*kwargs.get("outlets", []), asset]
        super().__init__(**kwargs)
        self.asset = asset

    def execute(self, context: Context) -> dict[str, Any]:
        with protocol_errors():
            # The core logs "completed n of total file(s)" every 10% or 10 s.
            summary = self.committer.commit_job(self.job)
            # One GET: the record keeps the table format's commit, if the job has one.
            self.job_record = self.committer.job(self.job)
            table = self.job_record.table_commit
        if table is not None:
            self.log.info("job %s is in the table: %s", self.job, table.describe())
        pushed = self.report(
            context,
            summary,
            {"table_commit": table.model_dump(mode="json")} if table is not None else None,
        )
        if self.asset is not None:
            event = context["outlet_events"][self.asset]
            if summary.partitions:
                # Keyed as the run is (2024-01-01, not dt=2024-01-01), so that a
                # DAG scheduled on this asset's partitions gets the same key.
                event.add_partitions([partition_key(p) for p in summary.partitions])
            event.extra = pushed
        return pushed

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """The destination as output, with what the commit made visible."""
        from zero_rename.airflow import lineage

        return lineage.commit_lineage(self.committer, self.step_summary, self.job_record)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        """No output: the job did not commit (a retry that finishes it will say so)."""
        from zero_rename.airflow import lineage

        return lineage.step_lineage(self.step, self.destination, self.job_id, self.step_summary)


class ValidateOutputOperator(JobStepOperator):
    """The output check after the job commit: every file ``_SUCCESS`` lists is there
    with its size and ETag, and no visible file carrying the job id is missing from it.

    The result goes to the job record (the Commits page, ``zero-rename jobs show``)
    and, when the check passes, to XCom under ``summary``. A problem fails the task
    at once, without retries: the job stays committed, its files visible as they
    are. Put it after :class:`CommitJobOperator`, never upstream of
    :class:`AbortJobOperator`: a committed job cannot be aborted.

    :param threads: partitions listed at once; default the job's ``threads`` option.
    """

    step = "validate_output"

    def __init__(self, *, threads: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.threads = threads
        self.output_check: OutputCheck | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        with protocol_errors():  # a failed check is final: AirflowFailException
            check = self.committer.validate_output(self.job, self.threads)
        self.output_check = check
        self.log.info(
            "%s of job %s at %s: %s", self.step, self.job, self.destination, check.describe()
        )
        pushed = xcom_check(check, self.job, self.committer.dest.url)
        context["ti"].xcom_push(key=SUMMARY_KEY, value=pushed)
        return pushed

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """The destination as input, with the check's outcome as an assertion."""
        from zero_rename.airflow import lineage

        return lineage.output_check_lineage(self.destination, self.job_id, self.output_check)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        """A failed check is in the job record (one GET): reported as a failed assertion."""
        if self.output_check is None and self.job_id not in _NO_JOB:
            try:
                self.output_check = self.committer.job(self.job).output_check
            except Exception:  # only the lineage depends on it
                self.log.debug("could not read the output check of job %s", self.job_id)
        return self.get_openlineage_facets_on_complete(task_instance)


def xcom_check(check: OutputCheck, job_id: str, destination: str) -> dict[str, Any]:
    """An output check as plain JSON for XCom: paths and counts, never a credential."""
    return {
        "step": ValidateOutputOperator.step,
        "job_id": job_id,
        "destination": destination,
        **check.model_dump(mode="json"),
    }


class AbortJobOperator(JobStepOperator):
    """Job abort: decides "aborted" and aborts every pending upload of the job.

    Runs, by default, when an upstream step failed (``one_failed``). It refuses
    a job past its commit's point of no return: that job must be committed by a
    retry of the commit instead, unless ``roll_back`` asks otherwise.

    :param fail_run: after a successful abort, fail this task anyway, so that
        the DAG run, whose result is read from its last tasks, shows that a step
        failed; set False where aborting is the purpose (a manual abort).
    :param roll_back: a job whose commit passed its point of no return but cannot
        finish (S3 refused a planned file) is rolled back instead of refused:
        what it made visible is deleted, its uploads aborted, its claim released.
        A job whose commit can still finish is refused unless ``force``.
        Templated: ``"{{ params.roll_back }}"`` works.
    :param force: with ``roll_back``, roll back even a commit that could finish
        (after the check, which the log shows); never one whose files are all complete.
    """

    template_fields: Sequence[str] = (*JobStepOperator.template_fields, "roll_back", "force")
    step = "abort"
    ui_color = "#fadbd8"

    def __init__(
        self,
        *,
        fail_run: bool = True,
        roll_back: bool | str = False,
        force: bool | str = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ONE_FAILED)
        super().__init__(**kwargs)
        self.fail_run = fail_run
        self.roll_back = roll_back
        self.force = force

    def execute(self, context: Context) -> dict[str, Any] | None:
        pushed = None
        if self.job_id in _NO_JOB:
            self.log.warning("no job was set up at %s; nothing to abort", self.destination)
        else:
            with protocol_errors():
                summary = self.committer.abort_job(
                    self.job,
                    reason=self._reason(context),
                    roll_back=_flag("roll_back", self.roll_back),
                    force=_flag("force", self.force),
                )
            pushed = self.report(context, summary, self._outcome())
            self.log.info(
                "job %s is aborted: nothing of it was published, %d pending upload(s) were aborted",
                summary.job_id,
                summary.aborted_uploads,
            )
        if self.fail_run:
            raise AirflowFailException(
                f"{self._failed_upstream(context) or 'an upstream step'} failed; "
                + (
                    f"job {self.job_id} was aborted and nothing was published"
                    if pushed
                    else "no job was set up"
                )
                + ". This task fails so that the run shows it."
            )
        return pushed

    def _reason(self, context: Context) -> str:
        """The failed steps, the run, and each failed step's own error as the job's
        record keeps it (:func:`~zero_rename.core.failure_reason`)."""
        failed = self._failed_upstream(context)
        where = f"DAG {self.dag_id}, run {context['run_id']}"
        if not failed:
            return f"aborted by task {self.task_id} ({where})"
        try:
            record = self.committer.job(self.job)
        except ZeroRenameError:  # no record, or none readable: the abort says which
            record = None
        return failure_reason(failed.split(", "), where, record)

    def _outcome(self) -> dict[str, Any]:
        """For XCom: the reason the record keeps (an earlier abort's, if one came first)
        and each failed step's own error."""
        try:
            record = self.committer.job(self.job)
        except ZeroRenameError:
            return {}
        return {"reason": record.error, "failed_steps": record.failed_steps}

    def _failed_upstream(self, context: Context) -> str:
        """The upstream task ids that failed, for the message (not those that did not
        run because of them, ``upstream_failed``); empty if they cannot be read."""
        try:
            states = context["ti"].get_task_states(
                dag_id=self.dag_id,
                task_ids=sorted(self.upstream_task_ids),
                run_ids=[context["run_id"]],
            )
            found = states.get(context["run_id"], {})
            return ", ".join(sorted(t for t, s in found.items() if s == "failed"))
        except Exception:  # only the message depends on it
            self.log.debug("could not read upstream task states", exc_info=True)
            return ""


class CleanupJobOperator(JobStepOperator):
    """Job cleanup (a teardown): aborts stray uploads of a decided job and removes
    its temporary objects. A job still undecided is left alone, with a warning."""

    step = "cleanup"
    ui_color = "#e8e8e8"

    def execute(self, context: Context) -> dict[str, Any] | None:
        if self.job_id in _NO_JOB:
            self.log.warning("no job was set up at %s; nothing to clean up", self.destination)
            return None
        with protocol_errors():
            try:
                summary = self.committer.cleanup_job(self.job)
            except JobNotFoundError:
                self.log.warning("no job %s at %s; nothing to clean up", self.job, self.destination)
                return None
        return self.report(context, summary)


def _flag(name: str, value: bool | str) -> bool:
    """A boolean argument, as given or as a template rendered it ("True", "false")."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise AirflowFailException(f"{name} must be true or false, not {str(value)[:40]!r}")

"""The Spark stage: ``spark-submit`` of an application that writes a job's files.

The application receives ``--destination``, ``--job-id`` and one
``--option key=value`` per writer option (the S3 endpoint of the AWS
connection among them) after its own arguments. In orchestrated mode its
driver saves the job's stage manifest and publishes nothing; the commit step
does that later. Credentials are never passed: the Spark cluster has its own,
and a local ``spark-submit`` inherits the worker's environment. The one secret
on its command line is an OpenLineage transport's API key, which Airflow's
provider adds with ``spark_inject_transport_info``: it is handed over as Spark's
OpenLineage client takes it, and masked in the task's log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from zero_rename.airflow.failures import protocol_errors
from zero_rename.airflow.hooks import ZeroRenameHook
from zero_rename.airflow.links import CommitsLink
from zero_rename.airflow.resume import StageApplications
from zero_rename.airflow.xcom import SUMMARY_KEY, xcom_summary
from zero_rename.core import Committer, JobSummary, StepRunner

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.openlineage.extractors import OperatorLineage


def stage_arguments(destination: str, job_id: str, options: Mapping[str, Any]) -> list[str]:
    """The arguments naming the job, appended to the application's own."""
    args = ["--destination", destination, "--job-id", job_id]
    for key, value in sorted(options.items()):
        args += ["--option", f"{key}={value}"]
    return args


def writer_options(options: Mapping[str, Any] | str) -> dict[str, Any]:
    """The rendered options as a mapping, without those that rendered empty."""
    if isinstance(options, str):
        try:
            options = json.loads(options) if options.strip() else {}
        except json.JSONDecodeError as exc:
            raise AirflowFailException(f"writer options are not a JSON object: {exc}") from None
        if not isinstance(options, dict):
            raise AirflowFailException(f"writer options must be a JSON object, not {options!r}")
    return {k: v for k, v in options.items() if v is not None and str(v) != ""}


# A line of spark-submit's output that says what failed: a Python exception's last
# line (``ValueError: ...``), a logged error (``ERROR name: ...``), ``error: ...``.
_FAILURE_LINE = re.compile(r"(^|\s)(ERROR\b|error:|[\w.]*(Error|Exception)\b)")
_EXIT_CODE = re.compile(r"Error code is: (-?\d+)")


def submit_failure(text: str) -> str:
    """spark-submit's failure as the hook reports it (the command line, its exit
    code, then the last lines of its output), in one line: the exit code and the
    last output line that says what failed."""
    code = _EXIT_CODE.search(text)
    _, _, tail = text.partition("Last spark-submit output:")
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    cause = next((line for line in reversed(lines) if _FAILURE_LINE.search(line)), "")
    head = f"spark-submit exited with code {code.group(1)}" if code else "spark-submit failed"
    return f"{head}: {cause}" if cause else head


# The Spark settings that carry an OpenLineage http transport's API key, and its
# custom headers (which may carry one): the transport's own, and each of a
# composite transport's.
_LINEAGE_TRANSPORT = r"spark\.openlineage\.transport\.(transports\.[^.]+\.)?"
_LINEAGE_KEY = re.compile(_LINEAGE_TRANSPORT + r"auth\.apiKey")
_LINEAGE_SECRET = re.compile(_LINEAGE_TRANSPORT + r"(auth\.apiKey|headers\..+)")
_BEARER = "Bearer "


def lineage_key_unprefixed(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` with each OpenLineage API key as OpenLineage's Java client takes it.

    Airflow's OpenLineage provider (``spark_inject_transport_info``) passes the
    Python client's header value, ``Bearer <key>``, as the key; the Java client in
    Spark puts ``Bearer`` before its key itself, so Spark's events would carry
    ``Bearer Bearer <key>`` and a catalog that checks the key would refuse them.
    """
    return {
        name: value[len(_BEARER) :]
        if _LINEAGE_KEY.fullmatch(name) and isinstance(value, str) and value.startswith(_BEARER)
        else value
        for name, value in conf.items()
    }


def lineage_secrets(conf: Mapping[str, Any]) -> list[str]:
    """The values of ``conf`` that Airflow's task log must not show: an OpenLineage
    transport's key and headers. The provider's hook logs the whole spark-submit
    command and masks only settings named for a secret or a password."""
    return [
        str(v)
        for name, v in conf.items()
        if _LINEAGE_SECRET.fullmatch(name) and v is not None and str(v)
    ]


class SparkStageSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` for a job's stage; skips the submit once the stage is done.

    A retry after the application saved its stage manifest, or a cleared run
    whose job is already committing or committed, does not write the job again.
    A retry after the worker died under the stage reattaches to the application
    where the provider can find it again (``durable``, on by default), or aborts
    the job, so that nothing of that application can commit, and writes the run's
    next job, which the later steps follow (:mod:`zero_rename.airflow.resume`). An
    application the worker saw fail fails the task for good.

    :param destination: ``s3://bucket/table`` of the job.
    :param job_id: the job's id, usually ``{{ ti.xcom_pull(task_ids='setup_job') }}``.
    :param options: writer options passed as ``--option key=value``: a mapping, or its
        JSON text (as rendered by ``{{ params.options | tojson }}``). Options whose
        value renders empty are left out.
    :param aws_conn_id: connection whose endpoint (not its credentials) is passed on.
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "destination",
        "job_id",
        "options",
    )
    operator_extra_links = (CommitsLink(),)

    def __init__(
        self,
        *,
        destination: str,
        job_id: str,
        options: Mapping[str, Any] | str | None = None,
        aws_conn_id: str | None = "aws_default",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", "zero-rename-stage")
        super().__init__(**kwargs)
        self.destination = destination
        self.job_id = job_id
        self.options = options if isinstance(options, str) else dict(options or {})
        self.aws_conn_id = aws_conn_id
        self.step_summary: JobSummary | None = None  # for the lineage

    @cached_property
    def committer(self) -> Committer:
        return ZeroRenameHook(aws_conn_id=self.aws_conn_id).committer(self.destination)

    # The parent returns nothing; this returns the stage summary, for XCom.
    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        """The submit, unless the job's stage is done; then its manifest is required
        (:meth:`zero_rename.core.steps.StepRunner.stage`). A retry reattaches to the
        application an earlier try started, or fences it off and writes the run's
        next job (:mod:`zero_rename.airflow.resume`)."""
        with protocol_errors():
            runner = StepRunner(self.committer, self.dag_id, context["run_id"])
            self.job_id = runner.successor(self.job_id)
            summary = runner.stage_done(self.job_id)
            if summary is None:
                applications = StageApplications(context, runner, self.external_id_key)
                job_id = self.job_id = applications.prepare(self.job_id)
                summary = runner.stage(
                    job_id, lambda: applications.submit(job_id, lambda: self._submit(context))
                )
        return self._report(context, summary)

    def _get_hook(self) -> SparkSubmitHook:
        # The parent builds its hook from self.conf right after the provider's
        # injection of the OpenLineage transport: the key is put right first, and
        # kept out of the task log, where the hook writes the command line.
        from airflow.sdk.log import mask_secret

        self.conf = lineage_key_unprefixed(self.conf or {})
        for secret in lineage_secrets(self.conf):
            mask_secret(secret)
        return super()._get_hook()

    def _submit(self, context: Context) -> None:
        options = writer_options(self.options)
        if endpoint := ZeroRenameHook(aws_conn_id=self.aws_conn_id).endpoint_url:
            options.setdefault("endpoint", endpoint)
        # A template may render an optional argument as "": drop it.
        own = [str(a) for a in self.application_args or [] if str(a) != ""]
        self.application_args = [
            *own,
            *stage_arguments(self.committer.dest.url, self.job_id, options),
        ]
        try:
            super().execute(context)
        except AirflowException as exc:
            if type(exc) is not AirflowException:  # a subclass means more: let it be
                raise
            # Its first line is the command line; the application's own error is
            # in the output the hook appends. That line leads, for the job record.
            raise AirflowException(f"{submit_failure(str(exc))}\n{exc}") from exc

    def _report(self, context: Context, summary: JobSummary) -> dict[str, Any]:
        self.log.info(
            "stage of job %s: %d task(s), %d file(s), %d byte(s), %d row(s) pending",
            summary.job_id,
            summary.tasks,
            summary.files,
            summary.bytes,
            summary.rows,
        )
        pushed = xcom_summary(summary, "stage")
        context["ti"].xcom_push(key=SUMMARY_KEY, value=pushed)
        self.step_summary = summary
        return pushed

    # OpenLineage: what the stage left pending; the files become the destination's at
    # the commit. With [openlineage] spark_inject_parent_job_info (and _transport_info)
    # on, SparkSubmitOperator.execute passes this task's run (and the transport) to the
    # application, so that Spark's own lineage hangs under it.
    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        from zero_rename.airflow import lineage

        return lineage.step_lineage("stage", self.destination, self.job_id)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        from zero_rename.airflow import lineage

        return lineage.step_lineage("stage", self.destination, self.job_id, self.step_summary)

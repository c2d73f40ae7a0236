"""Manual output check: check a committed job's files against ``_SUCCESS``.

    validate_output

The output check of a job committed earlier, by destination and id: every
file ``_SUCCESS`` lists is there with its size and ETag, and no visible file
carrying the job id is missing from it. The result goes to the job record,
which the Commits page and ``zero-rename jobs show`` show. A problem fails the
run at once, without retries, and changes nothing: the job stays committed.
A job that is not committed is refused; one whose ``_SUCCESS`` a later job
replaced is reported as superseded.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, conf

from zero_rename.airflow.operators import ValidateOutputOperator

AWS_CONN_ID = conf.get("zero_rename", "aws_conn_id", fallback="aws_default")

with DAG(
    dag_id="manual_validate_output",
    description="Checks a committed zero-rename job's files against _SUCCESS",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    params={
        "destination": Param(
            type="string",
            pattern=r"^s3a?://[^/]+/.+",
            description="Destination of the job, s3://bucket/table",
        ),
        "job_id": Param(
            type="string",
            pattern=r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$",
            description="The job's id (a UUID)",
        ),
    },
    tags=["zero-rename"],
    doc_md=__doc__,
) as dag:
    ValidateOutputOperator(
        task_id="validate_output",
        destination="{{ params.destination }}",
        job_id="{{ params.job_id }}",
        aws_conn_id=AWS_CONN_ID,
        # A failed check is final and not retried; an S3 error is.
        retries=2,
    )

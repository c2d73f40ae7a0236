"""Manual abort: abort a job by destination and id, then clean it up.

    abort_job ──> cleanup_job

Aborting aborts every pending upload of the job, including those of task
attempts still running, and records the job as aborted so that none of it can
be committed later. A job whose commit passed its point of no return
(committing or committed) is refused with a message that says so: finish a
committing job by retrying its commit instead.

With ``roll_back``, a job stuck in committing whose commit cannot finish (S3
refused one of its files, an upload was aborted by hand) is rolled back: the
files it made visible are deleted, its uploads aborted, its claim released,
and the destination is as it was before the job. A commit that could still
finish is refused unless ``force`` is set too; one whose files are all
complete is always refused (retry its commit).
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, TriggerRule, conf

from zero_rename.airflow.operators import AbortJobOperator, CleanupJobOperator

AWS_CONN_ID = conf.get("zero_rename", "aws_conn_id", fallback="aws_default")

with DAG(
    dag_id="manual_abort",
    description="Aborts a zero-rename job and cleans it up",
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
        "roll_back": Param(
            False,
            type="boolean",
            description="Roll back a job stuck in committing whose commit cannot finish",
        ),
        "force": Param(
            False,
            type="boolean",
            description="With roll_back: roll back even a commit that could still finish",
        ),
    },
    tags=["zero-rename"],
    doc_md=__doc__,
) as dag:
    common = {
        "destination": "{{ params.destination }}",
        "job_id": "{{ params.job_id }}",
        "aws_conn_id": AWS_CONN_ID,
    }
    # Aborting is the purpose here: a successful abort is a successful run.
    abort = AbortJobOperator(
        task_id="abort_job",
        fail_run=False,
        roll_back="{{ params.roll_back }}",
        force="{{ params.force }}",
        trigger_rule=TriggerRule.ALL_SUCCESS,
        retries=2,
        **common,
    )
    # Runs only after a successful abort: a refused abort fails the run.
    cleanup = CleanupJobOperator(task_id="cleanup_job", retries=2, **common)
    abort >> cleanup

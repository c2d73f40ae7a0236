"""Failure is the main path: a crash before, during and after every protocol step.

A crash is a forked process that ends itself (``os._exit``) at an exact S3
call, so no cleanup handler runs, as with a killed worker. Each test then
retries the step, or aborts, and checks the destination's rows, its files and
its pending uploads: exactly once, or nothing at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from botocore.exceptions import ClientError

from tests.faults import CRASH_EXIT_CODE, clear, inject, run_until_crash
from tests.helpers import history_only, pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.core.protocol.claims import Claims
from zero_rename.core.s3 import profile_record
from zero_rename.core.s3.client import StoreConfig
from zero_rename.errors import (
    AbortRefusedError,
    CommitRolledBackError,
    StoreError,
    ZeroRenameError,
)

pytestmark = pytest.mark.s3

FILES = {f"2024-01-0{d}": f"day {d}".encode() for d in range(1, 4)}


def crash_at(
    dest: str,
    config: StoreConfig,
    op: str,
    step: Callable[[Committer], object],
    when: str = "before",
    nth: int = 1,
    key_contains: str | None = None,
) -> None:
    """Run ``step`` in a child process that dies at the ``nth`` matching ``op``."""

    def child() -> None:
        c = Committer(dest, config)
        inject(c.store.client, op, when=when, nth=nth, action="exit", key_contains=key_contains)
        step(c)

    assert run_until_crash(child) == CRASH_EXIT_CODE, f"no crash at {op} #{nth}"


def tasks_written(c: Committer, conflict_mode: str = "replace", mode: str = "magic") -> JobRecord:
    job = c.setup_job(
        {"committer": mode, "partition_columns": "dt", "conflict_mode": conflict_mode, "threads": 4}
    )
    for i, (day, body) in enumerate(FILES.items()):
        write_task(c, job, f"{i:05d}", {day: body})
    return job


def assert_committed_once(c: Committer, job: JobRecord) -> None:
    files = visible(c)
    assert sorted(files.values()) == sorted(FILES.values())
    assert all(job.job_id in name for name in files)
    assert pending_in_bucket(c) == []
    success = json.loads(c.store.get_object(c.dest.bucket, c.dest.success_key)[0])
    assert success["jobId"] == job.job_id and len(success["files"]) == len(FILES)
    record = c.job(job.job_id)
    assert record.state == "committed"
    assert history_only(c, job.job_id)


# -- job commit ---------------------------------------------------------------
COMMIT_CRASHES = [
    pytest.param("PutObject", "before", 1, "job.json", "setup", id="before-seal"),
    pytest.param("PutObject", "after", 1, "job.json", "sealed", id="after-seal"),
    # Read beside the seal (a small job's manifests), as the claim is sent: either may
    # land first.
    pytest.param("GetObject", "before", 2, "tasks/", "setup|sealed", id="while-reading-manifests"),
    pytest.param("ListMultipartUploads", "before", 1, None, "sealed", id="during-validation"),
    pytest.param("PutObject", "before", 1, "claims.json", "setup|sealed", id="before-claim"),
    pytest.param("PutObject", "after", 1, "claims.json", "setup|sealed", id="after-claim"),
    pytest.param("PutObject", "before", 1, "plan-", "sealed", id="before-plan-saved"),
    pytest.param("PutObject", "before", 2, "job.json", "sealed", id="before-point-of-no-return"),
    pytest.param("PutObject", "after", 2, "job.json", "committing", id="after-point-of-no-return"),
    pytest.param(
        "CompleteMultipartUpload", "before", 1, None, "committing", id="before-first-complete"
    ),
    pytest.param(
        "CompleteMultipartUpload", "after", 2, None, "committing", id="after-second-complete"
    ),
    # The last "done" entry and _SUCCESS go beside the swap to committed.
    pytest.param("PutObject", "after", 1, "journal/", "committing|committed", id="after-journal"),
    pytest.param(
        "PutObject", "before", 1, "_SUCCESS", "committing|committed", id="before-success-marker"
    ),
    pytest.param("PutObject", "after", 3, "job.json", "committed", id="after-final-record"),
    pytest.param("PutObject", "before", 2, "claims.json", "committed", id="before-claim-release"),
    pytest.param("DeleteObjects", "before", 1, None, "committed", id="during-cleanup"),
]


@pytest.mark.parametrize("op,when,nth,key,state", COMMIT_CRASHES)
@pytest.mark.also_on("moto")
def test_job_commit_crash_then_retry_commits_once(
    committer: Committer,
    dest: str,
    store_config: StoreConfig,
    op: str,
    when: str,
    nth: int,
    key: str | None,
    state: str,
) -> None:
    job = tasks_written(committer, conflict_mode="append")
    crash_at(dest, store_config, op, lambda c: c.commit_job(job.job_id), when, nth, key)
    found = committer.job(job.job_id).state
    assert found in state.split("|")  # "a|b": requests sent side by side, either landed
    if found in ("setup", "sealed"):
        assert visible(committer) == {}
    if found == "committing":
        with pytest.raises(AbortRefusedError, match="Retry the commit"):
            committer.abort_job(job.job_id)
    summary = committer.commit_job(job.job_id)
    if found == "committed":  # the crash hit cleanup: the cleanup step finishes it
        committer.cleanup_job(job.job_id)
    assert summary.files == len(FILES)
    assert_committed_once(committer, job)


@pytest.mark.also_on("moto")
def test_success_lost_beside_the_committed_swap_is_written_by_the_retry(
    committer: Committer,
) -> None:
    """``_SUCCESS`` goes beside the swap to committed: where only the swap lands, the
    job is committed without it, and the commit's retry writes it."""
    job = tasks_written(committer, conflict_mode="append")
    refusal = inject(
        committer.store.client,
        "PutObject",
        key_contains="_SUCCESS",
        code="AccessDenied",
        status=403,
    )
    with pytest.raises(ZeroRenameError):
        committer.commit_job(job.job_id)
    clear(committer.store.client, refusal)
    assert committer.job(job.job_id).state == "committed"
    assert committer.store.get_object(committer.dest.bucket, committer.dest.success_key) is None
    assert committer.commit_job(job.job_id).files == len(FILES)
    assert_committed_once(committer, job)


@pytest.mark.parametrize("nth,state", [(1, "setup"), (2, "sealed")])
def test_crash_before_decision_then_abort_leaves_nothing(
    committer: Committer, dest: str, store_config: StoreConfig, nth: int, state: str
) -> None:
    """Abort wins over a commit that did not pass its point of no return, sealed or not."""
    job = tasks_written(committer)
    crash_at(
        dest,
        store_config,
        "PutObject",
        lambda c: c.commit_job(job.job_id),
        nth=nth,
        key_contains="job.json",
    )
    assert committer.job(job.job_id).state == state
    committer.abort_job(job.job_id)
    assert visible(committer) == {} and pending_in_bucket(committer) == []
    hidden = {
        o.key for o in committer.store.list_objects(committer.dest.bucket, committer.dest.dir)
    }
    assert hidden <= {
        committer.dest.job(job.job_id).record_key,
        committer.dest.hidden_dir + "claims.json",
        # The destination's, not the job's: written by a process that probed the store.
        committer.dest.hidden_dir + profile_record.RECORD_NAME,
    }
    assert Claims(committer.ctx).read()[0].claims == ()


def test_replace_crash_between_complete_and_delete_rolls_forward(
    committer: Committer, dest: str, store_config: StoreConfig
) -> None:
    """S3A deletes before completing; we delete after, so a crash never empties a partition."""
    for day in FILES:
        committer.store.put_object(
            committer.dest.bucket,
            f"{committer.dest.dir}dt={day}/old.parquet",
            b"old " + day.encode(),
        )
    job = tasks_written(committer, conflict_mode="replace")
    crash_at(dest, store_config, "DeleteObjects", lambda c: c.commit_job(job.job_id))
    during = visible(committer)
    assert len(during) == 2 * len(FILES)  # old and new side by side, never neither
    committer.commit_job(job.job_id)
    assert_committed_once(committer, job)


def test_lost_complete_response_is_checked_not_guessed(committer: Committer) -> None:
    """A complete whose answer is lost (here: a 500 after it took effect) is checked
    by HEAD against the ETag the recorded parts imply, and the commit goes on."""
    job = tasks_written(committer, conflict_mode="append")
    lost = inject(committer.store.client, "CompleteMultipartUpload", when="after", nth=1)
    heads = inject(committer.store.client, "HeadObject", when="before", nth=10**6)
    committer.commit_job(job.job_id)
    assert lost.fired == 1 and heads.seen >= 1
    assert_committed_once(committer, job)


def test_resumed_commit_never_completes_twice(
    committer: Committer, dest: str, store_config: StoreConfig
) -> None:
    """A resumed commit lists the job's pending uploads and checks the rest by ETag,
    so it never sends a second complete, whose answer differs by store (here
    MinIO's NoSuchUpload is played for any complete of a completed upload)."""
    job = tasks_written(committer, conflict_mode="append")
    crash_at(
        dest,
        store_config,
        "CompleteMultipartUpload",
        lambda c: c.commit_job(job.job_id),
        when="after",
        nth=2,
    )
    assert committer.job(job.job_id).state == "committing"
    like_minio = _no_such_upload_once_completed(committer, store_config)
    committer.commit_job(job.job_id)
    assert like_minio.answered == 0
    assert_committed_once(committer, job)


class _NoSuchUploadOnceCompleted:
    """Answer a complete of an already completed upload as MinIO does: NoSuchUpload."""

    def __init__(self, probe: Committer) -> None:
        self.probe = probe
        self.answered = 0

    def mark(self, params: dict, context: dict, **_: object) -> None:
        c = self.probe
        context["completed-already"] = c.store.head_object(c.dest.bucket, params["Key"]) is not None

    def answer(self, context: dict, **_: object) -> None:
        if context.get("completed-already"):
            self.answered += 1
            raise ClientError(
                {
                    "Error": {"Code": "NoSuchUpload", "Message": "gone"},
                    "ResponseMetadata": {"HTTPStatusCode": 404},
                },
                "CompleteMultipartUpload",
            )


def _no_such_upload_once_completed(
    c: Committer, store_config: StoreConfig
) -> _NoSuchUploadOnceCompleted:
    hooks = _NoSuchUploadOnceCompleted(Committer(c.dest, store_config))
    events = c.store.client.meta.events
    events.register("before-parameter-build.s3.CompleteMultipartUpload", hooks.mark)
    events.register("before-call.s3.CompleteMultipartUpload", hooks.answer)
    return hooks


def test_commit_rolls_back_when_an_upload_vanished(committer: Committer) -> None:
    """Whatever the store answers to completing the vanished upload (404 NoSuchUpload;
    moto and older Ceph: a 500), the commit checks, says which file, and rolls the
    job back (tests/core/protocol/test_rollback.py has every refusal)."""
    job = tasks_written(committer, conflict_mode="append")
    crash = inject(committer.store.client, "CompleteMultipartUpload", when="before", nth=1)
    with pytest.raises(StoreError):
        committer.commit_job(job.job_id)
    clear(committer.store.client, crash)
    # the failed complete's upload, at least, is still pending: abort it by hand
    victim = committer.pending_uploads(job.job_id)[0]
    committer.store.abort_upload(committer.dest.bucket, victim.key, victim.upload_id)
    with pytest.raises(CommitRolledBackError, match=victim.key):
        committer.commit_job(job.job_id)
    assert committer.job(job.job_id).state == "aborted"
    assert visible(committer) == {} and pending_in_bucket(committer) == []


def test_concurrent_commit_and_abort_one_wins(
    committer: Committer, store_config: StoreConfig
) -> None:
    """The job record's compare-and-swap lets exactly one of a commit and an abort decide."""
    from concurrent.futures import ThreadPoolExecutor

    job = tasks_written(committer, conflict_mode="append")
    other = Committer(committer.dest, store_config)
    with ThreadPoolExecutor(2) as pool:
        commit = pool.submit(committer.commit_job, job.job_id)
        abort = pool.submit(other.abort_job, job.job_id)
        outcomes = []
        for future in (commit, abort):
            try:
                future.result()
                outcomes.append("ok")
            except ZeroRenameError as exc:
                outcomes.append(type(exc).__name__)
    state = committer.job(job.job_id).state
    if state == "committed":
        assert outcomes == ["ok", "AbortRefusedError"]
        assert_committed_once(committer, job)
    else:
        assert state == "aborted" and outcomes == ["JobDecidedError", "ok"]
        assert visible(committer) == {} and pending_in_bucket(committer) == []


# -- job abort and cleanup ----------------------------------------------------
@pytest.mark.parametrize(
    "op,key", [("PutObject", "job.json"), ("AbortMultipartUpload", None), ("DeleteObjects", None)]
)
def test_abort_crash_then_retry_leaves_nothing(
    committer: Committer, dest: str, store_config: StoreConfig, op: str, key: str | None
) -> None:
    job = tasks_written(committer)
    crash_at(dest, store_config, op, lambda c: c.abort_job(job.job_id), key_contains=key)
    committer.abort_job(job.job_id)
    assert committer.job(job.job_id).state == "aborted"
    assert visible(committer) == {} and pending_in_bucket(committer) == []
    assert committer.job(job.job_id).steps["abort"].status == "succeeded"


# -- job setup ----------------------------------------------------------------
def test_setup_lost_response_is_read_back(committer: Committer) -> None:
    job_id = "6f1c2e9a-1b2c-4d3e-8f4a-5b6c7d8e9f00"
    lost = inject(committer.store.client, "PutObject", when="after", key_contains="job.json")
    job = committer.setup_job({"conflict_mode": "append"}, job_id=job_id)
    assert lost.fired == 1 and job.job_id == job_id
    clear(committer.store.client, lost)
    assert committer.setup_job({"conflict_mode": "append"}, job_id=job_id).created == job.created
    write_task(committer, job, "00000", [b"x"])
    assert committer.commit_job(job_id).files == 1


# -- task attempts ------------------------------------------------------------
@pytest.mark.parametrize("op,nth", [("CreateMultipartUpload", 2), ("UploadPart", 2)])
def test_staging_task_commit_failure_aborts_its_uploads(
    committer: Committer, op: str, nth: int
) -> None:
    job = committer.setup_job({"committer": "staging", "conflict_mode": "append"})
    attempt = committer.task_attempt(job, "00000")
    for body in (b"one", b"two", b"three"):
        with attempt.open() as f:
            f.write(body)
    fault = inject(committer.store.client, op, nth=nth)
    with pytest.raises(StoreError, match="injected"):
        attempt.commit()
    clear(committer.store.client, fault)
    assert pending_in_bucket(committer) == []
    assert attempt._spool is None  # spool removed
    retry = committer.task_attempt(job, "00000", attempt=1)
    with retry.open() as f:
        f.write(b"retried")
    retry.commit()
    committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"retried"]


@pytest.mark.parametrize("op,nth", [("CreateMultipartUpload", 1), ("UploadPart", 2)])
def test_magic_write_failure_then_task_abort(committer: Committer, op: str, nth: int) -> None:
    job = committer.setup_job(
        {"committer": "magic", "conflict_mode": "append", "part_size": 5 * 1024 * 1024}
    )
    attempt = committer.task_attempt(job, "00000")
    with attempt.open() as f:
        f.write(b"first file")
    fault = inject(committer.store.client, op, nth=nth)
    with pytest.raises(StoreError), attempt.open() as f:
        f.write(b"x" * (6 * 1024 * 1024))
    clear(committer.store.client, fault)
    attempt.abort()
    assert pending_in_bucket(committer) == []
    committer.commit_job(job.job_id)
    assert visible(committer) == {}


def test_task_killed_mid_write_then_retried(
    committer: Committer, dest: str, store_config: StoreConfig
) -> None:
    job = committer.setup_job(
        {"committer": "magic", "conflict_mode": "append", "part_size": 5 * 1024 * 1024}
    )

    def write(c: Committer) -> None:
        attempt = c.task_attempt(job, "00000", 0)
        with attempt.open() as f:
            f.write(b"y" * (11 * 1024 * 1024))
        attempt.commit()

    crash_at(dest, store_config, "UploadPart", write, nth=2)
    assert len(pending_in_bucket(committer)) == 1  # the killed attempt's upload
    write_task(committer, job, "00000", [b"attempt 1"], attempt=1)
    committer.commit_job(job.job_id, expected=1)
    assert list(visible(committer).values()) == [b"attempt 1"]
    assert pending_in_bucket(committer) == []


def test_task_killed_after_publishing_counts_as_committed(
    committer: Committer, dest: str, store_config: StoreConfig
) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    crash_at(
        dest,
        store_config,
        "GetObject",  # the fence read after publishing
        lambda c: write_task(c, job, "00000", [b"published"]),
        key_contains="job.json",
    )
    committer.commit_job(job.job_id, expected=1)
    assert list(visible(committer).values()) == [b"published"]


def test_manifest_publish_lost_response_is_checked(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    lost = inject(committer.store.client, "PutObject", when="after", key_contains="tasks/")
    write_task(committer, job, "00000", [b"kept"])  # finds its own manifest, stays committed
    clear(committer.store.client, lost)
    committer.commit_job(job.job_id, expected=1)
    assert list(visible(committer).values()) == [b"kept"]

"""Conflict modes, manifest validation and bad input: refusals change nothing."""

from __future__ import annotations

import pytest

from tests.faults import clear, inject
from tests.helpers import pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import TaskManifest, dump
from zero_rename.core.s3 import probes
from zero_rename.core.s3.client import StoreConfig
from zero_rename.errors import (
    CommitRolledBackError,
    ConfigError,
    ConflictError,
    DestinationError,
    ManifestError,
    ValidationError,
)

pytestmark = pytest.mark.s3


def seed(c: Committer, files: dict[str, bytes]) -> None:
    """Files already in the destination (written by someone else)."""
    for relative, body in files.items():
        c.store.put_object(c.dest.bucket, c.dest.dir + relative, body)


# -- partitioned ------------------------------------------------------------
def test_partitioned_fail_refuses_and_changes_nothing(committer: Committer) -> None:
    seed(committer, {"dt=2024-01-01/old.parquet": b"old", "dt=2024-01-03/other.parquet": b"o"})
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "fail"})
    write_task(committer, job, "00000", {"2024-01-01": b"new1", "2024-01-02": b"new2"})
    with pytest.raises(ConflictError, match="dt=2024-01-01"):
        committer.resolve_conflicts(job.job_id)
    with pytest.raises(ConflictError, match="nothing was changed"):
        committer.commit_job(job.job_id)
    assert committer.job(job.job_id).state == "sealed"
    assert visible(committer) == {
        "dt=2024-01-01/old.parquet": b"old",
        "dt=2024-01-03/other.parquet": b"o",
    }
    committer.abort_job(job.job_id)
    assert pending_in_bucket(committer) == []


def test_partitioned_fail_ignores_other_partitions(committer: Committer) -> None:
    seed(committer, {"dt=2024-01-03/other.parquet": b"o", "dt=2024-01-011/x.parquet": b"x"})
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "fail"})
    write_task(committer, job, "00000", {"2024-01-01": b"new"})
    committer.commit_job(job.job_id)
    assert len(visible(committer)) == 3


def test_replace_takes_no_file_of_another_job_for_its_own(committer: Committer) -> None:
    """A file named ``part-<this job's id>-<other job's id>.c000``: its task id is
    this job's id, but the file is the other job's and is replaced."""
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    earlier = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(committer, earlier, job.job_id, {"2024-01-01": b"earlier"})
    committer.commit_job(earlier.job_id)
    write_task(committer, job, "00000", {"2024-01-01": b"new"})
    committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"new"]


def test_partitioned_replace_replaces_only_written_partitions(committer: Committer) -> None:
    seed(
        committer,
        {
            "dt=2024-01-01/old-a.parquet": b"a",
            "dt=2024-01-01/old-b.parquet": b"b",
            "dt=2024-01-02/keep.parquet": b"k",
            "dt=2024-01-01/_hidden": b"h",
        },
    )
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    write_task(committer, job, "00000", {"2024-01-01": b"new"})
    summary = committer.commit_job(job.job_id)
    assert summary.replaced_files == 2 and summary.partitions == ("dt=2024-01-01",)
    files = visible(committer)
    assert files.pop("dt=2024-01-02/keep.parquet") == b"k"
    assert list(files.values()) == [b"new"]


def test_replace_twice_leaves_one_copy(committer: Committer) -> None:
    for day_run in (b"first", b"second"):
        job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
        write_task(committer, job, "00000", {"2024-01-01": day_run})
        committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"second"]


def test_partitioned_append_keeps_existing(committer: Committer) -> None:
    seed(committer, {"dt=2024-01-01/old.parquet": b"old"})
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(committer, job, "00000", {"2024-01-01": b"new"})
    committer.commit_job(job.job_id)
    assert sorted(visible(committer).values()) == [b"new", b"old"]


# -- directory (no partition columns) ---------------------------------------
def test_directory_fail_refuses_at_setup(committer: Committer) -> None:
    seed(committer, {"existing.parquet": b"e"})
    with pytest.raises(ConflictError, match="already has 1 file"):
        committer.setup_job({"conflict_mode": "fail"})
    assert committer.jobs() == []


def test_directory_fail_checks_again_at_commit(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "fail"})
    write_task(committer, job, "00000", [b"mine"])
    seed(committer, {"raced-in.parquet": b"r"})
    with pytest.raises(ConflictError):
        committer.commit_job(job.job_id)
    assert visible(committer) == {"raced-in.parquet": b"r"}


def test_directory_replace_replaces_everything_visible(committer: Committer) -> None:
    seed(committer, {"a.parquet": b"a", "sub/b.parquet": b"b", "_keep/meta": b"m"})
    job = committer.setup_job({"conflict_mode": "replace"})
    write_task(committer, job, "00000", [b"new"])
    committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"new"]
    assert committer.store.head_object(committer.dest.bucket, committer.dest.dir + "_keep/meta")


# -- validation ---------------------------------------------------------------
def test_validation_names_missing_and_duplicate_tasks(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    m0 = write_task(committer, job, "00000", [b"a"], publish=False)
    assert m0 is not None
    with pytest.raises(ValidationError, match=r"no manifest for task\(s\) \['00001'\]"):
        committer.commit_job(job.job_id, [m0], expected=["00000", "00001"])
    with pytest.raises(ValidationError, match="task 00000 has 2 manifests"):
        committer.validate(job.job_id, [m0, m0])
    assert committer.job(job.job_id).steps["validate"].status == "failed"
    assert visible(committer) == {}


def test_validation_refuses_foreign_and_escaping_manifests(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    other = committer.setup_job({"conflict_mode": "append"})
    mine = write_task(committer, job, "00000", [b"a"], publish=False)
    foreign = write_task(committer, other, "00001", [b"b"], publish=False)
    assert mine is not None and foreign is not None
    with pytest.raises(ValidationError, match=f"belongs to job {other.job_id}"):
        committer.commit_job(job.job_id, [mine, foreign])
    upload = mine.uploads[0]
    escaping = mine.model_copy(
        update={
            "uploads": (
                upload.model_copy(update={"key": "elsewhere/" + upload.key.rsplit("/", 1)[-1]}),
            )
        }
    )
    with pytest.raises(ValidationError, match="outside the destination"):
        committer.validate(job.job_id, [escaping])
    doubled = mine.model_copy(update={"uploads": (upload, upload)})
    with pytest.raises(ValidationError, match="written by 2 uploads"):
        committer.validate(job.job_id, [doubled])
    assert visible(committer) == {}


def test_validation_checks_uploads_are_still_pending(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    m = write_task(committer, job, "00000", [b"a", b"b"], publish=False)
    assert m is not None
    gone = m.uploads[0]
    committer.store.abort_upload(committer.dest.bucket, gone.key, gone.upload_id)
    with pytest.raises(ValidationError, match="no longer pending") as err:
        committer.commit_job(job.job_id, [m])
    assert gone.key in str(err.value)
    assert committer.job(job.job_id).state == "sealed"
    committer.abort_job(job.job_id)
    assert visible(committer) == {} and pending_in_bucket(committer) == []


def test_recorded_parts_are_left_to_complete(committer: Committer) -> None:
    """Validation confirms that every upload is pending, by listing; which parts it
    holds is CompleteMultipartUpload's to check. A part nobody recorded does not
    stop it (the commit publishes exactly the recorded bytes); a recorded part S3
    does not hold is refused by S3: the commit says whose manifest is wrong and
    rolls that job back."""
    job = committer.setup_job({"conflict_mode": "append"})
    m = write_task(committer, job, "00000", [b"abc"], publish=False)
    assert m is not None
    u = m.uploads[0]
    committer.store.upload_part(committer.dest.bucket, u.key, u.upload_id, 2, b"extra")
    committer.validate(job.job_id, [m])
    committer.commit_job(job.job_id, [m])
    assert list(visible(committer).values()) == [b"abc"]

    job = committer.setup_job({"conflict_mode": "append"})
    m = write_task(committer, job, "00000", [b"def"], publish=False)
    assert m is not None
    u = m.uploads[0]
    wrong = u.model_copy(
        update={
            "parts": (u.parts[0].model_copy(update={"etag": '"0123456789abcdef0123456789abcdef"'}),)
        }
    )
    with pytest.raises(CommitRolledBackError, match=f"refused the parts recorded for {u.key}"):
        committer.commit_job(job.job_id, [m.model_copy(update={"uploads": (wrong,)})])
    assert list(visible(committer).values()) == [b"abc"]


def test_malformed_published_manifest_is_named(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    key = committer.dest.job(job.job_id).task_manifest_key("00000")
    committer.store.put_object(committer.dest.bucket, key, b'{"kind": "something else"}')
    with pytest.raises(ManifestError, match="tasks/00000.json"):
        committer.commit_job(job.job_id)
    assert committer.job(job.job_id).state == "sealed"


def test_a_stage_step_the_record_cannot_take_leaves_the_saved_stage_whole(
    committer: Committer,
) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    m = write_task(committer, job, "00000", [b"staged"], publish=False)
    assert m is not None
    # Every write of the job record is refused: the manifest is saved, the step is
    # not. (Refused, not a 500: a 500's outcome is unknown, and the record's
    # compare-and-swap reads it back and backs off for a dozen rounds, 15 s.)
    fault = inject(
        committer.store.client,
        "PutObject",
        key_contains="job.json",
        times=10**6,
        code="AccessDenied",
        status=403,
    )
    try:
        committer.save_stage_manifest(job.job_id, [m], engine="test")
    finally:
        clear(committer.store.client, fault)
    assert "stage" not in committer.job(job.job_id).steps
    committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"staged"]
    assert pending_in_bucket(committer) == []


def test_stage_manifest_is_the_engine_choice(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    m = write_task(committer, job, "00000", [b"staged"], publish=False)
    assert m is not None
    committer.save_stage_manifest(job.job_id, [m], engine="test")
    committer.save_stage_manifest(job.job_id, [m], engine="test")  # an engine retry
    stage = committer.job(job.job_id).steps["stage"]
    assert (stage.status, stage.detail) == ("succeeded", "test: 1 task(s), 1 file(s)")
    with pytest.raises(ManifestError, match="other task attempts"):
        committer.save_stage_manifest(job.job_id, [], engine="test")
    committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"staged"]


# -- bad input --------------------------------------------------------------
def test_destination_that_is_a_file(committer: Committer) -> None:
    """Refused; and the store's profile, read beside the destination's checks, is
    neither probed nor kept under the file's name (a fresh process, no record)."""
    committer.store.put_object(committer.dest.bucket, committer.dest.prefix, b"a file")
    probes._DETECTED.clear()
    with pytest.raises(DestinationError, match="is a file"):
        committer.setup_job({})
    listed = committer.store.list_objects(committer.dest.bucket, committer.dest.prefix)
    assert [o.key for o in listed] == [committer.dest.prefix]
    assert pending_in_bucket(committer) == []


def test_missing_bucket(store_config: StoreConfig) -> None:
    with pytest.raises(DestinationError, match="does not exist"):
        Committer("s3://no-such-bucket-zr/table", store_config).setup_job({})


@pytest.mark.moto_xfail(
    reason="accepts any credentials (no signature check without IAM emulation)",
    raises=pytest.fail.Exception,
)
@pytest.mark.localstack_xfail(
    reason="accepts any credentials (host mode checks no signature)",
    raises=pytest.fail.Exception,
)
def test_wrong_credentials(
    dest: str,
    store_config: StoreConfig,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(DestinationError, match="credentials") as err:
        Committer(dest, store_config).setup_job({})
    assert "not-the-secret" not in str(err.value) + caplog.text


def test_unknown_option_names_it(committer: Committer) -> None:
    with pytest.raises(ConfigError, match="'conflictmode'"):
        committer.setup_job({"conflictmode": "replace"})


def test_invalid_partition_values(committer: Committer) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    attempt = committer.task_attempt(job, "00000")
    with pytest.raises(ConfigError, match="do not match"):
        attempt.open({"day": "2024-01-01"})
    with pytest.raises(ConfigError, match="string or None"):
        attempt.open({"dt": 20240101})  # type: ignore[dict-item]
    with attempt.open({"dt": "../../escape"}) as f:
        f.write(b"x")
    attempt.commit()
    committer.commit_job(job.job_id)
    assert list(visible(committer)) == [f"dt=..%2F..%2Fescape/part-00000-{job.job_id}.c000.parquet"]


def test_manifest_json_is_versioned(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    m = write_task(committer, job, "00000", [b"a"], publish=False)
    assert isinstance(m, TaskManifest)
    assert b'"version": 1' in dump(m) and b"zero-rename/task-manifest" in dump(m)
    assert b"SECRET" not in dump(m).upper()

"""Plans, stage manifests and file lists in shards: a job of any size in bounded memory.

The shard size is lowered here so that a handful of files spans several shards.
"""

from __future__ import annotations

import gzip
import json
import random
import uuid

import pytest

from tests.faults import CRASH_EXIT_CODE, inject, run_until_crash
from tests.helpers import history_only, pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data import shards
from zero_rename.core.data.layout import Destination
from zero_rename.core.data.model import CommittedFile, JobRecord, Part, PendingUpload, TaskManifest
from zero_rename.core.data.options import JobOptions
from zero_rename.core.data.shards import KeySet, decode, digest, encode
from zero_rename.core.data.success import committed_files
from zero_rename.core.protocol.planning import planned
from zero_rename.core.protocol.validate import Validator
from zero_rename.core.s3.client import StoreConfig
from zero_rename.errors import ManifestError

DAYS = [f"2024-01-0{d}" for d in range(1, 5)]


def test_shards_encode_the_same_items_to_the_same_bytes() -> None:
    files = [CommittedFile(path=f"dt=1/f{i}", bytes=i, rows=i, etag=f'"{i}"') for i in range(5)]
    assert encode(files) == encode(files)  # create-only retries recognise their own
    assert decode(CommittedFile, encode(files), "test") == files


def _flipped(data: bytes) -> bytes:
    return data[:10] + bytes(b ^ 0xFF for b in data[10:30]) + data[30:]


# How a stored shard goes bad: its deflate stream damaged (zlib.error), cut off
# (EOFError), its header wrong (gzip.BadGzipFile), or not gzip at all.
DAMAGES = {
    "damaged": _flipped,
    "cut off": lambda data: data[: len(data) // 2],
    "bad header": lambda data: b"\x1f\x8bXX" + data[4:],
    "not gzip": lambda data: b"[]",
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_shard_is_a_manifest_error_naming_it(damage: str) -> None:
    files = [CommittedFile(path=f"dt=1/f{i}", bytes=i) for i in range(50)]
    with pytest.raises(ManifestError, match="s3://b/shard-00000 is not a gzip"):
        decode(CommittedFile, DAMAGES[damage](encode(files)), "s3://b/shard-00000")


_ONE = '"0cc175b9c0f1b6a831c399e269772661"'


def _upload_line(key: str, parts: list[tuple[int, str, int]], size: int, **more: object) -> bytes:
    upload = {"key": key, "upload_id": f"u-{key}", "bytes": size, **more}
    upload["parts"] = [{"number": n, "etag": e, "size": s} for n, e, s in parts]
    return json.dumps(upload).encode() + b"\n"


def test_the_plans_uploads_are_read_light_with_every_check_of_the_shard() -> None:
    md5 = '"d41d8cd98f00b204e9800998ecf8427e"'
    written = [
        PendingUpload(
            key=f"out/dt=1/f{i}",
            upload_id=f"u{i}",
            parts=(Part(number=1, etag=md5, size=3), Part(number=2, etag='"opaque"', size=i)),
            bytes=3 + i,
            rows=i,
            partition={"dt": "1"},
        )
        for i in range(3)
    ]
    uploads = planned(encode(written), "shard")
    assert [u.key for u in uploads] == [w.key for w in written]
    for light, full in zip(uploads, written, strict=True):
        assert (light.upload_id, light.bytes, light.rows) == (full.upload_id, full.bytes, full.rows)
        assert light.part_list() == full.part_list()
        assert light.expected_etag() == full.expected_etag()
        assert light.partition == full.partition
    # One read-only partition for the shard's uploads of one partition.
    assert uploads[0].partition is uploads[2].partition
    with pytest.raises(TypeError):
        uploads[0].partition["dt"] = "2"  # type: ignore[index]
    single = planned(gzip.compress(_upload_line("k", [(1, _ONE, 5)], 5)), "s")[0]
    assert single.part_list() == [(1, _ONE)]
    assert (
        single.expected_etag()
        == PendingUpload.model_validate_json(_upload_line("k", [(1, _ONE, 5)], 5)).expected_etag()
    )


@pytest.mark.parametrize(
    ("parts", "size", "more"),
    [
        ([(2, _ONE, 1), (1, _ONE, 1)], 2, {}),  # parts out of order
        ([(1, _ONE, 1), (3, _ONE, 1)], 2, {}),  # a part missing
        ([(1, _ONE, 1)], 2, {}),  # sizes that do not add up
        ([(1, _ONE, 1)], 1, {"extra": 1}),  # a field unknown
        ([(1, _ONE, 0)], -1, {}),  # negative bytes
        ([], 0, {}),  # no part
    ],
)
def test_a_plan_shard_with_one_bad_upload_is_refused_whole(
    parts: list[tuple[int, str, int]], size: int, more: dict[str, object]
) -> None:
    body = _upload_line("good", [(1, _ONE, 1)], 1) + _upload_line("bad", parts, size, **more)
    with pytest.raises(ManifestError, match="shard line 2 is not a valid PendingUpload"):
        planned(gzip.compress(body), "shard")


def test_a_plan_shard_that_is_not_one_is_refused() -> None:
    with pytest.raises(ManifestError, match="shard line 1 is not a valid PendingUpload"):
        planned(gzip.compress(b'{"key": "k"\n'), "shard")
    with pytest.raises(ManifestError, match="not a gzip-compressed shard"):
        planned(b"not gzip", "shard")


def test_key_sets_find_members_repeats_and_missing() -> None:
    a, b = KeySet(), KeySet()
    for key in ("x", "y", "y", "z"):
        a.add(digest(key))
    for key in ("x", "z"):
        b.add(digest(key))
    a.freeze()
    assert digest("y") in a and digest("w") not in a
    assert a.repeated() == {digest("y")}
    marks = a.marks()
    for value in b:
        a.mark(value, marks)
    assert a.unmarked(marks) == {digest("y")}


def test_key_sets_sort_in_place_and_mark_what_a_listing_finds() -> None:
    rng = random.Random(7)
    values = [rng.getrandbits(64) for _ in range(5000)] + [3, 3, 1, 2**64 - 1]
    keys = KeySet()
    for value in values:
        keys.add(value)
    keys.freeze()
    assert list(keys) == sorted(values)
    marks = keys.marks()
    for value in values[::2] + [3, 12345]:
        keys.mark(value, marks)
    assert keys.unmarked(marks) == set(values[1::2]) - {3}  # both 3s marked


def test_string_runs_keep_order_and_merge_sorted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shards, "RUN_SIZE", 7)
    rng = random.Random(7)
    items = [rng.choice(["b", "a\n", "\u00e9", 'q"', ""]) + str(rng.random()) for _ in range(50)]
    kept, ordered = shards.StringRuns(), shards.StringRuns(sort=True)
    for item in items:
        kept.add(item)
        ordered.add(item)
    assert list(kept) == items and len(kept) == 50
    assert list(ordered.merged()) == sorted(items)
    # A run larger than a piece of its inflating: attempt ids, mostly alike.
    monkeypatch.setattr(shards, "RUN_SIZE", 4000)
    long = shards.StringRuns(sort=True)
    ids = [f"attempt_{rng.random()}_{i:05d}_0" * 8 for i in range(9000)]
    for attempt in ids:
        long.add(attempt)
    assert list(long.merged()) == sorted(ids)


def test_the_validator_names_repeated_missing_and_unexpected_tasks() -> None:
    dest = Destination.parse("s3://bucket/out")
    job = JobRecord(job_id=str(uuid.uuid4()), destination=dest.url, options=JobOptions())

    def manifest(task: str) -> TaskManifest:
        return TaskManifest(
            job_id=job.job_id, task_id=task, attempt=0, task_attempt_id=f"a_{task}", committer="x"
        )

    tasks = ["00000", "00001", "00001", "00002", "00002", "00002"]
    repeats = {"task 00001 has 2 manifests", "task 00002 has 3 manifests"}
    for expected, problems in [
        (
            ["00000", "00001", "00003"],
            {"no manifest for task(s) ['00003']", "manifests of unexpected task(s) ['00002']"},
        ),
        (3, set()),
        (4, {"expected 4 task(s), found manifests of 3"}),
    ]:
        validator = Validator(dest, job, expected)
        for task in tasks:
            validator.check(manifest(task))
        assert validator.task_count() == 3
        validator.finish([])
        assert set(validator.problems) == repeats | problems


@pytest.fixture
def small_shards(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(shards, "SHARD_SIZE", 3)
    return 3


def write_days(c: Committer, mode: str = "replace") -> str:
    job = c.setup_job({"partition_columns": "dt", "conflict_mode": mode, "threads": 4})
    for i, day in enumerate(DAYS):
        write_task(c, job, f"{i:05d}", {day: f"{day} a".encode()})
        write_task(c, job, f"{i + 10:05d}", {day: f"{day} b".encode()})
    return job.job_id


@pytest.mark.s3
def test_a_job_across_shards_commits_and_lists_every_file(
    committer: Committer, small_shards: int
) -> None:
    job_id = write_days(committer)
    summary = committer.commit_job(job_id)
    assert summary.files == 8 and summary.partition_count == 4
    files = visible(committer)
    assert len(files) == 8
    success = committer.read_success()
    assert success is not None and success.file_count == 8 and len(success.file_list) == 3
    listed = list(committed_files(committer.ctx, success))
    assert sorted(f.path for f in listed) == sorted(files)
    assert all(f.etag for f in listed)
    assert history_only(committer, job_id) and pending_in_bucket(committer) == []


@pytest.mark.s3
def test_crash_between_shards_resumes_once(
    committer: Committer, dest: str, store_config: StoreConfig, small_shards: int
) -> None:
    """Killed after the first shard is done: the retry skips it by the journal and
    completes the rest, each file once."""
    job_id = write_days(committer)

    def commit(c: Committer) -> None:
        inject(c.store.client, "CompleteMultipartUpload", nth=4, action="exit")
        c.commit_job(job_id)

    assert run_until_crash(lambda: commit(Committer(dest, store_config))) == CRASH_EXIT_CODE
    assert committer.job(job_id).state == "committing"
    assert len(visible(committer)) == 3
    committer.commit_job(job_id)
    assert len(visible(committer)) == 8 and pending_in_bucket(committer) == []
    success = committer.read_success()
    assert success is not None
    assert len(list(committed_files(committer.ctx, success))) == 8


@pytest.mark.s3
def test_replace_across_shards_deletes_every_old_file(
    committer: Committer, small_shards: int
) -> None:
    for day in DAYS:
        for n in range(2):
            committer.store.put_object(
                committer.dest.bucket, f"{committer.dest.dir}dt={day}/old-{n}.parquet", b"old"
            )
    job_id = write_days(committer)
    assert committer.commit_job(job_id).replaced_files == 8
    assert sorted(visible(committer).values()) == sorted(
        f"{d} {x}".encode() for d in DAYS for x in "ab"
    )


@pytest.mark.s3
def test_stage_manifest_in_shards(committer: Committer, small_shards: int) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    manifests = [
        write_task(committer, job, f"{i:05d}", {d: b"s", DAYS[0]: b"t"}, publish=False)
        for i, d in enumerate(DAYS[1:])
    ]
    staged = [m for m in manifests if isinstance(m, TaskManifest)]
    committer.save_stage_manifest(job.job_id, staged, engine="test")
    committer.save_stage_manifest(job.job_id, list(reversed(staged)), engine="test")  # a retry
    summary = committer.stage_summary(job.job_id)
    assert summary is not None and (summary.tasks, summary.files) == (3, 6)
    assert sorted(m.task_id for m in committer.load_manifests(job.job_id)) == [
        "00000",
        "00001",
        "00002",
    ]
    assert committer.commit_job(job.job_id).files == 6


@pytest.mark.s3
def test_the_commit_reuses_the_plan_its_steps_prepared(committer: Committer) -> None:
    """Validate and resolve-conflicts steps prepare the plan once; the commit reads no
    manifest and lists no partition again, and checks by listing that the uploads
    are still pending."""
    job_id = write_days(committer)
    committer.validate(job_id)
    resolved = committer.resolve_conflicts(job_id)
    assert resolved.files == 8 and resolved.partition_count == 4
    prepared = committer.job(job_id).prepared_plan
    manifest_reads = inject(committer.store.client, "GetObject", nth=10**6, key_contains="tasks/")
    partition_listings = inject(
        committer.store.client, "ListObjectsV2", nth=10**6, key_contains="dt="
    )
    uploads_listed = inject(committer.store.client, "ListMultipartUploads", nth=10**6)
    committer.commit_job(job_id)
    assert committer.job(job_id).plan_key == prepared
    assert manifest_reads.seen == 0 and partition_listings.seen == 0
    assert uploads_listed.seen >= 1
    assert len(visible(committer)) == 8


@pytest.mark.s3
def test_a_manifest_published_after_the_steps_makes_the_commit_plan_again(
    committer: Committer,
) -> None:
    job_id = write_days(committer, mode="append")
    committer.validate(job_id)
    committer.resolve_conflicts(job_id)
    prepared = committer.job(job_id).prepared_plan
    write_task(committer, committer.job(job_id), "00099", {DAYS[0]: b"late but in time"})
    assert committer.commit_job(job_id).files == 9
    assert committer.job(job_id).plan_key != prepared


@pytest.mark.s3
def test_damaged_shards_stop_the_commit_and_the_file_list_with_their_names(
    committer: Committer, small_shards: int
) -> None:
    """A stage manifest shard or a committed file list shard that no longer
    decompresses: a ManifestError naming the object, nothing published. (The
    stage shard's digest, kept in its header, refuses it before it is read.)"""
    c, bucket = committer, committer.dest.bucket
    job = c.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    staged = [write_task(c, job, f"{i:05d}", {d: b"s"}, publish=False) for i, d in enumerate(DAYS)]
    c.save_stage_manifest(job.job_id, [m for m in staged if m is not None], engine="test")
    shard = next(o.key for o in c.store.list_objects(bucket, c.dest.job(job.job_id).dir + "stage/"))
    _damage(c, shard)
    with pytest.raises(ManifestError, match=f"{shard} changed after it was written"):
        c.commit_job(job.job_id)
    assert visible(c) == {} and c.job(job.job_id).state != "committed"

    done = write_days(c, "append")
    c.commit_job(done)
    success = c.read_success()
    assert success is not None and len(success.file_list) > 1
    _damage(c, c.dest.dir + success.file_list[1])
    with pytest.raises(ManifestError, match="files-00001.jsonl.gz is not a gzip"):
        list(c.committed_files(success))


def _damage(c: Committer, key: str) -> None:
    found = c.store.get_object(c.dest.bucket, key)
    assert found is not None
    c.store.put_object(c.dest.bucket, key, _flipped(found[0]), content_type="application/gzip")

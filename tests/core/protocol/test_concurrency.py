"""Several writers at once: task commits racing a job commit, and jobs racing jobs.

A job commit seals the job before it lists task manifests, so a task attempt
told "committed" is always in the plan; and it claims the partitions it writes
before its point of no return, so two jobs on one partition are serialized
where their modes exclude each other. Each test checks what a reader would
see (files and their contents) and what is left pending, not return codes.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from tests.faults import pause
from tests.helpers import pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord, TaskManifest
from zero_rename.core.protocol import states
from zero_rename.core.protocol.claims import Claims, compatible
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.views.snapshot import committed_at
from zero_rename.errors import (
    ConflictError,
    JobDecidedError,
    PartitionClaimConflict,
    ZeroRenameError,
)

pytestmark = pytest.mark.s3

DAY = "2024-01-01"
MODES = ("fail", "replace", "append")


def in_thread(pool: ThreadPoolExecutor, call: Callable[[], object]) -> Future[object]:
    return pool.submit(call)


def outcome(future: Future[object]) -> str:
    try:
        future.result(timeout=120)
        return "ok"
    except ZeroRenameError as exc:
        return type(exc).__name__


# -- task commits racing the job commit ----------------------------------------------
def test_task_published_while_sealed_before_listing_is_committed(
    committer: Committer, store_config: StoreConfig
) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    write_task(committer, job, "00000", [b"early"])
    deciding = Committer(committer.dest, store_config)
    # The listing after the seal (the first, before it, is confirmed by this one).
    listing = pause(deciding.store.client, "ListObjectsV2", nth=2, key_contains="/tasks/")
    with ThreadPoolExecutor(2) as pool, listing as held:
        commit = in_thread(pool, lambda: deciding.commit_job(job.job_id))
        assert held.reached.wait(30)
        assert committer.job(job.job_id).state == "sealed"
        late = in_thread(pool, lambda: write_task(committer, job, "00001", [b"during"]))
        _wait_for_manifest(committer, job, "00001")
        time.sleep(0.3)
        assert not late.done()  # it read "sealed" and waits for the decision
        held.release()
        assert isinstance(late.result(timeout=60), TaskManifest)
        assert commit.result(timeout=60).files == 2
    assert sorted(visible(committer).values()) == [b"during", b"early"]
    assert pending_in_bucket(committer) == []


def test_task_published_after_listing_is_refused_and_leaves_nothing(
    committer: Committer, store_config: StoreConfig
) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    write_task(committer, job, "00000", [b"listed"])
    deciding = Committer(committer.dest, store_config)
    # The point of no return: the listing after the seal is done by then.
    deciding_swap = pause(deciding.store.client, "PutObject", nth=2, key_contains="job.json")
    with ThreadPoolExecutor(2) as pool, deciding_swap as held:
        commit = in_thread(pool, lambda: deciding.commit_job(job.job_id))
        assert held.reached.wait(30)
        late = in_thread(pool, lambda: write_task(committer, job, "00001", [b"too late"]))
        _wait_for_manifest(committer, job, "00001")
        held.release()
        assert commit.result(timeout=60).files == 1
        with pytest.raises(JobDecidedError, match="may not add output"):
            late.result(timeout=60)
    assert list(visible(committer).values()) == [b"listed"]
    committer.cleanup_job(job.job_id)
    assert pending_in_bucket(committer) == []


def _wait_for_manifest(c: Committer, job: JobRecord, task_id: str) -> None:
    key = c.dest.job(job.job_id).task_manifest_key(task_id)
    deadline = time.monotonic() + 30
    while c.store.head_object(c.dest.bucket, key) is None:
        assert time.monotonic() < deadline, f"task {task_id} never published"
        time.sleep(0.02)


@pytest.mark.atomic_writes
@pytest.mark.parametrize("round_number", range(3))
def test_tasks_racing_the_job_commit_are_in_or_out_never_lost(
    s3_server: object, bucket: str, store_config: StoreConfig, round_number: int
) -> None:
    """Without expected_tasks (the library's default), every task told "committed" is
    in the output and every other task left nothing behind."""
    dest = f"s3://{bucket}/race{round_number}"
    tasks, deciding = Committer(dest, store_config), Committer(dest, store_config)
    job = tasks.setup_job({"conflict_mode": "append", "threads": 8})
    rng = random.Random(round_number)
    bodies = {f"{i:05d}": f"task {i}".encode() for i in range(16)}

    def task(task_id: str) -> TaskManifest | None:
        time.sleep(rng.uniform(0, 0.4))
        return write_task(tasks, job, task_id, [bodies[task_id]])

    with ThreadPoolExecutor(17) as pool:
        futures = {t: pool.submit(task, t) for t in bodies}
        time.sleep(0.2)
        commit = pool.submit(deciding.commit_job, job.job_id)
        outcomes = {t: outcome(f) for t, f in futures.items()}
        summary = commit.result(timeout=120)
    committed = sorted(bodies[t] for t, o in outcomes.items() if o == "ok")
    assert set(outcomes.values()) <= {"ok", "JobDecidedError"}, outcomes
    assert sorted(visible(tasks).values()) == committed
    assert summary.files == len(committed)
    tasks.cleanup_job(job.job_id)
    assert pending_in_bucket(tasks) == []


# -- jobs racing jobs -------------------------------------------------------------------
def test_claim_matrix_only_appends_share() -> None:
    assert [(a, b) for a in MODES for b in MODES if compatible(a, b)] == [("append", "append")]


def _job(c: Committer, mode: str, body: bytes, **more: object) -> JobRecord:
    job = c.setup_job({"partition_columns": "dt", "conflict_mode": mode, **more})
    write_task(c, job, "00000", {DAY: body})
    return job


@pytest.mark.parametrize("second", MODES)
@pytest.mark.parametrize("first", MODES)
def test_two_jobs_on_one_partition(
    committer: Committer, store_config: StoreConfig, first: str, second: str
) -> None:
    """The first job is frozen holding its claim, past its point of no return; the
    second either proceeds (two appends) or is refused naming the first, changing
    nothing. Once the first is committed, the second's retry sees its files."""
    a, b = Committer(committer.dest, store_config), Committer(committer.dest, store_config)
    job_a, job_b = _job(a, first, b"A"), _job(b, second, b"B")
    with ThreadPoolExecutor(1) as pool, pause(a.store.client, "CompleteMultipartUpload") as held:
        commit_a = in_thread(pool, lambda: a.commit_job(job_a.job_id))
        assert held.reached.wait(30)
        if compatible(second, first):
            b.commit_job(job_b.job_id)
        else:
            with pytest.raises(PartitionClaimConflict, match=job_a.job_id) as err:
                b.commit_job(job_b.job_id)
            assert err.value.holder == job_a.job_id and err.value.partitions == (f"dt={DAY}/",)
            assert b.job(job_b.job_id).state == "sealed"
            assert visible(committer) == {}  # nothing of B, and A is frozen before completing
        held.release()
        commit_a.result(timeout=60)
    if b.job(job_b.job_id).state != "committed":  # the retry a scheduler would make
        if second == "fail":
            with pytest.raises(ConflictError, match="nothing was changed"):
                b.commit_job(job_b.job_id)
        else:
            b.commit_job(job_b.job_id)
    expected = {"replace": [b"B"], "append": [b"A", b"B"], "fail": [b"A"]}[second]
    assert sorted(visible(committer).values()) == expected
    for c, job in ((a, job_a), (b, job_b)):
        if c.job(job.job_id).state != "committed":
            c.abort_job(job.job_id)
        c.cleanup_job(job.job_id)
    assert pending_in_bucket(committer) == []
    assert Claims(committer.ctx).read()[0].claims == ()


def test_waiting_job_commits_after_the_holder(
    committer: Committer, store_config: StoreConfig
) -> None:
    a, b = Committer(committer.dest, store_config), Committer(committer.dest, store_config)
    job_a = _job(a, "replace", b"A")
    job_b = _job(b, "replace", b"B", on_conflict="wait", wait_timeout=60)
    with ThreadPoolExecutor(2) as pool, pause(a.store.client, "CompleteMultipartUpload") as held:
        commit_a = in_thread(pool, lambda: a.commit_job(job_a.job_id))
        assert held.reached.wait(30)
        commit_b = in_thread(pool, lambda: b.commit_job(job_b.job_id))
        time.sleep(1.5)
        assert not commit_b.done() and b.job(job_b.job_id).state == "sealed"
        held.release()
        assert commit_a.result(timeout=60).files == 1
        assert commit_b.result(timeout=60).replaced_files == 1
    assert list(visible(committer).values()) == [b"B"]


def test_waiting_gives_up_after_its_timeout(
    committer: Committer, store_config: StoreConfig
) -> None:
    a, b = Committer(committer.dest, store_config), Committer(committer.dest, store_config)
    job_a = _job(a, "append", b"A")
    job_b = _job(b, "fail", b"B", on_conflict="wait", wait_timeout=1)
    with ThreadPoolExecutor(1) as pool, pause(a.store.client, "CompleteMultipartUpload") as held:
        commit_a = in_thread(pool, lambda: a.commit_job(job_a.job_id))
        assert held.reached.wait(30)
        started = time.monotonic()
        with pytest.raises(PartitionClaimConflict, match="after waiting 1 s"):
            b.commit_job(job_b.job_id)
        assert time.monotonic() - started >= 1
        held.release()
        commit_a.result(timeout=60)


def test_unpartitioned_job_claims_the_whole_destination(
    committer: Committer, store_config: StoreConfig
) -> None:
    a, b = Committer(committer.dest, store_config), Committer(committer.dest, store_config)
    job_a = _job(a, "append", b"A")
    job_b = b.setup_job({"conflict_mode": "replace"})
    write_task(b, job_b, "00000", [b"B"])
    with ThreadPoolExecutor(1) as pool, pause(a.store.client, "CompleteMultipartUpload") as held:
        commit_a = in_thread(pool, lambda: a.commit_job(job_a.job_id))
        assert held.reached.wait(30)
        with pytest.raises(PartitionClaimConflict, match="dt=2024-01-01"):
            b.commit_job(job_b.job_id)
        held.release()
        commit_a.result(timeout=60)
    assert b.commit_job(job_b.job_id).replaced_files == 1
    assert list(visible(committer).values()) == [b"B"]


def test_claim_of_a_decided_job_is_broken(committer: Committer, store_config: StoreConfig) -> None:
    """A claim left behind (the holder's release failed) by a job now committed or
    aborted is broken by the next job; one of a live job is not."""
    stale = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    Claims(committer.ctx).acquire(stale, [f"dt={DAY}/"])
    job = _job(committer, "replace", b"new")
    with pytest.raises(PartitionClaimConflict, match="let it finish, or abort it"):
        committer.commit_job(job.job_id)
    committer.records.advance(stale.job_id, states.ABORT)  # its claim left behind
    assert committer.commit_job(job.job_id).files == 1
    assert list(visible(committer).values()) == [b"new"]
    assert Claims(committer.ctx).read()[0].claims == ()


@pytest.mark.atomic_writes
@pytest.mark.parametrize("round_number", range(4))
def test_racing_replace_jobs_leave_exactly_one_copy(
    s3_server: object, bucket: str, store_config: StoreConfig, round_number: int
) -> None:
    """Two replace jobs on one partition, started together: whatever the interleaving,
    a reader ends with one job's files, and _SUCCESS names only files that exist."""
    dest = f"s3://{bucket}/replace{round_number}"
    writers = [Committer(dest, store_config) for _ in range(2)]
    jobs = [_job(c, "replace", f"job {i}".encode()) for i, c in enumerate(writers)]
    start = threading.Barrier(2)

    def commit(i: int) -> str:
        start.wait()
        try:
            writers[i].commit_job(jobs[i].job_id)
            return "ok"
        except PartitionClaimConflict:
            return "refused"

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(commit, range(2)))
    for i, result in enumerate(results):
        if result == "refused":  # the retry a scheduler would make
            writers[i].commit_job(jobs[i].job_id)
    files = visible(writers[0])
    assert len(files) == 1, files
    success = writers[0].read_success()
    assert success is not None and [f.path for f in success.files] == list(files)
    assert pending_in_bucket(writers[0]) == []


@pytest.mark.atomic_writes
def test_two_commits_of_one_job_publish_once(
    committer: Committer, store_config: StoreConfig
) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    for i in range(6):
        write_task(committer, job, f"{i:05d}", {DAY: f"part {i}".encode()})
    others = [Committer(committer.dest, store_config) for _ in range(2)]
    start = threading.Barrier(2)

    def commit(c: Committer) -> int:
        start.wait()
        return c.commit_job(job.job_id).files

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(commit, others)) == [6, 6]
    assert len(visible(committer)) == 6 and pending_in_bucket(committer) == []


def test_a_commit_still_planning_when_another_publishes_finishes_with_it(
    committer: Committer, store_config: StoreConfig
) -> None:
    """The race above, made certain: one commit lists the pending uploads only
    after the other has completed them. It must take the other's decision, not
    report the completed uploads as lost."""
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    for i in range(3):
        write_task(committer, job, f"{i:05d}", {DAY: f"part {i}".encode()})
    late, first = (Committer(committer.dest, store_config) for _ in range(2))
    with ThreadPoolExecutor(1) as pool, pause(late.store.client, "ListMultipartUploads") as held:
        planning = in_thread(pool, lambda: late.commit_job(job.job_id))
        assert held.reached.wait(30)
        assert first.commit_job(job.job_id).files == 3
        held.release()
        assert planning.result(timeout=60).files == 3  # type: ignore[attr-defined]
    assert sorted(visible(committer).values()) == [b"part 0", b"part 1", b"part 2"]
    assert pending_in_bucket(committer) == []
    assert committer.job(job.job_id).state == "committed"


def test_a_commit_publishing_a_plan_another_finished_and_removed_reports_it_committed(
    committer: Committer, store_config: StoreConfig
) -> None:
    """A commit that found the job decided (committing) publishes its plan, while
    the commit that decided finishes first and removes the plan's shards in its
    cleanup: the late one finds the shard missing and reports the job committed,
    as a commit started after it would, not the missing shard."""
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    for i in range(3):
        write_task(committer, job, f"{i:05d}", {DAY: f"part {i}".encode()})
    first, late = (Committer(committer.dest, store_config) for _ in range(2))
    with (
        ThreadPoolExecutor(2) as pool,
        pause(first.store.client, "CompleteMultipartUpload") as deciding,
        pause(late.store.client, "GetObject", key_contains="/uploads-") as reading,
    ):
        deciding_commit = in_thread(pool, lambda: first.commit_job(job.job_id))
        assert deciding.reached.wait(60)  # past the point of no return
        assert committer.job(job.job_id).state == "committing"
        late_commit = in_thread(pool, lambda: late.commit_job(job.job_id))
        assert reading.reached.wait(60)
        deciding.release()
        assert deciding_commit.result(timeout=60).files == 3  # type: ignore[attr-defined]
        reading.release()
        assert late_commit.result(timeout=60).files == 3  # type: ignore[attr-defined]
    assert sorted(visible(committer).values()) == [b"part 0", b"part 1", b"part 2"]
    assert pending_in_bucket(committer) == []
    assert committer.job(job.job_id).state == "committed"


def test_success_never_goes_back_to_a_job_committed_earlier(
    committer: Committer, store_config: StoreConfig
) -> None:
    """Two jobs on different partitions commit side by side. The first is held
    just before it writes ``_SUCCESS`` (its commit time taken), while the second
    commits whole: the first then leaves ``_SUCCESS`` to the second, which is
    later in the destination's commit order as the records keep it."""
    first = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    write_task(committer, first, "00000", {"2024-01-01": b"first"})
    second = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    write_task(committer, second, "00000", {"2024-01-02": b"second"})
    held = Committer(committer.dest, store_config)
    with (
        ThreadPoolExecutor(1) as pool,
        pause(held.store.client, "PutObject", key_contains="_SUCCESS") as success,
    ):
        running = in_thread(pool, lambda: held.commit_job(first.job_id))
        assert success.reached.wait(60)
        committer.commit_job(second.job_id)
        assert _success_job(committer) == second.job_id
        success.release()
        assert outcome(running) == "ok"
    assert _success_job(committer) == second.job_id
    done = {j.job_id: committer.job(j.job_id) for j in (first, second)}
    assert [r.state for r in done.values()] == ["committed", "committed"]
    assert committed_at(done[first.job_id]) < committed_at(done[second.job_id])
    assert committer.snapshot().committed_jobs == (first.job_id, second.job_id)
    assert sorted(visible(committer).values()) == [b"first", b"second"]
    assert pending_in_bucket(committer) == []


def _success_job(c: Committer) -> str:
    success = c.read_success()
    assert success is not None
    return success.job_id

"""A commit that S3 refuses after its point of no return is rolled back, exactly.

Each refusal kind (parts that are not the upload's: InvalidPart; an upload that
never existed: NoSuchUpload; an upload aborted by hand while the commit runs;
an object that vanished after its complete) at the first, a middle and the
last complete, in a job replacing an earlier job's partitions. The refusing
commit runs in a child process that dies during the rollback (at its deletes);
a retry of the commit then finishes the rollback. After it the destination
holds the earlier job's files, byte for byte, and its ``_SUCCESS``; nothing is
pending; the record says ``aborted`` with the refusal; the claim is gone; the
job keeps only its record.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tests import table_stub
from tests.faults import act_at, inject, pause, run_until_crash
from tests.helpers import pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord, TaskManifest
from zero_rename.core.protocol import commit as commit_mod
from zero_rename.core.protocol import rollback
from zero_rename.core.protocol.claims import Claims
from zero_rename.core.protocol.rollback import rollback_job
from zero_rename.core.s3.client import StoreConfig
from zero_rename.errors import CommitRolledBackError, JobDecidedError, RollbackRefusedError

pytestmark = pytest.mark.s3

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
OLD = {day: f"old {day}".encode() for day in DAYS}
NEW = {day: f"new {day}".encode() for day in DAYS}
WRONG_ETAG = '"0123456789abcdef0123456789abcdef"'
KINDS = ("invalid-part", "no-such-upload", "aborted-by-hand", "vanished")
POSITIONS = {"first": 0, "middle": 1, "last": 2}


def earlier_job(c: Committer, files: dict[str, bytes] = OLD) -> tuple[dict[str, bytes], bytes]:
    """A committed job on the partitions the refused job replaces: what must survive."""
    job = c.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    for i, (day, body) in enumerate(files.items()):
        write_task(c, job, f"{i:05d}", {day: body})
    c.commit_job(job.job_id)
    success = c.store.get_object(c.dest.bucket, c.dest.success_key)
    assert success is not None
    return visible(c), success[0]


def new_job(c: Committer, kind: str, position: int) -> tuple[JobRecord, list[TaskManifest]]:
    """A replace job of three files whose manifest at ``position`` (for the kinds that
    live in the manifest) describes its upload wrongly. One thread: completes go
    out in plan order, so ``position`` is the complete that is refused."""
    job = c.setup_job(
        {
            "partition_columns": "dt",
            "conflict_mode": "replace",
            "threads": 1,
            # A manifest naming an upload that never existed gets past a commit
            # only without the pending check.
            "verify_uploads": kind != "no-such-upload",
        }
    )
    manifests = []
    for i, (day, body) in enumerate(NEW.items()):
        m = write_task(c, job, f"{i:05d}", {day: body}, publish=False)
        assert m is not None
        manifests.append(_tampered(m, kind) if i == position else m)
    return job, manifests


def _tampered(m: TaskManifest, kind: str) -> TaskManifest:
    upload = m.uploads[0]
    if kind == "invalid-part":
        part = upload.parts[0].model_copy(update={"etag": WRONG_ETAG})
        upload = upload.model_copy(update={"parts": (part,)})
    elif kind == "no-such-upload":
        upload = upload.model_copy(update={"upload_id": upload.upload_id[:-4] + "beef"})
    return m.model_copy(update={"uploads": (upload,)})


def abort_by_hand(c: Committer) -> Callable[[str], None]:
    """Aborts the pending upload at a key, as an operator (or a lifecycle rule) would."""

    def action(key: str) -> None:
        for upload in c.store.list_uploads(c.dest.bucket, key.rsplit("/", 1)[0] + "/"):
            if upload.key == key:
                c.store.abort_upload(c.dest.bucket, key, upload.upload_id)

    return action


def refuse(
    c: Committer,
    config: StoreConfig,
    kind: str,
    position: int,
    job: JobRecord,
    manifests: list[TaskManifest],
    crash_in_rollback: bool,
) -> None:
    """Commit so that the complete at ``position`` is refused; with
    ``crash_in_rollback`` in a child that dies at the rollback's first delete."""
    if kind == "vanished":
        # Completed, its answer lost with the process, then deleted by someone.
        def complete_then_die() -> None:
            child = Committer(c.dest, config)
            inject(child.store.client, "CompleteMultipartUpload", "after", position + 1, 1, "exit")
            child.commit_job(job.job_id, manifests)

        run_until_crash(complete_then_die)
        assert c.job(job.job_id).state == "committing"
        c.store.delete_objects(c.dest.bucket, [manifests[position].uploads[0].key])

    def commit(child: Committer) -> None:
        if kind == "aborted-by-hand":
            act_at(child.store.client, "CompleteMultipartUpload", abort_by_hand(c), position + 1)
        child.commit_job(job.job_id, manifests)

    if not crash_in_rollback:
        with pytest.raises(CommitRolledBackError, match=manifests[position].uploads[0].key):
            commit(Committer(c.dest, config))
        return

    def commit_and_die_in_rollback() -> None:
        child = Committer(c.dest, config)
        inject(child.store.client, "DeleteObjects", "before", 1, 1, "exit")
        commit(child)

    assert run_until_crash(commit_and_die_in_rollback) != 0
    record = c.job(job.job_id)
    assert record.state == "rolling_back", record
    assert manifests[position].uploads[0].key in record.error
    with pytest.raises(CommitRolledBackError, match="rolled back"):
        c.commit_job(job.job_id)


def assert_rolled_back(
    c: Committer, job: JobRecord, old: dict[str, bytes], success: bytes, refused: str
) -> None:
    assert visible(c) == old  # the earlier job's files, byte for byte: none of the new
    assert pending_in_bucket(c) == []
    found = c.store.get_object(c.dest.bucket, c.dest.success_key)
    assert found is not None and found[0] == success
    record = c.job(job.job_id)
    assert record.state == "aborted" and refused in record.error
    assert record.steps["rollback"].status == "succeeded"
    # The commit it undid says so, and no step reads as running for ever.
    assert record.steps["commit"].status == "rolled_back"
    assert "running" not in {s.status for s in record.steps.values()}
    assert Claims(c.ctx).read()[0].of(job.job_id) is None
    layout = c.dest.job(job.job_id)
    assert [o.key for o in c.store.list_objects(c.dest.bucket, layout.dir)] == [layout.record_key]


# Each kind of refusal under make test at one position, every position among
# them; the other eight pairs under make test-extended. Where the refused
# complete falls changes which files were visible before it, which every case
# checks are gone again; the kind changes how the refusal is told.
IN_MAKE_TEST = {
    ("invalid-part", "first"),
    ("no-such-upload", "middle"),
    ("aborted-by-hand", "last"),
    ("vanished", "last"),
}
REFUSALS_THROUGH_A_CRASH = [
    pytest.param(
        kind,
        index,
        id=f"{kind}-{where}",
        marks=() if (kind, where) in IN_MAKE_TEST else pytest.mark.extended,
    )
    for kind in KINDS
    for where, index in POSITIONS.items()
]


@pytest.mark.parametrize("kind,position", REFUSALS_THROUGH_A_CRASH)
def test_a_refused_complete_rolls_back_even_through_a_crash(
    committer: Committer, store_config: StoreConfig, kind: str, position: int
) -> None:
    old, success = earlier_job(committer)
    job, manifests = new_job(committer, kind, position)
    refuse(committer, store_config, kind, position, job, manifests, crash_in_rollback=True)
    assert_rolled_back(committer, job, old, success, manifests[position].uploads[0].key)
    # The partitions are free again: the next job replaces the earlier one's files.
    again = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    for i, (day, body) in enumerate(NEW.items()):
        write_task(committer, again, f"{i:05d}", {day: body})
    committer.commit_job(again.job_id)
    assert sorted(visible(committer).values()) == sorted(NEW.values())


@pytest.mark.every_backend
@pytest.mark.parametrize("kind", ["invalid-part", "aborted-by-hand"])
def test_a_refused_complete_rolls_back_at_once(
    committer: Committer, store_config: StoreConfig, kind: str
) -> None:
    """Without a crash, on every store: their answers to a complete of an aborted
    upload differ (NoSuchUpload; moto: a 500), and both are a refusal."""
    old, success = earlier_job(committer)
    job, manifests = new_job(committer, kind, 1)
    refuse(committer, store_config, kind, 1, job, manifests, crash_in_rollback=False)
    assert_rolled_back(committer, job, old, success, manifests[1].uploads[0].key)
    assert committer.abort_job(job.job_id).state == "aborted"  # idempotent, as an abort is


def _stuck_committing(
    c: Committer, config: StoreConfig, completes_before_death: int
) -> tuple[JobRecord, list[TaskManifest]]:
    """A job whose commit died past its point of no return, after some completes."""
    job, manifests = new_job(c, "none", -1)

    def die() -> None:
        child = Committer(c.dest, config)
        nth = completes_before_death + 1
        op = "CompleteMultipartUpload" if nth <= len(manifests) else "PutObject"
        key = None if nth <= len(manifests) else "_SUCCESS"
        inject(child.store.client, op, "before", 1 if key else nth, 1, "exit", key)
        child.commit_job(job.job_id, manifests)

    run_until_crash(die)
    assert c.job(job.job_id).state == "committing"
    return job, manifests


def test_explicit_rollback_refuses_a_job_that_can_finish_unless_forced(
    committer: Committer, store_config: StoreConfig
) -> None:
    old, success = earlier_job(committer)
    job, manifests = _stuck_committing(committer, store_config, completes_before_death=1)
    with pytest.raises(RollbackRefusedError, match="1 complete, 2 still pending"):
        rollback_job(committer.ctx, job.job_id)
    assert committer.job(job.job_id).state == "committing"  # nothing changed
    summary = rollback_job(committer.ctx, job.job_id, force=True)
    assert summary.state == "aborted" and summary.aborted_uploads == 2
    assert_rolled_back(committer, job, old, success, "rolled back by hand")


def test_explicit_rollback_never_undoes_a_job_whose_files_are_all_complete(
    committer: Committer, store_config: StoreConfig
) -> None:
    job, _ = _stuck_committing(committer, store_config, completes_before_death=3)
    for force in (False, True):
        with pytest.raises(RollbackRefusedError, match="committed in all but its record"):
            rollback_job(committer.ctx, job.job_id, force=force)
    committer.commit_job(job.job_id)
    assert sorted(visible(committer).values()) == sorted(NEW.values())
    with pytest.raises(JobDecidedError, match="nothing to roll back"):
        rollback_job(committer.ctx, job.job_id, force=True)


def test_explicit_rollback_of_a_job_that_cannot_finish(
    committer: Committer, store_config: StoreConfig
) -> None:
    """An upload aborted by hand while the job sat in committing: the commit cannot
    finish, so the rollback needs no force, and says what it found."""
    old, success = earlier_job(committer)
    job, manifests = _stuck_committing(committer, store_config, completes_before_death=2)
    abort_by_hand(committer)(manifests[2].uploads[0].key)
    summary = rollback_job(committer.ctx, job.job_id)
    assert summary.state == "aborted"
    assert_rolled_back(committer, job, old, success, "2 complete, 0 still pending, 1 neither")


def test_a_sealed_job_is_aborted_by_a_forced_rollback_only(committer: Committer) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    write_task(committer, job, "00000", {DAYS[0]: b"x"})
    with pytest.raises(RollbackRefusedError, match="can still run"):
        rollback_job(committer.ctx, job.job_id)
    rollback_job(committer.ctx, job.job_id, force=True)
    assert committer.job(job.job_id).state == "aborted"
    assert pending_in_bucket(committer) == [] and visible(committer) == {}


# -- a zombie commit resumed after the job was decided -------------------------------
def _paused_commit(
    c: Committer, config: StoreConfig, job: JobRecord
) -> tuple[threading.Thread, dict[str, object], object]:
    """A commit of ``job`` in a thread, held before its first complete is sent."""
    zombie = Committer(c.dest, config)
    held = pause(zombie.store.client, "CompleteMultipartUpload", nth=1)
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["summary"] = zombie.commit_job(job.job_id)
        except Exception as exc:  # reported to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    assert held.reached.wait(60)
    return thread, outcome, held


@pytest.mark.parametrize("later_mode", ["replace", "append"])
def test_a_zombie_commit_reports_the_decision_and_leaves_the_later_job_alone(
    committer: Committer, store_config: StoreConfig, later_mode: str
) -> None:
    """Paused past its point of no return while another process committed the job
    and a later job replaced (or added to) its partitions: resumed, the zombie
    reports the committed job's summary; it neither fails with "investigate" nor
    writes its _SUCCESS over the later job's."""
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    for i, (day, body) in enumerate(OLD.items()):
        write_task(committer, job, f"{i:05d}", {day: body})
    thread, outcome, held = _paused_commit(committer, store_config, job)
    try:
        summary = Committer(committer.dest, store_config).commit_job(job.job_id)
        later = committer.setup_job({"partition_columns": "dt", "conflict_mode": later_mode})
        write_task(committer, later, "00000", {DAYS[0]: b"later"})
        committer.commit_job(later.job_id)
        success = committer.store.get_object(committer.dest.bucket, committer.dest.success_key)
    finally:
        held.release()  # type: ignore[attr-defined]
        thread.join(60)
    assert "error" not in outcome, outcome
    assert outcome["summary"] == summary
    assert committer.store.get_object(committer.dest.bucket, committer.dest.success_key) == success
    expected = {b"later"} | (set(OLD.values()) if later_mode == "append" else set())
    if later_mode == "replace":
        expected |= {OLD[DAYS[1]], OLD[DAYS[2]]}
    assert set(visible(committer).values()) == expected
    assert pending_in_bucket(committer) == []
    assert committer.job(job.job_id).state == "committed"


def test_a_commit_refused_while_another_rolls_back_follows_the_rollback(
    committer: Committer, store_config: StoreConfig
) -> None:
    """Two commits of one job: one is refused and rolls back while the other is held
    before a complete; released, the other finds its upload aborted by the rollback
    and reports the rollback, and no file of the job appears afterwards."""
    old, success = earlier_job(committer)
    job, manifests = new_job(committer, "invalid-part", 2)
    decided = _stuck_committing_with(committer, store_config, job, manifests)
    thread, outcome, held = _paused_commit(committer, store_config, decided)
    try:
        with pytest.raises(CommitRolledBackError):
            committer.commit_job(job.job_id)
    finally:
        held.release()  # type: ignore[attr-defined]
        thread.join(60)
    assert isinstance(outcome.get("error"), CommitRolledBackError), outcome
    assert_rolled_back(committer, job, old, success, manifests[2].uploads[0].key)


def _stuck_committing_with(
    c: Committer, config: StoreConfig, job: JobRecord, manifests: list[TaskManifest]
) -> JobRecord:
    def die() -> None:
        child = Committer(c.dest, config)
        inject(child.store.client, "CompleteMultipartUpload", "before", 1, 1, "exit")
        child.commit_job(job.job_id, manifests)

    run_until_crash(die)
    record = c.job(job.job_id)
    assert record.state == "committing"
    return record


ROLLBACK_CRASHES = [
    pytest.param("PutObject", "before", 1, "job.json", "committing", id="before-deciding"),
    pytest.param("PutObject", "after", 1, "job.json", "rolling_back", id="decision-answer-lost"),
    pytest.param("AbortMultipartUpload", "before", 1, None, "rolling_back", id="sweeping"),
    pytest.param("DeleteObjects", "after", 1, None, "rolling_back", id="after-the-deletes"),
    pytest.param("PutObject", "before", 2, "job.json", "rolling_back", id="before-aborted"),
    pytest.param("PutObject", "before", 1, "claims.json", "aborted", id="before-the-release"),
]


@pytest.mark.parametrize("op,when,nth,key,left", ROLLBACK_CRASHES)
def test_a_crash_anywhere_in_the_rollback_is_finished_by_a_retry(
    committer: Committer,
    store_config: StoreConfig,
    op: str,
    when: str,
    nth: int,
    key: str | None,
    left: str,
) -> None:
    """A job stuck in committing, one of its uploads then aborted by hand, a losing
    attempt's upload still pending: the retry that rolls it back dies at each
    request of the rollback (before it, or after it with the answer lost). The
    next retry, and an abort after it, leave exactly the state before the job."""
    old, success = earlier_job(committer)
    job, manifests = new_job(committer, "none", -1)
    _stuck_committing_with(committer, store_config, job, manifests)
    abort_by_hand(committer)(manifests[1].uploads[0].key)
    stray = committer.task_attempt(job, "00001", attempt=1).open({"dt": DAYS[1]})
    stray.write(b"a losing attempt's")

    def retry_and_die() -> None:
        child = Committer(committer.dest, store_config)
        inject(child.store.client, op, when, nth, 1, "exit", key)
        child.commit_job(job.job_id)

    assert run_until_crash(retry_and_die) != 0
    assert committer.job(job.job_id).state == left
    with pytest.raises(JobDecidedError):  # CommitRolledBackError, or aborted already
        committer.commit_job(job.job_id)
    committer.abort_job(job.job_id)  # an aborted job's abort removes what a crash left
    assert_rolled_back(committer, job, old, success, manifests[1].uploads[0].key)


def rollback_while_held(
    committer: Committer,
    store_config: StoreConfig,
    job: JobRecord,
    monkeypatch: pytest.MonkeyPatch,
    owner: Any,
    name: str,
    rollback_now: Callable[[], object],
) -> list[BaseException]:
    """Run the job's commit in a thread held at ``owner.name`` while
    ``rollback_now`` runs a forced rollback decided on a stale check (one file
    pending); returns what the commit raised."""
    reached, go = threading.Event(), threading.Event()
    call = getattr(owner, name)

    def hold(*args: Any) -> Any:
        reached.set()
        assert go.wait(60)
        return call(*args)

    monkeypatch.setattr(owner, name, hold)
    stale = rollback.CommitOutlook(files=1, complete=0, pending=1)
    monkeypatch.setattr(rollback, "commit_outlook", lambda *args: stale)
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            Committer(committer.dest, store_config).commit_job(job.job_id)
        except BaseException as exc:  # reported to the caller
            errors.append(exc)

    thread = threading.Thread(target=commit)
    thread.start()
    assert reached.wait(60)
    try:
        rollback_now()
    finally:
        go.set()
        thread.join(60)
    return errors


@pytest.mark.parametrize("first", ["publish", "rollback"])
def test_a_forced_rollback_and_the_table_commit_never_overlap(
    committer: Committer, store_config: StoreConfig, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    """A forced rollback decided on a check taken while the commit still completed
    its uploads (one pending), racing that commit's table commit. The commit
    records its publish_table step by compare-and-swap before it publishes: if
    that comes first the rollback is refused and the commit finishes; if the
    rollback swaps the record first, nothing is published and the job is rolled
    back whole."""
    calls = table_stub.install(monkeypatch, "delta")
    job = committer.setup_job(
        {"partition_columns": "dt", "conflict_mode": "append", "table_format": "delta"}
    )
    write_task(committer, job, "00000", {"2024-01-01": b"one"})

    def rollback_now() -> None:
        if first == "publish":
            with pytest.raises(RollbackRefusedError, match="table may have started"):
                committer.rollback_job(job.job_id, force=True)
        else:
            committer.rollback_job(job.job_id, force=True)

    if first == "publish":  # held inside the table commit, its step recorded
        owner, name = sys.modules["zero_rename.core.tables.delta"].DeltaFormat, "publish"
    else:  # held right before the step is recorded
        owner, name = commit_mod, "_fence_publish"
    errors = rollback_while_held(
        committer, store_config, job, monkeypatch, owner, name, rollback_now
    )
    record = committer.job(job.job_id)
    if first == "publish":
        assert errors == [] and record.state == "committed"
        assert [p.job_id for p, _ in calls.published] == [job.job_id]
        assert record.steps["publish_table"].status == "succeeded"
        assert list(visible(committer).values()) == [b"one"]
    else:
        assert [type(e) for e in errors] == [CommitRolledBackError]
        assert record.state == "aborted" and calls.published == []
        assert visible(committer) == {}
    assert pending_in_bucket(committer) == []


@pytest.mark.parametrize("before", ["an earlier job's", "none"])
def test_a_forced_rollback_racing_the_last_round_takes_the_success_marker_back(
    committer: Committer, store_config: StoreConfig, monkeypatch: pytest.MonkeyPatch, before: str
) -> None:
    """A forced rollback decided on a check taken while the commit still completed
    its uploads, swapping the record while the commit's last round (``_SUCCESS``
    beside the swap to committed) is on its way: the swap is refused, and the
    ``_SUCCESS`` that went out is put back as it was, or removed."""
    old, success = earlier_job(committer) if before != "none" else ({}, None)
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    for i, day in enumerate(DAYS):
        write_task(committer, job, f"{i:05d}", {day: NEW[day]})
    errors = rollback_while_held(
        committer,
        store_config,
        job,
        monkeypatch,
        commit_mod,
        "_record_committed",  # the last round: _SUCCESS beside the swap to committed
        lambda: committer.rollback_job(job.job_id, force=True),
    )
    assert [type(e) for e in errors] == [CommitRolledBackError]
    if success is not None:
        assert_rolled_back(committer, job, old, success, "rolled back by hand")
    else:
        assert visible(committer) == {} and pending_in_bucket(committer) == []
        assert committer.store.get_object(committer.dest.bucket, committer.dest.success_key) is None
        assert committer.job(job.job_id).state == "aborted"

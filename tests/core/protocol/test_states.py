"""The job state machine and the errors' retry meanings, as tables: every event in
every state, every error class. No S3: the records' compare-and-swap is the
behaviour suite's (tests/core/protocol/test_failures.py, test_concurrency.py)."""

from __future__ import annotations

import pytest

from zero_rename import errors
from zero_rename.core.protocol import states
from zero_rename.core.protocol.states import JobState
from zero_rename.errors import (
    AbortRefusedError,
    CommitRolledBackError,
    JobDecidedError,
    Retry,
    StoreError,
    ZeroRenameError,
    is_final,
    retry_of,
)

S = JobState
MOVE, STAY = "move", "stay"
# event -> what it does in each state: MOVE, STAY, or the refusal's error class
TABLE: dict[str, dict[JobState, object]] = {
    states.SEAL.name: {
        S.SETUP: MOVE,
        S.SEALED: STAY,
        S.COMMITTING: STAY,
        S.ROLLING_BACK: STAY,
        S.COMMITTED: STAY,
        S.ABORTED: JobDecidedError,
    },
    states.DECIDE.name: {
        S.SETUP: ZeroRenameError,
        S.SEALED: MOVE,
        S.COMMITTING: STAY,
        S.ROLLING_BACK: STAY,
        S.COMMITTED: STAY,
        S.ABORTED: JobDecidedError,
    },
    states.PUBLISHED.name: {
        S.SETUP: ZeroRenameError,
        S.SEALED: ZeroRenameError,
        S.COMMITTING: MOVE,
        S.ROLLING_BACK: CommitRolledBackError,
        S.COMMITTED: STAY,
        S.ABORTED: CommitRolledBackError,
    },
    states.ABORT.name: {
        S.SETUP: MOVE,
        S.SEALED: MOVE,
        S.COMMITTING: AbortRefusedError,
        S.ROLLING_BACK: STAY,
        S.COMMITTED: AbortRefusedError,
        S.ABORTED: STAY,
    },
    states.ROLL_BACK.name: {
        S.SETUP: JobDecidedError,
        S.SEALED: JobDecidedError,
        S.COMMITTING: MOVE,
        S.ROLLING_BACK: STAY,
        S.COMMITTED: JobDecidedError,
        S.ABORTED: STAY,
    },
    states.ROLLED_BACK.name: {
        S.SETUP: ZeroRenameError,
        S.SEALED: ZeroRenameError,
        S.COMMITTING: ZeroRenameError,
        S.ROLLING_BACK: MOVE,
        S.COMMITTED: ZeroRenameError,
        S.ABORTED: STAY,
    },
}


def test_the_table_covers_every_event_and_state() -> None:
    assert set(TABLE) == {e.name for e in states.EVENTS}
    assert all(set(row) == set(JobState) for row in TABLE.values())


@pytest.mark.parametrize(
    "event,state",
    [(e, s) for e in states.EVENTS for s in JobState],
    ids=lambda v: v.name if isinstance(v, states.Event) else str(v),
)
def test_each_event_in_each_state(event: states.Event[JobState], state: JobState) -> None:
    expected = TABLE[event.name][state]
    if expected in (MOVE, STAY):
        assert event.applies("j", state) is (expected == MOVE)
        return
    assert isinstance(expected, type)
    with pytest.raises(expected, match=f"job j is {state.label}|job j was") as raised:
        event.applies("j", state)
    assert type(raised.value) is expected  # the refusal's own class, not a parent


def test_the_arrows_are_the_diagrams() -> None:
    assert states.transitions() == {
        (S.SETUP, S.SEALED),
        (S.SEALED, S.COMMITTING),
        (S.COMMITTING, S.COMMITTED),
        (S.SETUP, S.ABORTED),
        (S.SEALED, S.ABORTED),
        (S.COMMITTING, S.ROLLING_BACK),
        (S.ROLLING_BACK, S.ABORTED),
    }
    assert {S.COMMITTED, S.ABORTED} == states.FINAL
    assert not any(source in states.FINAL for source, _ in states.transitions())


def test_the_groups_of_states() -> None:
    assert {S.SETUP, S.SEALED, S.COMMITTING, S.ROLLING_BACK} == states.LIVE
    assert {S.SETUP, S.SEALED, S.COMMITTING, S.ROLLING_BACK} == states.STUCKABLE
    assert {S.ROLLING_BACK, S.ABORTED} == states.FAILED
    assert set(JobState) == states.UNDECIDED | states.DECIDED
    assert set(JobState) == states.LIVE | states.FINAL
    assert states.STUCKABLE <= states.LIVE and states.FAILED <= states.DECIDED


C = states.Course
# situation -> what job commit does with a record found in each state
COURSES: dict[str, dict[JobState, states.Course]] = {
    states.COMMIT_STARTS.name: {
        S.SETUP: C.PLAN,
        S.SEALED: C.PLAN,
        S.COMMITTING: C.PUBLISH,
        S.ROLLING_BACK: C.FINISH_ROLLBACK,
        S.COMMITTED: C.REPORT,
        S.ABORTED: C.REFUSE,
    },
    states.COMMIT_GOES_ON.name: {
        S.SETUP: C.ROLLED_BACK,
        S.SEALED: C.ROLLED_BACK,
        S.COMMITTING: C.PUBLISH,
        S.ROLLING_BACK: C.FINISH_ROLLBACK,
        S.COMMITTED: C.REPORT,
        S.ABORTED: C.ROLLED_BACK,
    },
    states.PLAN_FAILED.name: {
        S.SETUP: C.RAISE,
        S.SEALED: C.RAISE,
        S.COMMITTING: C.FOLLOW,
        S.ROLLING_BACK: C.FOLLOW,
        S.COMMITTED: C.FOLLOW,
        S.ABORTED: C.REFUSE,
    },
    states.UPLOAD_REFUSED.name: {
        S.SETUP: C.ROLL_BACK,
        S.SEALED: C.ROLL_BACK,
        S.COMMITTING: C.ROLL_BACK,
        S.ROLLING_BACK: C.ROLL_BACK,
        S.COMMITTED: C.REPORT,
        S.ABORTED: C.ROLLED_BACK,
    },
    states.PUBLISH_FAILED.name: {
        S.SETUP: C.ROLLED_BACK,
        S.SEALED: C.ROLLED_BACK,
        S.COMMITTING: C.RAISE,
        S.ROLLING_BACK: C.FINISH_ROLLBACK,
        S.COMMITTED: C.REPORT,
        S.ABORTED: C.ROLLED_BACK,
    },
}


def test_each_situation_answers_for_every_state() -> None:
    assert set(COURSES) == {s.name for s in states.SITUATIONS}
    for situation in states.SITUATIONS:
        assert {state: situation(state) for state in JobState} == COURSES[situation.name]


A = states.AttemptState
# a task attempt's events -> what each does in each of the attempt's states
ATTEMPT_TABLE: dict[str, dict[states.AttemptState, object]] = {
    states.OPEN_FILES.name: {
        A.WRITING: STAY,  # it moves to where it is
        A.COMMITTED: "is committed; it cannot open files",
        A.ABORTED: "is aborted; it cannot open files",
        A.UNKNOWN: "is unknown; it cannot open files",
    },
    states.COMMIT_TASK.name: {
        A.WRITING: MOVE,
        A.COMMITTED: "is committed; it cannot commit$",
        A.ABORTED: "is aborted; it cannot commit; start a new attempt",
        A.UNKNOWN: "is unknown; it cannot commit$",
    },
    states.LOSE_TASK_OUTCOME.name: {
        A.WRITING: MOVE,
        A.COMMITTED: "cannot lose",
        A.ABORTED: MOVE,
        A.UNKNOWN: MOVE,
    },
    states.ABORT_TASK.name: {
        A.WRITING: MOVE,
        A.COMMITTED: "is committed; abort the job instead",
        A.ABORTED: MOVE,
        A.UNKNOWN: STAY,  # its uploads stay for the job commit or abort
    },
}


@pytest.mark.parametrize(
    "event,state",
    [(e, s) for e in states.ATTEMPT_EVENTS for s in states.AttemptState],
    ids=lambda v: v.name if isinstance(v, states.Event) else str(v),
)
def test_each_attempt_event_in_each_state(
    event: states.Event[states.AttemptState], state: states.AttemptState
) -> None:
    expected = ATTEMPT_TABLE[event.name][state]
    if expected in (MOVE, STAY):
        moves = event.applies("attempt_j_00000_0", state)
        assert moves is (expected == MOVE or state is event.target)
        return
    assert isinstance(expected, str)
    with pytest.raises(ZeroRenameError, match=expected):
        event.applies("attempt_j_00000_0", state)


MEANINGS = {
    Retry.FINAL: [
        "ConfigError",
        "DestinationError",
        "CredentialsError",
        "StoreCapabilityError",
        "ManifestError",
        "ValidationError",
        "OutputCheckError",
        "ConflictError",
        "TaskCommitConflict",
        "JobDecidedError",
        "CommitRolledBackError",
        "AbortRefusedError",
        "RollbackRefusedError",
        "UploadRefusedError",
        "JobNotFoundError",
        "StageError",
        "TableConflictError",
    ],
    Retry.RETRY: ["ZeroRenameError", "PartitionClaimConflict", "ContentionError"],
    Retry.UNKNOWN: ["CommitStateUnknownError", "TaskCommitUnknownError", "FanoutWorkerError"],
}


def test_every_error_class_says_what_a_retry_can_do() -> None:
    classes = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, ZeroRenameError)
    }
    stored = {"StoreError", "PreconditionFailed", "ConditionalConflict", "NoSuchUpload"}
    assert classes - stored == {n for names in MEANINGS.values() for n in names}
    for meaning, names in MEANINGS.items():
        for name in names:
            assert getattr(errors, name).retry is meaning, name


@pytest.mark.parametrize(
    "status,meaning",
    [(404, Retry.RETRY), (403, Retry.RETRY), (500, Retry.UNKNOWN), (0, Retry.UNKNOWN)],
)
def test_a_store_error_is_unknown_when_the_request_may_have_landed(
    status: int, meaning: Retry
) -> None:
    exc = StoreError("x", status=status)
    assert retry_of(exc) is meaning and not is_final(exc)


def test_errors_from_elsewhere_are_worth_a_retry() -> None:
    assert retry_of(OSError("disk")) is Retry.RETRY and not is_final(KeyError("x"))

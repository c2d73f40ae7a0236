"""The job's state machine: its states, their groups, and every transition.

::

    setup ──> sealed ──> committing ──> committed
      │          │            │
      │          │            └──> rolling_back ──┐
      └──────────┴────────────────────────────────┴──> aborted

A job record moves only by an :class:`Event`, applied by compare-and-swap
(:meth:`zero_rename.core.data.records.JobRecords.advance`). Each event says, for
every state the record may be found in, whether it moves on, stays (the event's
work was done, or another process decided differently and the caller follows),
or is refused with the error that state means for it (an abort of a committing
job: :class:`AbortRefusedError`). Where a step reads a record without moving it
and must choose what to do (job commit, finding the job decided by another
process), a :class:`Situation` answers with a :class:`Course` for each state.
The groups of states the steps and views need are defined here once. Nothing
outside this module compares a state with a name.

A task attempt's own states (writing, committed, aborted, unknown) move by
events of the same kind (:data:`OPEN_FILES`, :data:`COMMIT_TASK`...).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Generic, TypeVar

from zero_rename.errors import (
    AbortRefusedError,
    CommitRolledBackError,
    JobDecidedError,
    ZeroRenameError,
)

# A job whose record has not changed for this long in setup, sealed, committing
# or rolling_back is stuck: a run whose writers or commit stopped, a rollback
# that crashed, or one still running that a person should look at. The commit
# journals its progress in other objects, so a big commit's record keeps its
# time from its decision; task commits do not touch the record either, so a
# stage writing for longer than this is marked too (--stuck-after says when).
STUCK_AFTER = timedelta(minutes=15)


class _State(enum.StrEnum):
    @property
    def label(self) -> str:
        """For people: ``rolling back``."""
        return self.value.replace("_", " ")


class JobState(_State):
    SETUP = "setup"
    SEALED = "sealed"
    COMMITTING = "committing"
    ROLLING_BACK = "rolling_back"
    COMMITTED = "committed"
    ABORTED = "aborted"


SETUP = JobState.SETUP
SEALED = JobState.SEALED
COMMITTING = JobState.COMMITTING
ROLLING_BACK = JobState.ROLLING_BACK
COMMITTED = JobState.COMMITTED
ABORTED = JobState.ABORTED

# Before any decision: an abort still wins, a commit may still run.
UNDECIDED = frozenset({SETUP, SEALED})
# The job's outcome is settled (committing: it will be committed, by a retry if need be).
DECIDED = frozenset({COMMITTING, ROLLING_BACK, COMMITTED, ABORTED})
# States a record never leaves.
FINAL = frozenset({COMMITTED, ABORTED})
# Past the point of no return on the way to committed: the decided plan is being, or
# has been, published, and a retry of the commit finishes it.
PUBLISHING = frozenset({COMMITTING, COMMITTED})
# No task commit may join the job: a commit sealed it, or it is decided.
CLOSED = frozenset({SEALED, *DECIDED})
# The record may still change: readers of the committed state read it again.
LIVE = frozenset(JobState) - FINAL
# Where a job can stand still with work unfinished, once its record stops changing:
# a run that stopped before its commit (its writers gone, or still writing a long
# stage); a commit that stopped before deciding, or after; a rollback that stopped.
STUCKABLE = frozenset({SETUP, SEALED, COMMITTING, ROLLING_BACK})
# Nothing of the job is or will be visible: it was aborted, or is being rolled
# back; its record says why (``error``).
FAILED = frozenset({ROLLING_BACK, ABORTED})


Refusal = tuple[type[ZeroRenameError], str]
S = TypeVar("S", bound=_State)


@dataclass(frozen=True)
class Event(Generic[S]):
    """One kind of transition: from ``sources`` to ``target``; in a state of ``stays``
    the record is left as it is; in any other state the event is refused, with the
    error and message (``{job}``, ``{state}``) of ``refusals``, else of ``otherwise``."""

    name: str
    sources: frozenset[S]
    target: S
    stays: frozenset[S] = frozenset()
    refusals: dict[S, Refusal] = field(default_factory=dict)
    otherwise: Refusal | None = None

    def applies(self, job_id: str, state: S) -> bool:
        """Whether the record moves; False: it stays. Raises the refusal otherwise."""
        if state in self.sources:
            return True
        if state in self.stays:
            return False
        error, text = self.refusals.get(
            state,
            self.otherwise or (ZeroRenameError, "job {job} is {state}: it cannot " + self.name),
        )
        raise error(text.format(job=job_id, state=state.label))


_ABORTED_NO_COMMIT = (JobDecidedError, "job {job} was aborted; it cannot commit")
_PAST_NO_RETURN = (
    AbortRefusedError,
    "job {job} is {state}: its commit passed the point of no return. Retry the commit "
    "to finish it; aborting now would lose committed output",
)
_NOTHING_VISIBLE = (JobDecidedError, "job {job} is {state}: nothing of it is visible; abort it")

# Job commit closes the job to task commits; a job decided already is followed.
SEAL = Event("seal", frozenset({SETUP}), SEALED, CLOSED - {ABORTED}, {ABORTED: _ABORTED_NO_COMMIT})
# The point of no return; another commit of the job may have taken it first.
DECIDE = Event(
    "decide", frozenset({SEALED}), COMMITTING, DECIDED - {ABORTED}, {ABORTED: _ABORTED_NO_COMMIT}
)
PUBLISHED = Event(
    "be committed",
    frozenset({COMMITTING}),
    COMMITTED,
    frozenset({COMMITTED}),
    {
        ROLLING_BACK: (CommitRolledBackError, "job {job} is rolling back; it cannot be committed"),
        ABORTED: (CommitRolledBackError, "job {job} was rolled back; it cannot be committed"),
    },
)
# A job rolling back stays so: its rollback, not the abort, finishes it.
ABORT = Event(
    "be aborted",
    UNDECIDED,
    ABORTED,
    frozenset({ABORTED, ROLLING_BACK}),
    {COMMITTING: _PAST_NO_RETURN, COMMITTED: _PAST_NO_RETURN},
)
ROLL_BACK = Event(
    "be rolled back",
    frozenset({COMMITTING}),
    ROLLING_BACK,
    frozenset({ROLLING_BACK, ABORTED}),
    {
        SETUP: _NOTHING_VISIBLE,
        SEALED: _NOTHING_VISIBLE,
        COMMITTED: (
            JobDecidedError,
            "job {job} is committed: every file of it is visible and recorded; there is "
            "nothing to roll back",
        ),
    },
)
ROLLED_BACK = Event("finish rolling back", frozenset({ROLLING_BACK}), ABORTED, frozenset({ABORTED}))

EVENTS: tuple[Event[JobState], ...] = (SEAL, DECIDE, PUBLISHED, ABORT, ROLL_BACK, ROLLED_BACK)


def transitions() -> set[tuple[JobState, JobState]]:
    """Every (from, to) pair some event makes: the arrows of the diagram above."""
    return {(source, event.target) for event in EVENTS for source in event.sources}


class Course(enum.Enum):
    """What a step does with a job record it read, as a :class:`Situation` answers."""

    PLAN = "plan"  # seal, plan and pass the point of no return
    PUBLISH = "publish"  # publish the decided plan (or finish publishing it)
    REPORT = "report"  # the job is committed: report its summary
    FINISH_ROLLBACK = "finish rollback"  # finish the job's rollback, then say it was
    ROLL_BACK = "roll back"  # roll the job back (S3 refused its files for good)
    ROLLED_BACK = "rolled back"  # say the job was rolled back: nothing of it stays
    REFUSE = "refuse"  # the job was aborted: it cannot commit
    FOLLOW = "follow"  # another commit decided: follow its decision
    RAISE = "raise"  # nothing was decided: the error met stands


@dataclass(frozen=True)
class Situation:
    """What a step does, in one situation, with a job record found in each state."""

    name: str
    courses: Mapping[JobState, Course]

    def __call__(self, state: JobState) -> Course:
        return self.courses[state]


def _courses(**by_state: Course) -> dict[JobState, Course]:
    return {JobState(name.lower()): course for name, course in by_state.items()}


# Job commit reads the record first: it plans an undecided job, publishes a decided
# plan, reports a committed job, finishes a rollback, and refuses an aborted job.
COMMIT_STARTS = Situation(
    "a job commit starts",
    _courses(
        SETUP=Course.PLAN,
        SEALED=Course.PLAN,
        COMMITTING=Course.PUBLISH,
        COMMITTED=Course.REPORT,
        ROLLING_BACK=Course.FINISH_ROLLBACK,
        ABORTED=Course.REFUSE,
    ),
)
# Past the decision (its own or another commit's), job commit reads the record again:
# after deciding, beside the zombie check, at the table's fence. Anything but
# committing was decided by another process (a commit, a rollback) meanwhile.
COMMIT_GOES_ON = Situation(
    "a decided job commit reads its record again",
    _courses(
        SETUP=Course.ROLLED_BACK,
        SEALED=Course.ROLLED_BACK,
        COMMITTING=Course.PUBLISH,
        COMMITTED=Course.REPORT,
        ROLLING_BACK=Course.FINISH_ROLLBACK,
        ABORTED=Course.ROLLED_BACK,
    ),
)
# Planning failed: a decision racing the plan made its uploads vanish (an abort
# aborts them, another commit completes them); follow it rather than report the
# problem it caused.
PLAN_FAILED = Situation(
    "a job commit's planning failed",
    _courses(
        SETUP=Course.RAISE,
        SEALED=Course.RAISE,
        COMMITTING=Course.FOLLOW,
        COMMITTED=Course.FOLLOW,
        ROLLING_BACK=Course.FOLLOW,
        ABORTED=Course.REFUSE,
    ),
)
# S3 refused a planned file for good: a job decided for good meanwhile (a zombie
# resumed after the job was committed) keeps that decision; else it rolls back.
UPLOAD_REFUSED = Situation(
    "S3 refused a planned file",
    _courses(
        SETUP=Course.ROLL_BACK,
        SEALED=Course.ROLL_BACK,
        COMMITTING=Course.ROLL_BACK,
        COMMITTED=Course.REPORT,
        ROLLING_BACK=Course.ROLL_BACK,
        ABORTED=Course.ROLLED_BACK,
    ),
)
# Publishing a decided plan found a commit object of the job missing or unreadable
# (a shard of the plan, a journal): another commit of the job that finished first
# removes them in its cleanup. A job still committing keeps the error; any other
# state was decided elsewhere, and the commit follows that.
PUBLISH_FAILED = Situation(
    "publishing a decided plan failed to read it",
    _courses(
        SETUP=Course.ROLLED_BACK,
        SEALED=Course.ROLLED_BACK,
        COMMITTING=Course.RAISE,
        COMMITTED=Course.REPORT,
        ROLLING_BACK=Course.FINISH_ROLLBACK,
        ABORTED=Course.ROLLED_BACK,
    ),
)
SITUATIONS = (COMMIT_STARTS, COMMIT_GOES_ON, PLAN_FAILED, UPLOAD_REFUSED, PUBLISH_FAILED)


# -- a task attempt --------------------------------------------------------------
class AttemptState(_State):
    """A task attempt's state, in its own process: it writes, then is committed or
    aborted; a task commit whose outcome is unknown leaves it ``unknown`` (its
    uploads are left for the job commit, which may have them in its plan)."""

    WRITING = "writing"
    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


WRITING = AttemptState.WRITING

OPEN_FILES = Event(
    "open files",
    frozenset({WRITING}),
    WRITING,
    otherwise=(ZeroRenameError, "{job} is {state}; it cannot open files"),
)
COMMIT_TASK = Event(
    "commit",
    frozenset({WRITING}),
    AttemptState.COMMITTED,
    refusals={
        AttemptState.ABORTED: (
            ZeroRenameError,
            "{job} is aborted; it cannot commit; start a new attempt",
        )
    },
    otherwise=(ZeroRenameError, "{job} is {state}; it cannot commit"),
)
LOSE_TASK_OUTCOME = Event(
    "lose its task commit's outcome",
    frozenset({WRITING, AttemptState.ABORTED, AttemptState.UNKNOWN}),
    AttemptState.UNKNOWN,
)
# After an unknown outcome the uploads stay: the manifest may be in a job commit's plan.
ABORT_TASK = Event(
    "abort",
    frozenset({WRITING, AttemptState.ABORTED}),
    AttemptState.ABORTED,
    frozenset({AttemptState.UNKNOWN}),
    {AttemptState.COMMITTED: (ZeroRenameError, "{job} is committed; abort the job instead")},
)
ATTEMPT_EVENTS: tuple[Event[AttemptState], ...] = (
    OPEN_FILES,
    COMMIT_TASK,
    LOSE_TASK_OUTCOME,
    ABORT_TASK,
)

"""The job's state machine: its states, their groups, and every transition.

::

    setup ──> sealed ──> committing ──> committed
      │          │            │
      │          │            └──> rolling_back ──┐
      └──────────┴────────────────────────────────┴──> aborted

A job record moves only by an :class:`Event`, applied by compare-and-swap
(:func:`zero_rename.core.protocol.jobs.JobRecords.advance`). Each event says, for every
state the record may be found in, whether it moves on, stays (the event's work
was done, or another process decided differently and the caller follows), or
is refused with the error that state means for it (an abort of a committing
job: :class:`AbortRefusedError`). Nothing outside this module compares a
state with a name.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from zero_rename.errors import (
    AbortRefusedError,
    CommitRolledBackError,
    JobDecidedError,
    ZeroRenameError,
)


class JobState(enum.StrEnum):
    SETUP = "setup"
    SEALED = "sealed"
    COMMITTING = "committing"
    ROLLING_BACK = "rolling_back"
    COMMITTED = "committed"
    ABORTED = "aborted"

    @property
    def label(self) -> str:
        """For people: ``rolling back``."""
        return self.value.replace("_", " ")


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


Refusal = tuple[type[ZeroRenameError], str]


@dataclass(frozen=True)
class Event:
    """One kind of transition: from ``sources`` to ``target``; in a state of ``stays``
    the record is left as it is; in any other state the event is refused, with the
    error and message (``{job}``, ``{state}``) of ``refusals``."""

    name: str
    sources: frozenset[JobState]
    target: JobState
    stays: frozenset[JobState] = frozenset()
    refusals: dict[JobState, Refusal] = field(default_factory=dict)

    def applies(self, job_id: str, state: JobState) -> bool:
        """Whether the record moves; False: it stays. Raises the refusal otherwise."""
        if state in self.sources:
            return True
        if state in self.stays:
            return False
        error, text = self.refusals.get(
            state, (ZeroRenameError, "job {job} is {state}: it cannot " + self.name)
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

EVENTS = (SEAL, DECIDE, PUBLISHED, ABORT, ROLL_BACK, ROLLED_BACK)


def transitions() -> set[tuple[JobState, JobState]]:
    """Every (from, to) pair some event makes: the arrows of the diagram above."""
    return {(source, event.target) for event in EVENTS for source in event.sources}

"""What the Commits page offers to do about a job: runs of the ``manual_abort`` DAG.

A job the page shows as failed (a step failed, or its rollback is under way),
stuck or committing gets buttons: abort it, roll it back, or roll it back by
force, as ``zero-rename jobs abort`` and ``jobs rollback [--force]`` allow.
Each button opens a confirmation saying what will happen and with which
``params``; confirming triggers a run of ``manual_abort`` through Airflow's
own API for triggering runs, as the user, which Airflow's auth manager must
allow (``POST`` on the DAG's runs). The page does nothing to the job itself:
the run does, with its retries, its log and its record in Airflow.

Nothing here imports Airflow: the routes (``app.py``) check permissions and
trigger the run; this module says which action fits which job and what it does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from zero_rename.airflow.ui.view import DestinationView
from zero_rename.core import states

ABORT_DAG = "manual_abort"


@dataclass(frozen=True)
class Action:
    name: str  # the form's value
    label: str  # the button's
    roll_back: bool
    force: bool

    def params(self, destination: str, job_id: str) -> dict[str, Any]:
        """The ``params`` of the manual_abort run (its ``conf``)."""
        return {
            "destination": destination,
            "job_id": job_id,
            "roll_back": self.roll_back,
            "force": self.force,
        }

    def params_text(self, destination: str, job_id: str) -> str:
        return json.dumps(self.params(destination, job_id), indent=2)


ABORT = Action("abort", "Abort", roll_back=False, force=False)
ROLL_BACK = Action("roll_back", "Roll back", roll_back=True, force=False)
FORCE_ROLL_BACK = Action("force_roll_back", "Roll back by force", roll_back=True, force=True)
ACTIONS = {a.name: a for a in (ABORT, ROLL_BACK, FORCE_ROLL_BACK)}


def offered(state: str, stuck: bool, failed: bool) -> tuple[Action, ...]:
    """The actions for a job in ``state``: an undecided job that failed or is stuck
    may be aborted; a committing one rolled back (by force too, as the command
    line allows); a rollback under way finished. Nothing for a job still running
    as it should, or one that ended."""
    job_state = states.JobState(state)
    if job_state in states.UNDECIDED:
        return (ABORT,) if stuck or failed else ()
    if job_state == states.COMMITTING:
        return (ROLL_BACK, FORCE_ROLL_BACK)
    if job_state == states.ROLLING_BACK:
        return (ROLL_BACK,)
    return ()


def has_failed_step(statuses: Iterable[str]) -> bool:
    return any(status == "failed" for status in statuses)


def consequences(
    action: Action, state: str, destination: str, job_id: str, pending: int, held: int
) -> list[str]:
    """What the run will do, in the order it does it: the confirmation's list.
    ``pending``: the job's pending uploads now; ``held``: partitions its claim holds."""
    if action is ABORT:
        return [
            f"records job {job_id} aborted, by compare-and-swap: if a commit of it passes "
            "its point of no return first, the abort is refused and the run fails, saying so",
            f"aborts its pending uploads ({pending} now), those of task attempts still "
            "running included: none of them can be completed afterwards",
            "removes its temporary objects (the run's cleanup_job task)",
            "nothing of the job is visible now, and it can never be committed afterwards",
        ]
    if states.JobState(state) == states.ROLLING_BACK:
        steps = [f"finishes the rollback of job {job_id} that is under way"]
    elif action.force:
        steps = [
            f"rolls job {job_id} back even if the check of its planned files says its "
            "commit could still finish (never a job whose every file is complete): "
            "its output is given up",
        ]
    else:
        steps = [
            f"checks every file job {job_id}'s commit planned: if the commit can still "
            "finish, the run refuses to roll back and fails; then finish it instead "
            f"(zero-rename jobs commit {destination} {job_id})",
        ]
    return [
        *steps,
        f"aborts its pending uploads ({pending} now) and deletes the files it made visible",
        f"records it aborted (rolled back) and releases its claim ({held} partition(s)); "
        "the files it would have replaced stay as they are",
        "removes its temporary objects (the run's cleanup_job task)",
    ]


@dataclass(frozen=True)
class Confirmation:
    """What the confirmation shows before a run is triggered."""

    action: Action
    destination: str
    job_id: str
    state: str
    steps: tuple[str, ...]
    params: str  # the run's params, as JSON


def offers(view: DestinationView) -> dict[str, tuple[Action, ...]]:
    """The actions of each job the page shows, by job id."""
    stuck = {s.job_id for s in view.stuck}
    found = {}
    for job in view.jobs:
        failed = has_failed_step(s.status for s in job.steps)
        actions = offered(job.state, job.job_id in stuck, failed)
        if actions:
            found[job.job_id] = actions
    return found


def confirmation(view: DestinationView, job_id: str, name: str) -> Confirmation | str:
    """The confirmation of action ``name`` on the job, or why there is none."""
    action = ACTIONS.get(name)
    job = next((j for j in view.jobs if j.job_id == job_id), None)
    if action is None or job is None:
        return f"no action {name[:40]!r} for job {job_id[:40]!r} here"
    if action not in offers(view).get(job_id, ()):
        label = states.JobState(job.state).label
        return f"job {job_id} is {label}: nothing to {action.label.lower()}"
    held = sum(len(h.dirs) for h in view.holders if h.job_id == job_id)
    return Confirmation(
        action=action,
        destination=view.url,
        job_id=job_id,
        state=job.state,
        steps=tuple(consequences(action, job.state, view.url, job_id, job.pending_uploads, held)),
        params=action.params_text(view.url, job_id),
    )

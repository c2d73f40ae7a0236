"""``zero-rename uploads list|abort``: pending uploads, job by job or by age."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

from zero_rename.cli.arguments import (
    DEST_HELP,
    Subcommands,
    command,
    command_group,
    duration_arg,
    job_id_arg,
    threads_arg,
)
from zero_rename.cli.context import DEFAULT_THREADS, Context
from zero_rename.cli.durations import format_duration, format_span
from zero_rename.cli.exits import ExitCode, NotFound, Refused
from zero_rename.cli.output import Advance, Output, Result, iso, shown
from zero_rename.core import Committer, Decision, Destination, JobSweep, Pending, PendingUploads

# Recorded in the job record of a job the sweep aborts.
ABANDONED = "abandoned in setup; aborted from the command line (zero-rename uploads abort)"


def register(groups: Subcommands, common: argparse.ArgumentParser) -> None:
    commands = command_group(groups, "uploads", "list and abort pending (invisible) uploads")
    listing = command(
        commands,
        "list",
        common,
        run_list,
        dest=DEST_HELP,
        help="pending uploads under DEST, with their job's state",
        description="List pending multipart uploads under DEST, with the job each belongs "
        "to and the state of that job (or the table format whose metadata it writes).",
    )
    listing.add_argument(
        "--job",
        type=job_id_arg,
        metavar="ID",
        help="only this job's (its id, or its first 8 characters or more)",
    )
    listing.add_argument(
        "--older-than",
        type=duration_arg,
        metavar="AGE",
        help="only uploads started at least AGE ago (90m, 24h, 7d)",
    )

    abort = command(
        commands,
        "abort",
        common,
        run_abort,
        dest=DEST_HELP,
        help="abort one job's uploads, or sweep old ones",
        description="Abort pending uploads under DEST: those of one job (--job), or those "
        "of any job started at least AGE ago (--all-older-than), and the table formats' "
        "metadata writes (under _iceberg/, _delta_log/) among them started over an "
        "hour ago. Uploads of a job that is committing are never aborted: they are "
        "its commit's.",
    )
    scope = abort.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--job",
        type=job_id_arg,
        metavar="ID",
        help="abort this job's uploads (it must be committed or aborted); its id, or its "
        "first 8 characters or more",
    )
    scope.add_argument(
        "--all-older-than",
        type=duration_arg,
        metavar="AGE",
        help="sweep uploads of any job started at least AGE ago",
    )
    abort.add_argument("--dry-run", action="store_true", help="show what would go, change nothing")
    abort.add_argument(
        "--threads",
        type=threads_arg,
        default=DEFAULT_THREADS,
        metavar="N",
        help=f"parallel requests (default {DEFAULT_THREADS})",
    )


# What the sweep does with a job's old uploads (Decision.action).
ABORT, ABORT_JOB, KEEP, REFUSE = (
    PendingUploads.ABORT,
    PendingUploads.ABORT_JOB,
    PendingUploads.KEEP,
    PendingUploads.REFUSE,
)


def uploads_of(ctx: Context, dest: Destination) -> PendingUploads:
    """The destination's pending uploads, through the command's one connection."""
    return Committer(dest, store=ctx.store(), profile=ctx.config.profile).uploads()


# -- list ------------------------------------------------------------------
def run_list(ctx: Context, args: argparse.Namespace) -> Result:
    committer = ctx.committer(args.dest)
    dest = committer.dest
    now = datetime.now(UTC)
    job = None if args.job is None else committer.resolve_job(args.job)
    with listing(ctx) as seen:
        found = committer.uploads().find(job, args.older_than, now, seen)
    data = {
        "destination": dest.url,
        "job_id": job,
        "older_than_seconds": _seconds(args.older_than),
        "count": len(found),
        "uploads": [_upload_json(dest, p, now) for p in found],
    }
    return Result(data, lambda out: _render_list(out, dest, found, now, args.older_than))


def _render_list(
    out: Output,
    dest: Destination,
    found: Sequence[Pending],
    now: datetime,
    older_than: timedelta | None,
) -> None:
    if not found:
        age = f" older than {format_span(older_than.total_seconds())}" if older_than else ""
        out.say(f"no pending uploads{age} under {dest.url}")
        return
    out.table(
        ["key", "job", "state", "started", "age", "upload id"],
        (
            [
                _relative(dest, p.key),
                p.owner.job_id,
                _state(p),
                p.upload.initiated,
                format_duration(_age(p, now)),
                _short(p.upload.upload_id),
            ]
            for p in found
        ),
    )
    jobs = Counter(p.owner.job_id for p in found)
    out.say(f"{len(found)} pending upload(s) of {len(jobs)} job(s) under {dest.url}")


# -- abort -----------------------------------------------------------------
def run_abort(ctx: Context, args: argparse.Namespace) -> Result:
    dest = ctx.destination(args.dest)
    if args.job is not None:
        return _abort_job(ctx, dest, args.job, args.dry_run, args.threads)
    return _sweep(ctx, dest, args.all_older_than, args.dry_run, args.threads)


def _abort_job(
    ctx: Context, dest: Destination, job_ref: str, dry_run: bool, threads: int
) -> Result:
    committer = Committer(dest, store=ctx.store(), profile=ctx.config.profile)
    job_id = committer.resolve_job(job_ref)
    uploads = committer.uploads()
    with listing(ctx) as seen:
        found = uploads.find(job_id, seen=seen)
    owner = uploads.owner_of_job(job_id, [p.key for p in found])
    if owner.state is None and not found:
        raise NotFound(f"no job {job_id} and no pending upload of it under {dest.url}")
    decision = uploads.decide_for_job(owner)
    if decision.action == REFUSE:
        raise Refused(f"{decision.reason}; {len(found)} pending upload(s) left untouched")
    data: dict[str, Any] = {
        "destination": dest.url,
        "job_id": job_id,
        "state": owner.state,
        "reason": decision.reason,
        "dry_run": dry_run,
        "uploads": len(found),
        "aborted": 0,
        "already_gone": 0,
    }
    if dry_run:
        data["keys"] = [p.key for p in found]
        return Result(data, lambda out: _render_job_dry_run(out, dest, found, decision))
    with ctx.out.progress(
        f"aborting uploads of job {job_id[:8]}", len(found), "uploads"
    ) as advance:
        aborted, gone = uploads.abort_job(job_id, found, threads, advance)
    data.update(aborted=aborted, already_gone=gone)
    return Result(
        data,
        lambda out: out.say(
            f"aborted {aborted} pending upload(s) of job {job_id} under {dest.url}"
            + (f" ({gone} already gone)" if gone else "")
            + f": {decision.reason}"
        ),
    )


def _render_job_dry_run(
    out: Output, dest: Destination, found: Sequence[Pending], decision: Decision
) -> None:
    out.say(f"dry run: would abort {len(found)} pending upload(s) ({decision.reason})")
    for p in found:
        out.say(f"  {_relative(dest, p.key)}")


def _sweep(
    ctx: Context, dest: Destination, older_than: timedelta, dry_run: bool, threads: int
) -> Result:
    uploads = uploads_of(ctx, dest)
    now = datetime.now(UTC)
    with listing(ctx) as seen:
        old = uploads.find(None, older_than, now, seen)
    jobs = uploads.plan_sweep(old, now)
    aborted = gone = 0
    if not dry_run:
        jobs, aborted, gone = _carry_out(ctx, uploads, jobs, threads)
    # Actions as carried out: a job in setup whose commit won the race was refused.
    kept_jobs = {j.owner.job_id for j in jobs if j.decision.action in (KEEP, REFUSE)}
    kept = [p for p in old if p.owner.job_id in kept_jobs]
    refused = [j for j in jobs if j.decision.action == REFUSE]
    data = {
        "destination": dest.url,
        "older_than_seconds": _seconds(older_than),
        "dry_run": dry_run,
        "uploads": len(old),
        "aborted": aborted,
        "already_gone": gone,
        "jobs": [_job_entry(j) for j in jobs],
        "kept": [_upload_json(dest, p, now) for p in kept],
    }
    return Result(
        data,
        lambda out: _render_sweep(out, dest, data),
        ExitCode.REFUSED if refused else ExitCode.OK,
    )


def _job_entry(job: JobSweep) -> dict[str, Any]:
    """One entry per job (job id None: uploads zero-rename did not write)."""
    owner = job.owner
    return {
        "job_id": owner.job_id,
        "table_format": owner.table_format,
        "state": owner.state,
        "destination": owner.destination.url if owner.destination else None,
        "uploads": len(job.uploads),
        "action": job.decision.action,
        "reason": job.decision.reason,
    }


def _carry_out(
    ctx: Context, pending: PendingUploads, jobs: Sequence[JobSweep], threads: int
) -> tuple[list[JobSweep], int, int]:
    """Abort the old uploads the sweep decided to, then the jobs left in setup."""
    uploads = [p.upload for j in jobs if j.decision.action == ABORT for p in j.uploads]
    with ctx.out.progress("aborting old uploads", len(uploads), "uploads") as advance:
        aborted, gone = pending.abort(uploads, threads, advance)
    abandoned = sum(1 for j in jobs if j.decision.action == ABORT_JOB)
    done = []
    with ctx.out.progress("aborting abandoned jobs", abandoned, "jobs") as advance:
        for job in jobs:
            if job.decision.action == ABORT_JOB:
                job, count = pending.abort_abandoned(job, ABANDONED)
                aborted += count
                advance(1)
            done.append(job)
    return done, aborted, gone


def _render_sweep(out: Output, dest: Destination, data: dict[str, Any]) -> None:
    age = format_span(data["older_than_seconds"])
    if not data["jobs"]:
        out.say(f"no pending uploads older than {age} under {dest.url}")
        return
    verb = {
        ABORT: "abort",
        ABORT_JOB: "abort job",
        KEEP: "keep",
        REFUSE: "refused",
    }
    if data["dry_run"]:
        verb.update(
            {
                ABORT: "would abort",
                ABORT_JOB: "would abort job",
                REFUSE: "would refuse",
            }
        )
    out.table(
        ["job", "state", "old uploads", "action", "why"],
        (
            [
                j["job_id"] or _not_a_job(j["table_format"]),
                j["state"] or ("-" if j["table_format"] else "no record"),
                j["uploads"],
                verb[j["action"]],
                j["reason"],
            ]
            for j in data["jobs"]
        ),
        right=["old uploads"],
    )
    if data["dry_run"]:
        out.say(f"dry run: nothing changed ({data['uploads']} upload(s) older than {age})")
    else:
        out.say(
            f"aborted {data['aborted']} upload(s) under {dest.url}"
            + (f" ({data['already_gone']} already gone)" if data["already_gone"] else "")
        )
    refused = [j["job_id"] for j in data["jobs"] if j["action"] == REFUSE]
    if refused:
        out.say(
            f"refused for committing job(s) {shown(refused)}: retry their commit", style="yellow"
        )


# -- helpers ---------------------------------------------------------------
def listing(ctx: Context) -> AbstractContextManager[Advance]:
    """Progress of a listing of pending uploads (many thousands take a while: 1,000
    a page, and a record read for each job they belong to)."""
    return ctx.out.progress("listing pending uploads", unit="uploads")


def _upload_json(dest: Destination, p: Pending, now: datetime) -> dict[str, Any]:
    return {
        "key": p.key,
        "path": _relative(dest, p.key),
        "upload_id": p.upload.upload_id,
        "initiated": iso(p.upload.initiated),
        "age_seconds": _age(p, now),
        "job_id": p.owner.job_id,
        "job_state": p.owner.state,
        "table_format": p.owner.table_format,
        "job_destination": p.owner.destination.url if p.owner.destination else None,
    }


def _age(p: Pending, now: datetime) -> float | None:
    age = p.age(now)
    return None if age is None else round(age.total_seconds(), 3)


def _state(p: Pending) -> str:
    if p.owner.job_id is None:
        return _not_a_job(p.owner.table_format)
    return p.owner.state or "no record"


def _not_a_job(table_format: str | None) -> str:
    """What an upload of no job is: a table format's metadata write, or another tool's."""
    return f"({table_format} table metadata)" if table_format else "(not zero-rename)"


def _relative(dest: Destination, key: str) -> str:
    return key[len(dest.dir) :] if key.startswith(dest.dir) else key


def _short(upload_id: str) -> str:
    return upload_id if len(upload_id) <= 16 else upload_id[:16] + "…"


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()

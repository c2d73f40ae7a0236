"""``zero-rename jobs list|show|abort|commit|rollback``: the job records of a destination
(``jobs history``: :mod:`zero_rename.cli.history`)."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from typing import Any

from zero_rename.cli import history
from zero_rename.cli.arguments import (
    DEST_HELP,
    Subcommands,
    add_wide,
    command,
    command_group,
    job_ids,
)
from zero_rename.cli.context import Context
from zero_rename.cli.durations import format_duration
from zero_rename.cli.exits import NotFound, Refused
from zero_rename.cli.output import Advance, Output, Result, Steps, human_bytes, iso, shown
from zero_rename.core import Committer, JobRecord, states, table_formats
from zero_rename.errors import JobNotFoundError


def register(groups: Subcommands, common: argparse.ArgumentParser) -> None:
    commands = command_group(
        groups, "jobs", "job records: list, show, history, abort, commit, rollback"
    )
    listing = command(
        commands,
        "list",
        common,
        run_list,
        dest=DEST_HELP,
        help="every job of DEST",
        description="List every job record of DEST, oldest first, each job by the first "
        "8 characters of its id (more where two jobs share them), which every command "
        "taking a job id accepts; --wide for whole ids, --json has them always.",
    )
    add_wide(listing)
    command(
        commands,
        "show",
        common,
        run_show,
        dest=DEST_HELP,
        job=True,
        help="one job in detail",
        description="Show one job: state, steps with timings, options, counts, and its "
        "pending uploads.",
    )
    command(
        commands,
        "abort",
        common,
        run_abort,
        dest=DEST_HELP,
        job=True,
        help="abort a job that has not committed",
        description="Job abort: record the job as aborted (compare-and-swap, so it cannot "
        "race a commit), abort its pending uploads and remove its temporary "
        "objects. Refused once its commit passed the point of no return.",
    )
    command(
        commands,
        "commit",
        common,
        run_commit,
        dest=DEST_HELP,
        job=True,
        help="finish a commit that passed its point of no return",
        description="Retry the job commit of a job left 'committing' by a crash or "
        "timeout: it completes the remaining uploads (journaled, each "
        "checked), deletes replaced files, writes _SUCCESS and cleans up, "
        "exactly once. Refused for a job still in setup: committing it is its "
        "orchestrator's decision.",
    )
    rollback = command(
        commands,
        "rollback",
        common,
        run_rollback,
        dest=DEST_HELP,
        job=True,
        help="undo a commit that cannot finish",
        description="Return DEST to where it was before a job whose commit passed its "
        "point of no return but cannot finish (S3 refused a planned file, an "
        "upload was aborted by hand): abort its pending uploads, delete the files "
        "it made visible, record it aborted and release its claim. The files a "
        "replace would have deleted are untouched. First checks every planned "
        "file: a job that can still finish is refused (retry its commit: "
        "zero-rename jobs commit) unless --force, and one whose every file is "
        "complete is always refused. Finishes a rollback a crash cut short.",
    )
    rollback.add_argument(
        "--force",
        action="store_true",
        help="roll back even though the check says the commit could still finish",
    )
    history.register(commands, common)


# -- list ------------------------------------------------------------------
def run_list(ctx: Context, args: argparse.Namespace) -> Result:
    committer = ctx.committer(args.dest)
    with ctx.out.progress("reading job records", unit="jobs") as advance:
        records = committer.jobs(advance)
    if not records and not committer.holds_anything():
        raise NotFound(f"nothing at {committer.dest.url}: no job and no file")
    data = [_job_row(r) for r in records]
    return Result(data, lambda out: _render_list(out, committer, data, args.wide))


def _job_row(record: JobRecord) -> dict[str, Any]:
    summary = record.summary
    return {
        "job_id": record.job_id,
        "state": record.state,
        "created": iso(record.created),
        "updated": iso(record.updated),
        "committer": record.options.mode_name,
        "conflict_mode": record.options.conflict_mode,
        "partition_columns": list(record.options.partition_columns),
        "files": summary.files if summary else None,
        "bytes": summary.bytes if summary else None,
        "rows": summary.rows if summary else None,
        "duration_seconds": duration(record),
    }


def duration(record: JobRecord) -> float | None:
    """From job setup to the end of its last step, once committed or aborted."""
    finished = [s.finished for s in record.steps.values() if s.finished is not None]
    if record.state not in states.FINAL or not finished:
        return None
    return round((max(finished) - record.created).total_seconds(), 3)


def _render_list(out: Output, committer: Committer, rows: list[dict[str, Any]], wide: bool) -> None:
    if not rows:
        out.say(f"no jobs at {committer.dest.url}")
        return
    ids = job_ids([r["job_id"] for r in rows], wide)
    out.table(
        [
            "job id",
            "state",
            "created",
            "committer",
            "conflict",
            "files",
            "bytes",
            "rows",
            "duration",
        ],
        (
            [
                ids[r["job_id"]],
                r["state"],
                r["created"].replace("T", " ")[:19] + "Z",
                r["committer"],
                r["conflict_mode"],
                r["files"],
                human_bytes(r["bytes"]),
                r["rows"],
                format_duration(r["duration_seconds"]),
            ]
            for r in rows
        ),
        right=["files", "bytes", "rows", "duration"],
        whole=["job id"],
    )
    out.say(f"{len(rows)} job(s) at {committer.dest.url}")


# -- show ------------------------------------------------------------------
def run_show(ctx: Context, args: argparse.Namespace) -> Result:
    committer = ctx.committer(args.dest)
    with ctx.out.steps(f"job {args.job[:8]}") as step:
        step("reading its record")
        job = committer.resolve_job(args.job)
        record = committer.job(job)
        # Listings: under a table of thousands of files and uploads, seconds.
        step("listing its pending uploads")
        uploads = committer.pending_uploads(job)
        step("counting its task manifests")
        manifests = committer.published_task_manifests(job)
    data = {
        **record.model_dump(mode="json"),
        "committer": record.options.mode_name,
        "duration_seconds": duration(record),
        "pending_uploads": len(uploads),
        "published_task_manifests": manifests,
    }
    return Result(data, lambda out: _render_show(out, record, len(uploads), manifests))


def _render_show(out: Output, record: JobRecord, pending: int, manifests: int) -> None:
    s, o = record.summary, record.options
    out.heading(f"job {record.job_id}")
    out.fields(
        [
            ("destination", record.destination),
            ("state", record.state),
            ("created", record.created),
            ("updated", record.updated),
            ("host", record.hostname),
            ("duration", format_duration(duration(record))),
            ("expected tasks", record.expected_tasks),
            ("tasks", s.tasks if s else f"{manifests} task manifest(s) published"),
            ("files", s.files if s else None),
            ("bytes", _bytes(s.bytes) if s else None),
            ("rows", s.rows if s else None),
            ("replaced files", s.replaced_files if s else None),
            ("partitions", shown(list(s.partitions)) if s else None),
            ("commit requests", s.requests if s else None),
            ("commit seconds", format_duration(s.seconds) if s else None),
            (
                "claimed",
                ", ".join(d.rstrip("/") or "(whole destination)" for d in record.claimed) or None,
            ),
            ("store profile", _profile(record)),
            ("pending uploads", pending),
            ("error", record.error),
            ("set up by", ", ".join(f"{k}={v}" for k, v in record.origin.items()) or None),
            ("output check", _output_check(record)),
            ("table commit", record.table_commit.describe() if record.table_commit else None),
        ]
    )
    check = record.output_check
    if check is not None and check.problems:
        out.say()
        out.table(
            ["problem", "path", "detail"],
            ([p.kind, p.path, p.detail] for p in check.problems),
            title=f"output check: {check.problem_count} problem(s)"
            + (
                f", the first {len(check.problems)} shown"
                if check.problem_count > len(check.problems)
                else ""
            ),
        )
    out.say()
    out.table(
        ["step", "status", "started", "finished", "took", "detail"],
        (
            [name, t.label, t.started, t.finished, format_duration(t.seconds), t.detail]
            for name, t in record.steps.items()
        ),
        title="steps",
    )
    # A failed step's own error (kept once a rollback ended it), whole: too long for
    # the table.
    for name, t in record.steps.items():
        if t.error:
            out.say(f"{name} {t.label}: {t.error}")
    out.say()
    out.heading("options")
    out.fields(
        [
            ("committer", f"{o.committer} ({o.mode_name})"),
            ("conflict mode", o.conflict_mode),
            ("partition columns", ", ".join(o.partition_columns)),
            ("part size", _bytes(o.part_size)),
            ("threads", o.threads),
            ("verify uploads", o.verify_uploads),
            (
                "on conflict",
                f"{o.on_conflict}"
                + (f" (up to {o.wait_timeout} s)" if o.on_conflict == "wait" else ""),
            ),
            ("table format", _table_format(record)),
        ]
    )


def _table_format(record: JobRecord) -> str:
    """The job's table format, as the format describes its options (Iceberg: its
    catalog and table as configured)."""
    plugin = table_formats().get(record.options.table_format)
    return plugin.described(record.options) if plugin else record.options.table_format


def _output_check(record: JobRecord) -> str | None:
    """The last output check (``validate_output``), if one ran: its outcome and when."""
    check = record.output_check
    if check is None:
        return None
    return f"{check.outcome} at {iso(check.checked)}: {check.describe()}"


def _profile(record: JobRecord) -> str | None:
    p = record.store_profile
    if p is None:
        return None
    return f"{p.name}: uploads listed " + (
        "by prefix" if p.uploads_by_prefix else "without a prefix, filtered"
    )


def _bytes(count: int) -> str:
    return human_bytes(count) if count < 1024 else f"{human_bytes(count)} ({count:,} B)"


# -- abort -----------------------------------------------------------------
def run_abort(ctx: Context, args: argparse.Namespace) -> Result:
    committer = ctx.committer(args.dest)
    with ctx.out.steps(f"aborting job {args.job[:8]}") as step:
        job = committer.resolve_job(args.job)
        try:
            committer.job(job)
        except JobNotFoundError:
            # Without a record the job may still have uploads (its setup failed
            # after tasks started, or the record was deleted): those are aborted.
            step("listing its pending uploads")
            if not committer.pending_uploads(job):
                raise
        summary = committer.abort_job(
            job, reason="aborted from the command line (zero-rename jobs abort)", steps=step
        )
    return Result(
        summary.model_dump(mode="json"),
        lambda out: out.say(
            f"aborted job {job} at {committer.dest.url}: {summary.aborted_uploads} pending "
            f"upload(s) aborted in {format_duration(summary.seconds)}"
        ),
    )


# -- commit ----------------------------------------------------------------
def run_commit(ctx: Context, args: argparse.Namespace) -> Result:
    committer = ctx.committer(args.dest)
    job = committer.resolve_job(args.job)
    record = committer.job(job)
    if record.state in (*states.UNDECIDED, states.ABORTED):
        raise Refused(
            f"job {job} is {record.state}; only a job whose commit passed its "
            "point of no return ('committing') is finished from here"
            + (
                "; a sealed job's commit stopped before deciding: rerun its "
                "orchestrator's commit step, or abort it"
                if record.state == states.SEALED
                else ""
            )
        )
    # Logs "completed n of N file(s)" with -v; on a terminal, a bar of the completes.
    with ctx.out.steps(f"committing job {job[:8]}") as step:
        summary = committer.commit_job(job, progress=_completes(step))
    return Result(
        summary.model_dump(mode="json"),
        lambda out: out.say(
            f"job {job} committed: {summary.files} file(s), {human_bytes(summary.bytes)}, "
            f"{summary.rows} row(s) in {len(summary.partitions)} partition(s)"
        ),
    )


def _completes(step: Steps) -> Callable[[int, int], None]:
    """The commit's ``progress(done, total)`` as a bar of its completes: the step
    starts at the first call, when the total is known."""
    bar: list[Advance] = []
    shown = [0]
    # Called from the completes' threads: what is new since the last call counts.
    lock = threading.Lock()

    def progress(done: int, total: int) -> None:
        with lock:
            if not bar:
                bar.append(step("completing uploads", total, "files"))
            new, shown[0] = done - shown[0], max(done, shown[0])
        if new > 0:
            bar[0](new)

    return progress


# -- rollback ----------------------------------------------------------------
def run_rollback(ctx: Context, args: argparse.Namespace) -> Result:
    committer = ctx.committer(args.dest)
    job = committer.resolve_job(args.job)
    with ctx.out.steps(f"rolling back job {job[:8]}") as step:
        summary = committer.rollback_job(
            job,
            force=args.force,
            reason="rolled back from the command line (zero-rename jobs rollback)",
            steps=step,
        )
    record = committer.job(job)
    data = {**summary.model_dump(mode="json"), "error": record.error}
    return Result(
        data,
        lambda out: out.say(
            f"rolled back job {job} at {committer.dest.url}: nothing of it is visible or "
            f"pending ({summary.aborted_uploads} pending upload(s) aborted); {record.error}"
        ),
    )

"""``zero-rename success show`` and ``zero-rename validate``: the committed output."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from zero_rename.cli.arguments import DEST_HELP, Subcommands, command, command_group, threads_arg
from zero_rename.cli.context import DEFAULT_THREADS, Context
from zero_rename.cli.exits import ExitCode, NotFound
from zero_rename.cli.output import Output, Result, human_bytes, shown
from zero_rename.core import (
    STRAY,
    CommittedFile,
    Committer,
    Destination,
    Problem,
    SuccessData,
    files_committed,
    total_requests,
)


def register(groups: Subcommands, common: argparse.ArgumentParser) -> None:
    commands = command_group(groups, "success", "the _SUCCESS summary of a destination")
    show = command(
        commands,
        "show",
        common,
        run_show,
        dest=DEST_HELP,
        help="what the last commit wrote",
        description="Show DEST/_SUCCESS: the job, committer, counts and partitions "
        "of the last commit.",
    )
    show.add_argument("--files", action="store_true", help="list every file too")

    validate = command(
        groups,
        "validate",
        common,
        run_validate,
        dest=DEST_HELP,
        help="check the output against _SUCCESS",
        description="Check that every file DEST/_SUCCESS lists is there with its size and "
        "ETag, that no visible file carrying the job id is missing from it, and that "
        "every job.json under DEST/_zero_rename/jobs/ is the record of the job its key "
        "names (readers leave any other out: a stray). "
        "Exit code 1 when a problem is found.",
    )
    validate.add_argument(
        "--threads",
        type=threads_arg,
        default=DEFAULT_THREADS,
        metavar="N",
        help=f"partitions listed in parallel (default {DEFAULT_THREADS})",
    )


def read_success(committer: Committer) -> SuccessData:
    success = committer.read_success()
    if success is None:
        raise NotFound(f"no _SUCCESS at {committer.dest.url}: no job has committed there")
    return success


# -- success show ----------------------------------------------------------
def run_show(ctx: Context, args: argparse.Namespace) -> Result:
    committer = ctx.committer(args.dest)
    success = read_success(committer)
    data = success.model_dump(mode="json", by_alias=True)
    every: list[CommittedFile] | None = None
    if args.files:  # the whole list, from the file list's shards
        every = []
        total = files_committed(success)
        with ctx.out.progress("reading the file list", total, "files") as advance:
            for committed in committer.committed_files(success):
                every.append(committed)
                advance(1)
        data["files"] = [f.model_dump(mode="json") for f in every]
    return Result(data, lambda out: render_success(out, committer.dest, success, every))


def render_success(
    out: Output, dest: Destination, s: SuccessData, files: Sequence[CommittedFile] | None = None
) -> None:
    m = s.metrics
    out.heading(f"{dest.url}/_SUCCESS")
    out.fields(
        [
            ("job id", s.job_id),
            ("committer", s.committer),
            ("success", s.success),
            ("date", s.date),
            ("host", s.hostname),
            ("destination", s.destination),
            ("tasks", m.get("committer_tasks_committed")),
            ("files", m.get("committer_files_committed", files_committed(s))),
            (
                "bytes",
                human_bytes(m.get("committer_bytes_committed", sum(f.bytes for f in s.files))),
            ),
            ("rows", m.get("committer_rows_committed")),
            ("replaced files", m.get("committer_files_replaced")),
            (
                "partitions",
                f"{s.partition_count or len(s.partitions)}: {shown(list(s.partitions))}"
                if s.partitions
                else "none (unpartitioned)",
            ),
            ("requests", total_requests(s.iostatistics)),
            ("conflict mode", s.diagnostics.get("conflict_mode")),
        ]
    )
    if files is not None:
        out.say()
        out.table(
            ["path", "bytes", "rows", "etag"],
            ([f.path, f.bytes, f.rows, f.etag.strip('"')] for f in files),
            right=["bytes", "rows"],
        )


# -- validate --------------------------------------------------------------
def run_validate(ctx: Context, args: argparse.Namespace) -> Result:
    committer = ctx.committer(args.dest)
    success = read_success(committer)
    # A table of many thousands of files is listed 1,000 a request: seconds.
    with ctx.out.progress("listing the destination's files", unit="files") as advance:
        problems = committer.check_output(success, args.threads, advance)
    # Job records no reader reads (a backup's copy, a record naming another job).
    with ctx.out.progress("reading the job records", unit="records") as advance:
        problems += [
            Problem(kind=STRAY, path=s.key[len(committer.dest.dir) :], detail=s.reason)
            for s in committer.stray_records(advance)
        ]
    data = {
        "destination": committer.dest.url,
        "job_id": success.job_id,
        "files_checked": files_committed(success),
        "valid": not problems,
        "problems": [p.to_json() for p in problems],
    }
    return Result(
        data,
        lambda out: _render_validate(out, committer.dest, success, problems),
        ExitCode.FAILED if problems else ExitCode.OK,
    )


def _render_validate(
    out: Output, dest: Destination, success: SuccessData, problems: list[Problem]
) -> None:
    if not problems:
        out.say(
            f"ok: {dest.url} holds the {files_committed(success)} file(s) _SUCCESS lists for "
            f"job {success.job_id}, sizes and ETags as recorded",
            style="green",
        )
        return
    out.table(["problem", "path", "detail"], ([p.kind, p.path, p.detail] for p in problems))
    out.say(
        f"{len(problems)} problem(s) in {dest.url} (job {success.job_id}, "
        f"{files_committed(success)} file(s) listed)",
        style="red",
    )

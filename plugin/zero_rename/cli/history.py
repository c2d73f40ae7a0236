"""``zero-rename jobs history``: each job of a destination with what its commit did."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence

from zero_rename.cli.arguments import (
    DEST_HELP,
    Subcommands,
    add_stuck_after,
    add_wide,
    command,
    job_ids,
    whole_number,
)
from zero_rename.cli.context import Context
from zero_rename.cli.durations import format_duration
from zero_rename.cli.exits import NotFound
from zero_rename.cli.output import Output, Result, human_bytes
from zero_rename.core import Committer, History, HistoryEntry, states

MAX_LIMIT = 1_000_000
# Characters of an abort reason in the table (--json has it whole).
REASON_SHOWN = 60


def register(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = command(
        commands,
        "history",
        common,
        run_history,
        dest=DEST_HELP,
        help="each job with its commit's seconds, files, rows and bytes",
        description="The history of DEST, oldest first: each job's state, when it was "
        "committed or aborted, its commit's seconds, files, rows, bytes, partitions "
        "and replaced files, its conflict mode, and why an aborted job was aborted. "
        "Jobs still running stand at the time they were set up; one in setup, sealed, "
        "committing or rolling back whose record has not changed for --stuck-after "
        "is marked stuck. Each job is named by the first 8 characters of its id (more "
        "where two share them), which every command taking a job id accepts; --wide "
        "for whole ids. Reads the job records only (with --limit, about N of them).",
    )
    add_wide(parser)
    parser.add_argument(
        "--limit",
        type=whole_number(MAX_LIMIT),
        metavar="N",
        help="only the newest N jobs (still printed oldest first)",
    )
    add_stuck_after(parser)


def run_history(ctx: Context, args: argparse.Namespace) -> Result:
    committer = ctx.committer(args.dest)
    history = committer.history(args.limit, stuck_after=args.stuck_after)
    if not history.entries and not committer.holds_anything():
        raise NotFound(f"nothing at {committer.dest.url}: no job and no file")
    data = [e.to_json() for e in history.entries]
    return Result(data, lambda out: _render(out, committer, history, args.wide))


def _render(out: Output, committer: Committer, history: History, wide: bool) -> None:
    entries = history.entries
    if not entries:
        out.say(f"no jobs at {committer.dest.url}")
        return
    ids = job_ids([e.job_id for e in entries], wide)
    out.table(
        [
            "job id",
            "state",
            "when (UTC)",
            "mode",
            "files",
            "rows",
            "bytes",
            "partitions",
            "replaced",
            "commit",
            "note",
        ],
        (
            [
                ids[e.job_id],
                e.state.label,
                e.at.strftime("%Y-%m-%d %H:%M:%S"),
                e.mode,
                e.files,
                e.rows,
                human_bytes(e.bytes),
                e.partitions,
                e.replaced_files,
                format_duration(e.seconds),
                _note(e),
            ]
            for e in entries
        ),
        right=["files", "rows", "bytes", "partitions", "replaced", "commit"],
        whole=["job id"],
    )
    shown = (
        f"{len(entries)} of {history.total}" if len(entries) < history.total else f"{len(entries)}"
    )
    out.say(f"{shown} job(s) at {committer.dest.url}")
    typical = _typical(entries)
    if typical:
        out.say(typical)


def _note(entry: HistoryEntry) -> str:
    """Why a job did not commit, or that it is stuck."""
    if entry.stuck:
        return f"stuck: {entry.state.label}, unchanged since {entry.updated:%Y-%m-%d %H:%M}Z"
    if entry.state == states.ABORTED or entry.reason:
        text = entry.reason or "aborted"
        if entry.rolled_back and not text.startswith("rolled back"):
            text = f"rolled back: {text}"
        return text if len(text) <= REASON_SHOWN else text[: REASON_SHOWN - 1] + "…"
    if entry.state != states.COMMITTED:
        return "running"
    return ""


def _typical(entries: Sequence[HistoryEntry]) -> str:
    """The median commit of those shown: what "usual" is, to read a row against."""
    done = [e for e in entries if e.state == states.COMMITTED and e.files is not None]
    if not done:
        return ""
    seconds = statistics.median(e.seconds or 0.0 for e in done)
    files = statistics.median(e.files or 0 for e in done)
    rows = statistics.median(e.rows or 0 for e in done)
    size = statistics.median(e.bytes or 0 for e in done)
    return (
        f"median of {len(done)} commit(s): {format_duration(seconds)}, {files:,.0f} file(s), "
        f"{rows:,.0f} row(s), {human_bytes(int(size))}"
    )

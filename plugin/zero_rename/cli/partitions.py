"""``zero-rename partitions``: each partition of a destination, who wrote it, who holds it."""

from __future__ import annotations

import argparse

from zero_rename.cli.arguments import DEST_HELP, Subcommands, add_stuck_after, command
from zero_rename.cli.context import Context
from zero_rename.cli.exits import NotFound
from zero_rename.cli.output import Output, Result, human_bytes
from zero_rename.core import Committer, Holder, PartitionInfo, PartitionView, states, stuck_advice


def register(groups: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = command(
        groups,
        "partitions",
        common,
        run_partitions,
        dest=DEST_HELP,
        help="each partition: its files, rows, bytes, last job, and who holds it",
        description="Each partition of DEST as readers read it: its files, rows and "
        "bytes, the committed job that last wrote it (its conflict mode, when), how "
        "many committed jobs' files it holds; and the jobs whose claims hold it now: "
        "a running commit, or a stuck one (in setup, sealed, committing or rolling "
        "back, its record unchanged for --stuck-after), with what to do about it. Reads the "
        "job records, one listing of DEST, the claims and, for jobs that wrote "
        "several partitions, their committed file lists; no data file.",
    )
    add_stuck_after(parser)


def run_partitions(ctx: Context, args: argparse.Namespace) -> Result:
    committer = ctx.committer(args.dest)
    view = committer.partitions(stuck_after=args.stuck_after)
    if not view.partitions and not view.records and not committer.holds_anything():
        raise NotFound(f"nothing at {committer.dest.url}: no job and no file")
    data = {
        "destination": view.destination,
        "partitions": [p.to_json() for p in view.partitions],
        "holders": [h.to_json() for h in view.holders],
        "stuck_jobs": list(view.stuck_jobs),
    }
    return Result(data, lambda out: _render(out, committer, view))


def _render(out: Output, committer: Committer, view: PartitionView) -> None:
    dest = committer.dest.url
    if not view.partitions:
        out.say(f"no partition at {dest} holds a committed file")
    else:
        out.table(
            [
                "partition",
                "files",
                "rows",
                "bytes",
                "last job",
                "mode",
                "written (UTC)",
                "jobs",
                "held by",
            ],
            (_row(p) for p in view.partitions),
            right=["files", "rows", "bytes", "jobs"],
        )
        files = sum(p.files for p in view.partitions)
        size = sum(p.bytes for p in view.partitions)
        out.say(
            f"{len(view.partitions)} partition(s), {files:,} file(s), {human_bytes(size)} at {dest}"
        )
    stuck = [h for h in view.holders if h.stuck]
    running = [h for h in view.holders if not h.stuck]
    if running:
        out.say(
            f"{len(running)} running job(s) hold partitions: "
            + ", ".join(f"{h.job_id} ({h.state})" for h in running)
        )
    for holder in stuck:
        out.say(_stuck_line(holder, dest), style="bold")
    unheld = sorted(set(view.stuck_jobs) - {h.job_id for h in view.holders})
    if unheld:
        out.say(f"stuck, holding no partition: {', '.join(unheld)}")


def _row(p: PartitionInfo) -> list[object]:
    return [
        p.partition or "(the destination itself)",
        p.files,
        p.rows,
        human_bytes(p.bytes),
        p.job_id or ("another tool's files" if p.foreign_files else None),
        p.mode,
        p.written_at.strftime("%Y-%m-%d %H:%M:%S") if p.written_at else None,
        p.jobs,
        ", ".join(_holder(h) for h in p.holders),
    ]


def _holder(h: Holder) -> str:
    return f"{'STUCK ' if h.stuck else ''}{h.job_id} ({h.state.replace('_', ' ')}, {h.mode})"


def _stuck_line(holder: Holder, dest: str) -> str:
    return (
        f"stuck: job {holder.job_id} is {'in ' if holder.state == states.SETUP else ''}"
        f"{holder.state.replace('_', ' ')} and holds "
        f"{len(holder.dirs)} partition(s) since {holder.since:%Y-%m-%d %H:%M}Z on "
        f"{holder.hostname}; " + stuck_advice(holder.state, dest, holder.job_id)
    )

"""The job-commit benchmark's tables and its ``## Job commit`` section of the
benchmarks page."""

from __future__ import annotations

import argparse
import os
import platform
from collections.abc import Sequence

import boto3

from bench.commit_results import LABELS, BenchConfig, Row
from bench.counter import Step
from bench.page import load_note, seaweedfs_version

HEADER = "## Job commit"


def _ratio(row: Row) -> str:
    return f"{row.ratio:.2f}x" if row.ratio is not None else "-"


def _ordered(rows: Sequence[Row]) -> list[Row]:
    order = {name: i for i, name in enumerate(LABELS)}
    return sorted(rows, key=lambda r: (r.files, order.get(r.method, len(order))))


def _protocol(row: Row) -> str:
    value = row.protocol_requests_per_file
    return f"{value:.3f}" if value is not None else "-"


def _rss(row: Row) -> str:
    return f"{row.peak_rss / 2**20:.0f}" if row.peak_rss else "-"


def stdout_table(rows: Sequence[Row]) -> str:
    header = (
        f"{'files':>7}  {'method':<19} {'runs':>4} {'seconds':>8} {'x floor':>8} "
        f"{'req/file':>9} {'protocol':>9} {'MiB':>5} {'committed':>9} {'left':>5}"
    )
    lines = [header, "-" * len(header)]
    for r in _ordered(rows):
        lines.append(
            f"{r.files:>7}  {r.method:<19} {r.runs:>4} {r.seconds:>8.2f} "
            f"{_ratio(r):>8} {r.requests_per_file:>9.3f} {_protocol(r):>9} "
            f"{_rss(r):>5} {r.committed:>9} {r.leftover:>5}"
        )
    return "\n".join(lines)


def results_table(rows: Sequence[Row]) -> str:
    lines = [
        "| files | method | runs | seconds (median) | vs floor | commit's S3 requests "
        "per file | whole protocol's | peak RSS (MiB) | files committed |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in _ordered(rows):
        lines.append(
            f"| {r.files:,} | {LABELS.get(r.method, r.method)} | {r.runs} | "
            f"{r.seconds:.2f} | {_ratio(r)} | {r.requests_per_file:.3f} | "
            f"{_protocol(r)} | {_rss(r)} | {r.committed:,} |"
        )
    return "\n".join(lines)


def breakdown_table(row: Row) -> str:
    """The timed phase step by step: each run of consecutive requests of one
    operation, when it began and how long until the next began."""
    lines = ["| step | requests | starts at (s) | takes (s) |", "|---|---:|---:|---:|"]
    for step in row.steps:
        name = step.op + "".join(f" (with {n:,} {op})" for op, n in step.folded)
        lines.append(f"| {name} | {step.requests:,} | {step.start:.2f} | {step.seconds:.2f} |")
    return "\n".join(lines)


def _find(rows: Sequence[Row], files: int, method: str) -> Row | None:
    return next((r for r in rows if r.files == files and r.method == method), None)


def _main_step(row: Row, op: str) -> Step | None:
    """The largest step of one operation: the parallel phase, not a lone record read."""
    steps = [step for step in row.steps if step.op == op]
    return max(steps, key=lambda step: step.requests) if steps else None


def _seconds(step: Step | None) -> float:
    return step.seconds if step else 0.0


def reading(rows: Sequence[Row], cfg: BenchConfig) -> str:
    """A short account of the largest run, with its own numbers."""
    files = max(r.files for r in rows if r.method != "committer-scale")
    floor = _find(rows, files, "floor")
    verify = _find(rows, files, "committer")
    noverify = _find(rows, files, "committer-noverify")
    copies = [
        r
        for r in (_find(rows, files, "copy-delete"), _find(rows, files, "copy-bulk"))
        if r is not None and r.ratio is not None
    ]
    assert floor is not None
    out = [
        f"At {files:,} files the floor completes {files / floor.seconds:,.0f} uploads a "
        "second. On loopback a request spends almost no time on the wire: what limits every "
        "method here is the CPU the Python client (botocore, under one interpreter lock) and "
        "the server spend on each request, on the same two cores. So on this machine seconds "
        "follow S3 requests per file closely, and the ratios to the floor are mostly ratios "
        "of request counts."
    ]
    if verify and noverify and verify.ratio and noverify.ratio:
        listings = sum(step.seconds for step in verify.steps if step.op == "ListMultipartUploads")
        completes = _seconds(_main_step(verify, "CompleteMultipartUpload"))
        manifests = _main_step(verify, "GetObject")
        rest = verify.seconds - listings - completes - _seconds(manifests)
        out.append(
            f"The committer's job commit takes {verify.ratio:.2f}x the floor with its uploads "
            f"confirmed by listing (the default) and {noverify.ratio:.2f}x without. Of its "
            f"{verify.seconds:.1f} s, {completes:.1f} s go to the completes (the floor took "
            f"{floor.seconds:.1f} s for as many), {listings:.1f} s to listing the job's "
            f"pending uploads ({verify.requests.get('ListMultipartUploads', 0):,} requests, "
            f"1,000 uploads each), {_seconds(manifests):.1f} s to reading the "
            f"{manifests.requests if manifests else 0:,} task manifests and {rest:.1f} s to "
            "everything else: the plan, the job record, the journal, `_SUCCESS` and cleanup. "
            "Parts are not listed: CompleteMultipartUpload itself refuses parts that are "
            "missing or differ from the ones the task recorded."
        )
        if verify.protocol_requests_per_file:
            out.append(
                f"Over the whole protocol (job setup, the task attempts and the job commit) "
                f"the committer sent {verify.protocol_requests_per_file:.2f} requests per "
                f"file at {cfg.files_per_task} files per task: CreateMultipartUpload, "
                "UploadPart and CompleteMultipartUpload per file; the task manifest, the "
                "job-record read that fences a task commit and the manifest read at job "
                "commit per task; a fixed few per job."
            )
        measured = sorted(
            (r for r in rows if r.method in ("committer", "committer-scale") and r.peak_rss),
            key=lambda r: (r.files, r.method),
        )
        if len(measured) > 1:
            rss = ", ".join(f"{_rss(r)} MiB at {r.files:,}" for r in measured)
            out.append(
                f"The committing process's peak memory: {rss} files. Manifests, plan, "
                "journal and file list are streamed in shards of 10,000 entries and the set "
                "of pending uploads is kept as 8-byte digests, so memory does not follow the "
                "file count."
            )
    if copies:
        described = " and ".join(
            f"{r.ratio:.2f}x the floor ({r.requests_per_file:.2f} requests a file, "
            f"{LABELS[r.method].split(': ', 1)[1]})"
            for r in copies
        )
        out.append(
            f"The rename-based commit takes {described}. With {cfg.file_size:,}-byte files a "
            "server-side copy costs about what a complete does, so here a rename-based commit "
            "costs what its requests cost. Its real cost is in bytes: S3 copies data at a "
            "rate per object (the zero-rename paper measured about 6-10 MB/s), so copying a "
            "128 MB file takes seconds, while CompleteMultipartUpload moves no data whatever "
            "the file size."
        )
    out.append(
        "Results on real S3 differ: a request there takes tens of milliseconds rather than "
        "well under one, so time is set by concurrency and the connection pool rather than "
        "by client CPU (the paper found the pool size the bottleneck of job commit), requests "
        "per file still set the cost, and copies of large files favour the committer even "
        "more than these small files show."
    )
    return "\n\n".join(out)


# The subsections :func:`section` writes; any other is carried over (written by hand).
GENERATED = ("### Results", "### Where the committer's time goes", "### Reading")


def section(
    rows: Sequence[Row],
    cfg: BenchConfig,
    args: argparse.Namespace,
    command: str,
    load: tuple[float, float] | None = None,
    elapsed: float | None = None,
) -> str:
    """The whole ``## Job commit`` section, header included."""
    largest = max(r.files for r in rows if r.method != "committer-scale")
    committer = _find(rows, largest, "committer") or _find(rows, largest, "committer-noverify")
    runs = ", ".join(
        f"{n:,} files: median of {k}" if k > 1 else f"{n:,} files: one run"
        for n, k in zip(args.files, args.repeat, strict=True)
    )
    if getattr(args, "scale", None):
        runs += (
            f"; the committer alone at {', '.join(f'{n:,}' for n in args.scale)} files "
            f"of {args.scale_file_size:,} bytes, one run each"
        )
    parts = [
        HEADER,
        "",
        "What it measures: the job commit alone, the step that makes a job's files visible. "
        f"Each method commits the same number of {cfg.file_size:,}-byte files, with "
        f"{cfg.threads} threads over a connection pool of {cfg.threads}. Writing the files "
        "(task attempts, or plain PUTs for the rename baselines) is preparation: it is not "
        "timed. Requests are counted per HTTP request sent, retries included, through "
        "botocore's event hooks, the same way for every method; for the committer the task "
        "attempts' requests are counted too (the whole protocol's column). The committer's "
        "commit runs in a freshly spawned process whose peak resident memory is reported.",
        "",
        "- **zero-rename job commit**: `commit_job` on a job whose task attempts "
        f"({cfg.files_per_task} files each, manifests published to S3) wrote the files as "
        "pending multipart uploads. It lists and reads the task manifests, validates them "
        "(confirming that every upload is still pending by listing the job's uploads, 1,000 "
        "a request, when `verify_uploads` is on, the default), checks for conflicts, saves "
        "the plan, takes the job record past the point of no return, completes every upload "
        "while journaling, writes `_SUCCESS`, records the job committed and cleans up.",
        "- **floor**: parallel CompleteMultipartUpload calls, nothing else, on uploads written "
        "by the same task attempts: no commit that completes uploads can send fewer requests.",
        *_rename_bullet(rows),
        "",
        f"Machine: {os.cpu_count()} cores, SeaweedFS {seaweedfs_version()} (`weed mini`) on "
        f"loopback, Python {platform.python_version()}, boto3 {boto3.__version__}. "
        f"Runs: {runs}." + (" " + load_note(load) if load else ""),
        "",
        "Reproduce with `make bench`, or:"
        if elapsed is None
        else f"Reproduce with `make bench`, or the command below; this run took "
        f"{_duration(elapsed)}, {_timed(rows) / elapsed:.0%} of it in the timed commits "
        "and most of the rest writing the files they commit:",
        "",
        "```",
        command,
        "```",
        "",
        "### Results",
        "",
        results_table(rows),
        "",
    ]
    if committer is not None:
        parts += [
            f"### Where the committer's time goes ({largest:,} files, "
            f"{'defaults' if committer.method == 'committer' else 'verify_uploads=false'})",
            "",
            "The commit's requests in the order sent, consecutive requests of one operation "
            "taken as one step; a step lasts until the next one's first request, so the time "
            f"the client spends between requests is in it (commit took {committer.seconds:.2f} s):",
            "",
            breakdown_table(committer),
            "",
            "In order: read the job record and look for a stage manifest (there is none: the "
            "tasks published theirs), seal the record so that no task commits after the "
            "manifests are listed, list and read the task manifests, save the stage manifest, "
            "confirm the uploads pending by listing the job's uploads, list the destination "
            "for conflicts, save the plan, compare-and-swap the job record past the point of "
            "no return, read the plan back, list the journal, complete every upload with a "
            "journal checkpoint every 1,000 completions or 5 seconds, write the last "
            "checkpoint, `_SUCCESS` and the committed file list, swap the record to "
            "committed, release the partition claims, then clean up (list pending uploads, "
            "list and delete the manifests, plan and journal).",
            "",
        ]
    parts += ["### Reading", "", reading(rows, cfg), ""]
    return "\n".join(parts)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.1f} minutes" if seconds >= 120 else f"{seconds:.0f} s"


def _timed(rows: Sequence[Row]) -> float:
    """Seconds of timed commits in the whole run (medians times runs, near enough)."""
    return sum(r.seconds * r.runs for r in rows)


def _rename_bullet(rows: Sequence[Row]) -> list[str]:
    ways = []
    if any(r.method == "copy-delete" for r in rows):
        ways.append("with one DeleteObject per file (renaming file by file)")
    if any(r.method == "copy-bulk" for r in rows):
        ways.append("with one DeleteObjects per 1,000 keys after the copies (renaming a directory)")
    if not ways:
        return []
    return [
        "- **rename**: what a rename-based commit costs on S3, which has no rename: the "
        "files written as plain objects under a `_temporary/` prefix, then listed, copied "
        f"to their final keys (CopyObject) and deleted, {', or '.join(ways)}."
    ]


# -- the job commit to a table format -----------------------------------------------
TABLE_HEADER = "## Job commit to a table format"
# The section writes no subsection: every one there is written by hand, and kept.
TABLE_GENERATED: tuple[str, ...] = ()
_TABLE_ROWS = ("committer", "committer-iceberg", "committer-delta")


def table_section(
    rows: Sequence[Row],
    cfg: BenchConfig,
    args: argparse.Namespace,
    command: str,
    load: tuple[float, float] | None = None,
) -> str:
    """The ``## Job commit to a table format`` section: the commit with each format
    beside the commit without one, and what publishing adds, request by request."""
    shown = [r for r in rows if r.method in _TABLE_ROWS]
    wire = "every method's" if getattr(args, "wire", False) else "the table-format methods'"
    parts = [
        TABLE_HEADER,
        "",
        "What it measures: the job commit with `table_format` set, beside the same commit "
        "without one. The task attempts write real Parquet files of 10 rows, each with the "
        "statistics of its own footer and the files' schema in the task manifests (what "
        "the Spark writer records), so the commit describes every file to the format "
        "without reading it: Iceberg through PyIceberg on the embedded SQL catalog (SQLite), "
        "Delta as a commit file zero-rename writes after the version job setup checked, one "
        "commit each, appended to a table an earlier job of one file created (untimed); "
        "every method's jobs append. Not all of the formats' requests pass through botocore "
        "(PyIceberg writes with pyarrow's S3 filesystem, delta-rs reads and checkpoints with "
        f"Rust's object_store), so {wire} requests are counted at the wire: the suite's "
        "S3 proxy (`tests/s3proxy.py`) runs in front of the server and counts every "
        "request it receives, by operation. Seconds include the proxy's forwarding (a "
        "Python thread per connection) for the methods that go through it, and not the "
        "import of the format's library, which a process pays once (PyIceberg's takes "
        "seconds).",
        "",
        f"Machine: {os.cpu_count()} cores, SeaweedFS {seaweedfs_version()} (`weed mini`) on "
        f"loopback, Python {platform.python_version()}, {_table_libraries()}."
        + (" " + load_note(load) if load else ""),
        "",
        "```",
        command,
        "```",
        "",
        results_table(shown),
        "",
    ]
    added = _added_requests(shown)
    if added:
        parts += [
            "What publishing adds to the commit's requests, by operation (the format's "
            "method minus the commit without a format, at the same file count):",
            "",
            "| files | format | added requests | by operation |",
            "|---:|---|---:|---|",
            *added,
            "",
        ]
    return "\n".join(parts)


def _added_requests(rows: Sequence[Row]) -> list[str]:
    lines = []
    for files in sorted({r.files for r in rows}):
        plain = _find(rows, files, "committer")
        for method in _TABLE_ROWS[1:]:
            row = _find(rows, files, method)
            if plain is None or row is None:
                continue
            ops = sorted(set(row.requests) | set(plain.requests))
            diff = {op: row.requests.get(op, 0) - plain.requests.get(op, 0) for op in ops}
            shown = ", ".join(f"{op} {n:+,}" for op, n in diff.items() if n)
            lines.append(
                f"| {files:,} | {method.removeprefix('committer-')} | "
                f"{sum(diff.values()):+,} | {shown or '-'} |"
            )
    return lines


def _table_libraries() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("pyiceberg", "deltalake", "pyarrow"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    return ", ".join(found)

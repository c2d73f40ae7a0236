"""The peers' results: tables on stdout, the ``## Spark's committers and table
writers`` section of the benchmarks page and its chart (:mod:`bench.peers.chart`).

Every figure of a section comes from one run (``meta``: the machine, the
versions, the command) and is a median over the rounds of that run, with its
range beside it.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.page import load_note, seaweedfs_version, write_section
from bench.peers import chart, jars
from bench.peers.run import Run
from bench.peers.sessions import METHODS
from bench.peers.workloads import Workload

HEADER = "## Spark's committers and table writers"
MIB = 1024 * 1024
# The method the others are compared with: zero-rename's default committer.
OURS = "zero-rename-magic"
TIMED = ("ok", "not replaced")
# Short names for the tables and the chart; the section's introduction says
# what each is and how its session is configured.
SHORT = {
    "fileoutput-v1": "FileOutputCommitter v1",
    "fileoutput-v2": "FileOutputCommitter v2",
    "s3a-magic": "S3A magic",
    "s3a-directory": "S3A staging, directory",
    "s3a-partitioned": "S3A staging, partitioned",
    "manifest": "manifest committer",
    "iceberg-spark": "Spark's Iceberg writer",
    "delta-spark": "Spark's Delta writer",
    "zero-rename-magic": "zero-rename, magic",
    "zero-rename-staging": "zero-rename, staging",
    "zero-rename-iceberg": "zero-rename, magic, to Iceberg",
    "zero-rename-delta": "zero-rename, magic, to Delta",
}
STATUS_TEXT = {
    "unsupported": "not supported",
    "failed": "failed",
    "check failed": "check failed",
    "not replaced": "did not replace",
}


def environment() -> dict[str, Any]:
    """The machine and versions a run measured on."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "java": java.splitlines()[0] if java else "unknown",
        "seaweedfs": seaweedfs_version(),
        "hadoop": jars.HADOOP_VERSION,
        "iceberg": jars.ICEBERG_VERSION,
        "delta": jars.DELTA_VERSION,
    }


# -- grouping ----------------------------------------------------------------------


class Group:
    """One method's runs of one workload (through the proxy, or straight to the store)."""

    def __init__(self, runs: Sequence[Run]) -> None:
        self.runs = list(runs)
        self.method = runs[0].method
        self.workload = runs[0].workload
        self.timed = [r for r in runs if r.status in TIMED]

    @property
    def label(self) -> str:
        return SHORT.get(self.method, self.method)

    @property
    def ours(self) -> bool:
        return METHODS[self.method].zero_rename

    @property
    def status(self) -> str:
        if self.timed:
            return self.timed[0].status
        return self.runs[0].status

    @property
    def reason(self) -> str:
        return next((r.reason for r in self.runs if r.reason), "")

    def med(self, value: Callable[[Run], float | None]) -> float | None:
        found = [v for r in self.timed if (v := value(r)) is not None]
        return statistics.median(found) if found else None

    def wall(self) -> float:
        return self.med(lambda r: r.seconds) or 0.0

    def phase(self, name: str) -> float | None:
        return self.med(lambda r: r.phases.get(name))

    def per_file(self, requests: Callable[[Run], float]) -> float | None:
        return self.med(lambda r: requests(r) / r.written if r.written else None)

    def range(self) -> tuple[float, float]:
        seconds = [r.seconds for r in self.timed] or [0.0]
        return min(seconds), max(seconds)


def groups(runs: Sequence[Run], workload: str, via_proxy: bool = True) -> list[Group]:
    """The methods' groups of ``workload``, in the order of METHODS."""
    found: dict[str, list[Run]] = {}
    for r in runs:
        if r.workload == workload and r.via_proxy == via_proxy:
            found.setdefault(r.method, []).append(r)
    return [Group(found[m]) for m in METHODS if m in found]


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _mib(value: float | None) -> str:
    return "-" if not value else f"{value / MIB:,.0f}"


# -- tables ------------------------------------------------------------------------


def time_table(found: Sequence[Group]) -> str:
    """Wall time and where it went, medians over rounds (seconds)."""
    base = next((g for g in found if g.method == OURS and g.timed), None)
    lines = [
        "| method | wall time (s) | range | vs zero-rename, magic | setup | tasks | commit | "
        "of which the committer's job commit | tasks' commits, summed | "
        "first write in a fresh JVM |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for g in found:
        if not g.timed:
            lines.append(f"| {g.label} | {STATUS_TEXT.get(g.status, g.status)} |" + " |" * 8)
            continue
        low, high = g.range()
        ratio = f"{g.wall() / base.wall():.2f}x" if base and base.wall() else "-"
        job_commit = g.phase("job_commit")
        if g.ours:
            job_commit = g.med(lambda r: r.zero_rename.get("commit"))
        flag = " (did not replace)" if g.status == "not replaced" else ""
        lines.append(
            f"| {g.label}{flag} | {g.wall():.2f} | {low:.2f}-{high:.2f} | {ratio} | "
            f"{_f(g.phase('setup'))} | {_f(g.phase('tasks'))} | {_f(g.phase('commit'))} | "
            f"{_f(job_commit)} | {_f(g.phase('task_commit'))} | "
            f"{_f(g.med(lambda r: r.cold), 1)} |"
        )
    return "\n".join(lines)


def _kinds(g: Group, phase: str | None = None) -> str:
    """Requests per file by operation, largest first."""
    total: Counter[str] = Counter()
    files = 0
    for r in g.timed:
        total.update(r.by_phase.get(phase, {}) if phase else r.requests)
        files += r.written
    if not files:
        return "-"
    ranked = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{op} {n / files:.2f}" for op, n in ranked if n / files >= 0.005) or "-"


def cost_table(found: Sequence[Group]) -> str:
    """Requests, copies, memory and CPU, medians over rounds."""
    lines = [
        "| method | files written | S3 requests per file | in setup / tasks / commit | "
        "copied inside the store (MiB) | JVM peak (MiB) | Python driver peak | "
        "Python workers' peak | CPU (s): JVM / Python workers / S3 server / proxy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for g in found:
        if not g.timed:
            continue

        def phase_requests(phase: str) -> Callable[[Run], float]:
            return lambda r: sum(r.by_phase.get(phase, {}).values())

        split = " / ".join(_f(g.per_file(phase_requests(p))) for p in ("setup", "tasks", "commit"))
        cpu = " / ".join(
            _f(g.med(lambda r, k=k: r.cpu.get(k)), 1)
            for k in ("jvm", "python_workers", "server", "proxy")
        )
        lines.append(
            f"| {g.label} | {g.timed[0].written:,} | "
            f"{_f(g.per_file(lambda r: r.total_requests))} | {split} | "
            f"{_f(g.med(lambda r: sum(r.copied.values()) / MIB), 1)} | "
            f"{_mib(g.med(lambda r: r.memory.get('jvm_peak')))} | "
            f"{_mib(g.med(lambda r: r.memory.get('driver_peak')))} | "
            f"{_mib(g.med(lambda r: r.memory.get('workers_peak')))} | {cpu} |"
        )
    return "\n".join(lines)


def kinds_table(found: Sequence[Group]) -> str:
    lines = [
        "| method | requests per file by operation | of them, in the commit |",
        "|---|---|---|",
    ]
    lines += [f"| {g.label} | {_kinds(g)} | {_kinds(g, 'commit')} |" for g in found if g.timed]
    return "\n".join(lines)


def replace_table(found: Sequence[Group], workload: Workload) -> str:
    """What each method's replace left: rows and files as its reader sees them,
    and data files in the store."""
    day = next(iter(workload.frame.rows_by_day()))
    expected = workload.expected_rows_by_day()
    lines = [
        f"| method | rows of {day} read back (written: {expected[day]:,}) | other days' rows | "
        f"files the reader sees (expected {workload.expected_files()}) | "
        "data files in the store | replaced? |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for g in found:
        if not g.timed:
            lines.append(f"| {g.label} | - | - | - | - | {STATUS_TEXT.get(g.status)}: {g.reason} |")
            continue
        r = g.timed[0]
        rows = r.read_back.get("rows_by_day", {})
        others = sum(n for d, n in rows.items() if d != day)
        verdict = "yes" if r.status == "ok" else f"no: {r.reason}"
        if r.status == "ok" and r.files > r.reader_files:
            verdict += (
                f"; {r.files - r.reader_files} replaced file(s) left in the store, "
                "outside the table"
            )
        lines.append(
            f"| {g.label} | {rows.get(day, 0):,} | {others:,} | {r.reader_files} | "
            f"{r.files} | {verdict} |"
        )
    return "\n".join(lines)


MANIFEST_APPENDS = (
    "Why the manifest committer's replace added its files beside the old ones: Spark's "
    "dynamic partition overwrite relies on the commit protocol to delete each partition "
    "a job wrote and move the job's own into its place at job commit "
    "(`HadoopMapReduceCommitProtocol.commitJob`, over the partitions its tasks recorded in "
    "`newTaskTempFile`). `PathOutputCommitProtocol` (spark-hadoop-cloud) accepts the "
    "manifest committer for a dynamic overwrite, since it declares the capability "
    "`mapreduce.job.committer.dynamic.partitioning`, but records the partitions only when "
    "the committer is a `FileOutputCommitter`: in Spark 4.1.2, which carries the fix of "
    "SPARK-56588 (apache/spark#55622: the `FileOutputCommitter` now stages its output so "
    "that the old partitions are deleted), the manifest committer still commits straight "
    "into the destination and no partition is deleted, so the overwrite appends. The "
    "change that would record the partitions for the other committers (SPARK-41551, "
    "apache/spark#40221: \"else the partition delete doesn't take place - the job extends "
    'the dataset, rather than replaces it") was closed without being merged.'
)
TABLE_KEEPS_FILES = (
    "{methods} replaced the day in the table (their readers see only the new files) and "
    "left the replaced files in the store: a table format removes them from its log or "
    "snapshot, and deletes them only later (Delta's `VACUUM`, Iceberg's snapshot "
    "expiry), so that readers of the table's earlier versions still find them."
)


def replace_notes(found: Sequence[Group]) -> list[str]:
    """What the replace table's verdicts come from, where they need it."""
    notes = []
    manifest = next((g for g in found if g.method == "manifest"), None)
    if manifest is not None and manifest.status == "not replaced":
        notes.append(MANIFEST_APPENDS)
    keeping = [
        g.label
        for g in found
        if g.timed and g.status == "ok" and g.timed[0].files > g.timed[0].reader_files
    ]
    if keeping:
        notes.append(TABLE_KEEPS_FILES.format(methods=" and ".join(keeping)))
    return notes


def proxy_table(runs: Sequence[Run]) -> str:
    """The 1 GiB write through the proxy and straight to the store, per method."""
    direct = {g.method: g for g in groups(runs, "main", via_proxy=False)}
    lines = [
        "| method | through the proxy (s) | straight to the store (s) | difference | "
        "proxy's CPU (s) | requests through it |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for g in groups(runs, "main"):
        d = direct.get(g.method)
        if d is None or not d.timed or not g.timed:
            continue
        lines.append(
            f"| {g.label} | {g.wall():.2f} | {d.wall():.2f} | "
            f"{(g.wall() - d.wall()) / d.wall():+.1%} | "
            f"{_f(g.med(lambda r: r.cpu.get('proxy')), 1)} | "
            f"{_f(g.med(lambda r: float(r.total_requests)), 0)} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


# -- reading: where the time goes --------------------------------------------------


def gap(ours: Group, peer: Group) -> str:
    """Where ``peer``'s write is faster than ours, phase by phase (medians)."""
    parts = []
    for name in ("setup", "tasks", "commit"):
        a, b = ours.phase(name), peer.phase(name)
        if a is not None and b is not None:
            parts.append((b - a, name, a, b))
    parts.sort()
    text = ", ".join(f"{name} {b:.2f} s against {a:.2f} s" for _, name, a, b in parts)
    jvm, workers = (peer.med(lambda r, k=k: r.cpu.get(k)) or 0.0 for k in ("jvm", "python_workers"))
    our_jvm, our_py = (
        ours.med(lambda r, k=k: r.cpu.get(k)) or 0.0 for k in ("jvm", "python_workers")
    )
    most = parts[0] if parts else None
    lead = (
        f"; most of the difference is in the {most[1]} ({-most[0]:.2f} s)"
        if most and most[0] < 0
        else ""
    )
    peer_workers = f", its Python workers {workers:.1f} s" if workers else ""
    return (
        f"{peer.label}: {peer.wall():.2f} s against {ours.wall():.2f} s ({text}){lead}. "
        f"CPU: the peer's JVM {jvm:.1f} s{peer_workers}; "
        f"ours {our_jvm:.1f} s in the JVM and {our_py:.1f} s in Python workers. "
        f"Requests per file {_f(peer.per_file(lambda r: r.total_requests))} against "
        f"{_f(ours.per_file(lambda r: r.total_requests))}, of them in the commit "
        f"{_f(peer.per_file(commit_requests))} against {_f(ours.per_file(commit_requests))}."
    )


def commit_requests(r: Run) -> float:
    return float(sum(r.by_phase.get("commit", {}).values()))


def our_steps(ours: Group) -> str:
    """zero-rename's own steps of the write (its records), medians."""

    def z(key: str) -> float:
        return ours.med(lambda r: r.zero_rename.get(key)) or 0.0

    def worker(step: str) -> str:
        fresh = z(f"{step}_fresh")
        return (
            "a fresh one"
            if fresh >= 1
            else "an idle one reused"
            if fresh == 0
            else "fresh or reused"
        )

    return (
        f"{ours.label}'s own steps: from the call to Spark's call of the format's `writer()`, "
        f"{z('to_setup'):.2f} s (Spark's planning and its driver-side Python worker, "
        f"{worker('setup')}), then job setup {z('setup'):.2f} s; from the last task's end to "
        f"Spark's call of `commit()`, {z('to_commit'):.2f} s (another such worker, "
        f"{worker('commit')}), then job commit {z('commit'):.2f} s. Its tasks, summed: "
        f"{z('task_write'):.1f} s in `write()`, of which {z('task_fed'):.1f} s waiting on Spark "
        f"for rows, {z('task_s3'):.1f} s in S3 calls on the task's own thread and "
        f"{z('task_encode'):.1f} s encoding Parquet and the rest."
    )


def reading(runs: Sequence[Run], workload: Workload) -> str:
    found = groups(runs, workload.name)
    ours = next((g for g in found if g.method == OURS and g.timed), None)
    if ours is None:
        return ""
    ahead = sorted(
        (g for g in found if g.timed and not g.ours and g.wall() < ours.wall()),
        key=lambda g: g.wall(),
    )
    out = []
    if ahead:
        out.append(
            f"Ahead of {ours.label} ({ours.wall():.2f} s): "
            + ", ".join(f"{g.label} ({g.wall():.2f} s)" for g in ahead)
            + "."
        )
        out += [gap(ours, g) for g in ahead]
    else:
        peers = [g for g in found if g.timed and not g.ours]
        if peers:
            nearest = min(peers, key=lambda g: g.wall())
            out.append(
                f"No peer is ahead of {ours.label} ({ours.wall():.2f} s); the nearest: "
                + gap(ours, nearest)
            )
    out += [phase_leaders(found, ours), our_steps(ours), publish_cost(found, ours)]
    return "\n\n".join(p for p in out if p)


def phase_leaders(found: Sequence[Group], ours: Group) -> str:
    """Each phase's fastest peer beside ours: where a peer leads a phase, that
    phase is where ours has something to learn from it."""
    peers = [g for g in found if g.timed and not g.ours]
    parts = []
    for name, what in (
        ("setup", "setup"),
        ("tasks", "the tasks (the write itself)"),
        ("commit", "the commit"),
    ):
        timed = [g for g in peers if g.phase(name) is not None]
        mine = ours.phase(name)
        if not timed or mine is None:
            continue
        best = min(timed, key=lambda g: g.phase(name) or 0.0)
        value = best.phase(name) or 0.0
        verdict = "ahead of ours" if value < mine else "behind ours"
        parts.append(f"{what}: {best.label} {value:.2f} s, {verdict} ({mine:.2f} s)")
    return "Fastest peer by phase: " + "; ".join(parts) + "." if parts else ""


def publish_cost(found: Sequence[Group], ours: Group) -> str:
    """What publishing to a table format added to zero-rename's job commit."""
    parts = []
    mine = ours.med(lambda r: r.zero_rename.get("commit"))
    for g in found:
        if not g.timed or METHODS[g.method].table_format == "none" or mine is None:
            continue
        commit = g.med(lambda r: r.zero_rename.get("commit")) or 0.0
        added = (g.per_file(commit_requests) or 0.0) - (ours.per_file(commit_requests) or 0.0)
        parts.append(
            f"{g.label}: job commit {commit:.2f} s against {mine:.2f} s without a table "
            f"format, {added:+.2f} requests per file in the commit"
        )
    return (
        "Publishing to a table format, in zero-rename's job commit: " + "; ".join(parts) + "."
        if parts
        else ""
    )


# -- the section ---------------------------------------------------------------------


def data_size(found: Sequence[Group], workload: Workload) -> str:
    """How much the write put in the store (zero-rename's files, else the first
    method's): the data files' size, median over rounds."""
    if workload.before is not None:
        return ""
    timed = [g for g in found if g.timed]
    group = next((g for g in timed if g.method == OURS), timed[0] if timed else None)
    size = group.med(lambda r: float(r.bytes)) if group else None
    if not size:
        return ""
    each = size / workload.frame.files
    per_file = f"{each / MIB:.2f} MiB" if each >= MIB else f"{each / 1024:,.1f} KiB"
    return f" The data files come to {size / MIB:,.0f} MiB, {per_file} a file."


def workload_part(runs: Sequence[Run], workload: Workload, rounds: int) -> list[str]:
    found = groups(runs, workload.name)
    if not found:
        return []
    parts = [
        f"### {workload.label[0].upper() + workload.label[1:]}",
        "",
        rounds_text(found, rounds)
        + WORKLOAD_TEXT.get(workload.name, "")
        + data_size(found, workload),
        "",
        time_table(found),
        "",
        cost_table(found),
        "",
        kinds_table(found),
        "",
    ]
    if workload.mode == "replace":
        parts += ["Did each replace replace?", "", replace_table(found, workload), ""]
        parts += [f"{note}\n" for note in replace_notes(found)]
    text = reading(runs, workload)
    if text:
        parts += [text, ""]
    return parts


def rounds_text(found: Sequence[Group], planned: int) -> str:
    """The rounds the methods ran, and which ran fewer than planned (a run
    stopped before its last rounds reached them)."""
    timed = [g for g in found if g.timed]
    most = max((len(g.timed) for g in timed), default=planned)
    text = f"{most} round{'s' if most > 1 else ''}. "
    fewer = [g for g in timed if len(g.timed) < most]
    if fewer:
        text += (
            "The run was stopped before its last round reached "
            + ", ".join(f"{g.label} ({len(g.timed)})" for g in fewer)
            + ": their medians are over the rounds given. "
        )
    return text


WORKLOAD_TEXT = {
    "main": "The PySpark write's DataFrame (see above): each task writes one file per day.",
    "daily": "A daily job's write: one day's rows, each task rolling to a new file at a "
    "tenth of them (`maxRecordsPerFile`, zero-rename's `max_rows_per_file`; Iceberg by "
    "its target file size, below).",
    "replace": "A table of three days (10 tasks, 10 files a day) is written first, untimed; "
    "then the daily write replaces its first day, as each method replaces the partitions "
    "a DataFrame holds (below).",
    "small": "A job commit of many small files: each of the tasks writes 10 rows into each "
    "day. The commit column times the commit apart from the write for every method.",
}


def not_run(runs: Sequence[Run]) -> str:
    """Every method and workload that did not run, and why."""
    seen: dict[tuple[str, str], Run] = {}
    for r in runs:
        if r.status in ("unsupported", "failed", "check failed"):
            seen.setdefault((r.workload, r.method), r)
    lines = [
        f"- {SHORT.get(m, m)}, {w}: {STATUS_TEXT[r.status]}. {r.reason}"
        for (w, m), r in sorted(seen.items())
    ]
    return "\n".join(lines)


def section(meta: dict[str, Any], runs: Sequence[Run], chart_name: str) -> str:
    workloads = {n: Workload.from_json(w) for n, w in meta["workloads"].items()}
    parts = [
        HEADER,
        "",
        *INTRO,
        "",
        environment_text(meta),
        "",
        "Reproduce with `make bench-peers` (it builds `.venv-peers` first), or in it this "
        "run's command below; `BENCH_PEERS_ARGS` passes options to the first (`--quick`: "
        "every path on tiny sizes; `--methods`, `--workloads`, `--rounds`, "
        "`--rounds-for WORKLOAD=N`, `--scale`, `--small-files`). The raw results go to "
        "`.state/bench-peers/results.json`, from which `--report-only` writes this section "
        "and the chart again.",
        "",
        "```",
        meta["command"],
        "```",
        "",
        f"![Wall time of each write, by phase]({chart_name})",
        "",
    ]
    parts += ["### What the proxy costs", "", PROXY_TEXT, "", proxy_share(runs), ""]
    proxy = proxy_table(runs)
    if proxy:
        parts += [proxy, ""]
    for name, workload in workloads.items():
        parts += workload_part(runs, workload, meta["rounds"].get(name, 1))
    missing = not_run(runs)
    parts += [
        "### Methods that did not run a workload",
        "",
        missing or "None: every method ran every workload.",
        "",
    ]
    return "\n".join(parts)


def environment_text(meta: dict[str, Any]) -> str:
    return (
        f"Machine: {meta['cores']} cores, local Spark `local[2]`, PySpark {meta['pyspark']} "
        f"(`.venv-peers`), {meta['java']}, Python {meta['python']}, SeaweedFS "
        f"{meta['seaweedfs']} (`weed mini`) on loopback; hadoop-aws and Hadoop's committers "
        f"{meta['hadoop']}, Iceberg {meta['iceberg']}, Delta {meta['delta']}. The run took "
        f"{meta['minutes']:.0f} minutes, rounds shuffled with seed {meta['seed']}. "
        + load_note(tuple(meta["load"]))
    )


INTRO = [
    "What it measures: the same DataFrames written by Spark's own committers, Spark's "
    "Iceberg and Delta writers and zero-rename, each in a Spark session configured as its "
    "documentation recommends (`bench/peers/sessions.py`), all on one Spark version, one "
    "embedded SeaweedFS and the suite's S3 proxy, which counts every request at the wire "
    "(whatever client sent it: the JVM's AWS SDK, Iceberg's S3FileIO, botocore, PyIceberg's "
    "and delta-rs' own) and the bytes each copy moved inside the store.",
    "",
    "Spark 4.1.2 is the newest release every peer's jars are published for "
    "(`bench/peers/jars.py`: Spark 4.2 has no `spark-hadoop-cloud` and no Iceberg runtime "
    "on Maven Central), so every method runs on 4.1.2 in an environment of its own, "
    "`.venv-peers`, zero-rename included; the rest of this page is measured on the suite's "
    "Spark 4.2.",
    "",
    "- **FileOutputCommitter v1 and v2**: Spark's default for `s3a://` paths; v1 renames "
    "(on S3A a copy and a delete) at task and job commit, v2 at task commit.",
    "- **S3A magic, staging (directory, partitioned)**: Hadoop's S3A committers through "
    "`spark-hadoop-cloud` (`PathOutputCommitProtocol`, `BindingParquetOutputCommitter`, "
    "`fs.s3a.committer.name`).",
    "- **Manifest committer**: Hadoop's, through its factory. It refuses the `s3a` scheme "
    "by name, so it writes to `s3://` mapped to S3A, as users who want it on S3 must.",
    "- **Iceberg**: `writeTo(...).create()`, `.append()`, `.overwritePartitions()`; "
    "Iceberg's JDBC catalog on SQLite, the file PyIceberg's SQL catalog reads, S3FileIO. "
    "`write.distribution-mode=none`, so that its tasks write the same files as the others "
    "(its default for a partitioned table shuffles the rows to one task a partition); it "
    "rolls files by `target-file-size-bytes`, not by rows, set from the rows wanted "
    "(`bench/peers/writes.py`): the same number of files, each task's last the smallest.",
    '- **Delta**: `format("delta")` with `DeltaSparkSessionExtension` over S3A; its '
    "replace is a dynamic partition overwrite.",
    '- **zero-rename**: `format("zero-rename")` with the magic or staging committer, '
    "publishing to no table format, to Iceberg (PyIceberg, the same SQLite catalog) or to "
    "Delta (delta-rs); written through the format's subclass in `bench/spark_source.py`, "
    "the same writer, which records when Spark calls each of its steps.",
    "",
    "Every write runs in a fresh driver process (its own JVM, its jars resolved once "
    "beforehand), which first writes a few rows in the workload's shape, untimed (the "
    "first write in a fresh JVM, class loading and all, is in the last column of each "
    "time table), then reads the workload's rows from Spark's local-disk cache. Each write "
    "gets a bucket and an Iceberg catalog of its own. Times come from Spark's event log: "
    "**setup** from the call to the first writing job's start (planning, the committer's "
    "job setup, a Python data source's `writer()`), **tasks** until the last writing "
    "job's end, **commit** from there to the call's return (job commit, a table format's "
    "commit); the committer's own job commit where Spark's file writer times it "
    "(`job commit time`), and zero-rename's from its own records. Requests are split by "
    "the same phases, by when they arrived at the proxy. Peak memory is each process's "
    "`VmHWM` over the write alone (reset before it): the JVM (driver and executor: "
    "`local[2]`), the Python driver and Spark's Python workers. After every write the "
    "destination is read back (rows per day, files as the method's reader sees them) and "
    "listed (data files, uploads left pending).",
]

PROXY_TEXT = (
    "The proxy holds each request and response whole in memory and forwards them from "
    "a Python thread per connection, on the same two cores as Spark and the store; "
    "sizing a copy costs it one HEAD of its own per CopyObject. Where the table below is "
    "given, the 1 GiB write of those methods also ran straight to the store in the same "
    "rounds (nothing counted)."
)


def proxy_share(runs: Sequence[Run]) -> str:
    """The proxy's CPU over the run's timed writes, beside the store's and Spark's."""
    timed = [r for r in runs if r.status in TIMED and r.via_proxy]
    total = {k: sum(r.cpu.get(k, 0.0) for r in timed) for k in CPU_KINDS}
    requests = sum(r.total_requests for r in timed)
    if not requests:
        return ""
    return (
        f"Over the timed writes through it, the proxy used {total['proxy']:,.0f} s of CPU "
        f"for {requests:,} requests ({total['proxy'] / requests * 1000:.2f} ms a request), "
        f"against {total['server']:,.0f} s for the S3 server, {total['jvm']:,.0f} s for "
        f"the JVMs and {total['python_workers']:,.0f} s for Spark's Python workers: a "
        "write that sends many requests is slowed by the proxy in proportion, one that "
        "sends few is not."
    )


CPU_KINDS = ("proxy", "server", "jvm", "python_workers")


def panels(meta: dict[str, Any], runs: Sequence[Run]) -> list[chart.Panel]:
    out = []
    for name, data in meta["workloads"].items():
        workload = Workload.from_json(data)
        bars = []
        for g in groups(runs, name):
            if not g.timed:
                bars.append(
                    chart.Bar(g.label, note=STATUS_TEXT.get(g.status, g.status), ours=g.ours)
                )
                continue
            low, high = g.range()
            phases = tuple(g.phase(p) or 0.0 for p in ("setup", "tasks", "commit"))
            bars.append(chart.Bar(g.label, g.wall(), low, high, phases, ours=g.ours))
        out.append(chart.Panel(workload.label[0].upper() + workload.label[1:], tuple(bars)))
    return out


def write(meta: dict[str, Any], runs: Sequence[Run], output: str, chart_path: str) -> None:
    svg = chart.svg(
        panels(meta, runs),
        "Spark's committers and table writers beside zero-rename: wall time (s), by phase",
        f"Medians over rounds of one run ({meta['command']}); zero-rename's methods in bold.",
    )
    Path(chart_path).write_text(svg)
    name = os.path.relpath(chart_path, Path(output).parent)
    write_section(output, HEADER, section(meta, runs, name))


def stdout_tables(meta: dict[str, Any], runs: Sequence[Run]) -> str:
    lines = []
    for name, data in meta["workloads"].items():
        found = groups(runs, name)
        if found:
            lines += [
                Workload.from_json(data).label,
                "",
                time_table(found),
                "",
                cost_table(found),
                "",
            ]
    proxy = proxy_table(runs)
    if proxy:
        lines += ["proxy:", proxy, ""]
    lines.append(not_run(runs))
    return "\n".join(lines)

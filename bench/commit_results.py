"""The job-commit benchmark's values, shared by the benchmark
(:mod:`bench.commit_bench`) and its report (:mod:`bench.commit_report`):
where it runs, one timed commit, and the medians the report shows."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.counter import RequestTotals, Step
from zero_rename.core.s3.client import StoreConfig

LABELS: dict[str, str] = {
    "committer": "zero-rename job commit, uploads confirmed by listing (default)",
    "committer-noverify": "zero-rename job commit, `verify_uploads=false`",
    "floor": "floor: bare parallel CompleteMultipartUpload",
    "copy-delete": "rename: CopyObject + DeleteObject per file",
    "copy-bulk": "rename: CopyObject per file + DeleteObjects per 1,000",
    "committer-scale": "zero-rename job commit alone, at scale (defaults)",
    "committer-scale@before": "zero-rename job commit alone, at scale, the --before tree's",
    "committer-iceberg": "zero-rename job commit, published as one Iceberg snapshot",
    "committer-delta": "zero-rename job commit, published as one Delta version",
}
# The methods that publish to a table format, whose requests are counted at the wire.
TABLE_METHODS = ("committer-iceberg", "committer-delta")


@dataclass(frozen=True)
class BenchConfig:
    """Where and how the benchmark runs; the same for every method."""

    endpoint_url: str
    bucket: str
    threads: int = 64
    files_per_task: int = 10
    file_size: int = 1024
    # Every method's jobs: "append" where a table format's job follows another
    # job at its destination (the table's first), so that all compare alike.
    conflict_mode: str = "fail"

    def store_config(self) -> StoreConfig:
        # A pool as large as the thread count, so no thread waits for a connection.
        return StoreConfig(endpoint_url=self.endpoint_url, max_pool_connections=self.threads)

    @property
    def body(self) -> bytes:
        return b"x" * self.file_size


@dataclass(frozen=True)
class Run(RequestTotals):
    """One timed commit of one method."""

    method: str
    files: int
    seconds: float
    requests: dict[str, int]
    steps: tuple[Step, ...] = ()
    committed: int = 0  # files visible at their final keys afterwards
    leftover: int = 0  # pending uploads or temporary objects left behind
    write_requests: int = 0  # the task attempts' requests (committer methods only)
    peak_rss: int = 0  # bytes: the committing process's peak (committer methods only)

    @property
    def protocol_requests_per_file(self) -> float | None:
        """Task attempts' and job commit's requests per file: the whole protocol."""
        if not self.write_requests or not self.files:
            return None
        return (self.write_requests + self.total_requests) / self.files


@dataclass(frozen=True)
class Row:
    """The median of one method's runs at one file count."""

    method: str
    files: int
    runs: int
    seconds: float
    requests_per_file: float
    ratio: float | None  # seconds over the floor's
    committed: int
    leftover: int
    requests: dict[str, int]
    steps: tuple[Step, ...]
    protocol_requests_per_file: float | None = None
    peak_rss: int = 0  # bytes, the largest of the runs


def summarize(runs: Sequence[Run]) -> list[Row]:
    """Median seconds per (file count, method); counts and steps from the median run."""
    groups: dict[tuple[int, str], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.files, run.method), []).append(run)
    medians = {key: statistics.median(r.seconds for r in group) for key, group in groups.items()}
    rows = []
    for (files, method), group in groups.items():
        typical = min(group, key=lambda r: abs(r.seconds - medians[files, method]))
        floor = medians.get((files, "floor"))
        rows.append(
            Row(
                method,
                files,
                len(group),
                medians[files, method],
                statistics.median(r.requests_per_file for r in group),
                medians[files, method] / floor if floor else None,
                min(r.committed for r in group),
                max(r.leftover for r in group),
                typical.requests,
                typical.steps,
                typical.protocol_requests_per_file,
                max(r.peak_rss for r in group),
            )
        )
    return rows

"""The writes every method of ``make bench-peers`` makes: the workloads of the
benchmarks page, the same DataFrames (:mod:`bench.frames`) for every method.

- ``main``: the PySpark write's 1,024 files, about 1 GiB: 16 tasks, each
  holding rows of all 64 days, one file per task and day;
- ``daily``: one day's partition of 10 files, written by 2 tasks (the task
  slots of ``local[2]``), each rolling to a new file every 100,000 rows;
- ``replace``: the daily write replacing one day of a table of three days
  (written first, untimed, 10 files a day);
- ``small``: 10,000 files of 10 rows, 100 tasks each writing one file into each
  of 100 days: a job commit of many small files.

Light (no Spark import): the orchestrator and the drivers share it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from bench.frames import FIRST_DAY, frame_sql


@dataclass(frozen=True)
class Frame:
    """``rows`` rows over ``days`` days in ``tasks`` tasks, ids from ``start``."""

    rows: int
    tasks: int
    days: int
    start: int = 0
    rows_per_file: int | None = None  # a task rolls to a new file after this many rows

    def sql(self) -> str:
        return frame_sql(self.rows, self.days, self.tasks, self.start)

    @property
    def files(self) -> int:
        """Files a file source writes: per task and day, one per ``rows_per_file``."""
        per_task_day = self.rows / (self.tasks * self.days)
        rolls = math.ceil(per_task_day / self.rows_per_file) if self.rows_per_file else 1
        return self.tasks * self.days * rolls

    def rows_by_day(self) -> dict[str, int]:
        """Rows of each day (``YYYY-MM-DD``): ids cycle through the days."""
        import datetime

        first = datetime.date.fromisoformat(FIRST_DAY)
        counts: dict[str, int] = {}
        for offset in range(self.days):
            # ids start..start+rows-1 whose id % days == offset
            lo = self.start + ((offset - self.start) % self.days)
            n = max(0, math.ceil((self.start + self.rows - lo) / self.days))
            counts[(first + datetime.timedelta(days=offset)).isoformat()] = n
        return counts


@dataclass(frozen=True)
class Workload:
    name: str
    frame: Frame
    mode: str = "append"  # or "replace": the partitions the frame holds
    before: Frame | None = None  # written first, untimed: what a replace replaces in

    @property
    def label(self) -> str:
        """What the workload writes, in the sizes it has."""
        f = self.frame
        if self.name == "main":
            return f"{f.files:,} files ({f.tasks} tasks x {f.days} days), {f.rows:,} rows"
        if self.name == "daily":
            return f"one day, {f.files} files ({f.tasks} tasks), {f.rows:,} rows"
        if self.name == "replace":
            return f"one day of {f.files} files, {f.rows:,} rows, replacing a day of a table"
        if self.name == "small":
            return (
                f"{f.files:,} files of {f.rows // f.files} rows ({f.tasks} tasks x {f.days} days)"
            )
        return self.name

    def expected_rows_by_day(self) -> dict[str, int]:
        """Rows per day a reader must find after the write (the destination is new)."""
        expected = dict(self.before.rows_by_day()) if self.before else {}
        new = self.frame.rows_by_day()
        if self.mode == "replace":
            expected.update(new)
        else:
            for day, n in new.items():
                expected[day] = expected.get(day, 0) + n
        return {d: n for d, n in expected.items() if n}

    def expected_files(self) -> int:
        """Data files a reader must find after the write."""
        if self.before is None:
            return self.frame.files
        kept = self.before.files * (self.before.days - self.frame.days) // self.before.days
        return kept + self.frame.files + (0 if self.mode == "replace" else self.before.files - kept)

    def scaled(self, factor: float) -> Workload:
        """The same workload with ``factor`` times the rows (files unchanged where
        rows allow; at least one row a file)."""

        def scale(frame: Frame) -> Frame:
            rows = max(frame.tasks * frame.days, round(frame.rows * factor))
            per_file = frame.rows_per_file
            if per_file:
                per_file = max(1, round(per_file * rows / frame.rows))
            return replace(frame, rows=rows, rows_per_file=per_file)

        return replace(
            self, frame=scale(self.frame), before=scale(self.before) if self.before else None
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Workload:
        before = data.get("before")
        return cls(
            name=data["name"],
            frame=Frame(**data["frame"]),
            mode=data.get("mode", "append"),
            before=Frame(**before) if before else None,
        )


DAILY = Frame(rows=1_000_000, tasks=2, days=1, rows_per_file=100_000)
WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("main", Frame(rows=8_000_000, tasks=16, days=64)),
        Workload("daily", DAILY),
        Workload(
            "replace",
            replace(DAILY, start=100_000_000),
            mode="replace",
            before=Frame(rows=300_000, tasks=10, days=3),
        ),
        Workload("small", Frame(rows=100_000, tasks=100, days=100)),
    )
}


def small_files(files: int) -> Workload:
    """The ``small`` workload with about ``files`` files: square, tasks x days."""
    side = max(1, round(math.sqrt(files)))
    return replace(WORKLOADS["small"], frame=Frame(rows=side * side * 10, tasks=side, days=side))


def warm_up(workload: Workload) -> Workload:
    """A few rows in the workload's shape (its mode, its table first): what a
    driver writes before the timed write, so that the JVM's first use of a code
    path (class loading, the first Python workers) is no method's cost."""
    rolls = workload.frame.rows_per_file is not None
    small = Frame(rows=2_000, tasks=2, days=2, rows_per_file=500 if rolls else None)
    before = replace(small, start=0) if workload.before else None
    new = replace(small, days=1, start=1_000_000) if workload.before else small
    return replace(workload, frame=new, before=before)

"""The history chart of the Commits page, laid out on the server as SVG.

One panel per measure (the job commit's seconds, files, rows, bytes), the jobs
side by side in the order they ended, oldest on the left: every job gets the
same width, so a burst of jobs on one day stays readable beside a daily
series, and the time axis names when. A dashed line is the median of the
committed jobs shown: what "usual" is. Jobs that did not commit have no
numbers; a strip under the panels marks them (aborted, rolled back, still
running, stuck) and a faint line crosses the panels where one was aborted.

Only geometry and text are computed here; ``templates/chart.svg`` draws them,
and Jinja escapes every text (job ids, reasons) as it does in the page. No
script and no network resource: the page stays whole where the api-server
cannot reach the Internet.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from zero_rename.core import HistoryEntry, states
from zero_rename.formatting import human_bytes

WIDTH = 760
LEFT = 100  # room for the value labels and the strip's name
RIGHT = 14
PANEL = 64  # a panel's height
TITLE = 22  # a panel's title above it
STRIP = 26  # the strip of jobs that did not commit
AXIS = 22  # the time labels
TIME_LABELS = 5


def seconds_text(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:,.0f} s"


def count_text(value: float) -> str:
    """``1234`` -> ``1.2k``: short enough for the axis."""
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:,.0f}"


@dataclass(frozen=True)
class Measure:
    key: str  # the history entry's field
    title: str
    text: Callable[[float], str]


MEASURES = (
    Measure("seconds", "Commit seconds", seconds_text),
    Measure("files", "Files", count_text),
    Measure("rows", "Rows", count_text),
    Measure("bytes", "Bytes", lambda v: human_bytes(int(v))),
)


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    job_id: str
    title: str  # its tooltip and text alternative
    selected: bool


@dataclass(frozen=True)
class Panel:
    measure: str
    title: str
    top: float
    bottom: float
    top_label: str  # the value at the top of the panel
    median_y: float | None
    median_label: str
    points: tuple[Point, ...]
    line: str  # the polyline through the points


@dataclass(frozen=True)
class Mark:
    """A job that did not commit: ``aborted``, ``rolled-back``, ``running``, ``stuck``."""

    x: float
    kind: str
    job_id: str
    title: str
    selected: bool


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    left: int
    right: int
    panels: tuple[Panel, ...]
    marks: tuple[Mark, ...]
    strip_y: float
    times: tuple[tuple[float, str], ...]  # (x, label) under the strip
    description: str  # the text alternative of the whole chart
    committed: int
    radius: float  # of a point: smaller as jobs crowd


def mark_kind(entry: HistoryEntry) -> str | None:
    if entry.state == states.COMMITTED:
        return None
    if entry.stuck:
        return "stuck"
    if entry.state == states.ABORTED:
        return "rolled-back" if entry.rolled_back else "aborted"
    return "running"


def history_chart(entries: Sequence[HistoryEntry], selected: str | None = None) -> Chart | None:
    """The chart of ``entries`` (oldest first); None when there is nothing to draw."""
    if not entries:
        return None
    step = (WIDTH - LEFT - RIGHT) / len(entries)
    xs = [LEFT + step * (i + 0.5) for i in range(len(entries))]
    committed = [(x, e) for x, e in zip(xs, entries, strict=True) if e.state == states.COMMITTED]
    panels = []
    top = 0.0
    for measure in MEASURES:
        top += TITLE
        panels.append(_panel(measure, committed, top, selected))
        top += PANEL
    strip_y = top + STRIP / 2 + 4
    marks = tuple(
        Mark(x, kind, e.job_id, _mark_title(e, kind), e.job_id == selected)
        for x, e in zip(xs, entries, strict=True)
        if (kind := mark_kind(e)) is not None
    )
    return Chart(
        width=WIDTH,
        height=int(top + STRIP + AXIS),
        left=LEFT,
        right=RIGHT,
        panels=tuple(panels),
        marks=marks,
        strip_y=strip_y,
        times=_times(xs, [e.at for e in entries]),
        description=_describe(entries, committed),
        committed=len(committed),
        radius=round(max(1.5, min(3.5, step / 3)), 1),
    )


def _panel(
    measure: Measure,
    committed: Sequence[tuple[float, HistoryEntry]],
    top: float,
    selected: str | None,
) -> Panel:
    values = [(x, e, float(getattr(e, measure.key) or 0)) for x, e in committed]
    peak = max((v for _, _, v in values), default=0.0)
    bottom = top + PANEL

    def y(value: float) -> float:
        return bottom - (value / peak * (PANEL - 4) if peak > 0 else 0.0)

    points = tuple(
        Point(
            x,
            y(v),
            e.job_id,
            f"job {e.job_id}, committed {e.at:%Y-%m-%d %H:%M:%S} UTC: "
            f"{measure.title.lower()} {measure.text(v)}",
            e.job_id == selected,
        )
        for x, e, v in values
    )
    median = statistics.median(v for _, _, v in values) if values else None
    return Panel(
        measure=measure.key,
        title=measure.title,
        top=top,
        bottom=bottom,
        top_label=measure.text(peak),
        median_y=y(median) if median is not None else None,
        median_label=f"median {measure.text(median)}" if median is not None else "",
        points=points,
        line=" ".join(f"{p.x:.1f},{p.y:.1f}" for p in points),
    )


def _mark_title(entry: HistoryEntry, kind: str) -> str:
    when = f"{entry.at:%Y-%m-%d %H:%M:%S} UTC"
    if kind == "stuck":
        since = f"{entry.updated:%Y-%m-%d %H:%M} UTC"
        return f"job {entry.job_id}: stuck {entry.state.label}, unchanged since {since}"
    if kind == "running":
        return f"job {entry.job_id}: {entry.state.label}, set up {when}"
    what = "rolled back" if kind == "rolled-back" else "aborted"
    return f"job {entry.job_id}: {what} {when}" + (f": {entry.reason}" if entry.reason else "")


def _times(xs: Sequence[float], times: Sequence[datetime]) -> tuple[tuple[float, str], ...]:
    """A few labels along the axis: the first, the last and evenly between."""
    span = max(times) - min(times)
    form = (
        "%Y-%m-%d"
        if span.days >= 2
        else "%m-%d %H:%M"
        if span.total_seconds() >= 3600
        else "%H:%M:%S"
    )
    count = min(TIME_LABELS, len(xs))
    picks = sorted({round(i * (len(xs) - 1) / max(1, count - 1)) for i in range(count)})
    return tuple((xs[i], times[i].strftime(form)) for i in picks)


def _describe(
    entries: Sequence[HistoryEntry], committed: Sequence[tuple[float, HistoryEntry]]
) -> str:
    """The chart in words, for a screen reader and for anyone without the picture."""
    first, last = entries[0].at, entries[-1].at
    words = [
        f"{len(entries)} job(s) from {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC, "
        f"{len(committed)} committed"
    ]
    if committed:
        latest = committed[-1][1]
        for measure in MEASURES:
            values = [float(getattr(e, measure.key) or 0) for _, e in committed]
            words.append(
                f"{measure.title.lower()}: median {measure.text(statistics.median(values))}, "
                f"latest {measure.text(float(getattr(latest, measure.key) or 0))}"
            )
    kinds = [k for e in entries if (k := mark_kind(e)) is not None]
    for kind in ("aborted", "rolled-back", "stuck", "running"):
        if kinds.count(kind):
            words.append(f"{kinds.count(kind)} {kind.replace('-', ' ')}")
    return "; ".join(words) + "."

"""The history chart of the Commits page, laid out on the server as SVG.

One panel per measure: the whole run's seconds (from job setup to the end of
the commit step, from the job record's steps), the commit step's seconds,
files, rows and bytes. The x-axis is time (UTC): each job stands where it
ended (a job still running, where it was set up), so a gap of three days
looks like one, and the axis labels carry dates. Each panel has a y-axis
with round ticks, labelled as the command line prints numbers
(:mod:`zero_rename.formatting`). A dashed line is the median of the
committed jobs shown: what "usual" is. Jobs that did not commit have no
numbers; a strip under the panels marks them (aborted, rolled back, still
running, stuck) and a faint line crosses the panels where one was aborted.

Only geometry and text are computed here; ``templates/chart.html`` draws them,
and Jinja escapes every text (job ids, reasons) as it does in the page. No
script and no network resource: the page stays whole where the api-server
cannot reach the Internet.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from zero_rename.core import HistoryEntry, states
from zero_rename.formatting import human_bytes, human_count, human_duration

# The drawing's own units; the page scales it to its width (never below MIN_WIDTH).
WIDTH = 1200
LEFT = 92  # room for the y-axis labels and the strip's name
RIGHT = 24  # room for the last time label
TITLE = 22  # a panel's title, above its plot
PANEL = 78  # a plot's height
GAP = 16  # below a plot: its lowest tick label, then room before the next title
STRIP = 28  # the strip of jobs that did not commit
AXIS = 36  # the time labels: a time, and the date under it where the day changes
Y_TICKS = 4  # at most this many ticks above zero
TIME_LABEL = 96  # the least room a time label takes, in drawing units
RADIUS = 3.0
MIN_SPAN = timedelta(seconds=4)  # the time axis's shortest


@dataclass(frozen=True)
class Measure:
    key: str  # the history entry's field, or "run_seconds"
    title: str
    text: Callable[[float], str]
    steps: Callable[[float], float]  # a round step for ticks up to a peak


def round_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten not below ``raw``."""
    if raw <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))


# Steps of ten seconds and more as a clock reads: 15 s, 30 s, whole minutes and hours.
_CLOCK_STEPS = (10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200)


def seconds_step(raw: float) -> float:
    if raw <= 10:
        return round_step(raw)
    return next((float(s) for s in _CLOCK_STEPS if s >= raw), round_step(raw / 86400) * 86400)


def bytes_step(raw: float) -> float:
    """A round step in the binary unit the ticks are labelled in (512 KiB, 1 MiB)."""
    unit = 1.0
    while raw >= 1024 * unit * 0.999 and unit < 1024**4:
        unit *= 1024
    step = round_step(raw / unit)
    if step >= 1000 and unit < 1024**4:  # 1000 MiB reads worse than 1 GiB
        unit, step = unit * 1024, 1.0
    return step * unit


def count_step(raw: float) -> float:
    return max(1.0, round_step(raw))  # a count's ticks are whole


MEASURES = (
    Measure("run_seconds", "Run seconds, setup to commit", human_duration, seconds_step),
    Measure("seconds", "Commit step seconds", human_duration, seconds_step),
    Measure("files", "Files", human_count, count_step),
    Measure("rows", "Rows", human_count, count_step),
    Measure("bytes", "Bytes", lambda v: human_bytes(int(v)), bytes_step),
)


def y_ticks(peak: float, step_of: Callable[[float], float]) -> tuple[float, ...]:
    """Zero and round values up to at least ``peak``, at most Y_TICKS above zero."""
    if peak <= 0:
        return (0.0,)
    step = step_of(peak / Y_TICKS)
    count = math.ceil(peak / step - 1e-9)
    return tuple(i * step for i in range(count + 1))


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    job_id: str
    title: str  # its tooltip and text alternative
    selected: bool


@dataclass(frozen=True)
class Tick:
    at: float  # y of a value tick, x of a time tick
    label: str
    date: str = ""  # under a time label where the day changes


@dataclass(frozen=True)
class Panel:
    measure: str
    title: str
    top: float
    bottom: float
    ticks: tuple[Tick, ...]
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
    times: tuple[Tick, ...]  # the time axis, under the strip
    axis_y: float  # where the time labels hang
    description: str  # the text alternative of the whole chart
    committed: int
    radius: float


def mark_kind(entry: HistoryEntry) -> str | None:
    if entry.state == states.COMMITTED:
        return None
    if entry.stuck:
        return "stuck"
    if entry.state == states.ABORTED:
        return "rolled-back" if entry.rolled_back else "aborted"
    return "running"


@dataclass(frozen=True)
class TimeScale:
    """UTC times onto x: the jobs' span, a little wider, across the plot."""

    start: datetime
    end: datetime

    @classmethod
    def around(cls, times: Sequence[datetime]) -> TimeScale:
        first, last = min(times), max(times)
        # A burst of jobs within a second still gets a few labelled seconds.
        pad = max((last - first) * 0.03, (MIN_SPAN - (last - first)) / 2)
        return cls(first - pad, last + pad)

    def x(self, at: datetime) -> float:
        share = (at - self.start) / (self.end - self.start)
        return LEFT + share * (WIDTH - LEFT - RIGHT)


def history_chart(
    entries: Sequence[HistoryEntry],
    selected: str | None = None,
    run_seconds: Mapping[str, float] | None = None,
) -> Chart | None:
    """The chart of ``entries`` (oldest first); ``run_seconds`` by job id, of the
    committed ones. None when there is nothing to draw."""
    if not entries:
        return None
    scale = TimeScale.around([e.at for e in entries])
    xs = [scale.x(e.at) for e in entries]
    committed = [(x, e) for x, e in zip(xs, entries, strict=True) if e.state == states.COMMITTED]
    runs = run_seconds or {}
    panels = []
    top = 0.0
    for measure in MEASURES:
        top += TITLE
        panels.append(_panel(measure, committed, runs, top, selected))
        top += PANEL + GAP
    strip_y = top + STRIP / 2
    marks = tuple(
        Mark(x, kind, e.job_id, _mark_title(e, kind), e.job_id == selected)
        for x, e in zip(xs, entries, strict=True)
        if (kind := mark_kind(e)) is not None
    )
    axis_y = top + STRIP
    return Chart(
        width=WIDTH,
        height=int(axis_y + AXIS),
        left=LEFT,
        right=RIGHT,
        panels=tuple(panels),
        marks=marks,
        strip_y=strip_y,
        times=time_ticks(scale),
        axis_y=axis_y,
        description=_describe(entries, committed, runs),
        committed=len(committed),
        radius=RADIUS,
    )


def value_of(measure: Measure, entry: HistoryEntry, runs: Mapping[str, float]) -> float | None:
    if measure.key == "run_seconds":
        return runs.get(entry.job_id)
    value = getattr(entry, measure.key)
    return None if value is None else float(value)


def _panel(
    measure: Measure,
    committed: Sequence[tuple[float, HistoryEntry]],
    runs: Mapping[str, float],
    top: float,
    selected: str | None,
) -> Panel:
    values = [(x, e, v) for x, e in committed if (v := value_of(measure, e, runs)) is not None]
    ticks = y_ticks(max((v for _, _, v in values), default=0.0), measure.steps)
    ceiling = ticks[-1] or 1.0
    bottom = top + PANEL

    def y(value: float) -> float:
        return bottom - value / ceiling * PANEL

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
        ticks=tuple(Tick(y(t), measure.text(t)) for t in ticks),
        median_y=y(median) if median is not None else None,
        median_label=f"median {measure.text(median)}" if median is not None else "",
        points=points,
        line=" ".join(f"{p.x:.1f},{p.y:.1f}" for p in points),
    )


# Intervals between time labels, the shortest that leaves each label its room.
_INTERVALS = tuple(
    timedelta(**{unit: n})
    for unit, n in (
        ("seconds", 1),
        ("seconds", 2),
        ("seconds", 5),
        ("seconds", 10),
        ("seconds", 30),
        ("minutes", 1),
        ("minutes", 2),
        ("minutes", 5),
        ("minutes", 10),
        ("minutes", 15),
        ("minutes", 30),
        ("hours", 1),
        ("hours", 2),
        ("hours", 3),
        ("hours", 6),
        ("hours", 12),
        ("days", 1),
        ("days", 2),
        ("days", 7),
        ("days", 14),
        ("days", 28),
        ("days", 91),
        ("days", 182),
        ("days", 364),
    )
)
_EPOCH = datetime(1970, 1, 5, tzinfo=UTC)  # a Monday: weeks start on Mondays


def time_ticks(scale: TimeScale) -> tuple[Tick, ...]:
    """Labels at round UTC times (every 5 minutes, 6 hours, day, week...), as many
    as fit; a time of day carries its date under it at the first label and
    wherever the day changes, so that every label can be read as a date."""
    room = (WIDTH - LEFT - RIGHT) / TIME_LABEL
    span = scale.end - scale.start
    interval = next((i for i in _INTERVALS if span / i <= room), _INTERVALS[-1])
    first = _EPOCH + math.ceil((scale.start - _EPOCH) / interval) * interval
    ticks, day = [], None
    at = first
    while at <= scale.end:
        if interval >= timedelta(days=1):
            ticks.append(Tick(scale.x(at), f"{at:%Y-%m-%d}"))
        else:
            label = f"{at:%H:%M}" if interval >= timedelta(minutes=1) else f"{at:%H:%M:%S}"
            date = f"{at:%Y-%m-%d}" if at.date() != day else ""
            ticks.append(Tick(scale.x(at), label, date))
            day = at.date()
        at += interval
    return tuple(ticks)


def _mark_title(entry: HistoryEntry, kind: str) -> str:
    when = f"{entry.at:%Y-%m-%d %H:%M:%S} UTC"
    if kind == "stuck":
        since = f"{entry.updated:%Y-%m-%d %H:%M} UTC"
        return f"job {entry.job_id}: stuck {entry.state.label}, unchanged since {since}"
    if kind == "running":
        return f"job {entry.job_id}: {entry.state.label}, set up {when}"
    what = "rolled back" if kind == "rolled-back" else "aborted"
    return f"job {entry.job_id}: {what} {when}" + (f": {entry.reason}" if entry.reason else "")


def _describe(
    entries: Sequence[HistoryEntry],
    committed: Sequence[tuple[float, HistoryEntry]],
    runs: Mapping[str, float],
) -> str:
    """The chart in words, for a screen reader and for anyone without the picture."""
    first, last = entries[0].at, entries[-1].at
    words = [
        f"{len(entries)} job(s) from {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC, "
        f"{len(committed)} committed"
    ]
    for measure in MEASURES:
        values = [v for _, e in committed if (v := value_of(measure, e, runs)) is not None]
        if values:
            words.append(
                f"{measure.title.lower()}: median {measure.text(statistics.median(values))}, "
                f"latest {measure.text(values[-1])}"
            )
    kinds = [k for e in entries if (k := mark_kind(e)) is not None]
    for kind in ("aborted", "rolled-back", "stuck", "running"):
        if kinds.count(kind):
            words.append(f"{kinds.count(kind)} {kind.replace('-', ' ')}")
    return "; ".join(words) + "."

"""The Commits page's history chart, laid out without a browser: its ticks and time axis."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from zero_rename.airflow.ui.chart import (
    MEASURES,
    TimeScale,
    bytes_step,
    history_chart,
    seconds_step,
    time_ticks,
    y_ticks,
)
from zero_rename.core import HistoryEntry, states

pytestmark = pytest.mark.unit

T0 = datetime(2024, 1, 1, 1, 0, tzinfo=UTC)
TEXT = {m.key: m.text for m in MEASURES}
STEPS = {m.key: m.steps for m in MEASURES}


def labels(key: str, peak: float) -> list[str]:
    return [TEXT[key](t) for t in y_ticks(peak, STEPS[key])]


def test_y_ticks_are_round_and_reach_the_peak_in_the_command_lines_format() -> None:
    assert labels("rows", 123_456) == ["0", "50,000", "100,000", "150,000"]
    assert labels("files", 3) == ["0", "1", "2", "3"]
    assert labels("files", 1) == ["0", "1"]
    assert labels("bytes", 700_000) == ["0 B", "200.0 KiB", "400.0 KiB", "600.0 KiB", "800.0 KiB"]
    assert labels("bytes", 3 * 1024**3) == ["0 B", "1.0 GiB", "2.0 GiB", "3.0 GiB"]
    assert labels("seconds", 0.19) == ["0.00s", "0.05s", "0.10s", "0.15s", "0.20s"]
    # Past half a minute, whole minutes and hours, as a clock reads.
    assert labels("run_seconds", 94) == ["0.00s", "30.0s", "1m 0s", "1m 30s", "2m 0s"]
    assert labels("run_seconds", 4000) == ["0.00s", "30m 0s", "1h 0m", "1h 30m"]
    assert labels("rows", 0) == ["0"]
    assert seconds_step(20) == 20 and bytes_step(1000) == 1024 and bytes_step(300) == 500


def test_the_time_axis_has_round_times_with_their_dates() -> None:
    days = TimeScale.around([T0, T0 + timedelta(days=6)])
    assert [t.label for t in time_ticks(days)] == [f"2024-01-{d:02d}" for d in range(1, 8)]
    hours = time_ticks(TimeScale.around([T0, T0 + timedelta(hours=30)]))
    assert [t.label for t in hours] == [f"{h:02d}:00" for h in (3, 6, 9, 12, 15, 18, 21, 0, 3, 6)]
    # A date under the first label and wherever the day changes.
    dates = {i: t.date for i, t in enumerate(hours) if t.date}
    assert dates == {0: "2024-01-01", 7: "2024-01-02"}
    burst = time_ticks(TimeScale.around([T0, T0 + timedelta(milliseconds=300)]))
    assert [t.label for t in burst] == ["00:59:59", "01:00:00", "01:00:01", "01:00:02"]
    xs = [t.at for t in hours]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)


def entry(job: str, at: datetime, **changes: object) -> HistoryEntry:
    plain = HistoryEntry(
        job_id=job,
        state=states.COMMITTED,
        created=at,
        updated=at,
        at=at,
        committed_at=at,
        aborted_at=None,
        seconds=0.1,
        files=1,
        rows=10,
        bytes=100,
        partitions=1,
        first_partitions=("dt=2024-01-01",),
        replaced_files=0,
        requests=9,
        mode="replace",
        committer="magic",
        reason="",
        rolled_back=False,
        stuck=False,
    )
    return replace(plain, **changes)  # type: ignore[arg-type]


def test_jobs_stand_where_they_ended_in_time() -> None:
    """Three days apart and then an hour: spaced as time, not as slots."""
    entries = [
        entry("a", T0),
        entry("b", T0 + timedelta(days=3)),
        entry("c", T0 + timedelta(days=3, hours=1)),
        entry("d", T0 + timedelta(days=4), state=states.ABORTED, files=None, rows=None),
    ]
    chart = history_chart(entries, run_seconds={"a": 60.0, "b": 90.0, "c": 75.0})
    assert chart is not None
    runs, *_ = chart.panels
    assert [p.job_id for p in runs.points] == ["a", "b", "c"]
    a, b, c = (p.x for p in runs.points)
    assert (b - a) / (c - b) == pytest.approx(72, rel=0.01)
    assert [m.job_id for m in chart.marks] == ["d"]
    assert runs.median_label == "median 1m 15s"
    assert "run seconds, setup to commit: median 1m 15s, latest 1m 15s" in chart.description

"""All command output: tables and lines for people, one JSON document for scripts.

A command returns a :class:`Result`: ``data`` is what ``--json`` prints,
``render`` draws the same data for a terminal. Lines a command prints while it
works (``say``) appear only for people. Errors go to stderr as one line. Text
from S3 (keys, partition values) is never read as rich markup: ``[x]`` in a
key stays ``[x]``.

Progress of long work (``progress``, ``steps``, ``status``) is drawn on stderr
for a terminal only, once the work has lasted PROGRESS_DELAY, and erased when it
ends; never on stdout, so it cannot change what a command prints there.

Every line for people passes through :func:`terminal_safe`: a job record, a key
or ``_SUCCESS`` is anyone's text, and an escape sequence in it (ESC[31m, an
OSC 8 hyperlink, a bidi override) would act on the terminal instead of being
read. ``--json`` prints text exactly; JSON escapes what a terminal would act on.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel
from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column, Table
from rich.text import Text

from zero_rename.cli.exits import ExitCode
from zero_rename.core import SHORT_JOB_ID, ignore_progress, no_steps, redact
from zero_rename.core import Advance as Advance  # re-exported for the commands
from zero_rename.core import Steps as Steps
from zero_rename.formatting import human_bytes as human_bytes  # re-exported for the commands
from zero_rename.formatting import human_count

# What a terminal acts on rather than shows: C0 and C1 controls, ESC and DEL
# among them; bidi embeddings, overrides, isolates and marks, which reorder the
# text around them; lone surrogates (bytes that were not UTF-8), which no
# UTF-8 terminal can be sent.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)

# Progress appears once work has lasted this long: a command that is over
# sooner shows none, so nothing flickers; and what appeared is erased at the end.
PROGRESS_DELAY = 1.0
# Tables of this many rows are laid out under a spinner.
PROGRESS_TABLE_ROWS = 2000
# ZERO_RENAME_PROGRESS: one of these turns progress off, or on as if stderr
# were a terminal (a terminal not detected as one; tests); unset: auto.
PROGRESS_ENV = "ZERO_RENAME_PROGRESS"
_NEVER = {"0", "off", "no", "never", "false"}
_ALWAYS = {"1", "on", "yes", "always", "true"}
# Without a terminal, lines are not wrapped to 80 columns: keys and job ids
# must stay whole for grep and cut.
PIPE_WIDTH = 250


@dataclass
class Result:
    """What a command produced; ``data`` must be JSON-serializable (see :func:`to_json`)."""

    data: Any
    render: Callable[[Output], None] | None = None
    code: ExitCode = ExitCode.OK


class Output:
    """Where every command writes; ``json_mode`` silences everything but the JSON document."""

    _display: _Display | None

    def __init__(
        self,
        json_mode: bool = False,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        progress: bool | None = None,
    ) -> None:
        """``progress``: draw progress on ``stderr`` (True: as on a terminal, whatever
        it is), or not; default: :func:`draws_progress`."""
        self.json_mode = json_mode
        out = stdout or sys.stdout
        err = stderr or sys.stderr
        self.console = Console(
            file=out, highlight=False, emoji=False, width=None if out.isatty() else PIPE_WIDTH
        )
        drawn = draws_progress(err) if progress is None else progress
        self.err = Console(
            file=err,
            highlight=False,
            emoji=False,
            soft_wrap=True,
            force_terminal=True if drawn and not json_mode else None,
        )
        # Progress is for people watching a terminal: never with --json, never on
        # a pipe or a file, where it would be noise in a log.
        self._display = _Display(self.err) if drawn and not json_mode else None

    # -- for people --------------------------------------------------------
    def say(self, text: str = "", style: str | None = None) -> None:
        if not self.json_mode:
            self.console.print(Text(terminal_safe(text), style=style or ""))

    def heading(self, text: str) -> None:
        self.say(text, style="bold")

    def fields(self, pairs: Iterable[tuple[str, Any]]) -> None:
        """Aligned ``name  value`` lines."""
        if self.json_mode:
            return
        items = [(name, plain(value)) for name, value in pairs]
        width = max((len(name) for name, _ in items), default=0)
        for name, value in items:
            line = Text(name.ljust(width + 2), style="bold")
            line.append(value)
            self.console.print(line)

    def table(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        title: str | None = None,
        right: Sequence[str] = (),
        whole: Sequence[str] = (),
    ) -> None:
        """A table; columns named in ``right`` are right-aligned (numbers), those in
        ``whole`` never wrapped (ids to copy): the others give way on a narrow terminal."""
        if self.json_mode:
            return
        table = Table(
            title=title,
            title_justify="left",
            header_style="bold",
            show_edge=False,
            pad_edge=False,
            box=None,
        )
        for column in columns:
            table.add_column(
                column,
                justify="right" if column in right else "left",
                overflow="fold",
                no_wrap=column in whole,
            )
        for row in rows:
            table.add_row(*(Text(plain(cell)) for cell in row))
        if self._display is None or table.row_count < PROGRESS_TABLE_ROWS:
            self.console.print(table)
            return
        # Laying out many thousands of rows takes seconds (10,000: about 3 s) before
        # the first is written: laid out under a spinner, then written once it is gone,
        # so that stdout and the display never share the screen.
        with self.status(f"laying out {table.row_count:,} rows"), self.console.capture() as laid:
            self.console.print(table)
        self.console.file.write(laid.get())
        self.console.file.flush()

    @contextmanager
    def progress(
        self, description: str, total: int | None = None, unit: str = ""
    ) -> Iterator[Advance]:
        """Progress of long work on stderr: a bar with count, rate and time left when
        ``total`` is known, else a spinner counting the ``unit`` seen so far (no
        ``unit``: no count). Yields ``advance(n)``, which any thread may call."""
        if self._display is None or total == 0:
            yield ignore_progress
            return
        with self._display.task(description, total, unit) as advance:
            yield advance

    @contextmanager
    def steps(self, description: str) -> Iterator[Steps]:
        """Work in named steps: yields ``step(name, total=None, unit="")``, which shows
        ``description: name`` in place of the step before (a bar when ``total`` is
        known, else a spinner counting ``unit``) and returns its ``advance(n)``."""
        if self._display is None:
            yield no_steps
            return
        with self._display.steps(description) as step:
            yield step

    @contextmanager
    def status(self, description: str) -> Iterator[None]:
        """A spinner on stderr while work of unknown length runs."""
        with self.progress(description):
            yield

    # -- for everyone ------------------------------------------------------
    def error(self, message: str) -> None:
        self.err.print(Text(f"error: {stderr_safe(message)}", style="red"))

    def warning(self, message: str) -> None:
        self.err.print(Text(f"warning: {stderr_safe(message)}", style="yellow"))

    def emit_json(self, data: Any) -> None:
        self.console.file.write(json.dumps(to_json(data), indent=2) + "\n")
        self.console.file.flush()

    def emit(self, result: Result) -> None:
        if self.json_mode:
            if result.data is not None:
                self.emit_json(result.data)
        elif result.render is not None:
            result.render(self)


def draws_progress(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Whether progress is drawn on ``stream``: only a terminal that can draw it (not
    TERM=dumb), and not where NO_COLOR asks for plain output; ZERO_RENAME_PROGRESS
    overrides (0: never, 1: always)."""
    env = os.environ if environ is None else environ
    setting = env.get(PROGRESS_ENV, "").strip().lower()
    if setting in _NEVER or setting in _ALWAYS:
        return setting in _ALWAYS
    if env.get("NO_COLOR") or env.get("TERM", "") in ("dumb", "unknown"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class _Display:
    """The command's progress display on stderr (rich): shown only once work has
    lasted PROGRESS_DELAY (then at once for later work of the same command),
    erased when the work ends. Its tasks are the ``progress`` and ``steps`` open."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            SpinnerColumn(),
            _Description(table_column=Column(no_wrap=True, overflow="ellipsis")),
            _Bar(),
            _Count(),
            _Rate(),
            _Time(),
            console=console,
            transient=True,
            # stdout is the command's output: nothing may be moved off it.
            redirect_stdout=False,
        )
        self._lock = threading.Lock()
        self._open = 0
        self._timer: threading.Timer | None = None
        self._shown = False
        self._seen = False

    @contextmanager
    def task(self, description: str, total: int | None, unit: str) -> Iterator[Advance]:
        task = self.progress.add_task(description, total=total, unit=unit)
        self._opened()
        try:
            yield self._advance(task)
        finally:
            self._finished(task)

    @contextmanager
    def steps(self, description: str) -> Iterator[Steps]:
        current = [self.progress.add_task(description, total=None, unit="")]

        def step(name: str, total: int | None = None, unit: str = "") -> Advance:
            # Each step drawn as it ended and as the next begins (when drawn at all).
            self.progress.refresh()
            self.progress.remove_task(current[0])
            current[0] = self.progress.add_task(f"{description}: {name}", total=total, unit=unit)
            self.progress.refresh()
            return self._advance(current[0])

        self._opened()
        try:
            yield step
        finally:
            self._finished(current[0])

    def _finished(self, task: TaskID) -> None:
        # Drawn once more as it ended (when drawn at all), then gone.
        self.progress.refresh()
        self.progress.remove_task(task)
        self._closed()

    def _advance(self, task: TaskID) -> Advance:
        def advance(count: int = 1) -> None:
            # A count that comes after its step ended is dropped, never an error.
            with suppress(KeyError):
                self.progress.advance(task, count)

        return advance

    def _opened(self) -> None:
        with self._lock:
            self._open += 1
            if self._open > 1:
                return
            if self._seen or PROGRESS_DELAY <= 0:
                self._show()
            else:
                self._timer = threading.Timer(PROGRESS_DELAY, self._show_later)
                self._timer.daemon = True
                self._timer.start()

    def _show_later(self) -> None:
        with self._lock:
            if self._open and not self._shown:
                self._show()

    def _show(self) -> None:
        self.progress.start()
        self._shown = self._seen = True

    def _closed(self) -> None:
        with self._lock:
            self._open -= 1
            if self._open:
                return
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._shown:
                self.progress.stop()
                self._shown = False


class _Description(ProgressColumn):
    """The task's description as text: a key or a URL in it is never rich markup.
    One line: on a narrow terminal it is cut short rather than wrapped."""

    def render(self, task: Task) -> Text:
        return Text(terminal_safe(task.description))


class _Bar(ProgressColumn):
    """A bar where the total is known; nothing otherwise (the spinner turns)."""

    def __init__(self) -> None:
        super().__init__()
        self._bar = BarColumn(bar_width=20)

    def render(self, task: Task) -> RenderableType:
        return self._bar.render(task) if task.total is not None else Text("")


class _Count(ProgressColumn):
    """``1,234/5,000 files``; where the total is unknown, ``1,234 files`` seen so far."""

    def render(self, task: Task) -> Text:
        unit = task.fields.get("unit", "")
        if task.total is None and not unit:
            return Text("")
        done = f"{int(task.completed):,}"
        if task.total is not None:
            done += f"/{int(task.total):,}"
        return Text(f"{done} {unit}".rstrip(), style="progress.download")


class _Rate(ProgressColumn):
    """Items a second, once there is a rate to tell."""

    def render(self, task: Task) -> Text:
        counted = task.total is not None or task.fields.get("unit")
        speed = task.speed
        if not counted or not speed:
            return Text("")
        rate = f"{speed:.1f}" if speed < 10 else f"{speed:,.0f}"
        return Text(f"{rate}/s", style="progress.data.speed")


class _Time(ProgressColumn):
    """The estimated time left where the total is known, else the time so far."""

    def __init__(self) -> None:
        super().__init__()
        self._left = TimeRemainingColumn()
        self._elapsed = TimeElapsedColumn()

    def render(self, task: Task) -> Text:
        if task.total is None:
            return self._elapsed.render(task)
        return Text("ETA ", style="progress.remaining") + self._left.render(task)


def to_json(value: Any) -> Any:
    """Plain JSON values: models by their field names, datetimes as ISO 8601 UTC."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json(v) for v in value]
    return value


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def plain(value: Any) -> str:
    """A cell or field as text, safe for a terminal: times in UTC, None as '-'."""
    if value is None or value == "":
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return human_count(value)
    return terminal_safe(str(value))


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal would act on shown as its escape
    (``\\x1b``, ``\\u202e``): a stored reason holding ESC[31m prints as text."""
    return _UNSAFE.sub(_escaped, text)


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def stderr_safe(message: str) -> str:
    """An error or warning line: one line, no credential, safe for a terminal."""
    first = message.splitlines()[0] if message.strip() else message
    return terminal_safe(redact(first))


def short_ids(ids: Iterable[str], least: int = SHORT_JOB_ID) -> dict[str, str]:
    """Each id by its shortest prefix of at least ``least`` characters that no other
    of ``ids`` starts with (as git shortens commits): what a table shows, and what
    every command taking a job id accepts."""
    every = sorted(set(ids))
    shortest: dict[str, str] = {}
    for i, job in enumerate(every):
        neighbours = every[max(0, i - 1) : i] + every[i + 1 : i + 2]
        common = max((_common_prefix(job, n) for n in neighbours), default=0)
        shortest[job] = job[: max(least, common + 1)]
    return shortest


def _common_prefix(a: str, b: str) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def shown(items: Sequence[str], limit: int = 10) -> str:
    """The first ``limit`` items and how many more."""
    if not items:
        return "-"
    text = ", ".join(items[:limit])
    return text + (f" (and {len(items) - limit} more)" if len(items) > limit else "")

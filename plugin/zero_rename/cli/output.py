"""All command output: tables and lines for people, one JSON document for scripts.

A command returns a :class:`Result`: ``data`` is what ``--json`` prints,
``render`` draws the same data for a terminal. Lines a command prints while it
works (``say``) and progress bars appear only for people. Errors go to stderr
as one line. Text from S3 (keys, partition values) is never read as rich
markup: ``[x]`` in a key stays ``[x]``.

Every line for people passes through :func:`terminal_safe`: a job record, a key
or ``_SUCCESS`` is anyone's text, and an escape sequence in it (ESC[31m, an
OSC 8 hyperlink, a bidi override) would act on the terminal instead of being
read. ``--json`` prints text exactly; JSON escapes what a terminal would act on.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from zero_rename.cli.exits import ExitCode
from zero_rename.core.s3.redact import redact
from zero_rename.formatting import human_bytes as human_bytes  # re-exported for the commands

# What a terminal acts on rather than shows: C0 and C1 controls, ESC and DEL
# among them; bidi embeddings, overrides, isolates and marks, which reorder the
# text around them; lone surrogates (bytes that were not UTF-8), which no
# UTF-8 terminal can be sent.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)

# Below this many items the work is over before a bar could say anything.
PROGRESS_MIN_ITEMS = 20
# Without a terminal, lines are not wrapped to 80 columns: keys and job ids
# must stay whole for grep and cut.
PIPE_WIDTH = 250

Advance = Callable[[int], None]


@dataclass
class Result:
    """What a command produced; ``data`` must be JSON-serializable (see :func:`to_json`)."""

    data: Any
    render: Callable[[Output], None] | None = None
    code: ExitCode = ExitCode.OK


class Output:
    """Where every command writes; ``json_mode`` silences everything but the JSON document."""

    def __init__(
        self, json_mode: bool = False, stdout: TextIO | None = None, stderr: TextIO | None = None
    ) -> None:
        self.json_mode = json_mode
        out = stdout or sys.stdout
        err = stderr or sys.stderr
        self.console = Console(
            file=out, highlight=False, emoji=False, width=None if out.isatty() else PIPE_WIDTH
        )
        self.err = Console(file=err, highlight=False, emoji=False, soft_wrap=True)

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
    ) -> None:
        """A table; columns named in ``right`` are right-aligned (numbers)."""
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
                column, justify="right" if column in right else "left", overflow="fold"
            )
        for row in rows:
            table.add_row(*(Text(plain(cell)) for cell in row))
        self.console.print(table)

    @contextmanager
    def progress(self, description: str, total: int) -> Iterator[Advance]:
        """A progress bar on stderr, only for people at a terminal and for long work.

        Yields ``advance(n)``; call it from the thread that owns the loop.
        """
        if self.json_mode or not self.err.is_terminal or total < PROGRESS_MIN_ITEMS:
            yield _ignore
            return
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.err,
            transient=True,
        ) as bar:
            task = bar.add_task(description, total=total)

            def advance(count: int = 1) -> None:
                bar.advance(task, count)

            yield advance

    @contextmanager
    def status(self, description: str) -> Iterator[None]:
        """One line on stderr while work of unknown length runs (a spinner), only for
        people at a terminal; gone when it ends."""
        if self.json_mode or not self.err.is_terminal:
            yield
            return
        with self.err.status(Text(terminal_safe(description))):
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


def _ignore(count: int = 1) -> None:
    pass


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
        return f"{value:,}"
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


def shown(items: Sequence[str], limit: int = 10) -> str:
    """The first ``limit`` items and how many more."""
    if not items:
        return "-"
    text = ", ".join(items[:limit])
    return text + (f" (and {len(items) - limit} more)" if len(items) > limit else "")

"""Progress of long work, for whoever shows it (the command line draws it on a
terminal); the work itself never waits for it or depends on it.

``advance(n)``: n more items done. ``steps(name, total=None, unit="")``: a named
step begins, ``total`` items of ``unit`` (None: not known before), and its
``advance`` is returned. Both may be called from any thread.
"""

from __future__ import annotations

from collections.abc import Callable

Advance = Callable[[int], None]
Steps = Callable[..., Advance]


def ignore(count: int = 1) -> None:
    """Progress nobody watches."""


def no_steps(name: str, total: int | None = None, unit: str = "") -> Advance:
    return ignore

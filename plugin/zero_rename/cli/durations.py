"""Durations on the command line (``90m``, ``24h``, ``7d``, ``1d12h``) and in output."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta

from zero_rename.formatting import human_duration

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_TOKEN = re.compile(r"(\d+)([smhdw])")
_WHOLE = re.compile(r"(?:\d+[smhdw])+")
# The longest duration a datetime can be compared against (Python's timedelta
# holds up to 999,999,999 days); anything longer means "never" and is a typo.
MAX_DURATION = timedelta(days=999_999_999)


def parse_duration(text: str) -> timedelta:
    """``24h`` -> 24 hours. Units: s, m, h, d, w; several may follow each other (``1h30m``).

    Raises:
        ValueError: naming the text and the accepted form.
    """
    cleaned = text.strip().lower()
    if len(cleaned) > 64 or not _WHOLE.fullmatch(cleaned):
        raise ValueError(
            f"invalid duration {text[:80]!r}: use a number and a unit "
            "(s, m, h, d, w), e.g. 90m, 24h, 7d or 1d12h"
        )
    seconds = sum(int(n) * _UNITS[u] for n, u in _TOKEN.findall(cleaned))
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"duration {text!r} is longer than {MAX_DURATION.days:,} days")
    return timedelta(seconds=seconds)


def duration_arg(text: str) -> timedelta:
    """argparse ``type=`` for durations: a bad value is a usage error (exit code 2)."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def format_span(seconds: float | None) -> str:
    """A threshold the way it is typed: ``24h``, ``90m``, ``1d12h``, ``0s``."""
    if seconds is None:
        return "-"
    whole, parts = int(seconds), []
    for unit in ("w", "d", "h", "m", "s"):
        count, whole = divmod(whole, _UNITS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def format_duration(seconds: float | None) -> str:
    """Short human form: ``0.42s``, ``12.3s``, ``4m 10s``, ``3h 5m``, ``2d 4h``
    (:func:`zero_rename.formatting.human_duration`, which the Commits page uses too)."""
    return human_duration(seconds)

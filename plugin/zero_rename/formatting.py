"""Text for people: shared by the command line and the Commits page.

One format for each kind of number, wherever it is shown: counts with
thousands separators (``50,000``), sizes in binary units (``1.5 KiB``),
durations short (``0.42s``, ``12.3s``, ``4m 10s``). The page's chart labels
its axes with these too.
"""

from __future__ import annotations


def human_count(count: float | None, missing: str = "-") -> str:
    """``50000`` -> ``50,000``; a fraction is rounded to a whole number (a median).
    ``missing`` stands for an unknown count."""
    if count is None:
        return missing
    return f"{round(count):,}"


def human_bytes(count: int | None, missing: str = "-") -> str:
    """``1536`` -> ``1.5 KiB``; ``missing`` stands for an unknown size."""
    if count is None:
        return missing
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def human_duration(seconds: float | None, missing: str = "-") -> str:
    """Short: ``0.42s``, ``12.3s``, ``4m 10s``, ``3h 5m``, ``2d 4h``."""
    if seconds is None:
        return missing
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    for unit, size, sub_unit, sub_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "m", 60),
        ("m", 60, "s", 1),
    ):
        if whole >= size:
            return f"{whole // size}{unit} {(whole % size) // sub_size}{sub_unit}"
    return f"{whole}s"

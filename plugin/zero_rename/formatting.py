"""Text for people: shared by the command line and the Commits page."""

from __future__ import annotations


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

"""zero-rename: an output committer for S3 that publishes by completing multipart uploads."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# Readers of committed output, from zero_rename.read; imported on first use so
# that ``import zero_rename`` stays light for the committer's workers.
_READERS = ("read_table", "read_dataset")


def __getattr__(name: str) -> Any:
    if name in _READERS:
        from zero_rename import read

        return getattr(read, name)
    raise AttributeError(f"module 'zero_rename' has no attribute {name!r}")

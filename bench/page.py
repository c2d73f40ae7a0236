"""The benchmarks page, ``docs/benchmarks.md``: one ``## `` section per benchmark.

Each benchmark rewrites only its own section, so the others' numbers stay as
they were measured; and every section names the machine the same way.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

TITLE = "# Benchmarks"


def replace_section(text: str, header: str, body: str) -> str:
    """``text`` with the ``header`` section replaced by ``body``, or appended.

    Only the lines from the header to the next ``## `` header change, so every
    other section of the page stays as it is.
    """
    if not text.strip():
        return f"{TITLE}\n\n{body.rstrip()}\n"
    lines = text.splitlines()
    if header not in lines:
        return text.rstrip("\n") + "\n\n" + body.rstrip() + "\n"
    start, end = _bounds(lines, header)
    tail = lines[end:]
    new = lines[:start] + body.rstrip().splitlines() + ([""] + tail if tail else [])
    return "\n".join(new) + "\n"


def write_section(
    path: str | Path, header: str, body: str, generated: tuple[str, ...] | None = None
) -> None:
    """Rewrite the ``header`` section of the page at ``path`` (created if missing).

    ``generated``: the headings (or how they begin) of the ``### `` subsections
    the benchmark writes. Every other subsection of the section as it stands is
    carried over after ``body``, in its order: measurements written by hand (a
    before-and-after study, earlier runs) outlive the benchmark's next run.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    current = target.read_text() if target.exists() else ""
    kept = hand_written(current, header, generated) if generated is not None else ""
    if kept:
        body = body.rstrip() + "\n\n" + kept
    target.write_text(replace_section(current, header, body))


def hand_written(text: str, header: str, generated: tuple[str, ...]) -> str:
    """The ``### `` subsections of the ``header`` section of ``text`` whose headings
    do not begin as one of ``generated`` does, in their order."""
    lines = text.splitlines()
    if header not in lines:
        return ""
    own = lines[slice(*_bounds(lines, header))]
    heads = [i for i, line in enumerate(own) if line.startswith("### ")] + [len(own)]
    kept = [
        "\n".join(own[first:last]).rstrip()
        for first, last in zip(heads, heads[1:], strict=False)
        if not own[first].startswith(generated)
    ]
    return "\n\n".join(kept)


def _bounds(lines: list[str], header: str) -> tuple[int, int]:
    """Where the ``header`` section is in ``lines``: its header's index, and the next
    ``## `` header's (or the end)."""
    start = lines.index(header)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return start, end


def seaweedfs_version() -> str:
    """The release of the SeaweedFS binary the embedded server runs."""
    from zero_rename.embedded_s3 import find_weed

    try:
        out = subprocess.run(
            [find_weed(), "version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "(version unknown)"
    # "version 8000GB 4.48 pypi linux amd64": the release is the dotted word.
    return next((w for w in out.split() if w[:1].isdigit() and "." in w), "(version unknown)")


def load_note(load: tuple[float, float]) -> str:
    """The load average at the start and end of a run, and a warning when the
    machine was busy with other work: times then say less than request counts."""
    cores = os.cpu_count() or 1
    shared = (
        " The machine was busy when the run started (a load above half its cores; the "
        "1-minute average still counts the last minute's work), so times may be slower "
        "and noisier than an idle machine's; request counts are not affected."
        if load[0] > cores / 2
        else ""
    )
    return (
        f"Load average (1 minute) {load[0]:.1f} at the start and {load[1]:.1f} at the end.{shared}"
    )

"""The peers' chart: each workload's wall time per method as an SVG of its own.

One panel per workload; in each, a bar per method at its median wall time,
split into the write's phases (setup, the tasks, commit: see
:mod:`bench.peers.eventlog`), with a line over the range of its rounds. A
method that did not run the workload says why in place of its bar. Plain SVG
written here, no plotting library: the page needs no script and no network.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

WIDTH = 860
LABEL = 230  # room for the methods' names
RIGHT = 70  # room for the value after the longest bar
ROW = 18
TITLE = 34
AXIS = 24
GAP = 18
PHASES = (("setup", "#9ecae1"), ("tasks", "#4292c6"), ("commit", "#08306b"))
TICKS = 5


@dataclass(frozen=True)
class Bar:
    label: str
    median: float = 0.0
    low: float = 0.0
    high: float = 0.0
    phases: tuple[float, ...] = ()  # seconds of each of PHASES, medians
    note: str = ""  # in place of the bar: "not supported", "failed"
    ours: bool = False


@dataclass(frozen=True)
class Panel:
    title: str
    bars: tuple[Bar, ...]


def nice_top(value: float) -> float:
    """The axis's end: 1, 2 or 5 times a power of ten, at or above ``value``."""
    if value <= 0:
        return 1.0
    power = 10.0 ** len(str(int(value))) / 10
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def _text(x: float, y: float, text: str, anchor: str = "start", **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def _panel(panel: Panel, top: float) -> list[str]:
    plot = WIDTH - LABEL - RIGHT
    end = nice_top(max([b.high for b in panel.bars] + [b.median for b in panel.bars]))
    scale = plot / end
    out = [_text(8, top + 20, panel.title, font_weight="bold", font_size="14")]
    y0 = top + TITLE
    bottom = y0 + ROW * len(panel.bars)
    for i in range(TICKS + 1):
        x = LABEL + plot * i / TICKS
        out.append(f'<line x1="{x:.1f}" y1="{y0 - 4}" x2="{x:.1f}" y2="{bottom}" stroke="#ddd"/>')
        out.append(_text(x, bottom + 14, f"{end * i / TICKS:g} s", "middle", fill="#555"))
    for row, bar in enumerate(panel.bars):
        y = y0 + ROW * row
        weight = {"font_weight": "bold"} if bar.ours else {}
        out.append(_text(LABEL - 8, y + 12, bar.label, "end", **weight))
        if bar.note:
            out.append(_text(LABEL + 4, y + 12, bar.note, fill="#888", font_style="italic"))
            continue
        x = float(LABEL)
        for seconds, (name, colour) in zip(bar.phases, PHASES, strict=False):
            width = seconds * scale
            if width > 0:
                out.append(
                    f'<rect x="{x:.1f}" y="{y + 3}" width="{width:.1f}" height="{ROW - 6}" '
                    f'fill="{colour}"><title>{escape(name)}: {seconds:.2f} s</title></rect>'
                )
            x += width
        if not bar.phases:
            out.append(
                f'<rect x="{LABEL}" y="{y + 3}" width="{bar.median * scale:.1f}" '
                f'height="{ROW - 6}" fill="#bbb"/>'
            )
        if bar.high > bar.low:
            yl = y + ROW / 2
            out.append(
                f'<line x1="{LABEL + bar.low * scale:.1f}" y1="{yl}" '
                f'x2="{LABEL + bar.high * scale:.1f}" y2="{yl}" stroke="#d62728"/>'
            )
        out.append(
            _text(LABEL + max(bar.median, bar.high) * scale + 4, y + 12, f"{bar.median:.1f}")
        )
    return out


def height_of(panel: Panel) -> int:
    return TITLE + ROW * len(panel.bars) + AXIS + GAP


def legend(top: float) -> list[str]:
    out, x = [], float(LABEL)
    for name, colour in PHASES:
        out.append(f'<rect x="{x:.1f}" y="{top}" width="12" height="12" fill="{colour}"/>')
        out.append(_text(x + 16, top + 10, name))
        x += 90
    out.append(
        f'<line x1="{x:.1f}" y1="{top + 6}" x2="{x + 20:.1f}" y2="{top + 6}" stroke="#d62728"/>'
    )
    out.append(_text(x + 26, top + 10, "range over rounds; figures: medians (s)"))
    return out


def svg(panels: Sequence[Panel], title: str, description: str) -> str:
    """The whole chart: ``title`` on top, one panel per workload, a legend."""
    height = 40 + sum(height_of(p) for p in panels) + 24
    body = [_text(8, 22, title, font_weight="bold", font_size="16")]
    top = 40.0
    for panel in panels:
        body += _panel(panel, top)
        top += height_of(panel)
    body += legend(top)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12" '
        f'role="img" aria-label="{escape(title, {chr(34): "&quot;"})}">\n'
        f"<title>{escape(title)}</title>\n<desc>{escape(description)}</desc>\n"
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n"
    )

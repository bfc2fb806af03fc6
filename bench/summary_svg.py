"""The summary's plot as a small SVG (no plotting library: matplotlib is the peers extra's):
one panel per plotted scenario, a horizontal bar per system measured in it, the figure as
the summary table prints it beside the bar. The same data always gives the same bytes, so a
test can compare the committed plot with the data file."""

from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape

WIDTH = 760
LABEL_W = 170
BAR_W = 380
ROW_H = 22
TITLE_H = 26
GAP = 14
KADENCE = "Kadence"
COLOURS = {True: "#1f6fb2", False: "#9aa5b1"}


@dataclass(frozen=True)
class Bar:
    system: str
    value: float
    figure: str


@dataclass(frozen=True)
class Panel:
    title: str
    log: bool
    better: str
    bars: list[Bar]


def _length(panel: Panel, value: float) -> float:
    """The bar's length: on a log scale from the decade below the smallest value."""
    values = [b.value for b in panel.bars]
    if not panel.log:
        return BAR_W * value / max(values)
    low = math.floor(math.log10(min(values))) - 1
    high = math.log10(max(values))
    return BAR_W * (math.log10(value) - low) / (high - low)


def _text(x: float, y: float, text: str, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:.0f}" y="{y:.0f}"{extra}>{escape(text)}</text>'


def render_svg(panels: list[Panel]) -> str:
    parts: list[str] = []
    y = 10
    for panel in panels:
        scale = "log scale" if panel.log else "linear scale"
        title = f"{panel.title} ({scale}, {panel.better} is better)"
        parts.append(_text(10, y + 18, title, font_weight="bold"))
        y += TITLE_H
        for bar in panel.bars:
            length = max(2.0, _length(panel, bar.value))
            colour = COLOURS[bar.system == KADENCE]
            parts.append(_text(LABEL_W - 8, y + 15, bar.system, text_anchor="end"))
            parts.append(
                f'<rect x="{LABEL_W}" y="{y + 3}" width="{length:.1f}" height="{ROW_H - 6}" '
                f'fill="{colour}"/>'
            )
            parts.append(_text(LABEL_W + length + 6, y + 15, bar.figure))
            y += ROW_H
        y += GAP
    parts.append(
        _text(
            10,
            y + 12,
            "From bench/summary.json. Some figures come from different machines: "
            "docs/benchmarks.md gives each one's command, date and CPU.",
            font_size="11",
            fill="#555",
        )
    )
    height = y + 24
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="13">'
    )
    background = f'<rect width="{WIDTH}" height="{height}" fill="white"/>'
    return "\n".join([head, background, *parts, "</svg>"]) + "\n"

"""Strips: the measured values of a quoted statistic drawn against the quote, the quote's tolerance and
the rerun band, on one axis that holds them all, as a small inline SVG with its legend below it.

An axis that spans only the measured values makes a spread of 0.08 fill the strip and look like a miss;
here the axis always holds the accepted intervals too, so a value inside its tolerance is seen inside it.
The page (report/page.py) says what each strip is of; this module only draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

Interval = tuple[float | None, float | None]
"""An accepted interval (low, high); None for an unbounded end (a one-sided bound)."""

WIDTH = 360  # the viewBox's width: the SVG scales to its box, down to a phone's width
FONT = 12
DOT = 4.5  # a measured value's radius
RING = 7.5  # the judged value's ring
GAP = 2 * DOT + 1  # two dots closer than this on one level are stacked
STACK = 7  # the vertical step between stacked dots (they overlap a little, each still seen)
COLORS = {"value": "#1565c0", "quote": "#c62828", "judged": "#111", "tolerance": "#43a047", "band": "#ffcc80"}


@dataclass(frozen=True)
class Row:
    """One row of a strip: a model's measured values (a line of dots per seed, or one line for all its
    trajectories or members), the quoted value, the judged value, and the intervals around the quote."""

    name: str
    lines: list[list[float]]
    quoted: float | None = None
    judged: float | None = None
    tolerance: Interval | None = None
    band: Interval | None = None


@dataclass(frozen=True)
class Words:
    """What each mark of a strip stands for, as its legend and tooltips say it."""

    value: str = "a trajectory"
    judged: str = "these bundles"
    quote: str = "quoted"
    tolerance: str = "the quote's tolerance"
    band: str = "rerun band"


def _number(value: object) -> float | None:
    """A finite real number, else None (booleans and comparisons' True are no points on an axis)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def interval(value: object) -> Interval | None:
    """report.json's [low, high] (null for an unbounded end) as an Interval; None when absent or malformed."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    lo, hi = (None if v is None else _number(v) for v in value)
    if (lo is None and value[0] is not None) or (hi is None and value[1] is not None) or lo is hi is None:
        return None
    return lo, hi


def _points(rows: list[Row]) -> list[float]:
    """Every finite number a strip of `rows` must show."""
    marks = [v for r in rows for line in r.lines for v in line] + [x for r in rows for x in (r.quoted, r.judged)]
    ends = [e for r in rows for i in (r.tolerance, r.band) if i for e in i]
    return [p for p in map(_number, marks + ends) if p is not None]


def _nice(step: float) -> float:
    """The smallest of 1, 2 or 5 times a power of ten that is at least `step`."""
    power = 10.0 ** math.floor(math.log10(step))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= step * (1 - 1e-9))


def axis(rows: list[Row]) -> tuple[float, float, float] | None:
    """The axis (low, high, tick step) that holds every value, quote, judged value and finite interval end
    of `rows`, with a margin, both ends on ticks; None when there is no finite number to draw."""
    points = _points(rows)
    if not points:
        return None
    lo, hi = min(points), max(points)
    tiny = hi - lo <= 1e-9 * max(abs(lo), abs(hi))  # one value, or values apart by round-off only
    span = (abs(hi) * 0.1 or 1.0) if tiny else hi - lo
    a, b = lo - 0.06 * span, hi + 0.06 * span
    if lo >= 0 > a:  # counts and shares stay on their side of 0
        a = 0.0
    elif hi <= 0 < b:
        b = 0.0
    step = _nice((b - a) / 4)
    return math.floor(a / step + 1e-9) * step, math.ceil(b / step - 1e-9) * step, step


def ticks(lo: float, hi: float, step: float) -> list[tuple[float, str]]:
    """The axis's ticks from `lo` to `hi`, each with its label, as many decimals as the step needs."""
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    out = []
    for i in range(min(round((hi - lo) / step), 12) + 1):
        v = lo + i * step
        v = 0.0 if abs(v) < step * 1e-6 else v
        out.append((v, f"{v:.3g}" if decimals > 6 or abs(v) >= 1e7 else f"{v:,.{decimals}f}"))
    return out


def levels(xs: list[float], most: int = 4) -> list[int]:
    """A vertical level per dot at `xs` (pixels): 0, then 1, -1, 2, -2 ... so that no two dots on one level
    are closer than GAP; beyond `most` levels each side a dot goes back to level 0 (a crowd of equal values)."""
    order = [0, *(s * k for k in range(1, most + 1) for s in (1, -1))]
    placed: dict[int, list[float]] = {}
    out = []
    for x in xs:
        level = next((lv for lv in order if all(abs(x - p) >= GAP for p in placed.get(lv, []))), 0)
        placed.setdefault(level, []).append(x)
        out.append(level)
    return out


def _text_width(text: str) -> float:
    return len(text) * FONT * 0.6


def _ends(i: Interval) -> str:
    lo, hi = i
    if lo is None:
        return f"at most {hi:.4g}"
    return f"at least {lo:.4g}" if hi is None else f"{lo:.4g} to {hi:.4g}"


def svg(rows: list[Row], words: Words = Words()) -> str:
    """The strip of `rows` as an inline SVG (empty when there is nothing to draw): per row its tolerance and
    rerun band as shaded bars (an unbounded end drawn to the axis's edge), a solid dot per value, the quote
    as a red bar and the judged value as a ring; below, the axis with its ticks, both ends labelled."""
    scale = axis(rows)
    if scale is None:
        return ""
    lo, hi, step = scale
    marks = ticks(lo, hi, step)
    half = max(_text_width(t) for _, t in marks) / 2 + 3
    names = any(r.name for r in rows)  # a row's name is drawn at its left (a strip of several models)
    left = max(half, (max(_text_width(r.name) for r in rows) + 10) if names else 0, RING + 2)
    right = WIDTH - max(half, RING + 2)

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (right - left)

    parts, y = [], 6.0
    for row in rows:
        drawn, y = _row(row, x, (left, right), y, names, words)
        parts += drawn
        y += 8
    base = y
    parts.append(f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{base:.1f}" y2="{base:.1f}" stroke="#555"/>')
    shown = _labelled([x(v) for v, _ in marks], [t for _, t in marks])
    for (v, text), label in zip(marks, shown):
        parts.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{base:.1f}" y2="{base + 5:.1f}" stroke="#555"/>')
        if label:
            parts.append(
                f'<text x="{x(v):.1f}" y="{base + 6 + FONT:.1f}" font-size="{FONT}" text-anchor="middle">{escape(text)}</text>'
            )
    height = base + 10 + FONT
    return (
        f'<svg class="strip" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}" height="{height:.0f}" role="img">'
        f"{''.join(parts)}</svg>"
    )


def _labelled(xs: list[float], texts: list[str]) -> list[bool]:
    """Which ticks are labelled: both ends always, an inner one where it keeps clear of its neighbours."""
    keep = [False] * len(xs)
    keep[0] = keep[-1] = True
    last = xs[0]
    for i in range(1, len(xs) - 1):
        room = (_text_width(texts[i]) + _text_width(texts[i - 1])) / 2 + 8
        if xs[i] - last >= room and xs[-1] - xs[i] >= (_text_width(texts[i]) + _text_width(texts[-1])) / 2 + 8:
            keep[i], last = True, xs[i]
    return keep


def _bar(kind: str, i: Interval, x, edges: tuple[float, float], top: float, height: float, words: Words) -> str:
    """An interval as a shaded bar from `top`, `height` high: an unbounded end reaches the axis's edge, and
    a bar is at least 3 px wide (a tolerance narrower than a pixel is still seen)."""
    a = edges[0] if i[0] is None else x(i[0])
    b = edges[1] if i[1] is None else x(i[1])
    if b - a < 3:
        a, b = (a + b) / 2 - 1.5, (a + b) / 2 + 1.5
    name = words.band if kind == "band" else words.tolerance
    return (
        f'<rect class="{kind}" x="{a:.1f}" y="{top:.1f}" width="{b - a:.1f}" height="{height:.1f}" '
        f'fill="{COLORS[kind]}" fill-opacity="{0.75 if kind == "band" else 0.9}"><title>{escape(name)}: {_ends(i)}</title></rect>'
    )


def _row(row: Row, x, edges: tuple[float, float], y: float, names: bool, words: Words) -> tuple[list[str], float]:
    """One row of a strip from height `y` down, and where it ends: the rerun band behind the whole row, a
    lane of dots per line (equal values stacked), the quote's tolerance in a lane of its own below them
    (drawn over the quote's bar, so a narrow one is still seen), the quote as a red bar and the judged value
    as a ring on the first line."""
    top, lanes = y, []
    for line in row.lines or [[]]:
        values = [v for v in map(_number, line) if v is not None]
        lv = levels([x(v) for v in values])
        half = max(map(abs, lv), default=0) * STACK + RING + 3
        lanes.append((values, lv, y + half))
        y += 2 * half
    lane = (y + 1, 8.0) if row.tolerance else None
    bottom = y + 10 if lane else y
    parts = [_bar("band", row.band, x, edges, top, bottom - top, words)] if row.band else []
    if names:
        parts.append(
            f'<text x="2" y="{(top + bottom) / 2 + FONT * 0.35:.1f}" font-size="{FONT}">{escape(row.name)}</text>'
        )
    for *_, cy in lanes:
        parts.append(f'<line x1="{edges[0]:.1f}" x2="{edges[1]:.1f}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="#bbb"/>')
    if (q := _number(row.quoted)) is not None:
        parts.append(
            f'<line class="quote" x1="{x(q):.1f}" x2="{x(q):.1f}" y1="{top - 2:.1f}" y2="{bottom + 2:.1f}" '
            f'stroke="{COLORS["quote"]}" stroke-width="2.5"><title>{escape(words.quote)}: {q:.4g}</title></line>'
        )
    if lane:
        parts.append(_bar("tolerance", row.tolerance, x, edges, *lane, words))
    for values, lv, cy in lanes:
        parts += [
            f'<circle class="value" cx="{x(v):.1f}" cy="{cy - k * STACK:.1f}" r="{DOT}" fill="{COLORS["value"]}" '
            f'stroke="#fff" stroke-width="1"><title>{escape(words.value)}: {v:.4g}</title></circle>'
            for v, k in zip(values, lv)
        ]
    if (j := _number(row.judged)) is not None:
        parts.append(
            f'<circle class="judged" cx="{x(j):.1f}" cy="{lanes[0][2]:.1f}" r="{RING}" fill="none" '
            f'stroke="{COLORS["judged"]}" stroke-width="2"><title>{escape(words.judged)}: {j:.4g}</title></circle>'
        )
    return parts, bottom


def legend(rows: list[Row], words: Words = Words()) -> str:
    """The strip's legend, HTML to sit directly below it: one key per kind of mark the strip draws."""
    n = sum(len(line) for r in rows for line in r.lines)
    keys = [
        ("value", f"{words.value}{'' if n == 1 else f' (one dot each, {n} in all)'}", n > 0),
        ("judged", words.judged, any(_number(r.judged) is not None for r in rows)),
        ("quote", words.quote, any(_number(r.quoted) is not None for r in rows)),
        ("tolerance", words.tolerance, any(r.tolerance for r in rows)),
        ("band", words.band, any(r.band for r in rows)),
    ]
    items = "".join(
        f'<span class="item"><span class="key {kind}"></span> {escape(text)}</span>'
        for kind, text, drawn in keys
        if drawn
    )
    return f'<p class="legend">{items}</p>'


def figure(kind: str, attrs: str, caption: str, rows: list[Row], words: Words = Words(), note: str = "") -> str:
    """A strip as a figure of class `kind` (`attrs`: its attributes, already escaped): its caption above it,
    its legend directly below, then `note` (both HTML, escaped by the caller); no strip when nothing is drawn."""
    drawing = svg(rows, words)
    return (
        f'<figure class="{escape(kind)}" {attrs}><figcaption>{caption}</figcaption>'
        + (drawing + legend(rows, words) if drawing else "")
        + (f'<p class="note">{note}</p>' if note else "")
        + "</figure>"
    )

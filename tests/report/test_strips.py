"""The strips: every value drawn against the quote, its tolerance and its rerun band, on an axis that holds
them all, inside the drawing, with markers one can see and a legend on the strip."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attngeom.report import strips

SVG = "{http://www.w3.org/2000/svg}"

# occupancy.softmax.step0 of the published report: four trajectories 0.08 under the quote, all inside its tolerance
STEP0 = strips.Row(
    "", [[26.9167, 26.9167, 26.9167, 26.916666666666668]], 27, 26.916666666666668, (26.5, 27.5), (26.0, 28.0)
)


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg.replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1))


def _marks(root: ET.Element, tag: str, kind: str) -> list[ET.Element]:
    return [e for e in root.iter(SVG + tag) if e.get("class") == kind]


def _inside_viewbox(root: ET.Element) -> None:
    """Every rectangle, circle, line and label lies inside the viewBox."""
    _, _, width, height = map(float, root.get("viewBox").split())
    for e in root.iter(SVG + "rect"):
        x, y, w, h = (float(e.get(k)) for k in ("x", "y", "width", "height"))
        assert 0 <= x and x + w <= width and 0 <= y and y + h <= height, e.attrib
    for e in root.iter(SVG + "circle"):
        cx, cy, r = (float(e.get(k)) for k in ("cx", "cy", "r"))
        assert r <= cx <= width - r and r <= cy <= height - r, e.attrib
    for e in root.iter(SVG + "line"):
        assert all(0 <= float(e.get(k)) <= width for k in ("x1", "x2")), e.attrib
        assert all(0 <= float(e.get(k)) <= height for k in ("y1", "y2")), e.attrib
    for e in root.iter(SVG + "text"):
        half = len(e.text) * strips.FONT * 0.6 / 2
        x = float(e.get("x"))
        left, right = (x - half, x + half) if e.get("text-anchor") == "middle" else (x, x + 2 * half)
        assert 0 <= left and right <= width and float(e.get("y")) <= height, e.text


def _x_of(root: ET.Element) -> tuple:
    """The strip's pixel mapping, read back from its two end ticks' labels."""
    labels = [(float(t.get("x")), float(t.text.replace(",", ""))) for t in root.iter(SVG + "text")]
    (x0, v0), (x1, v1) = labels[0], labels[-1]
    return lambda v: x0 + (v - v0) / (v1 - v0) * (x1 - x0)


def test_values_inside_their_tolerance_are_drawn_inside_it():
    """The case a strip of its own points got wrong: a spread of 0.08 under the quote filled the strip."""
    lo, hi, _ = strips.axis([STEP0])
    assert lo <= 26.0 and hi >= 28.0 and hi - lo <= 4
    root = _parse(strips.svg([STEP0]))
    _inside_viewbox(root)
    (tolerance,) = _marks(root, "rect", "tolerance")
    (band,) = _marks(root, "rect", "band")
    left, width = float(tolerance.get("x")), float(tolerance.get("width"))
    dots = _marks(root, "circle", "value")
    assert len(dots) == 4 and all(left < float(d.get("cx")) < left + width for d in dots)
    x = _x_of(root)
    assert float(band.get("x")) == pytest.approx(x(26.0), abs=0.2)
    assert float(band.get("width")) == pytest.approx(x(28.0) - x(26.0), abs=0.2)
    assert width == pytest.approx(x(27.5) - x(26.5), abs=0.2)
    (quote,) = _marks(root, "line", "quote")
    assert float(quote.get("x1")) == pytest.approx(x(27), abs=0.2)


def test_equal_values_are_stacked_so_each_is_seen():
    root = _parse(strips.svg([STEP0]))
    centres = {(d.get("cx"), d.get("cy")) for d in _marks(root, "circle", "value")}
    assert len(centres) == 4
    assert strips.levels([10.0, 10.0, 10.0, 40.0]) == [0, 1, -1, 0]


def test_markers_are_solid_and_large_enough():
    root = _parse(strips.svg([STEP0]))
    for dot in _marks(root, "circle", "value"):
        assert float(dot.get("r")) >= 4 and dot.get("fill") not in (None, "none") and dot.get("fill-opacity") is None
    (ring,) = _marks(root, "circle", "judged")
    assert float(ring.get("r")) > strips.DOT and ring.get("fill") == "none"


def test_an_unbounded_end_reaches_the_axis_edge():
    """An upper bound (reconstruction.yat_b: at most 0.0004) is drawn from the axis's left edge."""
    row = strips.Row("", [[0.000354]], 0.0004, 0.00038, (None, 0.0004), None)
    lo, hi, _ = strips.axis([row])
    assert lo <= 0.000354 and hi >= 0.0004
    root = _parse(strips.svg([row]))
    _inside_viewbox(root)
    (tolerance,) = _marks(root, "rect", "tolerance")
    axis_line = [e for e in root.iter(SVG + "line") if e.get("stroke") == "#555"][0]
    assert float(tolerance.get("x")) == pytest.approx(float(axis_line.get("x1")))
    assert float(tolerance.get("x")) + float(tolerance.get("width")) == pytest.approx(_x_of(root)(0.0004), abs=0.2)
    assert "at most 0.0004" in strips.svg([row]) and not _marks(root, "rect", "band")


def test_both_ends_of_the_axis_are_labelled():
    for row in (STEP0, strips.Row("", [[0.12434]], 0.121, 0.1207, (0.1205, 0.1215), (0.071, 0.171))):
        lo, hi, step = strips.axis([row])
        root = _parse(strips.svg([row]))
        labels = [t.text for t in root.iter(SVG + "text")]
        ticks = strips.ticks(lo, hi, step)
        assert labels[0] == ticks[0][1] and labels[-1] == ticks[-1][1] and len(ticks) >= 3
    assert [t for _, t in strips.ticks(0.05, 0.2, 0.05)] == ["0.05", "0.10", "0.15", "0.20"]
    assert [t for _, t in strips.ticks(0, 15000, 5000)] == ["0", "5,000", "10,000", "15,000"]


def test_counts_and_shares_stay_on_their_side_of_zero():
    lo, _, _ = strips.axis([strips.Row("", [[0.0, 0.01]], 0.0, 0.0)])
    assert lo == 0.0
    lo, hi, _ = strips.axis([strips.Row("", [[5.0, 5.0]], 5.0, 5.0)])  # one value: still an axis around it
    assert lo < 5.0 < hi


def test_a_strip_of_several_models_names_each_row_and_holds_every_interval():
    rows = [
        strips.Row("softmax", [[72.0, 71.2], [73.5]], 72, 72.3, (71.5, 72.5), (67.0, 77.0)),
        strips.Row("yat_b", [[52.2, 53.0]], 54, 53.96, (53.5, 54.5), (49.0, 59.0)),
        strips.Row("goat_v", [[60.0]], None, 60.0),
    ]
    lo, hi, _ = strips.axis(rows)
    assert lo <= 49.0 and hi >= 77.0
    root = _parse(strips.svg(rows))
    _inside_viewbox(root)
    names = [t.text for t in root.iter(SVG + "text")][:3]
    assert names == ["softmax", "yat_b", "goat_v"]
    assert len(_marks(root, "rect", "band")) == len(_marks(root, "rect", "tolerance")) == 2
    assert len(_marks(root, "circle", "value")) == 6 and len(_marks(root, "line", "quote")) == 2


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=12),
    quoted=st.floats(-1e6, 1e6, allow_nan=False),
    half=st.floats(0, 1e5, allow_nan=False),
    band=st.floats(0, 1e5, allow_nan=False),
    open_end=st.sampled_from([None, "low", "high"]),
)
def test_the_axis_holds_everything_a_strip_draws(values, quoted, half, band, open_end):
    tolerance = (None if open_end == "low" else quoted - half, None if open_end == "high" else quoted + half)
    row = strips.Row("", [values], quoted, values[0], tolerance, (quoted - band, quoted + band))
    lo, hi, step = strips.axis([row])
    finite = [*values, quoted, *(e for e in (*tolerance, quoted - band, quoted + band) if e is not None)]
    assert lo <= min(finite) and max(finite) <= hi and step > 0 and math.isfinite(hi - lo)
    _inside_viewbox(_parse(strips.svg([row])))


def test_intervals_as_report_json_holds_them():
    assert strips.interval([0.1205, 0.1215]) == (0.1205, 0.1215)
    assert strips.interval([None, 0.0004]) == (None, 0.0004)
    assert strips.interval(None) is None and strips.interval([None, None]) is None
    assert strips.interval(["a", 1]) is None and strips.interval([1]) is None and strips.interval([True, 2]) is None


def test_the_legend_names_what_the_strip_draws_and_every_text_is_escaped():
    words = strips.Words(value="a <b>trajectory</b>", judged="these & those")
    figure = strips.figure("trajectory", 'data-claim="x"', "<code>x</code>", [STEP0], words, note="4 of 4.")
    legend = re.search(r'<p class="legend">(.*?)</p>', figure).group(1)
    assert "a &lt;b&gt;trajectory&lt;/b&gt; (one dot each, 4 in all)" in legend and "these &amp; those" in legend
    assert all(k in legend for k in ('class="key tolerance"', 'class="key band"', 'class="key quote"'))
    assert figure.index("</svg>") < figure.index('<p class="legend">') < figure.index('<p class="note">4 of 4.</p>')
    bare = strips.figure("robust", "", "c", [strips.Row("<m>", [[1.0, 2.0]])])
    assert "key tolerance" not in bare and "key band" not in bare and "&lt;m&gt;" in bare and "<m>" not in bare
    assert (
        strips.figure("x", "", "c", [strips.Row("", [[]])]) == '<figure class="x" ><figcaption>c</figcaption></figure>'
    )

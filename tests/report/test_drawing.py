"""The shared drawing helpers: a pyplot-free figure and GIFs that redraw only what moves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from helpers.reports import gif_frames
from PIL import Image

from attngeom.report import drawing


def test_save_gif_redraws_only_what_moves(tmp_path: Path):
    fig = drawing.new_figure((3, 2))
    ax = fig.subplots()
    ax.set(xlim=(0, 4), ylim=(0, 1), title="still title")
    (dot,) = ax.plot([0.5], [0.5], "o", ms=12)
    drawing.save_gif(fig, tmp_path / "a.gif", 4, 5, lambda i: dot.set_xdata([0.5 + i]), [dot])
    frames = gif_frames(tmp_path / "a.gif")
    assert len(frames) == 4 and frames[0].shape == (160, 240, 3)
    with Image.open(tmp_path / "a.gif") as gif:
        assert gif.info["duration"] == 200 and gif.info["loop"] == 0
    moved = [np.any(a != b, axis=-1) for a, b in zip(frames, frames[1:])]
    assert all(m.any() for m in moved)
    rows = np.flatnonzero(np.logical_or.reduce(moved).any(axis=1))
    assert rows.min() > 40, "the title and the axes above the dot stay put"


def test_new_figure_has_its_own_canvas_at_the_shared_resolution():
    fig = drawing.new_figure((2, 1))
    assert fig.canvas.get_width_height() == (2 * drawing.DPI, drawing.DPI)
    assert len(drawing.COLORS) == 6

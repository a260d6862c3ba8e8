"""The toy figures' drawing: GIF frames from moving artists, and the ray figure's numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from attngeom import figures_toy, toy


def _frames(path: Path) -> list[np.ndarray]:
    with Image.open(path) as gif:
        out = []
        for i in range(gif.n_frames):
            gif.seek(i)
            out.append(np.asarray(gif.convert("RGB")))
        return out


def test_save_gif_redraws_only_what_moves(tmp_path: Path):
    fig = figures_toy.new_figure((3, 2))
    ax = fig.subplots()
    ax.set(xlim=(0, 4), ylim=(0, 1), title="still title")
    (dot,) = ax.plot([0.5], [0.5], "o", ms=12)
    figures_toy.save_gif(fig, tmp_path / "a.gif", 4, 5, lambda i: dot.set_xdata([0.5 + i]), [dot])
    frames = _frames(tmp_path / "a.gif")
    assert len(frames) == 4 and frames[0].shape == (160, 240, 3)
    with Image.open(tmp_path / "a.gif") as gif:
        assert gif.info["duration"] == 200 and gif.info["loop"] == 0
    moved = [np.any(a != b, axis=-1) for a, b in zip(frames, frames[1:])]
    assert all(m.any() for m in moved)
    rows = np.flatnonzero(np.logical_or.reduce(moved).any(axis=1))
    assert rows.min() > 40, "the title and the axes above the dot stay put"


def test_owner_image_is_the_toy_map():
    img = figures_toy.owner_image(toy.BODIES, "kernel", 2.0)
    grid = toy.view_grid(2.0, figures_toy.MAP_N)
    assert img.shape == (figures_toy.MAP_N, figures_toy.MAP_N)
    np.testing.assert_array_equal(img.ravel(), toy.owners(grid, toy.BODIES, "kernel"))


def test_ray_ride_figure(tmp_path: Path):
    entry = figures_toy.ray_ride(tmp_path)
    ride = toy.ray_ride()
    np.testing.assert_array_equal(entry["counters"]["mass"], ride["mass"])
    frames = _frames(tmp_path / entry["file"])
    assert len(frames) == len(ride["length"])
    assert not np.array_equal(frames[0], frames[len(frames) // 2])

"""The toy figures: the owner maps they draw and the ray figure's numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers.reports import gif_frames

from attngeom.geometry import toy
from attngeom.report import figures_toy


def test_owner_image_is_the_toy_map():
    img = figures_toy.owner_image(toy.BODIES, "kernel", 2.0)
    grid = toy.view_grid(2.0, figures_toy.MAP_N)
    assert img.shape == (figures_toy.MAP_N, figures_toy.MAP_N)
    np.testing.assert_array_equal(img.ravel(), toy.owners(grid, toy.BODIES, "kernel"))


def test_ray_ride_figure(tmp_path: Path):
    entry = figures_toy.ray_ride(tmp_path)
    ride = toy.ray_ride()
    np.testing.assert_array_equal(entry["counters"]["mass"], ride["mass"])
    frames = gif_frames(tmp_path / entry["file"])
    assert len(frames) == len(ride["length"])
    assert not np.array_equal(frames[0], frames[len(frames) // 2])


def test_hull_caption_names_the_grid_the_shares_are_counted_on(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(figures_toy, "save_gif", lambda *args: None)
    caption = figures_toy.hull_crossing(tmp_path)["caption"]
    assert f"{toy.GRID} × {toy.GRID} grid" in caption and "401" not in caption


def _captured(monkeypatch, figure, tmp_path: Path):
    """Draw a figure without writing its GIF; return the figure and its per-frame update."""
    seen = {}
    monkeypatch.setattr(
        figures_toy,
        "save_gif",
        lambda fig, path, n, fps, update, moving: seen.update(fig=fig, update=update, n=n, moving=moving),
    )
    figure(tmp_path)
    return seen


@pytest.mark.parametrize("figure", [figures_toy.territory, figures_toy.ray_ride], ids=["territory", "ray_ride"])
def test_moving_labels_overlap_no_axes(figure, monkeypatch, tmp_path: Path):
    seen = _captured(monkeypatch, figure, tmp_path)
    fig = seen["fig"]
    renderer = fig.canvas.get_renderer()
    texts = [a for a in seen["moving"] if hasattr(a, "get_text")]
    assert texts
    for i in (0, seen["n"] // 2, seen["n"] - 1):
        seen["update"](i)
        for text in texts:
            box = text.get_window_extent(renderer)
            assert box.width > 0
            for ax in fig.axes:
                assert not box.overlaps(ax.get_tightbbox(renderer)), (text.get_text(), i)

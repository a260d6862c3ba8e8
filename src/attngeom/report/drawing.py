"""The drawing helpers all six figures share: colours, style, a pyplot-free figure, GIF writing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from attngeom.base.files import atomic_file

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
DPI = 80
STYLE = {"font.size": 10, "axes.titlesize": 10, "figure.titlesize": 12}


def new_figure(size: tuple[float, float]) -> Figure:
    """A figure on its own Agg canvas: no pyplot state, no display needed."""
    fig = Figure(figsize=size, dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def save_gif(fig, path: Path, n_frames: int, fps: float, update, moving: list) -> None:
    """Write the GIF: the still parts are drawn once, the `moving` artists (in drawing order) per frame."""
    for artist in moving:
        artist.set_animated(True)
    canvas = fig.canvas
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)
    frames = []
    for i in range(n_frames):
        update(i)
        canvas.restore_region(background)
        for artist in moving:
            fig.draw_artist(artist)
        frames.append(Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3].copy()))
    with atomic_file(path) as f:  # a reader or a kill never meets half a GIF
        frames[0].save(f, format="GIF", save_all=True, append_images=frames[1:], duration=round(1000 / fps), loop=0)

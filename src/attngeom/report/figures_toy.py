"""The four toy figures of the posts (2-D, six bodies) and the owner maps they draw.

Each frame's owner maps are recomputed from the laws; the counters drawn on the hull and far-field
frames are the arrays of toy.hull_walk and toy.far_field, the functions the claims judge. Still
parts of a figure are drawn once and only the moving artists per frame, which keeps all six
figures within a minute on two cores.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.colors import ListedColormap, to_rgb
from scipy.spatial import ConvexHull

from attngeom.geometry import toy
from attngeom.report.drawing import COLORS, new_figure, save_gif

MAP_N = 160  # drawn maps' pixels per side; the judged shares use toy.GRID
LAW_TITLES = {"dot": "softmax: owner = argmax q·k", "kernel": "Yat kernel: owner = argmax (q·k+b)²/(|q−k|²+ε)"}


def territory_cmap(colors) -> ListedColormap:
    """Territory fills: each body's colour, lightened so the bodies stand out."""
    return ListedColormap([0.45 * np.array(to_rgb(c)) + 0.55 for c in colors])


def map_axes(ax, radius: float, law: str, colors) -> matplotlib.image.AxesImage:
    ax.set_title(LAW_TITLES[law])
    ax.set_xticks([-radius, 0, radius])
    ax.set_yticks([-radius, 0, radius])
    ax.set_aspect("equal")
    return ax.imshow(
        np.zeros((MAP_N, MAP_N)),
        cmap=territory_cmap(colors),
        vmin=-0.5,
        vmax=len(colors) - 0.5,
        extent=(-radius, radius, -radius, radius),
        interpolation="nearest",
    )


def owner_image(bodies_K2: np.ndarray, law: str, radius: float) -> np.ndarray:
    return toy.owners(toy.view_grid(radius, MAP_N), bodies_K2, law).reshape(MAP_N, MAP_N)


def territory(folder: Path) -> dict:
    """Figure 1: body 4 orbits; both owner maps recomputed at every frame."""
    frames = toy.orbit_bodies()
    share = {"dot": [], "kernel": []}
    fig = new_figure((8.4, 4.9))
    axes = fig.subplots(1, 2)
    images = {law: map_axes(ax, 2.0, law, COLORS) for ax, law in zip(axes, share)}
    dots = [ax.scatter(*frames[0].T, c=COLORS, s=60, edgecolors="k", zorder=3) for ax in axes]
    th = np.linspace(0, 2 * np.pi, 100)
    orbits = [ax.plot(0.6 + 0.9 * np.cos(th), -0.2 + 0.9 * np.sin(th), ":", color=COLORS[3], lw=1)[0] for ax in axes]
    text = fig.text(0.5, 0.02, "", ha="center", va="bottom")
    fig.suptitle("One body (red) orbits: who owns each point of the plane under each law")
    fig.tight_layout(rect=(0, 0.08, 1, 1))  # room for the caption below the tick labels

    def update(i: int) -> None:
        for law, img in images.items():
            owner = owner_image(frames[i], law, 2.0)
            img.set_data(owner)
            share[law].append(float(toy.shares(owner.ravel(), 6)[3]))
        for d in dots:
            d.set_offsets(frames[i])
        text.set_text(
            f"red body's share of the view: softmax {100 * share['dot'][-1]:5.1f} %   "
            f"kernel {100 * share['kernel'][-1]:5.1f} %"
        )

    save_gif(fig, folder / "territory.gif", len(frames), 8, update, [*images.values(), *orbits, *dots, text])
    return {
        "file": "territory.gif",
        "title": "1. Territory: one body orbits",
        "caption": "Six bodies (b = ln 2, ε = 0.25); the red one orbits. Left: softmax attention's owner is "
        "argmax q·k, so every border is a ray from the origin and the moving body only re-aims wedges; "
        "inside the others' hull it owns nothing. Right: the Yat kernel's pocket travels with its body.",
        "counters": {"moving_share_dot": share["dot"], "moving_share_kernel": share["kernel"]},
    }


def hull_crossing(folder: Path) -> dict:
    """Figure 2: the sixth body walks through the ring's hull and out; both shares counted."""
    walk = toy.hull_walk()
    colors = (COLORS[0], COLORS[2], COLORS[3], COLORS[4], COLORS[5], COLORS[1])
    hull = toy.RING[ConvexHull(toy.RING).vertices]
    fig = new_figure((8.4, 4.8))
    axes = fig.subplots(1, 2)
    images = {law: map_axes(ax, 2.6, law, colors) for ax, law in zip(axes, ("dot", "kernel"))}
    overlays, marks = [], []
    for ax in axes:
        overlays += ax.fill(*hull.T, fill=False, ls="--", color="k", lw=1.2, label="hull of the ring")
        overlays.append(ax.scatter(*toy.RING.T, c=colors[:5], s=55, edgecolors="k", zorder=3))
        marks.append(ax.scatter(*walk["walker"][0], c=colors[5], s=90, edgecolors="k", zorder=4, label="walker"))
    overlays.append(axes[0].legend(loc="lower left", fontsize=8))
    counters = [
        ax.text(
            0.02,
            0.97,
            "",
            transform=ax.transAxes,
            va="top",
            fontsize=11,
            fontweight="bold",
            bbox={"facecolor": "white", "alpha": 0.85},
        )
        for ax in axes
    ]
    status = fig.text(0.5, 0.03, "", ha="center")
    fig.suptitle("The orange body walks out of the ring's hull and back: its share of the view")
    fig.tight_layout(rect=(0, 0.06, 1, 1))

    def update(i: int) -> None:
        keys = np.vstack([toy.RING, walk["walker"][i]])
        for law, img in images.items():
            img.set_data(owner_image(keys, law, 2.6))
        for m in marks:
            m.set_offsets(walk["walker"][i][None])
        counters[0].set_text(f"orange share: {100 * walk['share_dot'][i]:.1f} %")
        counters[1].set_text(f"orange share: {100 * walk['share_kernel'][i]:.1f} %")
        status.set_text("inside the hull" if walk["inside"][i] else "outside the hull")

    save_gif(
        fig,
        folder / "hull_crossing.gif",
        len(walk["walker"]),
        8,
        update,
        [*images.values(), *overlays, *marks, *counters, status],
    )
    return {
        "file": "hull_crossing.gif",
        "title": "2. Hull crossing",
        "caption": "Inside the dashed hull the dot-product law gives the orange body exactly 0.0 % of the view in "
        "every frame (its score is an average of the others' and never beats their maximum); at the crossing a "
        "wedge snaps into existence. The kernel's share never touches zero. Shares are counted on a "
        f"{toy.GRID} × {toy.GRID} grid by toy.hull_walk, the function the claims use.",
        "counters": {k: walk[k].tolist() for k in ("inside", "share_dot", "share_kernel")},
        "counters_text": "largest softmax share while inside the hull: "
        f"{100 * walk['share_dot'][walk['inside']].max():.1f} %;"
        f" smallest kernel share: {100 * walk['share_kernel'].min():.1f} %",
    }


def ray_ride(folder: Path) -> dict:
    """Figure 3: a query rides a ray; both weight rows as bars and the kernel's raw mass."""
    ride = toy.ray_ride()
    K = len(toy.RAY_BODIES)
    colors = COLORS[:K]
    fig = new_figure((9.6, 4.2))
    ax_plane = fig.add_subplot(1, 3, 1)
    ax_soft, ax_ker = fig.add_subplot(1, 3, 2), fig.add_subplot(1, 3, 3)
    u = ride["query"][-1] / np.linalg.norm(ride["query"][-1])
    ax_plane.plot([0, 3.4 * u[0]], [0, 3.4 * u[1]], "--", color="0.4", lw=1)
    ax_plane.scatter(*toy.RAY_BODIES.T, c=colors, s=70, edgecolors="k", zorder=3)
    for j, p in enumerate(toy.RAY_BODIES):
        ax_plane.annotate(str(j + 1), p, xytext=(5, 5), textcoords="offset points")
    query = ax_plane.scatter(*ride["query"][0], marker="*", c="k", s=160, zorder=4, label="query q")
    ax_plane.set(xlim=(-1.6, 3.0), ylim=(-1.7, 2.9), aspect="equal", title="the query rides the dashed ray")
    ax_plane.legend(loc="lower right", fontsize=8)
    bars = {}
    for ax, law, title in ((ax_soft, "softmax", "softmax weights"), (ax_ker, "kernel", "Yat kernel weights")):
        bars[law] = ax.bar(np.arange(1, K + 1), ride[law][0], color=colors, edgecolor="k")
        ax.set(ylim=(0, 1), xticks=np.arange(1, K + 1), xlabel="body", title=title)
    ax_soft.set_ylabel("weight")
    readout = fig.text(0.5, 0.02, "", ha="center")  # below the axes, where no bar reaches
    fig.suptitle("One ray, two readings: the query's length is a temperature for softmax, an address for the kernel")
    fig.tight_layout(rect=(0, 0.05, 1, 1))

    def update(i: int) -> None:
        query.set_offsets(ride["query"][i][None])
        for law, row in bars.items():
            for bar, h in zip(row, ride[law][i]):
                bar.set_height(h)
        readout.set_text(f"|q| = {ride['length'][i]:.2f}      kernel's raw mass Σκ = {ride['mass'][i]:.2f}")

    save_gif(
        fig,
        folder / "ray_ride.gif",
        len(ride["length"]),
        10,
        update,
        [query, *bars["softmax"], *bars["kernel"], readout],
    )
    return {
        "file": "ray_ride.gif",
        "title": "3. Ray ride",
        "caption": "A query travels out along a ray and back. Softmax (logits q·k / √2) keeps one winner for the "
        "whole ride and only sharpens onto it; the kernel hands its peak from body to body as the query passes "
        "them, and its raw mass Σκ swells near a body and sags in the void.",
        "counters": {"length": ride["length"].tolist(), "mass": ride["mass"].tolist()},
    }


def far_field(folder: Path) -> dict:
    """Figure 5: the kernel map zooming from radius 2 to 120 beside the zoom-proof softmax map."""
    far = toy.far_field()
    fig = new_figure((10.2, 4.2))
    axes = [fig.add_subplot(1, 3, i + 1) for i in range(3)]
    images = {law: map_axes(ax, 1.0, law, COLORS) for ax, law in zip(axes, ("dot", "kernel"))}
    for ax in axes[:2]:
        ax.set(xticks=[], yticks=[], xlabel="the view [−R, R]², zooming out")
    axes[1].set_title("Yat kernel owners")
    axes[0].set_title("softmax owners")
    curve = axes[2]
    curve.plot(far["radius"], 100 * far["agreement"], color="0.8")
    (trace,) = curve.plot([], [], color=COLORS[3], lw=2)
    curve.set(
        xscale="log",
        xlim=(2, 120),
        ylim=(0, 102),
        xlabel="view radius R",
        ylabel="antipodal agreement (%)",
        title="kernel: owner at Ru = owner at −Ru",
    )
    readout = fig.text(0.5, 0.03, "", ha="center", fontweight="bold")
    fig.suptitle("Zooming out: the kernel's pockets dissolve into the softmax wedges")
    fig.tight_layout(rect=(0, 0.06, 1, 1))

    def update(i: int) -> None:
        r = far["radius"][i]
        for law, img in images.items():
            img.set_data(owner_image(toy.BODIES, law, r))
        trace.set_data(far["radius"][: i + 1], 100 * far["agreement"][: i + 1])
        readout.set_text(
            f"view radius R = {r:6.1f}    antipodal agreement (kernel) = {100 * far['agreement'][i]:5.1f} %"
        )

    save_gif(fig, folder / "far_field.gif", len(far["radius"]), 8, update, [*images.values(), trace, readout])
    return {
        "file": "far_field.gif",
        "title": "5. The far field",
        "caption": "The view [−R, R]² zooms from R = 2 to 120 around the six bodies. The softmax map is the same "
        "picture at every radius; the kernel's pockets dissolve into wedges, and the share of 90 directions "
        "whose owner matches its opposite's (toy.far_field) climbs on the schedule the 1/R correction sets.",
        "counters": {k: far[k].tolist() for k in ("radius", "agreement")},
        "counters_text": f"antipodal agreement from {100 * far['agreement'][0]:.1f} % at R = 2 to "
        f"{100 * far['agreement'][-1]:.1f} % at R = 120",
    }

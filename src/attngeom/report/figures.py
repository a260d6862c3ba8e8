"""The posts' six figures, rebuilt as GIFs from the two laws and the bundles in hand.

This module draws the two figures of the trained models and runs all six (the four toy ones are
in figures_toy.py). Every frame is recomputed from the formulas, and every counter drawn on a
frame comes from the function that computes the matching claim (toy.hull_walk, toy.far_field,
stats.scale_sweep, stats.occupancy), so the figures show the judged numbers.
`./reproduce.sh figures` writes them to OUT/figures/ with figures.json (titles, captions,
counters) and re-renders OUT/index.html.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.colors import ListedColormap

from attngeom.base import json_rules
from attngeom.base.errors import InputError
from attngeom.base.files import sha256_file, shown, write_json_atomic
from attngeom.base.variants import variant
from attngeom.bundles.layout import BundleModel, load_models
from attngeom.measures import stats
from attngeom.measures.table import checkpoint_labels
from attngeom.report import figures_toy, outputs, page
from attngeom.report.drawing import COLORS, STYLE, new_figure, save_gif

FIGURE_VARIANTS = ("softmax", "yat_b")


def scale_sweep(folder: Path, models: dict[str, BundleModel]) -> dict:
    """Figure 4: the real trained q/k of one head per model, winners recomputed at every scale."""
    scales = np.asarray(stats.SWEEP_SCALES)
    curves = {v: stats.scale_sweep(models[v]) for v in FIGURE_VARIANTS}
    changed = {v: stats.sweep_changed_rows(models[v]) for v in FIGURE_VARIANTS}
    line_colors = {"softmax": COLORS[0], "yat_b": COLORS[1]}
    fig = new_figure((8.4, 5.4))
    grid = fig.add_gridspec(3, 1, height_ratios=(1, 1, 2.4))
    strips = {}
    for row, v in enumerate(FIGURE_VARIANTS):
        ax = fig.add_subplot(grid[row])
        strips[v] = ax.imshow(
            changed[v][:1],
            cmap=ListedColormap(["#222222", "#ffd54f"]),
            vmin=0,
            vmax=1,
            aspect="auto",
            interpolation="nearest",
        )
        ax.set(yticks=[], title=f"{variant(v).label} model: a column lights when that row's winner differs from t = 1")
        ax.set_xlabel("query row of layer 1, head 1", fontsize=8, labelpad=1)
    ax = fig.add_subplot(grid[2])
    lines, points = {}, {}
    for v in FIGURE_VARIANTS:
        ax.plot(scales, 100 * curves[v], color=line_colors[v], alpha=0.25)
        (lines[v],) = ax.plot([], [], color=line_colors[v], lw=2, label=f"{variant(v).label} model")
        (points[v],) = ax.plot([], [], "o", color=line_colors[v])
    ax.set(xscale="log", xlim=(0.25, 4), ylim=(-2, 40), xlabel="query scale t", ylabel="rows with a new winner (%)")
    ax.set_xticks([0.25, 0.5, 1, 2, 4], ["¼", "½", "1", "2", "4"])
    ax.set_xticks([], minor=True)
    ax.legend(loc="upper center")
    readout = ax.text(0.02, 0.95, "", transform=ax.transAxes, va="top", family="monospace")
    fig.suptitle("Scaling every query by t on a trained head: which winners change?")
    fig.tight_layout()

    def update(i: int) -> None:
        for v in FIGURE_VARIANTS:
            strips[v].set_data(changed[v][i : i + 1])
            lines[v].set_data(scales[: i + 1], 100 * curves[v][: i + 1])
            points[v].set_data(scales[i : i + 1], 100 * curves[v][i : i + 1])
        readout.set_text(
            f"t = {scales[i]:.2f}\nsoftmax: {100 * curves['softmax'][i]:5.1f} %\n"
            f"kernel:  {100 * curves['yat_b'][i]:5.1f} %"
        )

    save_gif(
        fig,
        folder / "scale_sweep.gif",
        len(scales),
        6,
        update,
        [*strips.values(), *lines.values(), *points.values(), readout],
    )
    return {
        "file": "scale_sweep.gif",
        "title": "4. Scale sweep on the trained models",
        "caption": "The real trained queries and keys of layer 1, head 1 of each model, every row's winner recomputed "
        "with the query scaled by t from ¼ to 4 (the kernel with that head's learned b and ε). The softmax strip "
        "stays dark at every t; the kernel re-elects up to about a quarter of its rows. Curves: stats.scale_sweep.",
        "counters_text": "; ".join(f"{v}: at most {100 * curves[v].max():.1f} % of rows re-elected" for v in curves),
        "counters": {
            "changed": {v: curves[v].tolist() for v in FIGURE_VARIANTS},
            "strip_mean": {v: changed[v].mean(-1).tolist() for v in FIGURE_VARIANTS},
        },
    }


def census(folder: Path, models: dict[str, BundleModel]) -> dict:
    """Figure 6: layer 4 head 1, every query against the key that owns it, four checkpoints."""
    head = tuple(stats.CENSUS_HEAD)
    steps = sorted(models[FIGURE_VARIANTS[0]].maps)
    labels = checkpoint_labels(steps, models[FIGURE_VARIANTS[0]].cfg.get("STEPS"))
    fig = new_figure((10.4, 5.6))
    axes = fig.subplots(len(FIGURE_VARIANTS), len(steps), sharex=True, sharey=True)
    owners = {}
    for row, v in enumerate(FIGURE_VARIANTS):
        m = models[v]
        first = 2 if m.strict else 1
        owners[v] = {}
        for col, step in enumerate(steps):
            head_rows = stats.MapRows(m.maps[step][head], m.strict)
            win, count = head_rows.winners, round(float(head_rows.occupancy) * head_rows.T)
            owners[v][str(step)] = count
            rows = np.arange(first, first + win.size)
            annexed = np.zeros(win.size, bool)
            annexed[1:] |= win[1:] == win[:-1]
            annexed[:-1] |= win[:-1] == win[1:]
            ax = axes[row, col]
            ax.scatter(rows[~annexed], win[~annexed], s=5, c=COLORS[0], label="owner differs from neighbours'")
            ax.scatter(rows[annexed], win[annexed], s=5, c=COLORS[1], label="run: one key owns adjacent queries")
            ax.set_title(f"{variant(v).label}, step {labels[col]:,}\n{count} distinct owners")
            ax.set(xlim=(0, 128), ylim=(0, 128), aspect="equal")
    for ax in axes[-1]:
        ax.set_xlabel("query row i")
    for ax in axes[:, 0]:
        ax.set_ylabel("owning key j")
    axes[0, 0].legend(loc="upper left", fontsize=7, markerscale=2)
    fig.suptitle("Census of layer 4, head 1: which key owns each query, through training")
    fig.tight_layout()
    save_gif(fig, folder / "census.gif", 1, 1, lambda i: None, [])
    return {
        "file": "census.gif",
        "title": "6. Census through training",
        "caption": f"Layer 4, head 1 of both models at the telemetry checkpoints, steps {', '.join(f'{s:,}' for s in labels)} "
        "(the last map, stored under the index of the last step, follows the final update): each dot is a query row (x) and "
        "the key with its top weight in the model's own attention map (y). Orange: runs where one key owns a "
        "stretch of adjacent queries. Titles: distinct owners among the scorable rows (stats.occupancy × 128).",
        "counters": {"distinct_by_step": owners},
        "counters_text": "; ".join(
            f"{v}: {', '.join(map(str, d.values()))} distinct owners" for v, d in owners.items()
        ),
    }


_TRACKER_QUIET = "ignore::UserWarning:multiprocessing.resource_tracker"


def _quiet_worker() -> None:
    """A worker prints nothing of its own: a job's error reaches the command through the job's result,
    and what is left to print is the worker's pipe breaking while an interrupted command ends it."""
    sys.stderr = open(os.devnull, "w")  # for the worker's life


def _render(job: str, folder: Path, models: dict | None) -> dict:
    started = time.perf_counter()
    with matplotlib.rc_context(STYLE):
        entry = JOBS[job](folder, models) if job in MODEL_JOBS else JOBS[job](folder)
    entry["seconds"] = round(time.perf_counter() - started, 2)
    entry["bytes"] = (folder / entry["file"]).stat().st_size
    return entry


JOBS = {
    "territory": figures_toy.territory,
    "hull_crossing": figures_toy.hull_crossing,
    "ray_ride": figures_toy.ray_ride,
    "scale_sweep": scale_sweep,
    "far_field": figures_toy.far_field,
    "census": census,
}
MODEL_JOBS = {"scale_sweep", "census"}


def render_figures(models: dict[str, BundleModel], folder: Path, workers: int = 2) -> dict:
    """Render all six GIFs into `folder` (in parallel) and write figures.json beside them; return it.

    figures.json also lists the sha256 of the bundle files drawn, so that a report judged on
    other bundles never shows these figures.
    """
    folder.mkdir(parents=True, exist_ok=True)
    # Workers are born ignoring Ctrl-C (an ignored signal stays ignored across exec): the command
    # alone answers it, and a Pool, unlike a ProcessPoolExecutor, ends its workers when left early.
    # A Ctrl-C that outlasts the grace period ends the command before the pool's semaphores are freed; the
    # resource tracker the pool starts (sharing stderr, taking this process's -W options) stays quiet about them.
    if _TRACKER_QUIET not in sys.warnoptions:
        sys.warnoptions.append(_TRACKER_QUIET)
    answer = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        pool = multiprocessing.get_context("spawn").Pool(workers, initializer=_quiet_worker)
    finally:
        signal.signal(signal.SIGINT, answer)
    with pool:
        # the slowest first, so the two workers finish together
        order = ("hull_crossing", "far_field", "territory", "scale_sweep", "ray_ride", "census")
        pending = {
            job: pool.apply_async(_render, (job, folder, models if job in MODEL_JOBS else None)) for job in order
        }
        entries = [pending[job].get() for job in JOBS]
    inputs = sorted({sha256_file(p) for m in models.values() for p in m.files.values()})
    drawn = {"figures": entries, "inputs": inputs}
    write_json_atomic(folder / page.FIGURES_JSON, drawn)
    return drawn


def _read_json(path: Path) -> dict:
    try:
        return json_rules.read_json(path, json_rules.Record())
    except InputError as exc:
        raise InputError(f"{exc}; rerun ./reproduce.sh verify --out {shown(path.parent)}") from exc


def run_figures(bundles: Path | None, out: Path) -> int:
    """`figures`: render the GIFs, then re-render OUT/index.html when a verify report of these bundles is there.

    The figures and the page are renewed together in the report folder (outputs.write_set).
    """
    from attngeom.base.fetch import fetch_bundles

    outputs.check_out(out)
    root = bundles if bundles is not None else fetch_bundles()
    models = load_models(root, FIGURE_VARIANTS, heads=stats.FIXED_HEADS)
    started = time.perf_counter()
    written = None

    def write(folder: Path) -> None:
        nonlocal written
        drawn = render_figures(models, folder / page.FIGURES_DIR)
        for e in drawn["figures"]:
            print(f"{e['file']:<18} {e['bytes'] / 1e6:5.2f} MB  {e['seconds']:5.1f} s  {e.get('counters_text', '')}")
        report_path, results_path = folder / "report.json", folder / "results.json"
        if report_path.is_file() and results_path.is_file():
            doc = _read_json(report_path)
            judged = set(doc.get("provenance", {}).get("inputs", {}).values())
            if not set(drawn["inputs"]) <= judged:
                raise InputError(
                    f"{shown(out)} holds the report of other bundles; draw these figures into another --out "
                    f"or verify these bundles there first"
                )
            written = page.write_html(folder, doc, _read_json(results_path), drawn["figures"])

    outputs.write_set(out, {page.FIGURES_DIR, page.INDEX}, write)
    print(f"six figures in {time.perf_counter() - started:.1f} s under {shown(out / page.FIGURES_DIR)}")
    if written is not None:
        print(f"report with figures: {shown(out / page.INDEX)}")
    else:
        print(
            f"no report.json in {shown(out)} yet: ./reproduce.sh verify --out {shown(out)} writes the page with these figures"
        )
    return 0

"""The one table of per-model statistics: name, function, unit, label, the bundles it needs.

Every statistic is a function of `Measures`, the arrays one model yields on W windows
(a leading window axis; the fixed window alone is W = 1), each computed once and shared. It
returns one value per window, (W,). results.py writes the fixed window's value into results.json
(where results.json has long held it, `read` says where; a statistic without `read` is written
under its own name), claims.py reads it back through `read`, robustness.py computes it on every
window of every seed, summary.py takes its per-step statistics from here, and the report shows
each one with its label. A window, a seed or an ensemble member is one more model measured by the
same table.

A statistic of the table reads the maps of the first and last telemetry steps only (`Measures.steps`
at 0 and -1), so a window's other maps are never read (robustness.py); a test holds the table to it.

Adding a statistic: one `Statistic` in TABLE, its function, and a test.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from attngeom.base import blocks
from attngeom.base.blocks import measured
from attngeom.bundles.layout import BundleModel, fixed_window_only, load_model, window
from attngeom.geometry import hull
from attngeom.measures import stats


class Measures:
    """The shared arrays of one model on W windows (leading axis W), each computed on first use only."""

    def __init__(self, windowed: BundleModel) -> None:
        self.model = windowed
        self._rows: dict[int, stats.MapRows] = {}

    @classmethod
    def of(cls, model: BundleModel) -> Measures:
        """The measures of a model's fixed window (W = 1)."""
        return cls(fixed_window_only(model))

    @property
    def windows(self) -> int:
        """W."""
        return int(self.model.q_LHTD.shape[0])

    @property
    def window_size(self) -> int:
        """T, the positions of a window."""
        return int(self.model.q_LHTD.shape[-2])

    @property
    def heads(self) -> int:
        """L x H, the heads of a window."""
        return int(np.prod(self.model.q_LHTD.shape[-4:-2]))

    @property
    def rows(self) -> int:
        """Scorable rows per head: T - 1 (causal) or T - 2 (strict)."""
        return self.window_size - 1 - int(self.model.strict)

    def spans(self) -> list[slice]:
        """Consecutive blocks of windows, each within blocks.BLOCK_BYTES of float64 scores."""
        return blocks.spans(self.windows, self.heads * self.window_size**2 * 8)

    def part(self, span: slice) -> Measures:
        """The measures of a block of windows, sharing this model's census and sweep (computed on every
        window at once: the census certifies every head of every window in one batch, the sweep is one
        head). A block's arrays are freed with it: only its statistics are kept."""
        if span == slice(0, self.windows):
            return self
        part = Measures(window(self.model, span))
        # where a `measured` property keeps its value: the block's slices of the whole's arrays
        part.__dict__.update(inside_WLHT=self.inside_WLHT[span], sweep_SW=self.sweep_SW[:, span])
        return part

    @property
    def steps(self) -> list[int]:
        """The telemetry steps, in order."""
        return sorted(self.model.maps)

    @measured
    def score(self) -> stats.Scorer:
        return stats.scorer(self.model)

    @measured
    def changed_WLHS(self) -> np.ndarray:
        """Fraction of scorable rows whose winner moves at each of stats.SCALES."""
        return stats.scale_changed(self.model, score=self.score)

    def map_rows(self, step: int) -> stats.MapRows:
        """The map of a telemetry step, its rows read once for all its statistics, when first asked."""
        if step not in self._rows:
            self._rows[step] = stats.MapRows(self.model.maps[step], self.model.strict)
        return self._rows[step]

    def occupancy(self, step: int) -> np.ndarray:
        """Distinct winners / T per head at a telemetry step: (W, L, H)."""
        return self.map_rows(step).occupancy

    def entropy(self, step: int) -> np.ndarray:
        """The mean normalised entropy per head at a telemetry step: (W, L, H)."""
        return self.map_rows(step).entropy

    @measured
    def agreement(self) -> tuple[np.ndarray, np.ndarray]:
        """Per head, the share of rows whose winner is the nearest key and the best-aligned key: (W, L, H) each."""
        last = self.steps[-1]
        final = self.map_rows(last) if self.model.attn_LHTT is self.model.maps[last] else None  # a windowed model's
        return stats.winner_agreement(self.model, self.score, final)

    @measured
    def inside_WLHT(self) -> np.ndarray:
        """Which keys lie inside the hull of their head's other keys (the census)."""
        return hull.inside_hull(self.model.k_LHTD)

    @measured
    def sweep_SW(self) -> np.ndarray:
        """The 41-scale sweep's changed fraction on its head, per scale and window."""
        return stats.scale_sweep(self.model)

    @measured
    def reconstruction_WLH(self) -> tuple[np.ndarray, np.ndarray]:
        """Per head, the largest |kernel weights recomputed from q, k, b, eps - exported attn|, and the largest
        such gap as a share of the room float16 export leaves it (kernel models): (W, L, H) each."""
        return stats.reconstruction(self.model, self.score)


@dataclass(frozen=True)
class Statistic:
    """One per-model statistic, as every consumer reads it."""

    label: str  # what a reader sees
    unit: str  # "fraction", "count", "keys", "nats", "share", "weight"
    per_window: Callable[[Measures], np.ndarray]  # (W,)
    claim: tuple[str, dict] | None = None  # the claim function (and its arguments besides the model) quoting it
    needs: str = "any"  # the bundles it needs: "any", or "kernel" (a learned b and eps)
    out_of: Callable[[Measures], int] | None = None  # a theorem count: how many it counts over, per window
    read: Callable[[dict], float | int] | None = None  # where results.json's model entry has long held its value
    fmt: str = ".4f"  # how the report shows a statistic results.json holds under its own name
    checkpoint: str = "last"  # the telemetry checkpoint it is a statistic of: "first", or "last" (the final model)
    per_step: str | None = None  # the per-step statistic (STEP_STATISTICS) it equals at its checkpoint

    def applies(self, model: BundleModel) -> bool:
        """Whether the model's bundles hold what the statistic needs."""
        return self.needs == "any" or model.b_LH is not None


UNIT_RANGE = {
    "fraction": (0.0, 1.0),
    "share": (0.0, 1.0),
    "count": (0.0, math.inf),
    "keys": (0.0, math.inf),
    "nats": (0.0, math.inf),
    "weight": (0.0, math.inf),
}
"""Where a statistic of each unit can lie: a share of rows or keys within [0, 1]; a count, an entropy or a
kernel weight finite and never negative."""


def possible(key: str, value: float) -> bool:
    """Whether `value` is one the statistic `key` of the table can take (finite, within its unit's range)."""
    lo, hi = UNIT_RANGE[TABLE[key].unit]
    return math.isfinite(value) and lo <= value <= hi


def _at(step: str) -> Callable[[list[int]], int]:
    return (lambda steps: steps[0]) if step == "first" else (lambda steps: steps[-1])


def _distinct_winners(step: str) -> Statistic:
    pick = _at(step)
    return Statistic(
        f"distinct winners, {step} checkpoint (mean over heads)",
        "keys",
        lambda m: m.occupancy(pick(m.steps)).mean((1, 2)) * m.window_size,
        ("distinct_winners", {"step": step}),
        read=lambda r: list(r["occupancy_by_step"].values())[0 if step == "first" else -1] * r["setup"]["window"],
        checkpoint=step,
        per_step="distinct_winners",
    )


TABLE: dict[str, Statistic] = {
    "scale_moved_rows": Statistic(
        "winners moved under query scaling (all five scales)",
        "count",
        lambda m: np.round(m.changed_WLHS.sum((1, 2, 3)) * m.rows).astype(int),
        ("scale_moved_rows", {}),
        out_of=lambda m: m.heads * m.rows * len(stats.SCALES),
        read=lambda r: sum(r["scale_changed_rows"].values()),
    ),
    "keys_inside_hull": Statistic(
        "keys inside the others' hull",
        "count",
        lambda m: m.inside_WLHT.sum((1, 2, 3)),
        ("keys_inside_hull", {}),
        out_of=lambda m: m.heads * m.window_size,
        read=lambda r: r["keys_inside_hull"],
    ),
    **{
        f"scale_changed@{t:g}": Statistic(
            f"rows re-elected at query scale {t:g}",
            "fraction",
            lambda m, i=i: m.changed_WLHS[..., i].mean((1, 2)),
            ("scale_changed_fraction", {"t": t}),
            read=lambda r, t=t: r["scale_changed"][str(float(t))],
        )
        for i, t in enumerate(stats.SCALES)
    },
    "mean_norm_entropy_final": Statistic(
        "mean normalised entropy, final map",
        "fraction",
        lambda m: m.entropy(m.steps[-1]).mean((1, 2)),
        ("mean_norm_entropy", {}),
        read=lambda r: r["mean_norm_entropy_final"],
        per_step="mean_norm_entropy",
    ),
    "distinct_winners_first": _distinct_winners("first"),
    "distinct_winners_last": _distinct_winners("last"),
    "winner_is_nearest": Statistic(
        "winner is the nearest key",
        "fraction",
        lambda m: m.agreement[0].mean((1, 2)),
        read=lambda r: r["winner_is_nearest"],
    ),
    "winner_is_aligned": Statistic(
        "winner is the best-aligned key",
        "fraction",
        lambda m: m.agreement[1].mean((1, 2)),
        read=lambda r: r["winner_is_aligned"],
    ),
    "sweep_max_changed": Statistic(
        "largest change in the 41-scale sweep (layer 1, head 1)",
        "fraction",
        lambda m: m.sweep_SW.max(0),
        ("sweep_max_changed", {}),
        read=lambda r: max(r["scale_sweep"]["changed"]),
    ),
    "census_distinct_final": Statistic(
        "census head (layer 4, head 1) distinct owners, last checkpoint",
        "keys",
        lambda m: np.round(m.occupancy(m.steps[-1])[(slice(None), *stats.CENSUS_HEAD)] * m.window_size).astype(int),
        read=lambda r: list(r["census_head"]["distinct_by_step"].values())[-1],
    ),
    "winner_share_final": Statistic(
        "share of its row the winner holds, final map (mean over rows and heads)",
        "share",
        lambda m: m.map_rows(m.steps[-1]).share.mean((1, 2)),
    ),
    "reconstruction_max_abs": Statistic(
        "kernel weights recomputed from q, k, b, eps: largest error",
        "weight",
        lambda m: m.reconstruction_WLH[0].max((1, 2)),
        ("reconstruction_error", {}),
        needs="kernel",
        read=lambda r: r["reconstruction_max_abs"],
    ),
    "reconstruction_room_share": Statistic(
        "kernel weights recomputed from q, k, b, eps: largest error as a share of the room float16 export leaves",
        "share",
        lambda m: m.reconstruction_WLH[1].max((1, 2)),
        ("reconstruction_room_share", {}),
        needs="kernel",
    ),
}


def applicable(model: BundleModel) -> dict[str, Statistic]:
    """The table's statistics this model's bundles can show, in table order."""
    return {key: s for key, s in TABLE.items() if s.applies(model)}


def on_every_window(measures: Measures) -> dict[str, np.ndarray]:
    """Every applicable statistic on each window: key -> (W,), computed block by block (Measures.part),
    the blocks side by side on the process's cores (blocks.each)."""
    table = applicable(measures.model)

    def block(span: slice) -> dict[str, np.ndarray]:
        part = measures.part(span)
        return {key: np.asarray(s.per_window(part)) for key, s in table.items()}

    spans = measures.spans()
    if len(spans) > 1:
        _ = measures.inside_WLHT, measures.sweep_SW  # on every window at once, before the blocks share them
    parts = blocks.each(block, spans)
    return {key: np.concatenate([part[key] for part in parts]) for key in table}


def fixed_window(measures: Measures) -> dict[str, float | int]:
    """The statistics results.json holds under their own names (those without a `read`): their value on window 0."""
    return {key: s.per_window(measures)[0].item() for key, s in applicable(measures.model).items() if s.read is None}


def value(results: dict, model: str, key: str) -> float | int:
    """A statistic's fixed-window value of one model, read from results.json (what the claims judge); a
    model entry holding it under its table name (a measured trajectory's, `trajectories`) is read so."""
    entry = results["models"][model]
    read = TABLE[key].read
    return entry[key] if read is None or key in entry else read(entry)


# The per-step statistics: name -> (function of the measures at a telemetry step, (W,); digits kept in summaries).
STEP_STATISTICS: dict[str, tuple[Callable[[Measures, int], np.ndarray], int]] = {
    "distinct_winners": (lambda m, s: m.occupancy(s).mean((1, 2)) * m.window_size, 4),
    "mean_norm_entropy": (lambda m, s: m.entropy(s).mean((1, 2)), 6),
}


def by_step(model: BundleModel, final: bool = False) -> dict[str, dict[str, float]]:
    """Per telemetry step, the means over heads of the distinct winners (of T keys) and of the normalised
    entropy; per evaluation step, the validation loss; with `final` (a run that ran its whole schedule),
    also every applicable statistic of the table on the fixed window (`final`)."""
    m = Measures.of(model)
    out = {
        **{
            name: {str(s): round(float(f(m, s)[0]), digits) for s in m.steps}
            for name, (f, digits) in STEP_STATISTICS.items()
        },
        "validation_loss": {str(p["step"]): round(p["val"], 6) for p in model.run.get("curve", [])},
    }
    if final:
        out["final"] = {key: s.per_window(m)[0].item() for key, s in applicable(model).items()}
    return out


@cache
def published_model(folder: Path, variant: str) -> tuple[BundleModel, dict[str, dict[str, float]]]:
    """A published model and its statistics, loaded once however many runs are compared with it."""
    model = load_model(folder, variant, 0)
    return model, by_step(model)


def checkpoint_labels(checkpoints: list[int], steps: int | None) -> list[int]:
    """Checkpoints as the posts count them: the last map is stored under key step<STEPS-1>
    (the index of the last step), taken after the final, STEPS-th update, and counted as STEPS."""
    labels = list(checkpoints)
    if steps is not None and labels and labels[-1] == steps - 1:
        labels[-1] = steps
    return labels

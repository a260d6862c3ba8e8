"""Every statistic the analysis computes, per model and for the mathematics, as plain JSON data.

`results.json` holds this whole dictionary, including statistics the author computed but did
not quote; the claims (claims.py) only read from it. A model's statistics come from the arrays of
table.Measures on its fixed window, and every statistic of table.TABLE is in it
(under its own name unless the table says where results.json has long held it).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from attngeom.base.fetch import COMPANION_URL
from attngeom.base.records import ModelResults, Results
from attngeom.bundles import companion
from attngeom.bundles.layout import BundleModel
from attngeom.geometry import theorems, toy
from attngeom.measures import stats, table


def _round(x, digits: int = 10):
    return np.round(np.asarray(x, dtype=np.float64), digits).tolist()


def model_results(model: BundleModel, measures: table.Measures | None = None) -> ModelResults:
    """All statistics of one trained model on the fixed window (`measures`: its fixed window's, when computed already)."""
    m = measures or table.Measures.of(model)
    L, H, T, D = model.q_LHTD.shape
    steps = m.steps
    final = steps[-1]
    changed_LHS = m.changed_WLHS[0]
    occ = {s: m.occupancy(s)[0] for s in steps}
    entropy_LH = {s: m.entropy(s)[0] for s in steps}
    inside_LHT = m.inside_WLHT[0]
    nearest_LH, aligned_LH = (a[0] for a in m.agreement)
    rows = m.rows
    census = tuple(stats.CENSUS_HEAD)
    sharpest = tuple(int(i) for i in np.unravel_index(np.argmin(entropy_LH[final]), entropy_LH[final].shape))
    best = model.run["best_val"]  # None: stopped before its first evaluation
    best = None if best is None else float(best)
    stop = model.cfg.get("STOPPED_AFTER")
    out = {
        "variant": model.variant,
        "seed": model.seed,
        "setup": {
            "layers": L,
            "heads": H,
            "head_dim": D,
            "window": T,
            "steps": model.cfg.get("STEPS"),
            # steps 0 to STOPPED_AFTER for a run stopped early, else its whole schedule
            "steps_trained": model.cfg.get("STEPS") if stop is None else stop + 1,
            "checkpoints": steps,
            "scorable_rows_per_head": rows,
        },
        "scale_t": list(stats.SCALES),
        "scale_changed": {str(t): float(changed_LHS[..., i].mean()) for i, t in enumerate(stats.SCALES)},
        "scale_changed_rows": {
            str(t): int(round(changed_LHS[..., i].sum() * rows)) for i, t in enumerate(stats.SCALES)
        },
        "scale_comparisons": L * H * rows * len(stats.SCALES),
        "mean_norm_entropy_final": float(entropy_LH[final].mean()),
        "mean_norm_entropy_by_step": {str(s): float(e.mean()) for s, e in entropy_LH.items()},
        "occupancy_by_step": {str(s): float(o.mean()) for s, o in occ.items()},
        "occupancy_final_min": float(occ[final].min()),
        "occupancy_final_max": float(occ[final].max()),
        "keys_inside_hull": int(inside_LHT.sum()),
        "keys_total": int(inside_LHT.size),
        "winner_is_nearest": float(nearest_LH.mean()),
        "winner_is_aligned": float(aligned_LH.mean()),
        "scale_sweep": {
            "head": list(stats.SWEEP_HEAD),
            "scales": _round(stats.SWEEP_SCALES),
            "changed": _round(m.sweep_SW[:, 0]),
            # the author's export picks its head by a rule: the sharpest, lowest mean normalised entropy of the last map
            "sharpest_head": list(sharpest),
            "sharpest_max_changed": float(stats.scale_sweep(model, head=sharpest).max()),
        },
        "census_head": {
            "head": list(census),
            "distinct_by_step": {str(s): int(round(occ[s][census] * T)) for s in steps},
        },
        "best_val": best,
        "bpc": None if best is None else best / math.log(2),
        **table.fixed_window(m),
        "per_head": {
            "scale_changed": _round(changed_LHS),
            "occupancy_by_step": {str(s): _round(o) for s, o in occ.items()},
            "mean_norm_entropy_final": _round(entropy_LH[final]),
            "keys_inside_hull": inside_LHT.sum(-1).tolist(),
            "winner_is_nearest": _round(nearest_LH),
            "winner_is_aligned": _round(aligned_LH),
        },
    }
    if model.b_LH is not None:
        out["reconstruction_max_abs"] = float(m.reconstruction_WLH[0][0].max())
        out["per_head"]["b"] = _round(model.b_LH)
        out["per_head"]["eps"] = _round(model.eps_LH)
    return out


def mathematics_results() -> dict:
    """The exact theorems' numerical witnesses and the toy panels' numbers."""
    walk = toy.hull_walk()
    far = toy.far_field()
    settle = toy.settle_radii()
    return {
        "wedge_random": theorems.wedge_random(),
        "wedge_toy_moved": theorems.wedge_toy(),
        "hull_walk": {
            "inside": walk["inside"].tolist(),
            "share_dot": _round(walk["share_dot"]),
            "share_kernel": _round(walk["share_kernel"]),
        },
        "own_ground": toy.own_ground(),
        "far_field": {
            "radius": _round(far["radius"]),
            "agreement": _round(far["agreement"]),
            "correction_gap": {str(t): toy.far_field_correction(t) for t in (1e2, 1e3, 1e4)},
            "exact": {
                "theta_deg": _round(np.degrees(np.arange(len(settle)) * np.pi / len(settle))),
                "settle_radius": [None if np.isinf(r) else round(float(r), 10) for r in settle],
                "full_agreement_radius": None if np.isinf(settle.max()) else round(float(settle.max()), 10),
                "never_agree": int(np.isinf(settle).sum()),
            },
        },
    }


def quality_results(models: dict[str, BundleModel], companion_runs: Path | None) -> dict:
    """The quoted quality gap's source (the companion's runs, when given) and, as a statistic of
    these bundles only, each kernel model's seed-0 gap to softmax."""
    out: dict = {}
    if companion_runs is not None:
        out["companion"] = companion.quality(companion_runs, COMPANION_URL)
    soft = models["softmax"].run["best_val"] if "softmax" in models else None
    if soft is not None:  # a model stopped before its first evaluation has no loss to compare
        out["bundle_gap_to_softmax"] = {
            name: companion.relative_gap(float(soft), float(m.run["best_val"]))
            for name, m in models.items()
            if name != "softmax" and m.run["best_val"] is not None
        }
    return out


def compute_results(
    models: dict[str, BundleModel],
    companion_runs: Path | None = None,
    measures: dict[str, table.Measures] | None = None,
    mathematics: dict | None = None,
) -> Results:
    """results.json: every model's statistics, the quality gaps and the mathematics (`measures`: each
    model's fixed-window measures, when the caller keeps them for the robustness pass; `mathematics`:
    `mathematics_results()`, when the caller computed it beside other work)."""
    return {
        "models": {name: model_results(m, (measures or {}).get(name)) for name, m in models.items()},
        "quality": quality_results(models, companion_runs),
        "mathematics": mathematics if mathematics is not None else mathematics_results(),
    }

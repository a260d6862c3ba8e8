"""The kernel-attention companion's quality runs (`runs.json`): validated, and each mechanism's
mean best validation loss recomputed from its per-seed `best_val` values.

The geometry posts take their quality numbers from this companion ("Quality numbers for these
architectures, with seeds, live in the kernel-attention companion"), so the quality quote is
judged on these runs, not on the single seed-0 bundle. The file's own `summary` is read only to
show beside the recomputed means.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from attngeom.base import json_rules
from attngeom.base.errors import InputError


def read_runs(path: Path) -> dict[str, dict[int, float]]:
    """Per mechanism, each seed's best validation loss; anything malformed is one InputError."""
    return runs_of(json_rules.read_json(path), Path(path))


def runs_of(data: object, path: Path) -> dict[str, dict[int, float]]:
    """The runs of a parsed `runs.json` (see read_runs)."""
    runs = data.get("curves") if isinstance(data, dict) else None
    if not isinstance(runs, list) or not runs:
        raise InputError(f"{path}: expected an object with a non-empty 'curves' list of runs")
    found: dict[str, dict[int, float]] = {}
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            raise InputError(f"{path}: run {i} is not an object")
        variant, seed, best = run.get("variant"), run.get("seed"), run.get("best_val")
        if not isinstance(variant, str) or isinstance(seed, bool) or not isinstance(seed, int):
            raise InputError(f"{path}: run {i} lacks a 'variant' (text) or 'seed' (integer)")
        if isinstance(best, bool) or not isinstance(best, (int, float)) or not math.isfinite(best) or best <= 0:
            raise InputError(f"{path}: run {i} ({variant} seed {seed}) has no finite positive 'best_val'")
        if seed in found.setdefault(variant, {}):
            raise InputError(f"{path}: {variant} seed {seed} appears twice")
        found[variant][seed] = float(best)
    return found


def quality(path: Path, source: str) -> dict:
    """Per mechanism: seeds, best_val per seed, their mean and population standard deviation
    (as the companion's summary states them), and the summary's own mean for comparison."""
    data = json_rules.read_json(path)  # read and parsed once, within schema's limits
    runs = runs_of(data, Path(path))
    summary = data.get("summary")
    summary = summary if isinstance(summary, dict) else {}
    out = {}
    for variant, by_seed in runs.items():
        best = np.array([by_seed[s] for s in sorted(by_seed)])
        stated = summary.get(variant, {}).get("best_val_mean") if isinstance(summary.get(variant), dict) else None
        out[variant] = {
            "seeds": sorted(by_seed),
            "best_val": best.tolist(),
            "mean": float(best.mean()),
            "std": float(best.std()),
            "summary_mean": stated if isinstance(stated, (int, float)) else None,
        }
    return {"file": source, "mechanisms": out}


def relative_gap(x: float, y: float) -> float:
    """|x - y| / min(x, y): how far apart two losses are, relative to the better one."""
    return abs(x - y) / min(x, y)

"""Beyond one window of one seed: every statistic of table.TABLE on each extra window and each seed.

A rerun may leave, beside each model's bundle files, `windows_{variant}_s{seed}.npz` (the format
is bundles'); every seed with bundle files under the folder is read, and a seed without a
windows file contributes its fixed window only.

Each seed's windows are one `table.Measures`: every statistic is computed over a leading
window axis, in blocks of windows that fit the cache (`Measures.blocks`; the hull census certifies
all heads of all windows in one batch before any linear program). Seed 0's window 0 is the fixed
window the claims judge, taken from the plain pass rather than computed again. Of a windows file,
only the maps of the first and last telemetry steps are read: no statistic reads another. Theorem counts
are summed over every window and seed; measured statistics get their distribution over windows
and over seeds. The rest is shown, not judged.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attngeom.base import blocks
from attngeom.bundles import layout
from attngeom.bundles.layout import BundleModel
from attngeom.judgement import expected
from attngeom.measures import table


def summary(values, ddof: int = 0) -> dict:
    """n, mean, standard deviation (population; `ddof=1`: of a sample, 0 for one value or equal ones), min and max."""
    v = np.asarray(values, dtype=np.float64)
    return {
        "n": int(v.size),
        "mean": float(np.clip(v.mean(), v.min(), v.max())),  # within the values, whatever the round-off
        "std": float(v.std(ddof=ddof)) if v.size > ddof and v.min() < v.max() else 0.0,  # equal values: exactly 0
        "min": float(v.min()),
        "max": float(v.max()),
    }


def published_value(claims: list[dict], variant: str, claim: tuple[str, dict] | None) -> float | None:
    """The value the posts quote for this statistic of this model, if one of `claims` quotes one."""
    for e in claims:
        if claim is not None and e["function"] == claim[0] and e["args"] == {"model": variant, **claim[1]}:
            return e["value"]
    return None


def seed_sources(listing: layout.Listing, models: dict[str, BundleModel]) -> dict[str, dict[int, Path]]:
    """Per variant, every seed under the listed folder and the folder of its bundle files."""
    return {
        variant: {
            seed: (model.files["geom"].parent if seed == model.seed else listing.folders(seed)[variant])
            for seed in sorted({model.seed, *listing.seeds(variant)})
        }
        for variant, model in models.items()
    }


def seed_values(
    model: BundleModel, folder: Path, seed: int, plain: table.Measures
) -> tuple[dict[str, np.ndarray], BundleModel]:
    """One seed's statistics on each of its windows, and its windowed model. For the judged
    model's own seed, window 0 is `plain`'s (the fixed window's measures of the plain pass)."""
    if seed != model.seed:
        windowed = layout.load_windowed(folder, model.variant, seed, every_step=False)
        return table.on_every_window(table.Measures(windowed)), windowed
    windowed = layout.load_windowed(folder, model.variant, seed, model, every_step=False)
    values = table.on_every_window(plain)
    if windowed.q_LHTD.shape[0] > 1:
        rest = table.on_every_window(table.Measures(layout.window(windowed, slice(1, None))))
        values = {key: np.concatenate([v, rest[key]]) for key, v in values.items()}
    return values, windowed


def model_robustness(
    variant: str, values: dict[int, dict[str, np.ndarray]], per_seed: dict[int, BundleModel], claims: list[dict]
) -> dict:
    """One model's theorem counts and statistic distributions over every window and seed (`values`, of
    the windowed models `per_seed`), beside the values `claims` (expected/claims.json) quote."""
    seed0 = min(values)
    shape = table.Measures(per_seed[seed0])
    windows = {seed: len(next(iter(v.values()))) for seed, v in values.items()}
    measured = {key: s for key, s in table.TABLE.items() if key in values[seed0]}
    out = {
        "seeds": sorted(values),
        "windows": {str(s): w for s, w in windows.items()},
        "files": {str(s): ev.files.get("windows", ev.files["geom"]).name for s, ev in per_seed.items()},
        "counts": {
            key: {
                "count": int(sum(v[key].sum() for v in values.values())),
                "out_of": s.out_of(shape) * sum(windows.values()),
                "per_seed": {str(seed): v[key].tolist() for seed, v in values.items()},
                "published": published_value(claims, variant, s.claim),
            }
            for key, s in measured.items()
            if s.out_of is not None
        },
        "statistics": {},
    }
    for key, s in measured.items():
        if s.out_of is not None:
            continue
        out["statistics"][key] = {
            "label": s.label,
            "published": published_value(claims, variant, s.claim),
            "fixed_window_seed0": float(values[seed0][key][0]),
            "per_seed": {str(seed): v[key].tolist() for seed, v in values.items()},
            "over_windows": {str(seed): summary(v[key]) for seed, v in values.items()},
            "all_windows": summary(np.concatenate([v[key] for v in values.values()])),
            "over_seeds": summary([v[key][0] for v in values.values()]),
        }
    return out


def measure(
    listing: layout.Listing,
    models: dict[str, BundleModel],
    plain: dict[str, table.Measures] | None = None,
    claims: list[dict] | None = None,
) -> tuple[dict, list[Path]]:
    """results.json's robustness section and the files it read. Empty when the bundles hold one
    window of one seed only (the judged values are then all there is). `plain`: each model's
    fixed-window measures from the plain pass, `claims`: expected/claims.json's entries (each read
    here when not given)."""
    plain = plain or {name: table.Measures.of(m) for name, m in models.items()}
    claims = expected.load_claims() if claims is None else claims
    sources = seed_sources(listing, models)
    extra = any(
        len(seeds) > 1 or layout.windows_file(f, v, s) in listing.files
        for v, seeds in sources.items()
        for s, f in seeds.items()
    )
    if not extra:
        return {}, []

    def one_model(variant: str) -> tuple[dict, list[Path]]:
        values, per_seed = {}, {}
        for seed, folder in sources[variant].items():
            values[seed], per_seed[seed] = seed_values(models[variant], folder, seed, plain[variant])
        files = [path for ev in per_seed.values() for path in ev.files.values()]
        return model_robustness(variant, values, per_seed, claims), files

    # every model at once: they are few and of unequal cost, and the system shares the cores among them
    done = dict(zip(sources, blocks.each(one_model, sources, workers=len(sources))))
    section = {variant: entry for variant, (entry, _) in done.items()}
    return section, list(dict.fromkeys(path for _, files in done.values() for path in files))


def spread(values: list[float], published: float | None) -> dict:
    """The members' values of one statistic at one step, their spread, and where the published value stands."""
    out = {"members": values} | {k: v for k, v in summary(values, ddof=1).items() if k != "n"}
    if published is not None:
        out["published"] = published
        out["published_inside"] = bool(out["min"] <= published <= out["max"])
        out["published_in_std"] = (published - out["mean"]) / out["std"] if out["std"] > 0 else None
    return out

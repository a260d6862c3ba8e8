"""Copies of the published bundles to damage or tamper with in tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from attngeom.base.fetch import PUBLISHED_BUNDLES

QK, GOAT = PUBLISHED_BUNDLES


def copy_published(published_root: Path, dest: Path) -> Path:
    """Copy the two published bundle folders under `dest`; return `dest`."""
    for name in PUBLISHED_BUNDLES:
        shutil.copytree(published_root / name, dest / name)
    return dest


def rewrite_npz(path: Path, drop: tuple[str, ...] = (), **arrays: np.ndarray) -> None:
    """Rewrite an npz with some arrays replaced, added or dropped."""
    with np.load(path) as z:
        data = {k: z[k] for k in z.files if k not in drop}
    data.update(arrays)
    np.savez_compressed(path, **data)


def npz_array(path: Path, key: str) -> np.ndarray:
    with np.load(path) as z:
        return z[key].copy()


def edit_run(path: Path, which: str, **fields) -> None:
    """Change fields of the run record of variant `which` in a yat_attention.json."""
    data = json.loads(path.read_text())
    for run in data["runs"]:
        if run["variant"] == which:
            run.update(fields)
    path.write_text(json.dumps(data))


def stop_after(root: Path, step: int) -> None:
    """Make a copy of the published bundles look like the paper run stopped after `step`."""
    for path in sorted(root.rglob("attn_*_s0.npz")):
        with np.load(path) as z:
            late = tuple(k for k in z.files if k.startswith("step") and int(k[4:]) > step)
        rewrite_npz(path, drop=late)
    for path in sorted(root.rglob("yat_attention.json")):
        data = json.loads(path.read_text())
        data["cfg"]["STOPPED_AFTER"] = step
        for run in data["runs"]:
            run["curve"] = [point for point in run.get("curve", []) if point["step"] <= step]
        path.write_text(json.dumps(data))


def add_windows(model, W: int, seed: int = 0) -> None:
    """Write `windows_{variant}_s{seed}.npz` beside a loaded model's bundle, as the contract says: window
    0 is the bundle's own fixed window; window w > 0 takes the final q and k with their positions
    shuffled (the same cloud of keys, other causal neighbours) and the final map those q and k give
    (softmax of q.k / sqrt(D), or the kernel weights with the run's b and eps); the earlier
    checkpoints' maps are the fixed window's."""
    from dataclasses import replace

    from attngeom.bundles import layout
    from attngeom.geometry import laws
    from attngeom.measures import stats

    rng = np.random.default_rng(seed)
    T = model.q_LHTD.shape[-2]
    order_WT = np.concatenate([np.arange(T)[None], np.stack([rng.permutation(T) for _ in range(W - 1)])])
    q, k = (np.moveaxis(a[:, :, order_WT], 2, 0) for a in (model.q_LHTD, model.k_LHTD))  # (W, L, H, T, D)
    scores = stats.raw_scores(replace(model, q_LHTD=q, k_LHTD=k))
    available = laws.available_TT(T, model.strict)
    if model.b_LH is None:
        z = np.exp(np.where(available, scores / np.sqrt(q.shape[-1]), -np.inf))
        final = z / z.sum(-1, keepdims=True)
    else:
        final = laws.kernel_weights(scores, available)
    steps = sorted(model.maps)
    maps = {s: np.repeat(model.maps[s][None], W, axis=0) for s in steps}
    maps[steps[-1]] = np.concatenate([model.maps[steps[-1]][None], final[1:].astype(np.float16)])
    tokens = np.concatenate([model.tokens_T[None], rng.integers(0, 65, (W - 1, T))])
    path = layout.windows_file(model.files["geom"].parent, model.variant, model.seed)
    layout.write_windows_npz(path, tokens, maps, q, k)


def add_seed(folder: Path, variant: str, seed: int, best_val: float) -> None:
    """Another seed of a model in the same bundle folder: its seed-0 files under the seed's names and
    a copy of its run record with the seed and best validation loss changed."""
    for kind in ("attn", "geom"):
        shutil.copyfile(folder / f"{kind}_{variant}_s0.npz", folder / f"{kind}_{variant}_s{seed}.npz")
    path = folder / "yat_attention.json"
    data = json.loads(path.read_text())
    record = next(r for r in data["runs"] if r["variant"] == variant and r["seed"] == 0)
    data["runs"].append({**record, "seed": seed, "best_val": best_val})
    path.write_text(json.dumps(data))


def write_bundle(
    folder: Path, variant: str, seed: int, maps: dict[int, np.ndarray], q_LHTD, k_LHTD, cfg: dict, **record
) -> np.ndarray:
    """One model's bundle files in the original format, from arrays: `attn_` with `maps`, `geom_` with q, k
    and the last map, and its run record (variant, seed, `record`: best_val, curve, b_learned...) added to
    the folder's `yat_attention.json` (created with `cfg`). The tokens, drawn from the seed, are returned."""
    from attngeom.bundles import layout

    folder.mkdir(parents=True, exist_ok=True)
    tokens_T = np.random.default_rng(seed).integers(0, 65, q_LHTD.shape[-2])
    stem = f"{variant}_s{seed}"
    layout.write_attn_npz(folder / f"attn_{stem}.npz", tokens_T, maps)
    layout.write_geom_npz(folder / f"geom_{stem}.npz", tokens_T, q_LHTD, k_LHTD, maps[max(maps)])
    path = folder / layout.RUN_JSON
    data = json.loads(path.read_text()) if path.exists() else {"runs": [], "cfg": cfg}
    data["runs"].append({"variant": variant, "seed": seed, "best_val": 1.0, **record})
    path.write_text(json.dumps(data))
    return tokens_T


def write_manifest(root: Path, preset: str, variants: tuple[str, ...], **fields) -> None:
    """A finished run's `manifest.json` in `root`, as a rerun leaves it: its configuration, `completed`
    and the sha256 of every file under `root` (`fields` adds stopped_after, windows...)."""
    from attngeom.base.train_config import PRESETS
    from attngeom.training.runs import MANIFEST, file_hashes

    cfg = PRESETS[preset]
    manifest = {
        "completed": True,
        "config": {
            "preset": preset,
            "variants": list(variants),
            "seeds": [0],
            "train": {"steps": cfg.steps, "stop_after": fields.get("stopped_after")},
        },
        "files": file_hashes(root),
        "wall_s": 1.0,
        **fields,
    }
    (root / MANIFEST).write_text(json.dumps(manifest))


def _raw_run_field(path, variant, key, raw_json):
    """Set a field of a run record to raw JSON text that json.dumps would not write."""
    edit_run(path, variant, **{key: "@@raw@@"})
    path.write_text(path.read_text().replace('"@@raw@@"', raw_json))


def hostile(copy, how):
    """Damage one published bundle folder in a way the issue's hostile user did; return the expected message."""
    js = copy / QK / "yat_attention.json"
    geom, attn = copy / QK / "geom_softmax_s0.npz", copy / QK / "attn_softmax_s0.npz"
    if how == "best_val 1e400":
        _raw_run_field(js, "softmax", "best_val", "1e400")
        return "best_val: inf is not a finite number"
    if how == "best_val of 401 digits":
        _raw_run_field(js, "softmax", "best_val", "1" + "0" * 400)
        return "an integer of 401 digits"
    if how == "STEPS a string":
        data = json.loads(js.read_text())
        data["cfg"]["STEPS"] = "12000"
        js.write_text(json.dumps(data))
        return "cfg.STEPS: a string where an integer is due"
    if how == "nested 200,000 deep":
        _raw_run_field(js, "softmax", "extra", "[" * 200_000 + "]" * 200_000)
        return "nested deeper than 64"
    if how == "a 5,000-digit integer":
        _raw_run_field(js, "softmax", "extra", "7" * 5000)
        return "an integer of 5000 digits"
    if how == "seed a float":
        _raw_run_field(js, "yat_b", "seed", "0.5")
        return r"runs\[1\].seed: a number where an integer is due"
    if how in ("2 layers", "T = 1", "head dim 0"):
        cut = {
            "2 layers": (slice(0, 2), slice(None), slice(None)),
            "T = 1": (slice(None), slice(0, 1), slice(None)),
            "head dim 0": (slice(None), slice(None), slice(0, 0)),
        }[how]
        layers, rows, dims = cut
        with np.load(geom) as z, np.load(attn) as a:
            g = {k: z[k] for k in z.files}
            maps = {k: a[k] for k in a.files}
        g["q"], g["k"] = (g[k][layers, :, rows, dims] for k in ("q", "k"))
        g["attn"] = g["attn"][layers, :, rows, rows]
        g["tokens"] = g["tokens"][rows]
        maps = {k: (v[layers, :, rows, rows] if v.ndim == 4 else v[rows]) for k, v in maps.items()}
        np.savez_compressed(geom, **g)
        np.savez_compressed(attn, **maps)
        return {
            "2 layers": "2 layers of 4 heads; the census head is layer 4",
            "T = 1": "a window of 3 positions",
            "head dim 0": "a head dimension",
        }[how]
    if how == "rows that do not sum to 1":
        rewrite_npz(attn, step6000=npz_array(attn, "step6000") * np.float16(1.5))
        return "'step6000' row .* sums to"
    if how == "negative weights":
        m = npz_array(attn, "step0")
        m[1, 2, 5, :2] = [np.float16(-0.25), np.float16(1.25)]
        rewrite_npz(attn, step0=m)
        return "negative attention weights"
    raise AssertionError(how)

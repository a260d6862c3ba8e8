"""The bundle format of the original runs, and a rerun's extra windows: every file's name, reading
with full validation, and writing. No other module names, reads or writes these files.

A bundle folder holds, per variant and seed, `attn_{variant}_s{seed}.npz` (the attention maps
at the telemetry checkpoints), `geom_{variant}_s{seed}.npz` (final q, k and maps on the fixed
window) and one `yat_attention.json` with every run's record. A rerun adds, per variant and seed,
`windows_{variant}_s{seed}.npz`: W windows of T validation tokens (window 0 is the fixed window)
with `tokens_WT`, the telemetry `steps`, the maps `attn_{step}` (W, L, H, T, T) and the final
`q_WLHTD`, `k_WLHTD`, all float16 but the integers. Anything malformed raises `InputError` with
the file and the problem in one line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from attngeom.base import json_rules, schema
from attngeom.base.errors import InputError
from attngeom.base.files import write_json_atomic
from attngeom.base.variants import PUBLISHED, find, kernel_law, strict_mask
from attngeom.bundles import arrays

RUN_JSON = "yat_attention.json"
MIN_WINDOW = 3  # a strict mask leaves T - 2 rows to score
_STEP_KEY = re.compile(r"^step(\d+)$")
_GEOM = re.compile(r"^geom_(?P<variant>.+)_s(?P<seed>\d+)\.npz$")
_SEED = re.compile(r"0|[1-9]\d*")  # how the bundle files write a seed: `s{seed}`, no leading zero
BUNDLE_FILE = re.compile(rf"(attn|geom|windows)_.+_s\d+\.npz|{re.escape(RUN_JSON)}")
"""The name of any file of the bundle format (maps, telemetry, windows, the run JSON)."""


def attn_file(folder: Path, variant: str, seed: int) -> Path:
    """Where a bundle folder keeps a model's maps at the telemetry checkpoints."""
    return Path(folder) / f"attn_{variant}_s{seed}.npz"


def geom_file(folder: Path, variant: str, seed: int) -> Path:
    """Where a bundle folder keeps a model's final q, k and map on the fixed window."""
    return Path(folder) / f"geom_{variant}_s{seed}.npz"


def windows_file(folder: Path, variant: str, seed: int) -> Path:
    """Where a bundle folder keeps a model's extra windows."""
    return Path(folder) / f"windows_{variant}_s{seed}.npz"


@dataclass(frozen=True)
class BundleModel:
    """Everything one trained model left on the fixed window, as the bundle stores it."""

    variant: str
    seed: int
    tokens_T: np.ndarray
    maps: dict[int, np.ndarray]  # checkpoint step -> attn_LHTT (float16)
    q_LHTD: np.ndarray
    k_LHTD: np.ndarray
    attn_LHTT: np.ndarray
    run: dict
    cfg: dict
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def strict(self) -> bool:
        """True when row i sees keys j < i only (goat variants), False for j <= i."""
        return strict_mask(self.variant)

    @property
    def b_LH(self) -> np.ndarray | None:
        """Learned kernel b per layer and head; None for a dot-product (softmax) run."""
        return _scalars(self, "b_learned")

    @property
    def eps_LH(self) -> np.ndarray | None:
        """Learned kernel eps per layer and head; None for a dot-product (softmax) run."""
        return _scalars(self, "eps_learned")


def _scalars(model: BundleModel, key: str) -> np.ndarray | None:
    if key not in model.run:
        return None
    return np.asarray(model.run[key], dtype=np.float64)


def read_run_json(path: Path) -> dict:
    """Parse and check a `yat_attention.json` against its schema."""
    return json_rules.read_json(path, schema.RUN_JSON)


def _find_run(path: Path, data: dict, variant: str, seed: int) -> dict:
    runs = [r for r in data["runs"] if isinstance(r, dict) and r.get("variant") == variant and r.get("seed") == seed]
    if not runs:
        raise InputError(f"{path}: no run record for variant {variant} seed {seed}")
    return runs[0]


def _check_steps(path: Path, maps: dict[int, np.ndarray], steps: int | None) -> None:
    """Telemetry is taken at steps 0 to STEPS - 1 of the schedule (the run JSON's cfg), or up to the
    schema's bound on a step where the schedule is not recorded: a key beyond it is no checkpoint."""
    last = steps - 1 if steps else schema.MAX_STEP
    if max(maps) > last:
        raise InputError(f"{path}: 'step{max(maps)}' lies beyond the schedule's last step, {last}")


def _read_maps(
    folder: Path, variant: str, seed: int, shape: tuple[int, int, int] | None
) -> tuple[np.ndarray, dict[int, np.ndarray], dict, dict]:
    """A model's attn file and run record, validated: tokens, maps by step, the run JSON and the model's
    record in it. `shape`: (L, H, T) from its geom file, or None to take it from the first map."""
    attn_path, json_path = attn_file(folder, variant, seed), Path(folder) / RUN_JSON
    attn = arrays.load_npz(attn_path)
    arrays.require_keys(attn_path, attn, ("tokens",))
    maps = {}
    for key, arr in attn.items():
        if (m := _STEP_KEY.match(key)) is not None:
            if shape is None:
                arrays.check_array(attn_path, key, arr, (None, None, None, None), "f16")
                shape = arr.shape[:3]
            L, H, T = shape
            arrays.check_array(attn_path, key, arr, (L, H, T, T), "f16")
            arrays.check_attention(attn_path, key, arr, strict_mask(variant), kernel_law(variant))
            maps[int(m.group(1))] = arr
    if not maps:  # step 0's maps are taken before training: even a run stopped after one step has them
        raise InputError(f"{attn_path}: expected attention maps under step<N> keys, found none")
    arrays.check_array(attn_path, "tokens", attn["tokens"], (shape[2],), "int")
    data = read_run_json(json_path)
    _check_steps(attn_path, maps, data["cfg"].get("STEPS"))
    return attn["tokens"], dict(sorted(maps.items())), data, _find_run(json_path, data, variant, seed)


def load_telemetry(folder: Path, variant: str, seed: int = 0) -> BundleModel:
    """A telemetry-only bundle (the author's reruns: maps and run JSON, no q or k exported). Its q and k
    have head dimension 0: only the statistics of its maps at each step apply (`table.by_step`)."""
    tokens, maps, data, run = _read_maps(Path(folder), variant, seed, None)
    L, H, T, _ = maps[max(maps)].shape
    empty = np.zeros((L, H, T, 0), dtype=np.float16)
    files = {"attn": attn_file(folder, variant, seed), "json": Path(folder) / RUN_JSON}
    return BundleModel(variant, seed, tokens, maps, empty, empty, maps[max(maps)], run, data["cfg"], files)


def load_model(folder: Path, variant: str, seed: int = 0) -> BundleModel:
    """Load and validate one model from a bundle folder."""
    folder = Path(folder)
    attn_path = attn_file(folder, variant, seed)
    geom_path = geom_file(folder, variant, seed)
    json_path = folder / RUN_JSON
    geom = arrays.load_npz(geom_path)
    arrays.require_keys(geom_path, geom, ("tokens", "q", "k", "attn"))
    arrays.check_array(geom_path, "q", geom["q"], (None, None, None, None), "f16")
    L, H, T, D = geom["q"].shape
    # Every configuration has a layer, a head, a head dimension and a window of at least MIN_WINDOW.
    if min(L, H, D) < 1 or T < MIN_WINDOW:
        raise InputError(
            f"{geom_path}: 'q' has shape {(L, H, T, D)}: a model needs a layer, a head, "
            f"a head dimension and a window of {MIN_WINDOW} positions"
        )
    arrays.check_array(geom_path, "k", geom["k"], (L, H, T, D), "f16")
    arrays.check_array(geom_path, "attn", geom["attn"], (L, H, T, T), "f16")
    arrays.check_array(geom_path, "tokens", geom["tokens"], (T,), "int")
    arrays.check_int_range(geom_path, "tokens", geom["tokens"], 0, 2**31 - 1)  # indices into a vocabulary
    arrays.check_attention(geom_path, "attn", geom["attn"], strict_mask(variant), kernel_law(variant))

    tokens, maps, data, run = _read_maps(folder, variant, seed, (L, H, T))
    if not np.array_equal(tokens, geom["tokens"]):
        raise InputError(f"{attn_path}: 'tokens' differ from those in {geom_path.name}")
    spec = find(variant)
    # A kernel variant has its scalars b, eps = softplus(raw) for each layer and head; the run JSON's
    # schema has checked each number (finite, >= 0: schema.SOFTPLUS_GRID), here their presence and shape.
    if (spec is not None and spec.kernel) or "b_learned" in run or "eps_learned" in run:
        for key in ("b_learned", "eps_learned"):
            try:
                arr = np.asarray(run.get(key), dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise InputError(f"{json_path}: '{key}' of {variant} is not numeric") from exc
            if arr.shape != (L, H):
                raise InputError(f"{json_path}: '{key}' of {variant} has shape {arr.shape}, expected {(L, H)}")
    return BundleModel(
        variant=variant,
        seed=seed,
        tokens_T=geom["tokens"],
        maps=maps,
        q_LHTD=geom["q"],
        k_LHTD=geom["k"],
        attn_LHTT=geom["attn"],
        run=run,
        cfg=data["cfg"],
        files={"attn": attn_path, "geom": geom_path, "json": json_path},
    )


@dataclass(frozen=True)
class Listing:
    """A folder of bundles searched once: where each model's files are, and every file under it."""

    root: Path
    models: dict[tuple[str, int], Path]  # (variant, seed) -> the folder of its geom file
    files: tuple[Path, ...]

    def folders(self, seed: int = 0) -> dict[str, Path]:
        """Each variant with a bundle of `seed`, and the folder of its files."""
        return {v: folder for (v, s), folder in self.models.items() if s == seed}

    def seeds(self, variant: str) -> list[int]:
        """Every seed with a bundle of `variant`."""
        return sorted(s for v, s in self.models if v == variant)

    def named(self, name: str) -> list[Path]:
        """Every file of that name under the folder (a run's manifests, say)."""
        return [p for p in self.files if p.name == name]


def list_bundles(root: Path) -> Listing:
    """Search `root` recursively, once, for bundles; two bundles of one variant and seed are an InputError."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: not a folder of bundles")
    files = tuple(sorted(root.rglob("*")))
    models: dict[tuple[str, int], Path] = {}
    for path in files:
        if (m := _GEOM.match(path.name)) is not None:
            if not _SEED.fullmatch(m["seed"]):
                raise InputError(f"{path}: the seed is written {m['seed']}; bundle files write it s{int(m['seed'])}")
            key = (m["variant"], int(m["seed"]))
            if key in models:
                raise InputError(f"{path}: a second bundle for {key[0]} seed {key[1]} (first in {models[key]})")
            models[key] = path.parent
    return Listing(root, models, files)


def held_variants(root: Path, listing: Listing, seed: int = 0) -> tuple[str, ...]:
    """The published variants a folder holds, in their order: what a job told no variants judges. A folder
    holding none is an InputError."""
    folders = listing.folders(seed)
    held = tuple(v for v in PUBLISHED if v in folders)
    if not held:
        raise InputError(f"{root}: no bundle of {', '.join(PUBLISHED)} under this folder (geom_<variant>_s{seed}.npz)")
    return held


def load_models(
    root: Path,
    variants: tuple[str, ...] = PUBLISHED,
    seed: int = 0,
    heads: dict[str, tuple[int, int]] | None = None,
    listing: Listing | None = None,
) -> dict[str, BundleModel]:
    """Load every requested variant from a folder of bundles (searched, unless `listing` holds the
    search already); a missing one is an InputError.

    `heads` names the (layer, head) positions the caller reads by what it reads them for; a model
    too small to hold one is refused here rather than failing in the middle of the analysis.
    """
    folders = (listing or list_bundles(root)).folders(seed)
    missing = [v for v in variants if v not in folders]
    if missing:
        held = [v for v in PUBLISHED if v in folders]
        raise InputError(
            f"{root}: no geom_{missing[0]}_s{seed}.npz under this folder (needed: {', '.join(variants)}); "
            + (f"it holds {', '.join(held)}: judge those with --variants {','.join(held)}" if held else "it holds none")
        )
    models = {v: load_model(folders[v], v, seed) for v in variants}
    for m in models.values():
        L, H = m.q_LHTD.shape[:2]
        for use, (layer, head) in (heads or {}).items():
            if layer >= L or head >= H:
                raise InputError(
                    f"{m.files['geom']}: {L} layers of {H} heads; {use} is layer {layer + 1}, head {head + 1}"
                )
    return models


def write_attn_npz(path: Path, tokens_T: np.ndarray, maps: dict[int, np.ndarray]) -> None:
    """Write `attn_{variant}_s{seed}.npz` in the original format (np.savez_compressed's bytes)."""
    steps = {f"step{s}": np.asarray(m, dtype=np.float16) for s, m in maps.items()}
    arrays.save_npz(path, {"tokens": np.asarray(tokens_T, dtype=np.int32), **steps})


def write_geom_npz(path: Path, tokens_T: np.ndarray, q_LHTD, k_LHTD, attn_LHTT) -> None:
    """Write `geom_{variant}_s{seed}.npz` in the original format (np.savez_compressed's bytes)."""
    arrays.save_npz(
        path,
        {
            "tokens": np.asarray(tokens_T, dtype=np.int32),
            "q": np.asarray(q_LHTD, dtype=np.float16),
            "k": np.asarray(k_LHTD, dtype=np.float16),
            "attn": np.asarray(attn_LHTT, dtype=np.float16),
        },
    )


def write_windows_npz(path: Path, tokens_WT, maps: dict[int, np.ndarray], q_WLHTD, k_WLHTD) -> None:
    """Write `windows_{variant}_s{seed}.npz` in the format `read_windows` reads: `tokens_WT` (int32; window 0
    is the bundle's fixed window), `steps` (int32), `attn_{step}` (float16, W x L x H x T x T) per
    telemetry step, `q_WLHTD` and `k_WLHTD` (float16, stored without compression: arrays.save_npz)."""
    arrays.save_npz(
        path,
        {
            "tokens_WT": np.asarray(tokens_WT, dtype=np.int32),
            "steps": np.asarray(sorted(maps), dtype=np.int32),
            "q_WLHTD": np.asarray(q_WLHTD, dtype=np.float16),
            "k_WLHTD": np.asarray(k_WLHTD, dtype=np.float16),
            **{f"attn_{s}": np.asarray(m, dtype=np.float16) for s, m in maps.items()},
        },
        stored=("q_WLHTD", "k_WLHTD"),
    )


def write_model(folder: Path, result) -> None:
    """One trained model's files (a training result: maps, final geometry, windows) in the bundle format."""
    variant, seed = result.variant, result.seed
    write_attn_npz(attn_file(folder, variant, seed), result.tokens_T, {s: result.maps[s] for s in sorted(result.maps)})
    write_geom_npz(geom_file(folder, variant, seed), result.tokens_T, result.q_LHTD, result.k_LHTD, result.attn_LHTT)
    write_windows_npz(
        windows_file(folder, variant, seed),
        result.windows_WT,
        {s: result.window_maps[s] for s in sorted(result.window_maps)},
        result.q_WLHTD,
        result.k_WLHTD,
    )


def _bpc(nats: float | None) -> float | None:
    """A loss in nats as the run JSON records it: bits per character."""
    return None if nats is None else nats / math.log(2)


def run_json(results: list, cfg) -> dict:
    """The original `yat_attention.json` of one bundle folder, from its training results and configuration.

    A run stopped before its first evaluation has no validation loss yet: its `best_val` and `bpc`
    are null and its `curve` and `score_max` empty; so are a variant's summary figures when none of
    its seeds reached an evaluation.
    """
    records, summary = [], {}
    for r in results:
        record = {
            "variant": r.variant,
            "seed": r.seed,
            "best_val": r.best_val,
            "bpc": _bpc(r.best_val),
            "curve": r.curve,
            "score_max": r.score_max,
        }
        if r.b_LH is not None:
            record["b_learned"], record["eps_learned"] = r.b_LH.tolist(), r.eps_LH.tolist()
        record["telemetry_prompt"] = r.prompt
        records.append(record)
    for variant in dict.fromkeys(r.variant for r in results):
        best = np.array([r.best_val for r in results if r.variant == variant and r.best_val is not None])
        mean = float(best.mean()) if best.size else None
        summary[variant] = {
            "best_val_mean": mean,
            "best_val_std": float(best.std()) if best.size else None,
            "bpc_mean": _bpc(mean),
        }
    return {"summary": summary, "runs": records, "cfg": cfg.original_cfg()}


def write_run_json(folder: Path, results: list, cfg) -> None:
    """Write (or rewrite, as models are added) the folder's `yat_attention.json`."""
    write_json_atomic(Path(folder) / RUN_JSON, run_json(results, cfg))


def read_windows(path: Path, model: BundleModel, every_step: bool = True) -> BundleModel:
    """The model on every window of `path`, validated against its bundle: q, k, attn and
    maps gain a leading window axis W (tokens become tokens_WT). `every_step` False: the maps of the
    first and last telemetry steps only (all that the table of statistics reads of a window), the
    others neither read nor checked.

    What a valid file always satisfies: the model's shapes (L, H, T, D from its bundle) on W >= 1
    windows; telemetry steps strictly increasing, at least step 0 (taken before any update, so a run
    stopped after its first step has it); finite float16 q and k and maps that follow the variant's
    law (`arrays.check_attention`); window 0 is the bundle's fixed window, so its tokens are the
    bundle's.
    """
    data = arrays.load_npz(path, skip=lambda key: key not in ("tokens_WT", "steps"))  # the rest once steps are known
    arrays.require_keys(path, data, ("tokens_WT", "steps"))
    L, H, T, D = model.q_LHTD.shape
    arrays.check_array(path, "tokens_WT", data["tokens_WT"], (None, T), "int")
    W = data["tokens_WT"].shape[0]
    arrays.check_array(path, "steps", data["steps"], (None,), "int")
    steps = [int(s) for s in data["steps"]]
    if W < 1 or not steps or steps != sorted(set(steps)):  # step 0 alone: a run stopped before its next telemetry
        raise InputError(f"{path}: expected at least one window and increasing telemetry steps, got {W} and {steps}")
    maps_read = {f"attn_{s}" for s in (steps if every_step else (steps[0], steps[-1]))}
    wanted = {"q_WLHTD", "k_WLHTD", *maps_read}
    data.update(arrays.load_npz(path, skip=lambda key: key not in wanted))
    arrays.require_keys(path, data, tuple(sorted(wanted)))
    for key in ("q_WLHTD", "k_WLHTD"):
        arrays.check_array(path, key, data[key], (W, L, H, T, D), "f16")
    maps = {s: data[f"attn_{s}"] for s in steps if f"attn_{s}" in maps_read}
    for s, m in maps.items():
        arrays.check_array(path, f"attn_{s}", m, (W, L, H, T, T), "f16")
        arrays.check_attention(path, f"attn_{s}", m, model.strict, kernel_law(model.variant))
    if not np.array_equal(data["tokens_WT"][0], model.tokens_T):
        raise InputError(f"{path}: window 0 is not the bundle's fixed window (its tokens differ)")
    return replace(
        model,
        tokens_T=data["tokens_WT"],
        maps=maps,
        q_LHTD=data["q_WLHTD"],
        k_LHTD=data["k_WLHTD"],
        attn_LHTT=maps[steps[-1]],
        files={**model.files, "windows": Path(path)},
    )


def _each_array(model: BundleModel, f) -> BundleModel:
    """The model with `f` applied to every per-window array (tokens, maps, q, k, attn)."""
    return replace(
        model,
        tokens_T=f(model.tokens_T),
        maps={s: f(m) for s, m in model.maps.items()},
        q_LHTD=f(model.q_LHTD),
        k_LHTD=f(model.k_LHTD),
        attn_LHTT=f(model.attn_LHTT),
    )


def fixed_window_only(model: BundleModel) -> BundleModel:
    """A bundle without extra windows: its fixed window as a window axis of length 1."""
    return _each_array(model, lambda a: a[None])


def window(windowed: BundleModel, w: int | slice) -> BundleModel:
    """Window w of a windowed model, as an ordinary one-window model (a slice keeps the window axis)."""
    return _each_array(windowed, lambda a: a[w])


def load_windowed(
    folder: Path, variant: str, seed: int, loaded: BundleModel | None = None, every_step: bool = True
) -> BundleModel:
    """One seed's model on all its windows (its fixed window alone when it has no windows file); `loaded`:
    the model read from its bundle already; `every_step`: as `read_windows`."""
    model = loaded if loaded is not None else load_model(folder, variant, seed)
    extra = windows_file(folder, variant, seed)
    return read_windows(extra, model, every_step) if extra.is_file() else fixed_window_only(model)

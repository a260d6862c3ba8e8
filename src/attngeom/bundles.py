"""The bundle format of the original runs: read with full validation, and write.

A bundle folder holds, per variant and seed, `attn_{variant}_s{seed}.npz` (the attention maps
at the telemetry checkpoints), `geom_{variant}_s{seed}.npz` (final q, k and maps on the fixed
window) and one `yat_attention.json` with every run's record. Anything malformed raises
`InputError` with the file and the problem in one line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attngeom import schema
from attngeom.errors import InputError
from attngeom.variants import PUBLISHED as VARIANTS
from attngeom.variants import find, kernel_law, strict_mask

RUN_JSON = "yat_attention.json"
MIN_WINDOW = 3  # a strict mask leaves T - 2 rows to score
_STEP_KEY = re.compile(r"^step(\d+)$")


@dataclass(frozen=True)
class ModelEvidence:
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


def _scalars(model: ModelEvidence, key: str) -> np.ndarray | None:
    if key not in model.run:
        return None
    return np.asarray(model.run[key], dtype=np.float64)


def read_run_json(path: Path) -> dict:
    """Parse and check a `yat_attention.json` against its schema."""
    return schema.read_json(path, schema.RUN_JSON)


def _find_run(path: Path, data: dict, variant: str, seed: int) -> dict:
    runs = [r for r in data["runs"] if isinstance(r, dict) and r.get("variant") == variant and r.get("seed") == seed]
    if not runs:
        raise InputError(f"{path}: no run record for variant {variant} seed {seed}")
    return runs[0]


def load_model(folder: Path, variant: str, seed: int = 0) -> ModelEvidence:
    """Load and validate one model's evidence from a bundle folder."""
    folder = Path(folder)
    attn_path = folder / f"attn_{variant}_s{seed}.npz"
    geom_path = folder / f"geom_{variant}_s{seed}.npz"
    json_path = folder / RUN_JSON
    geom = schema.load_npz(geom_path)
    schema.require_keys(geom_path, geom, ("tokens", "q", "k", "attn"))
    schema.check_array(geom_path, "q", geom["q"], (None, None, None, None), "f16")
    L, H, T, D = geom["q"].shape
    if min(L, H, D) < 1 or T < MIN_WINDOW:
        raise InputError(
            f"{geom_path}: 'q' has shape {(L, H, T, D)}: a model needs a layer, a head, "
            f"a head dimension and a window of {MIN_WINDOW} positions"
        )
    schema.check_array(geom_path, "k", geom["k"], (L, H, T, D), "f16")
    schema.check_array(geom_path, "attn", geom["attn"], (L, H, T, T), "f16")
    schema.check_array(geom_path, "tokens", geom["tokens"], (T,), "int")
    schema.check_int_range(geom_path, "tokens", geom["tokens"], 0, 2**31 - 1)
    schema.check_attention(geom_path, "attn", geom["attn"], strict_mask(variant), kernel_law(variant))

    attn = schema.load_npz(attn_path)
    schema.require_keys(attn_path, attn, ("tokens",))
    schema.check_array(attn_path, "tokens", attn["tokens"], (T,), "int")
    maps = {}
    for key, arr in attn.items():
        if (m := _STEP_KEY.match(key)) is not None:
            schema.check_array(attn_path, key, arr, (L, H, T, T), "f16")
            schema.check_attention(attn_path, key, arr, strict_mask(variant), kernel_law(variant))
            maps[int(m.group(1))] = arr
    if not maps:  # step 0's maps are taken before training: even a run stopped after one step has them
        raise InputError(f"{attn_path}: expected attention maps under step<N> keys, found none")
    if not np.array_equal(attn["tokens"], geom["tokens"]):
        raise InputError(f"{attn_path}: 'tokens' differ from those in {geom_path.name}")

    data = read_run_json(json_path)
    run = _find_run(json_path, data, variant, seed)
    spec = find(variant)
    if (spec is not None and spec.kernel) or "b_learned" in run or "eps_learned" in run:
        for key in ("b_learned", "eps_learned"):
            try:
                arr = np.asarray(run.get(key), dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise InputError(f"{json_path}: '{key}' of {variant} is not numeric") from exc
            if arr.shape != (L, H):
                raise InputError(f"{json_path}: '{key}' of {variant} has shape {arr.shape}, expected {(L, H)}")
            if not np.isfinite(arr).all() or (arr <= 0).any():
                raise InputError(f"{json_path}: '{key}' of {variant} holds non-finite or non-positive values")
    return ModelEvidence(
        variant=variant,
        seed=seed,
        tokens_T=geom["tokens"],
        maps=dict(sorted(maps.items())),
        q_LHTD=geom["q"],
        k_LHTD=geom["k"],
        attn_LHTT=geom["attn"],
        run=run,
        cfg=data["cfg"],
        files={"attn": attn_path, "geom": geom_path, "json": json_path},
    )


def find_model_folders(root: Path, seed: int = 0) -> dict[str, Path]:
    """Map each variant found under `root` (searched recursively) to the folder of its geom file."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: not a folder of bundles")
    found: dict[str, Path] = {}
    for geom in sorted(root.rglob(f"geom_*_s{seed}.npz")):
        variant = geom.name[len("geom_") : -len(f"_s{seed}.npz")]
        if variant in found:
            raise InputError(f"{geom}: a second bundle for {variant} seed {seed} (first in {found[variant]})")
        found[variant] = geom.parent
    return found


def load_models(
    root: Path, variants: tuple[str, ...] = VARIANTS, seed: int = 0, heads: dict[str, tuple[int, int]] | None = None
) -> dict[str, ModelEvidence]:
    """Load every requested variant from a folder of bundles; a missing one is an InputError.

    `heads` names the (layer, head) positions the caller reads by what it reads them for; a model
    too small to hold one is refused here rather than failing in the middle of the analysis.
    """
    folders = find_model_folders(root, seed)
    missing = [v for v in variants if v not in folders]
    if missing:
        raise InputError(f"{root}: no geom_{missing[0]}_s{seed}.npz under this folder (needed: {', '.join(variants)})")
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
    """Write `attn_{variant}_s{seed}.npz` in the original format."""
    arrays = {f"step{s}": np.asarray(m, dtype=np.float16) for s, m in maps.items()}
    np.savez_compressed(path, tokens=np.asarray(tokens_T, dtype=np.int32), **arrays)


def write_geom_npz(path: Path, tokens_T: np.ndarray, q_LHTD, k_LHTD, attn_LHTT) -> None:
    """Write `geom_{variant}_s{seed}.npz` in the original format."""
    np.savez_compressed(
        path,
        tokens=np.asarray(tokens_T, dtype=np.int32),
        q=np.asarray(q_LHTD, dtype=np.float16),
        k=np.asarray(k_LHTD, dtype=np.float16),
        attn=np.asarray(attn_LHTT, dtype=np.float16),
    )

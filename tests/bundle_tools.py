"""Copies of the published bundles to damage or tamper with in tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from attngeom.fetch import PUBLISHED_BUNDLES

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
        path.write_text(json.dumps(data))

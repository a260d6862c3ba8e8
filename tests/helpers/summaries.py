"""The judged runs a summary reads: a finished rerun's manifest, a map row made a rerun's, two runs judged alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from attngeom import cli
from attngeom.training import runs

from .bundles import copy_published, rewrite_npz


def finished_manifest(**changes) -> dict:
    """A finished paper rerun's manifest, stopped after step 1200 in two segments (`changes` replaces fields)."""
    doc = {
        "completed": True,
        "config": {
            "preset": "paper",
            "variants": ["softmax"],
            "seeds": [0],
            "train": {"steps": 12000, "stop_after": 1200},
        },
        "files": {},
        "stopped_after": 1200,
        "platform": "Linux-x86_64",
        "machine": "Linux-x86_64 (x86_64, some CPU, 2 cores)",
        "command": "python -m attngeom rerun --preset paper --stop-after 1200 --variants softmax --out /runs/s --quiet",
        "wall_s": 5000.0,
        "trajectory": {"cpu": "some CPU (0123)", "cores": 2, "training_code": "ab" * 32},
        "segments": [
            {
                "machine": "A",
                "cpu": "some CPU (0123)",
                "from_steps": {"softmax_s0": 0},
                "to_steps": {"softmax_s0": 500},
            },
            {"machine": "A", "from_steps": {"softmax_s0": 500}, "to_steps": {"softmax_s0": 1200}, "wall_s": 9.5},
        ],
    }
    return doc | changes


def even_row(run: Path) -> int:
    """Weigh the six keys of one row of the softmax step-1200 map evenly (still a distribution); return the map's size."""
    attn = run / "kgl_blog-attngeom-qk" / "attn_softmax_s0.npz"
    with np.load(attn) as z:
        step = z["step1200"].copy()
    step[0, 0, 5, :6] = np.float16(1 / 6)
    rewrite_npz(attn, step1200=step)
    return step.size


def judged_runs_of(published_root: Path, root: Path) -> dict[str, Path]:
    """A finished full-length run of softmax (one row of its step-1200 map reweighed: a rerun) and one of
    yat_b, each in its own folder under `root` and judged alone into RUN/report."""
    out = {}
    for variant in ("softmax", "yat_b"):
        run = copy_published(published_root, root / variant)
        for path in run.rglob("*.npz"):
            if not path.name.endswith(f"_{variant}_s0.npz"):
                path.unlink()
        record = run / "kgl_blog-attngeom-qk" / "yat_attention.json"  # a run of one variant records only it
        doc = json.loads(record.read_text())
        doc["runs"] = [r for r in doc["runs"] if r["variant"] == variant]
        doc["summary"] = {variant: doc["summary"][variant]}
        record.write_text(json.dumps(doc))
        if variant == "softmax":
            even_row(run)
        manifest = finished_manifest(stopped_after=None, command=f"python -m attngeom rerun --variants {variant}")
        manifest["config"] |= {"variants": [variant], "train": {"steps": 12000, "stop_after": None}}
        (run / runs.MANIFEST).write_text(json.dumps(manifest))
        assert cli.main(["--bundles", str(run), "--variants", variant, "--out", str(run / "report")]) in (0, 1)
        out[variant] = run
    return out

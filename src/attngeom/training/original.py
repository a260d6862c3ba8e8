"""Run the author's training script for a few steps and record what `fidelity` compares.

`python -m attngeom.training.original JOB.json` runs in its own process, so the script's
import-time work (it downloads the corpus with `urllib` and builds its configuration from the
environment) touches nothing else. The driver:

- serves the script's corpus download from our sha256-verified copy and refuses every other URL,
  so the script never reaches the network;
- executes the script's source as a module whose `__file__` lies in a scratch folder (it writes
  its `results/` beside itself), with the paper configuration (`SMOKE` unset) and telemetry on;
- applies the device settings of this harness (`device.deterministic_device`), so both sides run
  under the same XLA flags and matmul precision;
- sets the step count to N and the validation batches to 1 (evaluation only; training is
  unchanged), and calls the script's own `run_variant(variant, 0, lr)` for each variant;
- wraps the script's `nnx.jit` so that its `train_step` records the initial parameters (before
  the first update) and every training loss; the step-0 maps come from the script's own
  telemetry file.

JOB.json: {"script", "corpus", "workdir", "steps", "lrs": {variant: lr}}. Output, in workdir:
`original.json` (per variant: parameter count and sums, losses, device) and `original_maps.npz`
(the step-0 maps under the variant names).
"""

from __future__ import annotations

import io
import json
import os
import sys
import types
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np

from attngeom.base.fetch import CORPUS_URL

RESULT, MAPS = "original.json", "original_maps.npz"
MODULE_NAME = "yat_attention"


def serve_corpus(corpus: bytes) -> Callable:
    """A `urlopen` that answers the corpus URL with `corpus` and refuses any other request."""

    def urlopen(url, *args, **kwargs):
        target = getattr(url, "full_url", url)
        if target != CORPUS_URL:
            raise PermissionError(f"the author's script asked for {target}; only the corpus is served, offline")
        return io.BytesIO(corpus)

    return urlopen


def load_script(script: Path, corpus: bytes, workdir: Path) -> types.ModuleType:
    """Execute the script as a module (not as `__main__`), offline, writing under `workdir`."""
    module = types.ModuleType(MODULE_NAME)
    module.__file__ = str(workdir / script.name)
    sys.modules[MODULE_NAME] = module
    real_urlopen = urllib.request.urlopen
    urllib.request.urlopen = serve_corpus(corpus)
    try:
        exec(compile(script.read_bytes(), str(script), "exec"), module.__dict__)
    finally:
        urllib.request.urlopen = real_urlopen
    return module


class Recorder:
    """What the script's `train_step` saw: the model's initial parameters and each loss."""

    def __init__(self, nnx_module: types.ModuleType, param_stats: Callable):
        self.nnx, self.param_stats = nnx_module, param_stats
        self.initial: tuple[int, float, float] | None = None
        self.losses: list[float] = []

    def __getattr__(self, name: str):
        return getattr(self.nnx, name)

    def jit(self, fn: Callable) -> Callable:
        """`nnx.jit`, with `train_step` recording its model before the first update and its loss."""
        jitted = self.nnx.jit(fn)
        if fn.__name__ != "train_step":
            return jitted

        def train_step(model, *args):
            if self.initial is None:
                self.initial = self.param_stats(model)
            loss = jitted(model, *args)
            self.losses.append(float(loss))
            return loss

        return train_step


def run(job: dict) -> None:
    """Run the script for each variant of the job; write the result and the maps into the workdir."""
    for name in ("SMOKE", "NORMSWAP", "GEOMETRY", "SWEEP_LRS", "LR_SOFTMAX", "LR_YAT"):
        os.environ.pop(name, None)
    os.environ["TELEMETRY"] = "1"
    from attngeom.training.device import deterministic_device

    deterministic_device()
    import jax
    from flax import nnx

    from attngeom.bundles.layout import attn_file
    from attngeom.training.model import param_stats

    workdir, script = Path(job["workdir"]), Path(job["script"])
    stdout, sys.stdout = sys.stdout, sys.stderr  # the script's own prints go to the log
    try:
        module = load_script(script, Path(job["corpus"]).read_bytes(), workdir)
        module.CFG.update(STEPS=int(job["steps"]), VAL_BATCHES=1)
        result, maps = {}, {}
        for variant, lr in job["lrs"].items():
            module.nnx = recorder = Recorder(nnx, param_stats)
            module.run_variant(variant, 0, lr=lr)
            count, total, absolute = recorder.initial
            with np.load(attn_file(module.RESULTS_DIR, variant, 0)) as z:
                maps[variant], tokens_T = z["step0"], z["tokens"]
            result[variant] = {
                "parameters": count,
                "param_sum": total,
                "param_abs_sum": absolute,
                "losses": recorder.losses,
                "tokens": tokens_T[:12].tolist(),
            }
    finally:
        sys.stdout = stdout
    device = jax.devices()[0]
    doc = {"device": {"platform": device.platform, "kind": device.device_kind}, "variants": result}
    (workdir / RESULT).write_text(json.dumps(doc), encoding="utf-8")
    np.savez(workdir / MAPS, **maps)


if __name__ == "__main__":
    run(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))

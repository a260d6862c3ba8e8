"""The run records every reader accepts, generated from what a run can write: the run JSON's losses and
learned scalars, the checkpoints, the manifests, and the largest windows file.

The maps, q and k of every variant are generated in tests/bundles/test_layout_acceptance.py; these are the numbers around them.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from helpers.bundles import write_manifest
from helpers.properties import FAST, H
from hypothesis import given
from hypothesis import strategies as st

from attngeom.base.errors import InputError
from attngeom.base.train_config import PRESETS
from attngeom.base.variants import TRAINABLE
from attngeom.bundles import arrays, layout
from attngeom.training import runs
from attngeom.training.local_run import MAX_WINDOWS

# A validation loss is a mean -log p: >= 0 and finite, with no upper bound (float32 logits reach 3.4e38).
LOSSES = st.one_of(st.sampled_from([0.0, 1e-30, 4.17, 3.4e38]), st.floats(0, 3.4e38))
SOFTPLUS = st.one_of(st.sampled_from([0.0, 1e-45, 3e-3, 88.0]), st.floats(0, 1e30))  # b, eps: softplus >= 0


@FAST
@given(
    curve=st.lists(LOSSES, max_size=4),
    scalars=st.lists(SOFTPLUS, min_size=2 * H, max_size=2 * H),
    bad=st.sampled_from(["", "negative b", "NaN eps", "inf loss", "negative loss", "a string"]),
)
def test_the_run_json_accepts_every_finite_loss_and_softplus_scalar(curve, scalars, bad):
    record = {
        "variant": "yat_b",
        "seed": 0,
        "best_val": min(curve, default=None),  # null: a run stopped before its first evaluation
        "curve": [{"step": 500 * (i + 1), "val": v} for i, v in enumerate(curve)],
        "b_learned": [scalars[:H]],
        "eps_learned": [scalars[H:]],
    }
    damage = {
        "negative b": {"b_learned": [[-1e-30] * H]},
        "NaN eps": {"eps_learned": [[float("nan")] * H]},
        "inf loss": {"best_val": float("inf")},
        "negative loss": {"curve": [{"step": 500, "val": -1e-9}]},
        "a string": {"best_val": "1.5"},
    }.get(bad, {})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / layout.RUN_JSON
        path.write_text(json.dumps({"runs": [{**record, **damage}], "cfg": PRESETS["smoke"].original_cfg()}))
        if not bad:
            assert layout.read_run_json(path)["runs"][0]["b_learned"] == [scalars[:H]]
        else:
            with pytest.raises(InputError, match=r"best_val|b_learned|eps_learned|curve"):
                layout.read_run_json(path)


@FAST
@given(steps=st.integers(1, 50), data=st.data(), bad=st.sampled_from(["", "no steps done", "too many", "a NaN loss"]))
def test_a_checkpoint_with_finite_losses_is_read_however_extreme(steps, data, bad):
    """Saved after an evaluation or at a stop: 1 <= done <= steps, and training stopped on any non-finite loss."""
    done = data.draw(st.integers(1, steps))
    losses = np.array(data.draw(st.lists(LOSSES, min_size=done, max_size=done)), np.float32)
    done = {"no steps done": 0, "too many": steps + 1}.get(bad, done)
    if bad == "a NaN loss":
        losses[-1] = np.nan
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.npz"
        runs.write_checkpoint(path, {"done": np.array(done), "losses": losses[:done]})
        if not bad:
            assert runs.checkpoint_step(path, steps) == done
        else:
            with pytest.raises(InputError, match="unusable checkpoint"):
                runs.read_checkpoint(path, steps)


@FAST
@given(
    seeds=st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=1500, unique=True),
    windows=st.integers(1, MAX_WINDOWS),
    error=st.one_of(st.none(), st.text(max_size=50), st.integers(10_001, 200_000).map(lambda n: "x" * n)),
    preflight=st.sampled_from([None, "PASS", "FAIL", "ERROR"]),
)
def test_a_manifest_is_read_whatever_seeds_windows_and_error_the_run_had(seeds, windows, error, preflight):
    """What `rerun` writes: any number of seeds, 1 to MAX_WINDOWS windows, an exception's message of any
    length (a failed run must stay resumable), the preflight's verdict."""
    fields = {"windows": windows, "preflight": preflight and {"verdict": preflight, "steps": 3}}
    fields |= {"error": error, "completed": False} if error is not None else {}
    with tempfile.TemporaryDirectory() as tmp:
        write_manifest(Path(tmp), "smoke", TRAINABLE, **fields)
        manifest = json.loads((Path(tmp) / runs.MANIFEST).read_text())
        manifest["config"]["seeds"] = seeds
        (Path(tmp) / runs.MANIFEST).write_text(json.dumps(manifest))
        assert runs.read_manifest(Path(tmp) / runs.MANIFEST)["config"]["seeds"] == seeds


def test_the_largest_windows_file_a_rerun_writes_fits_the_npz_bound():
    """`--windows MAX_WINDOWS` on the paper preset: float16 maps (W, L, H, T, T) at each telemetry step,
    float16 q and k (W, L, H, T, D), int32 tokens and steps, all under the reader's declared-size bound."""
    cfg = PRESETS["paper"]
    m, W = cfg.model, MAX_WINDOWS
    maps = len(cfg.telemetry_steps()) * W * m.layers * m.heads * m.seq_len * m.seq_len * 2
    qk = 2 * W * m.layers * m.heads * m.seq_len * m.head_dim * 2
    assert maps + qk + W * m.seq_len * 4 + len(cfg.telemetry_steps()) * 4 < arrays.MAX_NPZ_BYTES

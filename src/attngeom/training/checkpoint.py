"""A variant's training in progress and its checkpoint: the state, the step reached, everything recorded.

The state (parameters, optimiser, dropout rng keys and counters) is stored leaf by leaf under its
tree path, so that a checkpoint of another configuration is recognised and refused; beside it, the
stamp of the trajectory (`training.trajectory`), which `--resume` compares with its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from attngeom.base.errors import InputError
from attngeom.training import runs


@dataclass
class Progress:
    """A variant's training after `done` steps: its state and everything recorded so far."""

    state: tuple  # (params, rest, opt_state): parameters, dropout rngs and counters, optimiser
    done: int
    losses: np.ndarray  # (steps,) training loss of each step, zero from `done` on
    curve: list[dict]  # {"step", "val"} of each evaluation
    score_max: list[float]  # per validation batch and layer, at the last evaluation
    maps: dict[int, np.ndarray]  # telemetry step -> attn_LHTT on the fixed window
    window_maps: dict[int, np.ndarray]  # telemetry step -> attn_WLHTT on every window


def _named_leaves(state) -> list[tuple[str, jax.Array]]:
    """Each leaf of a state with its tree path ("state/0/blocks/0/attn/b_raw"): the checkpoint's names."""
    leaves = jax.tree_util.tree_leaves_with_path(state)
    return [("state/" + jax.tree_util.keystr(path, simple=True, separator="/"), leaf) for path, leaf in leaves]


def _leaf_to_numpy(leaf: jax.Array) -> np.ndarray:
    is_key = jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)
    return np.asarray(jax.random.key_data(leaf) if is_key else leaf)


def save_checkpoint(path: Path, progress: Progress, stamp: dict | None = None) -> None:
    """Everything needed to continue after `progress.done` steps, and the stamp of the trajectory it
    belongs to (`training.trajectory`), written atomically (tmp + rename)."""
    p = progress
    runs.write_checkpoint(
        path,
        {
            **({} if stamp is None else {runs.STAMP: runs.stamp_array(stamp)}),
            "done": np.array(p.done),
            "losses": p.losses[: p.done],
            "curve_step": np.array([c["step"] for c in p.curve], np.int64),
            "curve_val": np.array([c["val"] for c in p.curve], np.float64),
            "score_max": np.array(p.score_max, np.float64),
            "map_steps": np.array(sorted(p.maps), np.int64),
            **{f"map_{s}": m for s, m in p.maps.items()},
            "window_steps": np.array(sorted(p.window_maps), np.int64),
            **{f"windows_{s}": m for s, m in p.window_maps.items()},
            **{name: _leaf_to_numpy(leaf) for name, leaf in _named_leaves(p.state)},
        },
    )


def load_checkpoint(path: Path, like_state, steps: int) -> Progress:
    """The progress `save_checkpoint` wrote; `like_state` gives the structure, names and shapes."""
    z = runs.read_checkpoint(path, steps)
    like = _named_leaves(like_state)
    another = InputError(f"{path}: checkpoint of another configuration; delete it to restart that variant")
    if any(name not in z or z[name].shape != np.shape(_leaf_to_numpy(x)) for name, x in like):
        raise another
    try:
        maps = {int(s): z[f"map_{s}"] for s in z["map_steps"]}
        window_maps = {int(s): z[f"windows_{s}"] for s in z["window_steps"]}
    except KeyError:
        raise another from None
    leaves = [
        jax.random.wrap_key_data(z[name], impl=jax.random.key_impl(x))
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
        else jnp.asarray(z[name], dtype=x.dtype)
        for name, x in like
    ]
    done = int(z["done"])
    losses = np.zeros(steps, np.float32)
    losses[:done] = z["losses"]
    curve = [{"step": int(s), "val": float(v)} for s, v in zip(z["curve_step"], z["curve_val"])]
    state = jax.tree.unflatten(jax.tree.structure(like_state), leaves)
    return Progress(state, done, losses, curve, z["score_max"].tolist(), maps, window_maps)

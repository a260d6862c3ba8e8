"""Ensemble members trained together: their states stacked on a leading member axis, one vmapped step.

One paper model at batch 64 leaves a large GPU almost idle. Here the K members of one variant
and seed run in one compiled chunk: `jax.vmap` of the chunk over the stacked state, the batches
(which depend only on the seed and the step) shared by every member, and the probes and the
evaluation vmapped the same way. Everything around it is `train.train_group`'s: each member keeps
its own losses, maps, curve, callbacks and checkpoint, so its results and files are those of a
member trained alone, up to the round-off of the batched computation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from attngeom.base.train_config import TrainConfig
from attngeom.training import data, train


def stack(states: list) -> tuple:
    """The members' states stacked leaf by leaf on a new leading axis K."""
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *states)


def unstack(state: tuple) -> list:
    """Member by member, the states `stack` joined."""
    k = len(jax.tree.leaves(state)[0])
    return [jax.tree.map(lambda leaf, m=m: leaf[m], state) for m in range(k)]


def vmapped(graphdef: nnx.GraphDef, eval_graphdef: nnx.GraphDef, tx: optax.GradientTransformation) -> train.Engine:
    """The engine of K members trained together: every function vmapped over the member axis."""
    chunk = jax.vmap(train.scan_steps(train.make_step(graphdef, tx)), in_axes=(0, None, None, None))
    members = (0, 0, None)
    return train.Engine(
        chunk=jax.jit(chunk, donate_argnums=0),
        probe=jax.jit(jax.vmap(train.probe_fn(eval_graphdef), in_axes=members)),
        window_probe=jax.jit(
            jax.vmap(jax.vmap(train.probe_fn(eval_graphdef), in_axes=(None, None, 0)), in_axes=members)
        ),
        evaluate=jax.jit(jax.vmap(train.eval_fn(eval_graphdef), in_axes=(0, 0, None, None))),
        stack=stack,
        unstack=unstack,
        split=lambda a: list(np.asarray(a)),
    )


def train_members(
    variant: str,
    seed: int,
    cfg: TrainConfig,
    corpus: data.Corpus,
    members: list[train.Member],
    budget_s: float | None = None,
) -> list[train.RunResult]:
    """Train `members` of one variant and seed together (see `train.train_group`), one result each."""
    return train.train_group(variant, seed, cfg, corpus, members, vmapped, budget_s)

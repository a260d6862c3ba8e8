"""The FLOPs of one training step, and the time a schedule of such steps takes at a given rate.

XLA's `cost_analysis()` of one training step as jax lowers it (K members vmapped when K > 1, as
`training.together` trains them) gives its FLOPs: the step's operations counted before compilation,
in seconds where compiling the step takes a minute, and without what this machine's compiler makes
of them (its fusions recompute a little: on a CPU, the compiled step of 4 members of yat_b in the
paper preset counts 0.603 TFLOP, the lowered one 0.598). At a GPU's float32 rate and an assumed
fraction of it reached, the steps of every variant take an estimated time, to which each variant's
compilation is added. The GPU check sizes its runs with it (`bench/gpu_budget.py`), and `kaggle
build --members K` sizes its kernels (`backends.kaggle_budget`). Loads jax only when a step is measured.
"""

from __future__ import annotations

from attngeom.base.train_config import TrainConfig

COMPILE_S = 30.0  # the compilation of one variant's step, assumed (seconds)
EFFICIENCY = 0.3  # the fraction of a GPU's float32 rate a step reaches, assumed (not measured on a GPU yet)


def step_flops(variant: str, cfg: TrainConfig, members: int) -> float:
    """FLOPs of one training step of `members` members (vmapped when more than one), by XLA's cost analysis of
    the lowered step (nothing is compiled)."""
    import jax
    import numpy as np

    from attngeom.training import together, train

    graphdef, _, tx, state = train.init_state(variant, cfg, seed=0)
    step = train.make_step(graphdef, tx)
    if members > 1:
        state = together.stack([state] * members)
        step = jax.vmap(step, in_axes=(0, None, None))
    x_BT = np.zeros((cfg.batch, cfg.model.seq_len), np.int32)
    cost = jax.jit(step).lower(state, x_BT, x_BT).cost_analysis()
    # a list of one dict in older jax releases; a dict in jax 0.10.2 (the lock) and 0.11.2 (checked with both)
    return float((cost[0] if isinstance(cost, list) else cost)["flops"])


def schedule_seconds(flops: dict[str, float], steps: int, flops_per_s: float, compile_s: float = COMPILE_S) -> float:
    """Seconds to train `steps` steps of every variant of `flops` (variant -> FLOPs per step) one after
    another at `flops_per_s`, each variant's compilation included."""
    return steps * sum(flops.values()) / flops_per_s + compile_s * len(flops)

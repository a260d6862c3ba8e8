"""Training one variant as the original runs did, with chunks of steps executed on device.

The original loop ran one jitted step per host call. Here `lax.scan` runs up to `chunk` steps per
call; the batches of a chunk are still drawn on the host with the original numpy seeds, so the
data order, the dropout keys (the NNX rng counters travel in the scanned state) and the result
are those of the per-step loop. Chunks end at every evaluation and telemetry step; a chunk
shorter than `chunk` is padded with inactive steps that `lax.cond` skips, so each variant
compiles one step function, whatever the step count.

With a checkpoint path, the state (parameters, optimiser, dropout rng keys and counters) and
everything recorded so far are saved after every evaluation, and training continues from a saved
checkpoint: the batches of a step depend only on the step, so the result is that of an
uninterrupted run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from attngeom.training import data
from attngeom.errors import InputError
from attngeom.files import atomic_file
from attngeom.training.model import ModelConfig, build
from attngeom.variants import variant as variant_spec


@dataclass(frozen=True)
class TrainConfig:
    """Everything a run depends on besides the variant and the seed (paper preset by default)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    batch: int = 64
    steps: int = 12_000
    eval_every: int = 500
    val_batches: int = 16
    weight_decay: float = 0.01
    lr: float | None = None  # one learning rate for every variant, else each variant's original one
    chunk: int = 50
    stop_after: int | None = None  # the last step trained: the first part of the schedule, else all of it

    def steps_done(self) -> int:
        """How many steps a run of this configuration trains."""
        return self.steps if self.stop_after is None else self.stop_after + 1

    def lr_of(self, variant: str) -> float:
        return self.lr if self.lr is not None else variant_spec(variant).lr

    def telemetry_steps(self) -> tuple[int, ...]:
        """0 (before any update), steps//10, steps//2, steps-1 (after that step's update)."""
        return tuple(sorted({0, self.steps // 10, self.steps // 2, self.steps - 1}))

    def eval_points(self) -> tuple[int, ...]:
        """Numbers of completed steps after which the validation loss is measured."""
        return tuple(sorted({*range(self.eval_every, self.steps + 1, self.eval_every), self.steps}))

    def original_cfg(self) -> dict:
        """The `cfg` record of the original run JSON."""
        m, lr = self.model, self.lr_of("softmax")  # the original records softmax's rate
        cfg = {
            "D": m.d_model, "LAYERS": m.layers, "HEADS": m.heads, "T": m.seq_len, "FF": m.d_ff,
            "BATCH": self.batch, "STEPS": self.steps, "LR": lr, "DROP": m.dropout,
            "EVAL_EVERY": self.eval_every, "VAL_BATCHES": self.val_batches,
        }  # fmt: skip
        return cfg if self.stop_after is None else {**cfg, "STOPPED_AFTER": self.stop_after}


PRESETS = {
    "paper": TrainConfig(),
    "smoke": TrainConfig(
        model=ModelConfig(d_model=32, layers=6, heads=4, seq_len=32, d_ff=64),
        batch=8, steps=60, eval_every=20, val_batches=2, chunk=20,
    ),
}  # fmt: skip


def preset(name: str, **overrides) -> TrainConfig:
    """A preset with some fields replaced (None values are ignored)."""
    return replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})


@dataclass
class RunResult:
    """What one trained variant leaves behind, in the shapes the bundles store."""

    variant: str
    seed: int
    lr: float
    losses: np.ndarray  # (steps,) training loss of each step
    curve: list[dict]
    tokens_T: np.ndarray
    prompt: str  # the window's text
    maps: dict[int, np.ndarray]  # telemetry step -> attn_LHTT
    q_LHTD: np.ndarray
    k_LHTD: np.ndarray
    attn_LHTT: np.ndarray
    score_max: list[float]  # per validation batch and layer: the largest raw score at the last evaluation
    b_LH: np.ndarray | None
    eps_LH: np.ndarray | None
    wall_s: float

    @property
    def best_val(self) -> float:
        return min(p["val"] for p in self.curve)


def _loss(model: nnx.Module, x_BT: jax.Array, y_BT: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(model(x_BT), y_BT).mean()


def make_step(graphdef: nnx.GraphDef, tx: optax.GradientTransformation) -> Callable:
    """One adamw step on pure state `(params, rest, opt_state)`; `rest` holds the dropout rngs."""

    def step(state, x_BT, y_BT):
        params, rest, opt_state = state

        def loss_fn(p):
            model = nnx.merge(graphdef, p, rest)
            loss = _loss(model, x_BT, y_BT)
            return loss, nnx.as_pure(nnx.state(model, nnx.Not(nnx.Param)))

        (loss, rest), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), rest, opt_state), loss

    return step


def make_chunk(step: Callable) -> Callable:
    """`step` scanned over a chunk of batches (K, B, T); inactive (padding) steps change nothing."""

    def run(state, x_KBT, y_KBT, active_K):
        def body(carry, inputs):
            x_BT, y_BT, active = inputs
            skip = lambda s: (s, jnp.zeros((), jnp.float32))  # noqa: E731
            return jax.lax.cond(active, lambda s: step(s, x_BT, y_BT), skip, carry)

        return jax.lax.scan(body, state, (x_KBT, y_KBT, active_K))

    return jax.jit(run, donate_argnums=0)


def make_probe(graphdef: nnx.GraphDef) -> Callable:
    """Eval-mode q, k (L, H, T, Dh) and weights (L, H, T, T) on one window."""

    def probe(params, rest, tokens_T):
        _, p = nnx.merge(graphdef, params, rest).forward(tokens_T[None])
        return p["q"][:, 0], p["k"][:, 0], p["attn"][:, 0]

    return jax.jit(probe)


def make_eval(graphdef: nnx.GraphDef) -> Callable:
    """Eval-mode loss of each validation batch (N,) and each layer's largest raw score (N, L)."""

    def evaluate(params, rest, x_NBT, y_NBT):
        def one(xy):
            logits, p = nnx.merge(graphdef, params, rest).forward(xy[0])
            return optax.softmax_cross_entropy_with_integer_labels(logits, xy[1]).mean(), p["score_max"]

        return jax.lax.map(one, (x_NBT, y_NBT))

    return jax.jit(evaluate)


def init_state(variant: str, cfg: TrainConfig, seed: int):
    """Model built from `nnx.Rngs(seed)`: train/eval graph definitions, pure state, optimiser."""
    model = build(variant, cfg.model, seed)
    tx = optax.adamw(cfg.lr_of(variant), weight_decay=cfg.weight_decay)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    eval_graphdef = nnx.split(nnx.view(model, deterministic=True), nnx.Param, ...)[0]
    params, rest = nnx.as_pure(params), nnx.as_pure(rest)
    return graphdef, eval_graphdef, tx, (params, rest, tx.init(params))


def chunk_plan(cfg: TrainConfig) -> list[tuple[int, int]]:
    """(first step, number of steps) of each device call; chunks end at every event and at the stop."""
    last = cfg.steps_done()
    ends = sorted({s + 1 for s in cfg.telemetry_steps() if s > 0} | set(cfg.eval_points()) | {last})
    ends = [end for end in ends if end <= last]
    plan, start = [], 0
    for end in ends:
        for first in range(start, end, cfg.chunk):
            plan.append((first, min(cfg.chunk, end - first)))
        start = end
    return plan


def chunk_batches(corpus: data.Corpus, cfg: TrainConfig, seed: int, first: int, n: int):
    x_KBT, y_KBT = data.train_batches(corpus, seed, range(first, first + n), cfg.batch, cfg.model.seq_len)
    pad = ((0, cfg.chunk - n), (0, 0), (0, 0))
    return np.pad(x_KBT, pad), np.pad(y_KBT, pad), np.arange(cfg.chunk) < n


def _leaf_to_numpy(leaf: jax.Array) -> np.ndarray:
    is_key = jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)
    return np.asarray(jax.random.key_data(leaf) if is_key else leaf)


def save_checkpoint(path: Path, state, done: int, losses: np.ndarray, curve: list[dict],
                    score_max: list[float], maps: dict[int, np.ndarray]) -> None:  # fmt: skip
    """Everything needed to continue after `done` steps, written atomically (tmp + rename)."""
    leaves = {f"leaf_{i}": _leaf_to_numpy(leaf) for i, leaf in enumerate(jax.tree.leaves(state))}
    with atomic_file(path) as f:
        np.savez(f, done=done, losses=losses[:done], curve_step=np.array([p["step"] for p in curve]),
                 curve_val=np.array([p["val"] for p in curve], np.float64),
                 score_max=np.array(score_max, np.float64), map_steps=np.array(sorted(maps)),
                 **{f"map_{s}": maps[s] for s in maps}, **leaves)  # fmt: skip


def checkpoint_step(path: Path) -> int:
    """Completed steps in a checkpoint, 0 if there is none."""
    if not path.is_file():
        return 0
    try:
        with np.load(path) as z:
            return int(z["done"])
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"{path}: unreadable checkpoint ({type(exc).__name__}); delete it to restart that variant") from exc


def load_checkpoint(path: Path, like_state, steps: int):
    """(state, done, losses, curve, score_max, maps) from `save_checkpoint`; `like_state` gives the structure."""
    like, treedef = jax.tree.flatten(like_state)
    try:
        with np.load(path) as z:
            stored = [z[f"leaf_{i}"] for i in range(len(like))]
            done, logged = int(z["done"]), z["losses"]
            curve = [{"step": int(s), "val": float(v)} for s, v in zip(z["curve_step"], z["curve_val"])]
            score_max, maps = z["score_max"].tolist(), {int(s): z[f"map_{s}"] for s in z["map_steps"]}
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"{path}: unreadable checkpoint ({type(exc).__name__}); delete it to restart that variant") from exc
    if [a.shape for a in stored] != [np.shape(_leaf_to_numpy(x)) for x in like] or done > steps:
        raise InputError(f"{path}: checkpoint of another configuration; delete it to restart that variant")
    leaves = [
        jax.random.wrap_key_data(a, impl=jax.random.key_impl(x))
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
        else jnp.asarray(a, dtype=x.dtype)
        for a, x in zip(stored, like)
    ]
    losses = np.zeros(steps, np.float32)
    losses[:done] = logged
    return jax.tree.unflatten(treedef, leaves), done, losses, curve, score_max, maps


def train_variant(
    variant: str,
    seed: int,
    cfg: TrainConfig,
    corpus: data.Corpus,
    on_steps: Callable[[int, np.ndarray], None] = lambda first, losses: None,
    on_eval: Callable[[int, float], None] = lambda step, val: None,
    checkpoint: Path | None = None,
) -> RunResult:
    """Train one variant; `on_steps(first_step, losses)` after each chunk, `on_eval(step, val)`.

    With `checkpoint`, continue from it if it exists and save it after every evaluation.
    """
    t0 = time.perf_counter()
    graphdef, eval_graphdef, tx, state = init_state(variant, cfg, seed)
    run_chunk = make_chunk(make_step(graphdef, tx))
    probe, evaluate = make_probe(eval_graphdef), make_eval(eval_graphdef)
    window_T = data.telemetry_window(corpus, cfg.model.seq_len)
    val_x, val_y = data.val_batches(corpus, cfg.val_batches, cfg.batch, cfg.model.seq_len)
    telemetry = set(cfg.telemetry_steps())

    def snapshot(state) -> np.ndarray:
        return np.asarray(probe(state[0], state[1], window_T)[2], dtype=np.float16)

    if checkpoint is not None and checkpoint.is_file():
        state, start, losses, curve, score_max, maps = load_checkpoint(checkpoint, state, cfg.steps)
    else:
        start, losses, curve, score_max, maps = 0, np.zeros(cfg.steps, np.float32), [], [], {0: snapshot(state)}
    plan = [(first, n) for first, n in chunk_plan(cfg) if first >= start]
    batches: Iterator = (chunk_batches(corpus, cfg, seed, first, n) for first, n in plan)
    upcoming = next(batches, None)
    for first, n in plan:
        state, loss_K = run_chunk(state, *upcoming)
        upcoming = next(batches, None)  # drawn on the host while the device works
        losses[first : first + n] = np.asarray(loss_K)[:n]
        if not np.isfinite(losses[first : first + n]).all():
            bad = first + int(np.argmin(np.isfinite(losses[first : first + n])))
            raise InputError(f"{variant} seed {seed}: training loss not finite at step {bad}; try a smaller --lr")
        on_steps(first, losses[first : first + n])
        done = first + n
        if done - 1 in telemetry and done > 1:
            maps[done - 1] = snapshot(state)
        if done in cfg.eval_points():
            val_N, smax_NL = evaluate(state[0], state[1], val_x, val_y)
            curve.append({"step": done, "val": float(np.mean(np.asarray(val_N, dtype=np.float64)))})
            score_max = np.asarray(smax_NL, dtype=np.float64).ravel().tolist()
            on_eval(done, curve[-1]["val"])
            if checkpoint is not None:
                save_checkpoint(checkpoint, state, done, losses, curve, score_max, maps)
    done = cfg.steps_done()
    if checkpoint is not None and done < cfg.steps and done not in cfg.eval_points():
        save_checkpoint(checkpoint, state, done, losses, curve, score_max, maps)  # to carry on later
    q, k, attn = (np.asarray(a, dtype=np.float16) for a in probe(state[0], state[1], window_T))
    b_LH = eps_LH = None
    if variant_spec(variant).kernel:
        scalars = nnx.merge(graphdef, state[0], state[1]).kernel_scalars()
        b_LH, eps_LH = (np.asarray(a, dtype=np.float64) for a in scalars)
    return RunResult(
        variant=variant, seed=seed, lr=cfg.lr_of(variant), losses=losses[:done], curve=curve, tokens_T=window_T,
        prompt=corpus.decode(window_T),
        maps=maps, q_LHTD=q, k_LHTD=k, attn_LHTT=attn, score_max=score_max,
        b_LH=b_LH, eps_LH=eps_LH, wall_s=time.perf_counter() - t0,
    )  # fmt: skip


def bits_per_char(nats: float) -> float:
    """Loss in bits per character."""
    return nats / math.log(2)

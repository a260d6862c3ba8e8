"""Training one variant as the original runs did, with chunks of steps executed on device.

The original loop ran one jitted step per host call. Here `lax.scan` runs up to `chunk` steps per
call; the batches of a chunk are still drawn on the host with the original numpy seeds, so the
data order, the dropout keys (the NNX rng counters travel in the scanned state) and the result
are those of the per-step loop. Chunks end at every evaluation and telemetry step; a chunk
shorter than `chunk` is padded with inactive steps that `lax.cond` skips, so each variant
compiles one step function, whatever the step count.

With a checkpoint path, the `Progress` (parameters, optimiser, dropout rng keys and counters,
each stored under its tree path, and everything recorded so far) is saved after every evaluation
and at the stop of a run stopped early, and training continues from a saved checkpoint: the
batches of a step depend only on the step, so the result is that of an uninterrupted run.

At every telemetry step the maps are taken on the fixed window (the bundles) and, with one
vmapped probe, on W windows (the fixed one first).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from attngeom.errors import InputError
from attngeom.training import data, runs
from attngeom.training.config import TrainConfig
from attngeom.training.model import build
from attngeom.variants import variant as variant_spec


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
    windows_WT: np.ndarray  # the fixed window and the more windows
    window_maps: dict[int, np.ndarray]  # telemetry step -> attn_WLHTT
    q_WLHTD: np.ndarray  # on every window, at the end of the run
    k_WLHTD: np.ndarray
    q_LHTD: np.ndarray
    k_LHTD: np.ndarray
    attn_LHTT: np.ndarray
    score_max: list[float]  # per validation batch and layer: the largest raw score at the last evaluation
    b_LH: np.ndarray | None
    eps_LH: np.ndarray | None
    wall_s: float

    @property
    def best_val(self) -> float | None:
        """The lowest validation loss; None before the first evaluation (a run stopped before it)."""
        return min((p["val"] for p in self.curve), default=None)


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
    """`step` scanned over a chunk of batches (I, B, T); inactive (padding) steps change nothing."""

    def run(state, x_IBT, y_IBT, active_I):
        def body(carry, inputs):
            x_BT, y_BT, active = inputs

            def skip(s):
                return s, jnp.zeros((), jnp.float32)

            return jax.lax.cond(active, lambda s: step(s, x_BT, y_BT), skip, carry)

        return jax.lax.scan(body, state, (x_IBT, y_IBT, active_I))

    return jax.jit(run, donate_argnums=0)


def _probe(graphdef: nnx.GraphDef) -> Callable:
    def probe(params, rest, tokens_T):
        _, p = nnx.merge(graphdef, params, rest).forward(tokens_T[None])
        return p["q"][:, 0], p["k"][:, 0], p["attn"][:, 0]

    return probe


def make_probe(graphdef: nnx.GraphDef) -> Callable:
    """Eval-mode q, k (L, H, T, Dh) and weights (L, H, T, T) on one window."""
    return jax.jit(_probe(graphdef))


def make_window_probe(graphdef: nnx.GraphDef) -> Callable:
    """`make_probe` on each of W windows at once: q, k (W, L, H, T, Dh) and weights (W, L, H, T, T)."""
    return jax.jit(jax.vmap(_probe(graphdef), in_axes=(None, None, 0)))


def make_eval(graphdef: nnx.GraphDef) -> Callable:
    """Eval-mode loss of each validation batch (E,) and each layer's largest raw score (E, L)."""

    def evaluate(params, rest, x_EBT, y_EBT):
        def one(xy):
            logits, p = nnx.merge(graphdef, params, rest).forward(xy[0])
            return optax.softmax_cross_entropy_with_integer_labels(logits, xy[1]).mean(), p["score_max"]

        return jax.lax.map(one, (x_EBT, y_EBT))

    return jax.jit(evaluate)


PERTURBATION_SEED = 20_260  # with the member number, the seed of a member's signs: [PERTURBATION_SEED, member]


def perturb(params, member: int):
    """The parameters of ensemble member `member`: member 0 unchanged; member m >= 1 moves every
    float32 parameter by one ulp, up or down by a sign drawn per entry from
    `np.random.default_rng([PERTURBATION_SEED, m])`, leaf after leaf in tree order.

    `np.nextafter` gives the neighbouring float32, so the perturbation is the smallest one the
    format can carry: what another machine's round-off does to the first update. A zero moves to
    the smallest subnormal (1.4e-45), which a CPU that flushes subnormals treats as zero.
    """
    if member == 0:
        return params
    rng = np.random.default_rng([PERTURBATION_SEED, member])

    def move(x):
        x = np.asarray(x)
        sign = rng.choice(np.array([-np.inf, np.inf], x.dtype), size=x.shape)
        return jnp.asarray(np.nextafter(x, sign))

    return jax.tree.map(move, params)


def init_state(variant: str, cfg: TrainConfig, seed: int):
    """Model built from `nnx.Rngs(seed)` (perturbed for an ensemble member): train/eval graph
    definitions, pure state, optimiser."""
    model = build(variant, cfg.model, seed)
    tx = optax.adamw(cfg.lr_of(variant), weight_decay=cfg.weight_decay)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    eval_graphdef = nnx.split(nnx.view(model, deterministic=True), nnx.Param, ...)[0]
    params, rest = perturb(nnx.as_pure(params), cfg.member), nnx.as_pure(rest)
    return graphdef, eval_graphdef, tx, (params, rest, tx.init(params))


def chunk_plan(cfg: TrainConfig, start: int = 0) -> list[tuple[int, int]]:
    """(first step, number of steps) of each device call from `start` on; chunks end at every event and at the stop.

    Where the chunks begin and end changes no result: every step runs the same compiled step function.
    """
    last = cfg.steps_done()
    ends = sorted({s + 1 for s in cfg.telemetry_steps() if s > 0} | set(cfg.eval_points()) | {last})
    ends = [end for end in ends if start < end <= last]
    plan = []
    for end in ends:
        for first in range(start, end, cfg.chunk):
            plan.append((first, min(cfg.chunk, end - first)))
        start = end
    return plan


def chunk_batches(corpus: data.Corpus, cfg: TrainConfig, seed: int, first: int, n: int):
    x_IBT, y_IBT = data.train_batches(corpus, seed, range(first, first + n), cfg.batch, cfg.model.seq_len)
    pad = ((0, cfg.chunk - n), (0, 0), (0, 0))
    return np.pad(x_IBT, pad), np.pad(y_IBT, pad), np.arange(cfg.chunk) < n


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


def save_checkpoint(path: Path, progress: Progress) -> None:
    """Everything needed to continue after `progress.done` steps, written atomically (tmp + rename)."""
    p = progress
    runs.write_checkpoint(
        path,
        {
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

    With `checkpoint`, continue from it if it exists and save it after every evaluation and at the stop.
    """
    t0 = time.perf_counter()
    graphdef, eval_graphdef, tx, state = init_state(variant, cfg, seed)
    run_chunk = make_chunk(make_step(graphdef, tx))
    probe, evaluate = make_probe(eval_graphdef), make_eval(eval_graphdef)
    window_probe = make_window_probe(eval_graphdef)
    window_T = data.telemetry_window(corpus, cfg.model.seq_len)
    windows_WT = data.telemetry_windows(corpus, cfg.model.seq_len, cfg.windows)
    val_x, val_y = data.val_batches(corpus, cfg.val_batches, cfg.batch, cfg.model.seq_len)
    telemetry = set(cfg.telemetry_steps())

    def snapshot(p: Progress, step: int) -> None:
        p.maps[step] = np.asarray(probe(p.state[0], p.state[1], window_T)[2], dtype=np.float16)
        p.window_maps[step] = np.asarray(window_probe(p.state[0], p.state[1], windows_WT)[2], dtype=np.float16)

    if checkpoint is not None and checkpoint.exists():
        p = load_checkpoint(checkpoint, state, cfg.steps)
    else:
        p = Progress(state, 0, np.zeros(cfg.steps, np.float32), [], [], {}, {})
        snapshot(p, 0)
    plan = chunk_plan(cfg, start=p.done)
    batches: Iterator = (chunk_batches(corpus, cfg, seed, first, n) for first, n in plan)
    upcoming = next(batches, None)
    for first, n in plan:
        p.state, loss_I = run_chunk(p.state, *upcoming)
        upcoming = next(batches, None)  # drawn on the host while the device works
        losses_I = p.losses[first : first + n] = np.asarray(loss_I)[:n]
        if not np.isfinite(losses_I).all():
            bad = first + int(np.argmin(np.isfinite(losses_I)))
            raise InputError(f"{variant} seed {seed}: training loss not finite at step {bad}; try a smaller --lr")
        on_steps(first, losses_I)
        p.done = first + n
        if p.done - 1 in telemetry and p.done > 1:
            snapshot(p, p.done - 1)
        if p.done in cfg.eval_points():
            val_E, smax_EL = evaluate(p.state[0], p.state[1], val_x, val_y)
            p.curve.append({"step": p.done, "val": float(np.mean(np.asarray(val_E, dtype=np.float64)))})
            p.score_max = np.asarray(smax_EL, dtype=np.float64).ravel().tolist()
            on_eval(p.done, p.curve[-1]["val"])
        if checkpoint is not None and (p.done in cfg.eval_points() or p.done == cfg.steps_done()):
            save_checkpoint(checkpoint, p)  # at the stop of a stopped run too, to carry it on later
    state, done = p.state, p.done
    q, k, attn = (np.asarray(a, dtype=np.float16) for a in probe(state[0], state[1], window_T))
    q_WLHTD, k_WLHTD, _ = (np.asarray(a, dtype=np.float16) for a in window_probe(state[0], state[1], windows_WT))
    b_LH = eps_LH = None
    if variant_spec(variant).kernel:
        scalars = nnx.merge(graphdef, state[0], state[1]).kernel_scalars()
        b_LH, eps_LH = (np.asarray(a, dtype=np.float64) for a in scalars)
    return RunResult(
        variant=variant,
        seed=seed,
        lr=cfg.lr_of(variant),
        losses=p.losses[:done],
        curve=p.curve,
        tokens_T=window_T,
        prompt=corpus.decode(window_T),
        maps=p.maps,
        q_LHTD=q,
        k_LHTD=k,
        attn_LHTT=attn,
        score_max=p.score_max,
        windows_WT=windows_WT,
        window_maps=p.window_maps,
        q_WLHTD=q_WLHTD,
        k_WLHTD=k_WLHTD,
        b_LH=b_LH,
        eps_LH=eps_LH,
        wall_s=time.perf_counter() - t0,
    )

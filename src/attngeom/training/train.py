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

`train_group` runs that loop for a group of ensemble members of one variant and seed through an
`Engine`: `single` (one member, the functions above as they are; `train_variant`) or
`training.together.vmapped` (the members stacked and vmapped into one step).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from attngeom.base.errors import InputError
from attngeom.base.train_config import TrainConfig
from attngeom.base.variants import variant as variant_spec
from attngeom.training import data, runs
from attngeom.training.checkpoint import Progress, load_checkpoint, save_checkpoint
from attngeom.training.model import build


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


def scan_steps(step: Callable) -> Callable:
    """`step` scanned over a chunk of batches (I, B, T); inactive (padding) steps change nothing."""

    def run(state, x_IBT, y_IBT, active_I):
        def body(carry, inputs):
            x_BT, y_BT, active = inputs

            def skip(s):
                return s, jnp.zeros((), jnp.float32)

            return jax.lax.cond(active, lambda s: step(s, x_BT, y_BT), skip, carry)

        return jax.lax.scan(body, state, (x_IBT, y_IBT, active_I))

    return run


def make_chunk(step: Callable) -> Callable:
    """`scan_steps(step)` compiled, its state donated."""
    return jax.jit(scan_steps(step), donate_argnums=0)


def probe_fn(graphdef: nnx.GraphDef) -> Callable:
    """Eval-mode q, k (L, H, T, Dh) and weights (L, H, T, T) on one window, uncompiled."""

    def probe(params, rest, tokens_T):
        _, p = nnx.merge(graphdef, params, rest).forward(tokens_T[None])
        return p["q"][:, 0], p["k"][:, 0], p["attn"][:, 0]

    return probe


def make_probe(graphdef: nnx.GraphDef) -> Callable:
    """Eval-mode q, k (L, H, T, Dh) and weights (L, H, T, T) on one window."""
    return jax.jit(probe_fn(graphdef))


def make_window_probe(graphdef: nnx.GraphDef) -> Callable:
    """`make_probe` on each of W windows at once: q, k (W, L, H, T, Dh) and weights (W, L, H, T, T)."""
    return jax.jit(jax.vmap(probe_fn(graphdef), in_axes=(None, None, 0)))


def eval_fn(graphdef: nnx.GraphDef) -> Callable:
    """Eval-mode loss of each validation batch (E,) and each layer's largest raw score (E, L), uncompiled."""

    def evaluate(params, rest, x_EBT, y_EBT):
        def one(xy):
            logits, p = nnx.merge(graphdef, params, rest).forward(xy[0])
            return optax.softmax_cross_entropy_with_integer_labels(logits, xy[1]).mean(), p["score_max"]

        return jax.lax.map(one, (x_EBT, y_EBT))

    return evaluate


def make_eval(graphdef: nnx.GraphDef) -> Callable:
    """`eval_fn` compiled."""
    return jax.jit(eval_fn(graphdef))


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


RAMP_FROM = 2  # the steps of a process's first chunk; each next one twice as many, up to `cfg.chunk`


def chunk_plan(cfg: TrainConfig, start: int = 0, until: int | None = None) -> list[tuple[int, int]]:
    """(first step, number of steps) of each device call from `start` on (to `until` steps done if given);
    chunks end at every event and at the stop.

    The first chunks grow from `RAMP_FROM` steps: the first includes compiling the step, so a paper run
    shows its first steps, its compile time and its rate after seconds rather than after a whole chunk.
    Where the chunks begin and end changes no result: every step runs the same compiled step function.
    """
    last = cfg.steps_done() if until is None else until
    ends = sorted({s + 1 for s in cfg.telemetry_steps() if s > 0} | set(cfg.eval_points()) | {last})
    ends = [end for end in ends if start < end <= last]
    plan, size = [], min(RAMP_FROM, cfg.chunk)
    for end in ends:
        first = start
        while first < end:
            plan.append((first, min(size, end - first)))
            first, size = first + plan[-1][1], min(2 * size, cfg.chunk)
        start = end
    return plan


def chunk_batches(corpus: data.Corpus, cfg: TrainConfig, seed: int, first: int, n: int):
    x_IBT, y_IBT = data.train_batches(corpus, seed, range(first, first + n), cfg.batch, cfg.model.seq_len)
    pad = ((0, cfg.chunk - n), (0, 0), (0, 0))
    return np.pad(x_IBT, pad), np.pad(y_IBT, pad), np.arange(cfg.chunk) < n


@dataclass(frozen=True)
class Engine:
    """The compiled functions that train a group of members, and how their answers split per member.

    `state` is one member's state (`single`) or the members' states stacked on a leading axis
    (`training.together`); `split` turns a device answer into one numpy array per member.
    """

    chunk: Callable  # (state, x_IBT, y_IBT, active_I) -> (state, loss)
    probe: Callable  # (params, rest, tokens_T) -> (q, k, attn)
    window_probe: Callable  # (params, rest, windows_WT) -> (q, k, attn) on every window
    evaluate: Callable  # (params, rest, x_EBT, y_EBT) -> (val loss per batch, largest raw score per batch and layer)
    stack: Callable[[list], tuple]  # the members' states -> state
    unstack: Callable[[tuple], list]  # state -> the members' states
    split: Callable[[jax.Array], list[np.ndarray]]


_ENGINES: dict[tuple, Engine] = {}


def engine_for(engine_of: Callable[..., Engine], variant: str, cfg: TrainConfig, *made) -> Engine:
    """`engine_of(*made)` (graph definitions and optimiser), built once per process for what decides them
    (the variant, the model, the optimiser's settings): a later seed, member or resume of the same model
    reuses its compiled functions instead of tracing and loading them again (about 10 s a paper model)."""
    key = (engine_of, variant, cfg.model, cfg.lr_of(variant), cfg.weight_decay)
    if key not in _ENGINES:
        _ENGINES[key] = engine_of(*made)
    return _ENGINES[key]


def single(graphdef: nnx.GraphDef, eval_graphdef: nnx.GraphDef, tx: optax.GradientTransformation) -> Engine:
    """The engine of one member on its own: the compiled step, probes and evaluation as they are."""
    return Engine(
        chunk=make_chunk(make_step(graphdef, tx)),
        probe=make_probe(eval_graphdef),
        window_probe=make_window_probe(eval_graphdef),
        evaluate=make_eval(eval_graphdef),
        stack=lambda states: states[0],
        unstack=lambda state: [state],
        split=lambda a: [np.asarray(a)],
    )


@dataclass
class Member:
    """One trajectory of a group: its ensemble member number, callbacks and checkpoint."""

    member: int = 0
    on_steps: Callable[[int, np.ndarray], None] = lambda first, losses: None
    on_eval: Callable[[int, float], None] = lambda step, val: None
    checkpoint: Path | None = None
    stamp: dict | None = None  # the trajectory's stamp, saved in each checkpoint (`training.trajectory`)


def train_variant(
    variant: str,
    seed: int,
    cfg: TrainConfig,
    corpus: data.Corpus,
    on_steps: Callable[[int, np.ndarray], None] = lambda first, losses: None,
    on_eval: Callable[[int, float], None] = lambda step, val: None,
    checkpoint: Path | None = None,
    budget_s: float | None = None,
    stamp: dict | None = None,
) -> RunResult:
    """Train one variant (ensemble member `cfg.member`); `on_steps(first_step, losses)` after each chunk,
    `on_eval(step, val)`.

    With `checkpoint`, continue from it if it exists and save it (with `stamp`) after every evaluation and
    at the stop. With `budget_s`, stop after the last chunk that fits in that many seconds (see `train_group`).
    """
    member = Member(cfg.member, on_steps, on_eval, checkpoint, stamp)
    return train_group(variant, seed, cfg, corpus, [member], single, budget_s)[0]


def train_group(
    variant: str,
    seed: int,
    cfg: TrainConfig,
    corpus: data.Corpus,
    members: list[Member],
    engine_of: Callable[[nnx.GraphDef, nnx.GraphDef, optax.GradientTransformation], Engine],
    budget_s: float | None = None,
) -> list[RunResult]:
    """Train the members of one variant and seed on the same batches with `engine_of`'s engine.

    Members continue from their checkpoints; those behind first catch up with the others. With
    `budget_s`, training stops after the last chunk that fits in that many seconds from the start
    (a chunk's time taken as its steps times the slowest step of the chunks after the first, which
    compiles): the checkpoints are saved there, and the results are those of a run stopped after the
    step reached.
    """
    t0 = time.perf_counter()
    inits = [init_state(variant, replace(cfg, member=m.member), seed) for m in members]
    graphdef = inits[0][0]
    engine = engine_for(engine_of, variant, cfg, *inits[0][:3])
    window_T = data.telemetry_window(corpus, cfg.model.seq_len)
    windows_WT = data.telemetry_windows(corpus, cfg.model.seq_len, cfg.windows)
    val_x, val_y = data.val_batches(corpus, cfg.val_batches, cfg.batch, cfg.model.seq_len)
    telemetry = set(cfg.telemetry_steps())
    ps = [
        load_checkpoint(m.checkpoint, init[3], cfg.steps)
        if m.checkpoint is not None and m.checkpoint.exists()
        else Progress(init[3], 0, np.zeros(cfg.steps, np.float32), [], [], {}, {})
        for m, init in zip(members, inits)
    ]

    def snapshot(group: list[int], state, step: int) -> None:
        maps = engine.split(engine.probe(state[0], state[1], window_T)[2])
        window_maps = engine.split(engine.window_probe(state[0], state[1], windows_WT)[2])
        for i, attn, attn_W in zip(group, maps, window_maps):
            ps[i].maps[step] = attn.astype(np.float16)
            ps[i].window_maps[step] = attn_W.astype(np.float16)

    def keep(group: list[int], state, done: int, save: bool) -> None:
        """Hand the group's state back to its members; with `save`, their checkpoints, all or none in place."""
        for i, member_state in zip(group, engine.unstack(state)):
            ps[i].state, ps[i].done = member_state, done
        saved = [i for i in group if save and members[i].checkpoint is not None]
        if len(saved) == 1:
            save_checkpoint(members[saved[0]].checkpoint, ps[saved[0]], members[saved[0]].stamp)
        elif saved:
            paths = [members[i].checkpoint for i in saved]
            runs.commit_group(paths, lambda j, path: save_checkpoint(path, ps[saved[j]], members[saved[j]].stamp))

    def advance(group: list[int], until: int | None, budget: float | None) -> None:
        """Train the members `group` (all at one step) on to `until` (the end when None), or the budget's stop."""
        state, start = engine.stack([ps[i].state for i in group]), ps[group[0]].done
        if start == 0:
            snapshot(group, state, 0)
        plan = chunk_plan(cfg, start=start, until=until)
        batches: Iterator = (chunk_batches(corpus, cfg, seed, first, n) for first, n in plan)
        upcoming, per_step, done = next(batches, None), [], start
        for first, n in plan:
            if (
                budget is not None
                and per_step
                and time.perf_counter() - t0 + n * max(per_step[1:] or per_step) > budget
            ):
                break
            tick = time.perf_counter()
            state, loss = engine.chunk(state, *upcoming)
            upcoming = next(batches, None)  # drawn on the host while the device works
            for i, losses in zip(group, engine.split(loss)):
                ps[i].losses[first : first + n] = losses[:n]
                if not np.isfinite(losses[:n]).all():
                    bad = first + int(np.argmin(np.isfinite(losses[:n])))
                    who = f"{variant} seed {seed}" + (f" member {members[i].member}" if members[i].member else "")
                    raise InputError(f"{who}: training loss not finite at step {bad}; try a smaller --lr")
                members[i].on_steps(first, losses[:n])
            done = first + n
            if done - 1 in telemetry and done > 1:
                snapshot(group, state, done - 1)
            if done in cfg.eval_points():
                val_E, smax_EL = (engine.split(a) for a in engine.evaluate(state[0], state[1], val_x, val_y))
                for i, val, smax in zip(group, val_E, smax_EL):
                    ps[i].curve.append({"step": done, "val": float(np.mean(np.asarray(val, dtype=np.float64)))})
                    ps[i].score_max = np.asarray(smax, dtype=np.float64).ravel().tolist()
                    members[i].on_eval(done, ps[i].curve[-1]["val"])
            if done in cfg.eval_points() or done == cfg.steps_done():
                keep(group, state, done, save=True)  # at the stop of a stopped run too, to carry it on later
            per_step.append((time.perf_counter() - tick) / n)
        keep(group, state, done, save=done not in (cfg.steps_done(), until, *cfg.eval_points()))  # the budget's stop

    while len({p.done for p in ps}) > 1:  # those behind catch up (a group interrupted between its checkpoints)
        low = min(p.done for p in ps)
        advance([i for i, p in enumerate(ps) if p.done == low], min(p.done for p in ps if p.done > low), None)
    everyone = list(range(len(ps)))
    advance(everyone, None, budget_s)
    state = engine.stack([p.state for p in ps])
    finals = [
        engine.split(a)
        for a in (*engine.probe(state[0], state[1], window_T), *engine.window_probe(state[0], state[1], windows_WT))
    ]
    results = []
    for i, p in enumerate(ps):
        q, k, attn, q_WLHTD, k_WLHTD = (finals[j][i].astype(np.float16) for j in range(5))
        b_LH = eps_LH = None
        if variant_spec(variant).kernel:
            scalars = nnx.merge(graphdef, p.state[0], p.state[1]).kernel_scalars()
            b_LH, eps_LH = (np.asarray(a, dtype=np.float64) for a in scalars)
        results.append(
            RunResult(
                variant=variant,
                seed=seed,
                lr=cfg.lr_of(variant),
                losses=p.losses[: p.done],
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
        )
    return results

"""Training speed: the harness (chunks of steps under `lax.scan`) against a plain per-step loop.

The baseline is the original's structure: `nnx.Optimizer` and one `nnx.jit` step per host call.
Both draw every batch on the host with the original seeds inside the timed region, start from
the same initial model, and must produce identical losses. Prints steps/s per variant (median
of --repeats timed runs of --steps steps, compilation excluded) and the ratio harness/baseline.
Then, in the same process, the step's own matrix products (its shapes, forward and backward) timed
alone: the share of that matmul rate the harness's step reaches (1.0: the step is all matmul at
the rate the products reach alone).

    ./reproduce.sh bench train [--quick] [--members K] [--json FILE]   # or: python bench/bench_train.py

--quick: the smoke preset (a minute on 2 CPU cores); the default is the paper preset.
--members K: also K ensemble members one after another against the K trained together (one vmapped
step, `training.together`): member-steps/s of each (median of the repeats) and the ratio, the number
`rerun --members` chooses its default mode by (together on a GPU, one after another on a CPU).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: PYTHONSAFEPATH leaves the script's folder out
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from measured import write_figures  # bench/, beside this script

from attngeom.base import schema, train_config
from attngeom.base.files import output_file
from attngeom.base.variants import variant as variant_spec
from attngeom.cli import Parser, entry
from attngeom.commands import options
from attngeom.training import data, together, train
from attngeom.training.fidelity import LOSS_RTOL
from attngeom.training.model import build


def baseline(variant: str, cfg: train_config.TrainConfig, corpus: data.Corpus, steps: int, repeats: int):
    """Per-step nnx.jit loop: (losses of the first run, steps/s of each run)."""

    @nnx.jit
    def step(model, optimizer, x_BT, y_BT):
        loss, grads = nnx.value_and_grad(lambda m: train._loss(m, x_BT, y_BT))(model)
        optimizer.update(model, grads)
        return loss

    model = build(variant, cfg.model, seed=0)
    optimizer = nnx.Optimizer(model, optax.adamw(cfg.lr_of(variant), weight_decay=cfg.weight_decay), wrt=nnx.Param)
    initial = nnx.as_pure(nnx.state((model, optimizer)))  # nnx.jit retraces for a new model object: reset this one
    step(model, optimizer, *data.batch(corpus.train_M, cfg.batch, cfg.model.seq_len, 0)).block_until_ready()
    losses, rates = None, []
    for _ in range(repeats):
        nnx.update((model, optimizer), initial)
        t0 = time.perf_counter()
        batches = (data.batch(corpus.train_M, cfg.batch, cfg.model.seq_len, s) for s in range(steps))
        out = [step(model, optimizer, *xy) for xy in batches]
        out = np.asarray(jax.block_until_ready(out))
        rates.append(steps / (time.perf_counter() - t0))
        losses = out if losses is None else losses
    return losses, rates


def harness(variant: str, cfg: train_config.TrainConfig, corpus: data.Corpus, steps: int, repeats: int):
    """The harness's chunked steps: (losses of the first run, steps/s of each run)."""
    graphdef, _, tx, state = train.init_state(variant, cfg, seed=0)
    run_chunk = train.make_chunk(train.make_step(graphdef, tx))
    x_KBT, y_KBT, _ = train.chunk_batches(corpus, cfg, 0, 0, 1)
    jax.block_until_ready(run_chunk(state, x_KBT, y_KBT, np.zeros(cfg.chunk, bool)))  # compile; all steps inactive
    losses, rates = None, []
    for _ in range(repeats):
        state = train.init_state(variant, cfg, seed=0)[3]
        t0 = time.perf_counter()
        out = []
        for first in range(0, steps, cfg.chunk):
            n = min(cfg.chunk, steps - first)
            state, loss_K = run_chunk(state, *train.chunk_batches(corpus, cfg, 0, first, n))
            out.append(np.asarray(loss_K)[:n])
        rates.append(steps / (time.perf_counter() - t0))
        losses = np.concatenate(out) if losses is None else losses
    return losses, rates


def step_matmuls(variant: str, cfg: train_config.TrainConfig) -> list[tuple[tuple[int, ...], tuple[int, ...], int]]:
    """The float32 matrix products of one training step with their shapes and counts: each linear layer's
    forward product and its two backward ones (the input's gradient, the weights'), and each layer's
    attention products (scores and mix, forward, and the four of their backward pass)."""
    m, spec = cfg.model, variant_spec(variant)
    N, BH, T, Dh = cfg.batch * m.seq_len, cfg.batch * m.heads, m.seq_len, m.head_dim
    attn_linears = 2 * spec.qk_proj + spec.v_residual + 1  # q, k, v where the variant has them; o
    linears = [(m.d_model, m.d_model, attn_linears * m.layers), (m.d_model, m.d_ff, m.layers)]
    linears += [(m.d_ff, m.d_model, m.layers), (m.d_model, m.vocab, 1)]
    products = []
    for d_in, d_out, count in linears:
        products += [((N, d_in), (d_in, d_out), count), ((N, d_out), (d_out, d_in), count)]
        products.append(((d_in, N), (N, d_out), count))
    products += [((BH, T, Dh), (BH, Dh, T), 2 * m.layers), ((BH, T, T), (BH, T, Dh), 4 * m.layers)]
    return products


def matmul_time(variant: str, cfg: train_config.TrainConfig, repeats: int) -> tuple[float, float]:
    """The step's own products (`step_matmuls`) timed alone, compiled as the step compiles them (float32 at
    the highest precision): (seconds per step, their float32 operations per step)."""
    seconds, flops = 0.0, 0.0
    rng = np.random.default_rng(0)
    product = jax.jit(jnp.matmul)
    for a_shape, b_shape, count in step_matmuls(variant, cfg):
        a, b = (jnp.asarray(rng.standard_normal(s, np.float32)) for s in (a_shape, b_shape))
        product(a, b).block_until_ready()
        reps = max(5, repeats)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            product(a, b).block_until_ready()
            times.append(time.perf_counter() - t0)
        seconds += count * statistics.median(times)
        flops += count * 2 * np.prod(a_shape) * b_shape[-1]
    return seconds, float(flops)


def members(variant: str, cfg: train_config.TrainConfig, corpus: data.Corpus, steps: int, repeats: int, k: int):
    """K members one after another and K together: (each member's first loss, member-steps/s of each run), by mode."""
    graphdef, eval_graphdef, tx, _ = train.init_state(variant, cfg, seed=0)
    engines = {"sequential": train.single, "together": together.vmapped}
    groups = {"sequential": [[m] for m in range(k)], "together": [list(range(k))]}

    def fresh(engine: train.Engine, group: list[int]):
        return engine.stack([train.init_state(variant, replace(cfg, member=m), seed=0)[3] for m in group])

    losses, rates = {}, {}
    for mode, engine_of in engines.items():
        engine = engine_of(graphdef, eval_graphdef, tx)
        x_IBT, y_IBT, _ = train.chunk_batches(corpus, cfg, 0, 0, 1)
        inactive = np.zeros(cfg.chunk, bool)
        jax.block_until_ready(engine.chunk(fresh(engine, groups[mode][0]), x_IBT, y_IBT, inactive))  # compile
        rates[mode], firsts = [], []
        for _ in range(repeats):
            states = [fresh(engine, group) for group in groups[mode]]
            t0 = time.perf_counter()
            for state in states:
                for first in range(0, steps, cfg.chunk):
                    n = min(cfg.chunk, steps - first)
                    state, loss = engine.chunk(state, *train.chunk_batches(corpus, cfg, 0, first, n))
                    if first == 0:
                        firsts.append(np.asarray(loss).reshape(-1, cfg.chunk)[:, 0])
                jax.block_until_ready(state)
            rates[mode].append(k * steps / (time.perf_counter() - t0))
        losses[mode] = np.concatenate(firsts[: len(groups[mode])])
    return losses, rates


def main() -> int:
    parser = Parser(
        prog="reproduce.sh bench train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the smoke preset, 20 steps (about a minute on a CPU)")
    parser.add_argument("--preset", choices=tuple(train_config.PRESETS), help="default: paper (smoke with --quick)")
    parser.add_argument("--variants", default="softmax,yat_b,goat_v")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per method (the median is reported)")
    parser.add_argument("--chunk", type=int, help="harness steps per device call (default: the preset's)")
    parser.add_argument(
        "--members",
        type=options.integer(2, schema.MAX_MEMBERS, "a number of members"),
        metavar="K",
        help="also K ensemble members: one after another vs together",
    )
    parser.add_argument("--json", type=output_file, metavar="FILE", help="also write the figures to FILE")
    args = parser.parse_args()
    preset = args.preset or ("smoke" if args.quick else "paper")
    cfg = train_config.preset(preset, chunk=args.chunk)
    corpus = data.load_corpus()
    device = jax.devices()[0]
    print(
        f"device: {device.platform} ({device.device_kind}); preset {preset};"
        f" {args.steps} steps x {args.repeats} runs; chunk {cfg.chunk}"
    )
    print(f"{'variant':8} {'baseline steps/s':>17} {'harness steps/s':>16} {'ratio':>6}  losses")
    figures = {}
    for variant in args.variants.split(","):
        base_losses, base_rates = baseline(variant, cfg, corpus, args.steps, args.repeats)
        ours_losses, ours_rates = harness(variant, cfg, corpus, args.steps, args.repeats)
        base, ours = statistics.median(base_rates), statistics.median(ours_rates)
        identical = bool(np.array_equal(base_losses, ours_losses))
        same = "identical" if identical else f"DIFFER (max abs {np.max(np.abs(base_losses - ours_losses)):.3g})"
        print(f"{variant:8} {base:17.2f} {ours:16.2f} {ours / base:6.2f}  {same}", flush=True)
        mm_s, flops = matmul_time(variant, cfg, args.repeats)
        step_s = 1 / ours
        print(
            f"{'':8} its matrix products alone: {mm_s:.3f} s of a {step_s:.3f} s step ({flops / 1e9:.1f} GFLOP,"
            f" {flops / mm_s / 1e9:.1f} GFLOP/s alone, {flops / step_s / 1e9:.1f} in the step):"
            f" the step reaches {mm_s / step_s:.2f} of the matmul rate",
            flush=True,
        )
        figures[variant] = {
            "baseline_steps_per_s": base,
            "harness_steps_per_s": ours,
            "ratio": ours / base,
            "identical_losses": identical,
            "matmul_s_per_step": mm_s,
            "matmul_gflop_per_step": flops / 1e9,
            "matmul_rate_share": mm_s / step_s,
        }
    ensemble = {}
    if args.members:
        print(
            f"{'variant':8} {'one after another':>17} {'together':>16} {'ratio':>6}  member-steps/s, K={args.members}"
        )
    for variant in args.variants.split(",") if args.members else []:
        first, rates = members(variant, cfg, corpus, args.steps, args.repeats, args.members)
        seq, tog = statistics.median(rates["sequential"]), statistics.median(rates["together"])
        agree = bool(np.allclose(first["together"], first["sequential"], rtol=LOSS_RTOL, atol=0))
        print(f"{variant:8} {seq:17.2f} {tog:16.2f} {tog / seq:6.2f}  first losses {'agree' if agree else 'DIFFER'}")
        ensemble[variant] = {
            "sequential_member_steps_per_s": seq,
            "together_member_steps_per_s": tog,
            "ratio": tog / seq,
            "first_losses_within_tolerance": agree,
        }
    if args.json:
        doc = {
            "device": {"platform": device.platform, "kind": device.device_kind},
            "preset": preset,
            "steps": args.steps,
            "repeats": args.repeats,
            "chunk": cfg.chunk,
            "variants": figures,
        }
        if args.members:
            doc["members"] = {"k": args.members, "variants": ensemble}
        write_figures(args.json, doc)
    return 0


if __name__ == "__main__":
    entry(main)  # the exit statuses of every command: a bad option is one `error:` line and 2

"""`reproduce.sh rerun --backend local`: retrain the seed-0 runs, write the bundles, judge them.

Two bundle folders, as the author published them: `attngeom-qk` (softmax and yat_b in one
`yat_attention.json`) and `attngeom-goat` (goat_v). They go into a new run folder with a
manifest and a per-step training log; then `verify` judges them with the rerun tolerances and
writes the report into `<run>/report`. The exit status is verify's.

Each variant saves a checkpoint into `<run>/checkpoints` at every evaluation; `--resume RUN`
continues an interrupted run from them to the same bundles an uninterrupted run writes. The
checkpoints are deleted once the run completes.

Before training on a GPU, a preflight runs `fidelity` for a few steps (`--preflight N`; on a CPU
only when asked): `fidelity.json` goes into the run folder and its verdict into the manifest's
`preflight`. A failed preflight does not stop the run; it is recorded.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

from attngeom.errors import InputError
from attngeom.options import list_of, seed

BUNDLES = {"attngeom-qk": ("softmax", "yat_b"), "attngeom-goat": ("goat_v", "goat_nov")}
DEFAULT_VARIANTS = ("softmax", "yat_b", "goat_v")
PRESET_NAMES = ("paper", "smoke")  # attngeom.training.train.PRESETS, named here so the CLI starts without jax
DETERMINISTIC_XLA_FLAGS = ("--xla_gpu_deterministic_ops=true",)
CHECKPOINTS = "checkpoints"


def checkpoint_path(run_dir: Path, variant: str, seed: int) -> Path:
    """Where a variant's latest checkpoint lives while its run is in progress."""
    return run_dir / CHECKPOINTS / f"{variant}_s{seed}.npz"


def deterministic_device() -> None:
    """Before the first computation: deterministic GPU kernels, one GPU, full-precision matmuls."""
    if importlib.util.find_spec("jax") is None:
        raise InputError(
            f"training needs jax, which this environment lacks (Python {sys.version.split()[0]}); "
            "jax 0.10.2 needs Python 3.11 or 3.12: delete .venv and run again with ATTNGEOM_PYTHON=python3.12"
        )
    flags = os.environ.get("XLA_FLAGS", "").split()
    os.environ["XLA_FLAGS"] = " ".join(flags + [f for f in DETERMINISTIC_XLA_FLAGS if f not in flags])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = "0" if visible is None else visible.split(",")[0]
    import jax

    jax.config.update("jax_default_matmul_precision", "highest")


def run_json(results: list, cfg) -> dict:
    """The original `yat_attention.json` of one bundle folder."""
    from attngeom.training.train import bits_per_char

    runs, summary = [], {}
    for r in results:
        record = {"variant": r.variant, "seed": r.seed, "best_val": r.best_val, "bpc": bits_per_char(r.best_val),
                  "curve": r.curve, "score_max": r.score_max}  # fmt: skip
        if r.b_LH is not None:
            record["b_learned"], record["eps_learned"] = r.b_LH.tolist(), r.eps_LH.tolist()
        record["telemetry_prompt"] = r.prompt
        runs.append(record)
    for variant in dict.fromkeys(r.variant for r in results):
        best = np.array([r.best_val for r in results if r.variant == variant])
        summary[variant] = {"best_val_mean": float(best.mean()), "best_val_std": float(best.std()),
                            "bpc_mean": bits_per_char(float(best.mean()))}  # fmt: skip
    return {"summary": summary, "runs": runs, "cfg": cfg.original_cfg()}


def write_result(folder: Path, result) -> None:
    """The attention maps and the final geometry of one model, in the original npz format."""
    from attngeom.bundles import write_attn_npz, write_geom_npz

    stem = f"{result.variant}_s{result.seed}"
    write_attn_npz(folder / f"attn_{stem}.npz", result.tokens_T, {s: result.maps[s] for s in sorted(result.maps)})
    write_geom_npz(folder / f"geom_{stem}.npz", result.tokens_T, result.q_LHTD, result.k_LHTD, result.attn_LHTT)


def train_bundles(run, cfg, corpus, variants: tuple[str, ...], seeds: tuple[int, ...], quiet: bool) -> dict:
    """Train every requested variant and seed into its bundle folder; per-variant wall times."""
    from attngeom.training import train
    from attngeom.training.progress import StepProgress
    from attngeom.bundles import RUN_JSON
    from attngeom.files import write_json_atomic

    walls = {}
    for bundle, members in BUNDLES.items():
        chosen = [v for v in members if v in variants]
        if not chosen:
            continue
        folder = run.path / bundle
        folder.mkdir(exist_ok=True)  # a resumed run rewrites its bundles from the checkpoints
        results = []
        for seed in seeds:
            for variant in chosen:
                checkpoint = checkpoint_path(run.path, variant, seed)
                progress = StepProgress(f"{variant} s{seed}", cfg.steps, train.checkpoint_step(checkpoint), quiet)

                def on_steps(first, losses, variant=variant, seed=seed, progress=progress):
                    run.log_steps(variant, seed, first, losses)
                    progress.steps(len(losses), losses[-1])

                def on_eval(step, val, variant=variant, progress=progress):
                    progress.note(f"{variant} step {step}: val loss {val:.4f}")

                result = train.train_variant(variant, seed, cfg, corpus, on_steps=on_steps, on_eval=on_eval,
                                             checkpoint=checkpoint)  # fmt: skip
                progress.close()
                write_result(folder, result)
                results.append(result)
                walls[f"{variant}_s{seed}"] = round(result.wall_s, 3)
                write_json_atomic(folder / RUN_JSON, run_json(results, cfg))
                print(f"{variant} seed {seed}: best val {result.best_val:.4f} nats in {result.wall_s:.0f} s")
    return walls


def resume_run(path: Path):
    """The incomplete run at `path`, its configuration, variants and seeds, its log cut to the checkpoints."""
    from attngeom.training import runs, train
    from attngeom.training.model import ModelConfig

    folder = runs.RunFolder.resume(path)
    config = folder.manifest["config"]
    try:
        cfg = train.TrainConfig(**{**config["train"], "model": ModelConfig(**config["train"]["model"])})
        variants, seeds, preset_name = tuple(config["variants"]), tuple(config["seeds"]), config["preset"]
    except (TypeError, KeyError) as exc:
        raise InputError(f"{path}: not a local rerun, or one of another version (manifest lacks {exc})") from exc
    done = {(v, s): train.checkpoint_step(checkpoint_path(folder.path, v, s)) for s in seeds for v in variants}
    folder.trim_log(done)
    for (variant, seed), step in done.items():
        if step:
            print(f"{variant} seed {seed}: resuming after step {step}")
    return folder, cfg, variants, seeds, preset_name


def options(args: argparse.Namespace):
    """The training configuration, variants and seeds of a new run, checked."""
    from attngeom.training import train

    variants = args.variants
    seeds = args.seeds or (args.seed,)
    if args.steps is not None and args.steps < 2:
        raise InputError("--steps: at least 2 (the maps at step 0 and after the last step)")
    if args.lr is not None and not args.lr > 0:
        raise InputError("--lr: must be positive")
    return train.preset(args.preset, steps=args.steps, lr=args.lr), variants, seeds


def run(args: argparse.Namespace) -> int:
    """Train (or continue an interrupted run), write, verify; the exit status is the verification's."""
    if args.backend != "local":
        raise InputError(f"backend {args.backend!r} is not run here; use `reproduce.sh {args.backend} ...`")
    deterministic_device()
    from attngeom.training import data, runs
    from attngeom.bundles import VARIANTS

    if args.resume:
        folder, cfg, variants, seeds, preset_name = resume_run(args.resume)
        corpus = data.load_corpus()
    else:
        (cfg, variants, seeds), preset_name = options(args), args.preset
        corpus = data.load_corpus()
        label = f"{preset_name}-s{'_'.join(map(str, seeds))}"
        folder = runs.RunFolder(runs.new_run_dir(args.out, label), config={
            "preset": preset_name, "variants": list(variants), "seeds": list(seeds),
            "train": asdict(cfg), "learning_rates": {v: cfg.lr_of(v) for v in variants},
        })  # fmt: skip
    print(f"run folder: {folder.path}")
    try:
        if not args.resume:
            from attngeom.training.fidelity import run_preflight

            run_preflight(folder, variants, args.preflight)
        walls = train_bundles(folder, cfg, corpus, variants, seeds, args.quiet)
    except BaseException as exc:
        folder.fail(exc)
        raise
    shutil.rmtree(folder.path / CHECKPOINTS, ignore_errors=True)
    folder.complete(variant_wall_s=walls)
    judged = tuple(v for v in VARIANTS if v in variants)
    if 0 not in seeds or not judged:
        print(f"verification skipped: the claims are about seed 0 of {', '.join(VARIANTS)}, not trained here")
        return 0
    from attngeom.verify import run_verify

    smoke = preset_name == "smoke"
    status = run_verify(folder.path, out=folder.path / "report", tier="rerun", variants=judged, smoke=smoke)
    folder.complete(verify_exit=status)
    return status


def register(subparsers) -> None:
    """Add the `rerun` subcommand."""
    from attngeom.training.fidelity import step_count

    p = subparsers.add_parser("rerun", help="retrain the seed-0 runs, write the bundles, verify them",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--backend", choices=("local",), default="local", help="where to train (default: this machine)")
    p.add_argument("--preset", choices=PRESET_NAMES, default="paper",
                   help="paper: the original runs (12,000 steps); smoke: a tiny check (minutes on a CPU)")  # fmt: skip
    p.add_argument("--out", type=Path, help="the run folder, new or empty (default: runs/<time>-<preset>-s<seed>)")
    p.add_argument("--steps", type=int, help="training steps (telemetry at 0, steps/10, steps/2, steps-1)")
    p.add_argument("--seed", type=seed, default=0, help="the seed (default 0, the published runs)")
    p.add_argument("--seeds", type=list_of(seed), help="several seeds, comma-separated (overrides --seed)")
    p.add_argument("--variants", type=list_of(str, [v for members in BUNDLES.values() for v in members], "variant"),
                   default=DEFAULT_VARIANTS, help=f"comma-separated (default: {','.join(DEFAULT_VARIANTS)})")
    p.add_argument("--lr", type=float, help="one learning rate for all variants (default: the original ones)")
    p.add_argument("--resume", type=Path, metavar="RUN",
                   help="continue an interrupted run folder from its checkpoints (its own options are used)")  # fmt: skip
    p.add_argument("--preflight", type=step_count, metavar="N",
                   help="first compare N paper-preset steps with the author's script (`fidelity`); "
                   "default 3 on a GPU, 0 (skip) on a CPU")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress output or evaluation lines")
    p.set_defaults(func=run)

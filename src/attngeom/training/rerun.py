"""`reproduce.sh rerun --backend local`: retrain the seed-0 runs, write the bundles, judge them.

Two bundle folders, as the author published them: `attngeom-qk` (softmax and yat_b in one
`yat_attention.json`) and `attngeom-goat` (goat_v). They go into a new run folder with a
manifest and a per-step training log; then `verify` judges them with the rerun tolerances and
writes the report into `<run>/report`. The exit status is verify's. The run is complete once
its report exists.

Each variant saves a checkpoint into `<run>/checkpoints` at every evaluation; `--resume RUN`
continues an interrupted run from them to the same bundles an uninterrupted run writes (a run
whose training ended but whose verification did not is judged again). The checkpoints are
deleted once the run completes, except in a run stopped early with `--stop-after`, which
`--resume` carries on to the full schedule.

Only this module's `train_bundles` loads jax: the command line, the options and the run folders
work without it.

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
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from attngeom.bundles import RUN_JSON, write_attn_npz, write_geom_npz
from attngeom.errors import InputError
from attngeom.files import write_json_atomic
from attngeom.options import list_of, step_count
from attngeom.options import seed as seed_option
from attngeom.robustness import windows_path, write_windows_npz
from attngeom.training import data, runs
from attngeom.training.config import PRESET_NAMES, TrainConfig, bits_per_char, preset
from attngeom.variants import BUNDLES, PUBLISHED, TRAINABLE
from attngeom.verify import run_verify

DEFAULT_VARIANTS = PUBLISHED
DETERMINISTIC_XLA_FLAGS = ("--xla_gpu_deterministic_ops=true",)
MAX_WINDOWS = 256


@dataclass(frozen=True)
class Plan:
    """What a rerun trains: the configuration, the variants and seeds, the preset it started from."""

    cfg: TrainConfig
    variants: tuple[str, ...]
    seeds: tuple[int, ...]
    preset: str

    def manifest_config(self) -> dict:
        """The manifest's `config`, from which `from_manifest` rebuilds the plan."""
        return {
            "preset": self.preset,
            "variants": list(self.variants),
            "seeds": list(self.seeds),
            "train": asdict(self.cfg),
            "learning_rates": {v: self.cfg.lr_of(v) for v in self.variants},
        }

    @classmethod
    def from_manifest(cls, config: dict, path: Path) -> Plan:
        """The plan of the run at `path`, from its manifest's `config`."""
        try:
            cfg = TrainConfig.from_dict(config["train"])
            return cls(cfg, tuple(config["variants"]), tuple(config["seeds"]), config["preset"])
        except (TypeError, KeyError) as exc:
            raise InputError(f"{path}: not a local rerun, or one of another version (manifest lacks {exc})") from exc


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
    os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = "highest"  # read when jax loads
    if "jax" in sys.modules:  # loaded already (a caller in the same process): set it there too
        sys.modules["jax"].config.update("jax_default_matmul_precision", "highest")


def _bpc(nats: float | None) -> float | None:
    return None if nats is None else bits_per_char(nats)


def run_json(results: list, cfg) -> dict:
    """The original `yat_attention.json` of one bundle folder.

    A run stopped before its first evaluation has no validation loss yet: its `best_val` and `bpc`
    are null and its `curve` and `score_max` empty; so are a variant's summary figures when none of
    its seeds reached an evaluation.
    """
    records, summary = [], {}
    for r in results:
        record = {
            "variant": r.variant,
            "seed": r.seed,
            "best_val": r.best_val,
            "bpc": _bpc(r.best_val),
            "curve": r.curve,
            "score_max": r.score_max,
        }
        if r.b_LH is not None:
            record["b_learned"], record["eps_learned"] = r.b_LH.tolist(), r.eps_LH.tolist()
        record["telemetry_prompt"] = r.prompt
        records.append(record)
    for variant in dict.fromkeys(r.variant for r in results):
        best = np.array([r.best_val for r in results if r.variant == variant and r.best_val is not None])
        mean = float(best.mean()) if best.size else None
        summary[variant] = {
            "best_val_mean": mean,
            "best_val_std": float(best.std()) if best.size else None,
            "bpc_mean": _bpc(mean),
        }
    return {"summary": summary, "runs": records, "cfg": cfg.original_cfg()}


def write_result(folder: Path, result) -> None:
    """The attention maps and the final geometry of one model, in the original npz format."""
    stem = f"{result.variant}_s{result.seed}"
    write_attn_npz(folder / f"attn_{stem}.npz", result.tokens_T, {s: result.maps[s] for s in sorted(result.maps)})
    write_geom_npz(folder / f"geom_{stem}.npz", result.tokens_T, result.q_LHTD, result.k_LHTD, result.attn_LHTT)
    write_windows_npz(
        windows_path(folder, result.variant, result.seed),
        result.windows_WT,
        {s: result.window_maps[s] for s in sorted(result.window_maps)},
        result.q_WLHTD,
        result.k_WLHTD,
    )


def train_bundles(run, cfg, corpus, variants: tuple[str, ...], seeds: tuple[int, ...], quiet: bool) -> dict:
    """Train every requested variant and seed into its bundle folder; per-variant wall times."""
    from attngeom.training import train  # the one place jax is loaded: after `deterministic_device`
    from attngeom.training.progress import StepProgress

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
                checkpoint = runs.checkpoint_path(run.path, variant, seed)
                done = runs.checkpoint_step(checkpoint, cfg.steps)
                progress = StepProgress(f"{variant} s{seed}", cfg.steps_done(), done, quiet)

                def on_steps(first, losses, variant=variant, seed=seed, progress=progress):
                    run.log_steps(variant, seed, first, losses)
                    progress.steps(len(losses), losses[-1])

                def on_eval(step, val, variant=variant, progress=progress):
                    progress.note(f"{variant} step {step}: val loss {val:.4f}")

                result = train.train_variant(
                    variant, seed, cfg, corpus, on_steps=on_steps, on_eval=on_eval, checkpoint=checkpoint
                )
                progress.close()
                write_result(folder, result)
                results.append(result)
                walls[f"{variant}_s{seed}"] = round(result.wall_s, 3)
                write_json_atomic(folder / RUN_JSON, run_json(results, cfg))
                best = "no evaluation yet" if result.best_val is None else f"best val {result.best_val:.4f} nats"
                print(f"{variant} seed {seed}: {best} in {result.wall_s:.0f} s")
    return walls


def resume_run(path: Path) -> tuple[runs.RunFolder, Plan]:
    """The run at `path` reopened to continue, and its plan; its log cut to the checkpoints.

    An unfinished run continues as it was planned; a finished run stopped early is carried on to
    the full schedule. A damaged checkpoint is refused before the manifest is touched.
    """
    folder = runs.RunFolder.reopen(path)
    try:
        plan = Plan.from_manifest(folder.manifest["config"], folder.path)
        carry_on = folder.manifest["completed"] is True
        if carry_on:
            plan = replace(plan, cfg=replace(plan.cfg, stop_after=None))
        done = {
            (v, s): runs.checkpoint_step(runs.checkpoint_path(folder.path, v, s), plan.cfg.steps)
            for s in plan.seeds
            for v in plan.variants
        }
    except BaseException:
        folder.release()
        raise
    folder.restart()
    if carry_on:
        folder.update(config=plan.manifest_config(), stopped_after=None)
    folder.trim_log(done)
    for (variant, s), step in done.items():
        if step:
            print(f"{variant} seed {s}: resuming after step {step}")
    return folder, plan


def options(args: argparse.Namespace) -> Plan:
    """The plan of a new run, checked."""
    if args.steps is not None and args.steps < 2:
        raise InputError("--steps: at least 2 (the maps at step 0 and after the last step)")
    if args.lr is not None and not args.lr > 0:
        raise InputError("--lr: must be positive")
    if args.windows is not None and not 1 <= args.windows <= MAX_WINDOWS:
        raise InputError(f"--windows: from 1 to {MAX_WINDOWS} (the fixed window and W - 1 more)")
    cfg = preset(args.preset, steps=args.steps, lr=args.lr, stop_after=args.stop_after, windows=args.windows)
    if cfg.stop_after is not None and not 0 < cfg.stop_after < cfg.steps - 1:
        raise InputError(f"--stop-after: a step from 1 to {cfg.steps - 2} (the schedule has {cfg.steps} steps)")
    return Plan(cfg, args.variants, args.seeds or (args.seed,), args.preset)


def train_and_judge(folder: runs.RunFolder, plan: Plan, corpus: data.Corpus, quiet: bool) -> int:
    """Train into the run folder, verify, and only then mark it complete; verify's exit status."""
    walls = train_bundles(folder, plan.cfg, corpus, plan.variants, plan.seeds, quiet)
    folder.update(variant_wall_s=walls)
    judged = tuple(v for v in PUBLISHED if v in plan.variants)
    status, verified = 0, {}
    if 0 in plan.seeds and judged:
        status = run_verify(
            folder.path, out=folder.path / runs.REPORT, variants=judged
        )  # the run's files say what it is
        verified = {"verify_exit": status}
    else:
        print(f"verification skipped: the claims are about seed 0 of {', '.join(PUBLISHED)}, not trained here")
    if plan.cfg.stop_after is None:  # a stopped run keeps them, to be carried on with --resume
        shutil.rmtree(folder.path / runs.CHECKPOINTS, ignore_errors=True)
    folder.complete(**verified)
    return status


def run(args: argparse.Namespace) -> int:
    """Train (or continue an interrupted run), write, verify; the exit status is the verification's."""
    if args.backend != "local":
        raise InputError(f"backend {args.backend!r} is not run here; use `reproduce.sh {args.backend} ...`")
    deterministic_device()
    if args.resume:
        folder, plan = resume_run(args.resume)
        corpus = data.load_corpus()
    else:
        plan = options(args)
        corpus = data.load_corpus()
        label = f"{plan.preset}-s{'_'.join(map(str, plan.seeds))}"
        folder = runs.RunFolder(runs.new_run_dir(args.out, label), config=plan.manifest_config())
        folder.update(stopped_after=plan.cfg.stop_after, windows=plan.cfg.windows)
    print(f"run folder: {folder.path}")
    try:
        if not args.resume:
            from attngeom.training.fidelity import run_preflight

            run_preflight(folder, plan.variants, args.preflight)
        return train_and_judge(folder, plan, corpus, args.quiet)
    except BaseException as exc:
        folder.fail(exc)
        raise
    finally:
        folder.release()


def register(subparsers) -> None:
    """Add the `rerun` subcommand."""
    p = subparsers.add_parser(
        "rerun",
        help="retrain the seed-0 runs, write the bundles, verify them",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--backend", choices=("local",), default="local", help="where to train (default: this machine)")
    p.add_argument(
        "--preset",
        choices=PRESET_NAMES,
        default="paper",
        help="paper: the original runs (12,000 steps); smoke: a tiny check (minutes on a CPU)",
    )
    p.add_argument("--out", type=Path, help="the run folder, new or empty (default: runs/<time>-<preset>-s<seed>)")
    p.add_argument("--steps", type=int, help="training steps (telemetry at 0, steps/10, steps/2, steps-1)")
    p.add_argument(
        "--stop-after",
        type=int,
        metavar="STEP",
        help="stop after this step of the schedule (telemetry steps up to it are recorded)",
    )
    p.add_argument("--seed", type=seed_option, default=0, help="the seed (default 0, the published runs)")
    p.add_argument("--seeds", type=list_of(seed_option), help="several seeds, comma-separated (overrides --seed)")
    p.add_argument(
        "--variants",
        type=list_of(str, TRAINABLE, "variant"),
        default=DEFAULT_VARIANTS,
        help=f"comma-separated (default: {','.join(DEFAULT_VARIANTS)})",
    )
    p.add_argument(
        "--windows",
        type=int,
        metavar="W",
        help="record the maps on W windows of the validation text too, the fixed one first (default 16)",
    )
    p.add_argument("--lr", type=float, help="one learning rate for all variants (default: the original ones)")
    p.add_argument(
        "--resume",
        type=Path,
        metavar="RUN",
        help="continue an interrupted run folder from its checkpoints (its own options are used)",
    )
    p.add_argument(
        "--preflight",
        type=step_count,
        metavar="N",
        help="first compare N paper-preset steps with the author's script (`fidelity`); "
        "default 3 on a GPU, 0 (skip) on a CPU",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output or evaluation lines")
    p.set_defaults(func=run)

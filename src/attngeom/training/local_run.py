"""The local rerun: retrain the seed-0 runs on this machine and write the bundles (the `rerun` command, in
attngeom.jobs.rerun, then judges them).

Two bundle folders, as the author published them: `attngeom-qk` (softmax and yat_b in one
`yat_attention.json`) and `attngeom-goat` (goat_v). They go into a new run folder with a
manifest and a per-step training log. The run is complete once the command has judged it
(`finish`); this module never imports the judgement.

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

import math
import os
import shutil
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from attngeom.base.errors import InputError
from attngeom.base.schema import MAX_STEP
from attngeom.base.train_config import TrainConfig, preset
from attngeom.base.variants import BUNDLES, PUBLISHED, model_key
from attngeom.bundles.layout import write_model, write_run_json
from attngeom.training import data, runs, trajectory
from attngeom.training.device import COMPILATION_CACHE_DIR, deterministic_device
from attngeom.training.device_probe import check_device

MAX_WINDOWS = 256
TIME_LIMIT = "time limit"
"""The manifest's `stopped_by` when `--time-limit` set the stop (a user's `--stop-after` leaves it out)."""


@dataclass(frozen=True)
class RerunOptions:
    """What `rerun` was asked, read once from its command line (`commands/rerun.py`) and never changed:
    an ensemble member's are a copy with its own folder (`dataclasses.replace`)."""

    preset: str = "paper"
    out: Path | None = None
    steps: int | None = None
    seeds: tuple[int, ...] = (0,)
    variants: tuple[str, ...] = PUBLISHED
    lr: float | None = None
    stop_after: int | None = None
    windows: int | None = None
    resume: Path | None = None
    members: int | None = None
    time_limit: float | None = None
    preflight: int | None = None
    members_mode: str | None = None
    member_ids: tuple[int, ...] | None = None
    quiet: bool = False
    deadline: float | None = None  # time.monotonic() at which training stops: set once from time_limit


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
        """The plan of the run at `path`, from its manifest's `config`: every training field named (a
        missing one would silently take the default of today's code, say the paper's 12,000 steps)."""
        try:
            missing = [f.name for f in fields(TrainConfig) if f.name not in config["train"]]
            if missing:
                raise KeyError(f"config.train.{missing[0]}")
            cfg = TrainConfig.from_dict(config["train"])
            return cls(cfg, tuple(config["variants"]), tuple(config["seeds"]), config["preset"])
        except (TypeError, KeyError) as exc:
            raise InputError(f"{path}: not a local rerun, or one of another version (manifest lacks {exc})") from exc


def train_bundles(
    folders: list[runs.RunFolder],
    cfg: TrainConfig,
    corpus: data.Corpus,
    variants: tuple[str, ...],
    seeds: tuple[int, ...],
    quiet: bool,
    members: tuple[int, ...] | None = None,
    deadline: float | None = None,
) -> tuple[TrainConfig, list[dict]]:
    """Train every requested variant and seed into each folder's bundle folders: one run, or the ensemble
    members `members` (one per folder) trained together (`training.together`).

    With `deadline` (a `time.monotonic()` time), the run's first training, when it has steps left, gets
    its share of the time to it and stops after the last chunk that fits; the run then becomes a run
    stopped after the step reached, and the trainings after it stop there too. Returns the configuration
    trained (stopped or not) and each folder's per-variant wall times.
    """
    from attngeom.training import together, train  # the one place jax is loaded: after `deterministic_device`
    from attngeom.training.progress import CompileTimes, StepProgress

    times = CompileTimes(os.environ.get(COMPILATION_CACHE_DIR))  # beside the compiled steps: none without them

    members = members or (cfg.member,)
    walls: list[dict] = [{} for _ in folders]
    left = len(seeds) * len(variants)
    for bundle, chosen in ((b, [v for v in vs if v in variants]) for b, vs in BUNDLES.items()):
        results: list[list] = [[] for _ in folders]
        for seed, variant in ((s, v) for s in seeds for v in chosen):
            group, bars = [], []
            # what is compiled: the variant's step on this shape, for this many members at once; and the first
            # chunk's steps, which the recorded time includes
            compiled = (
                f"{variant}, {len(folders)} member(s), {asdict(cfg.model)}, batch {cfg.batch}, chunk {cfg.chunk}, "
            )
            compiled += f"first chunk {min(train.RAMP_FROM, cfg.chunk)}"
            for folder, member in zip(folders, members):
                (folder.path / bundle).mkdir(exist_ok=True)  # a resumed run rewrites its bundles from the checkpoints
                checkpoint = runs.checkpoint_path(folder.path, variant, seed)
                name = f"{variant} s{seed}" + (f" member {member}" if len(folders) > 1 else "")
                start = runs.checkpoint_step(checkpoint, cfg.steps)
                bars.append(StepProgress(name, cfg.steps_done(), start, quiet, last_compile_s=times.last(compiled)))

                def on_steps(first, losses, variant=variant, seed=seed, folder=folder, bar=bars[-1]):
                    folder.log_steps(variant, seed, first, losses)
                    bar.steps(len(losses), losses[-1])

                def on_eval(step, val, name=name, bar=bars[-1]):
                    bar.note(f"{name} step {step}: val loss {val:.4f}")

                stamp = trajectory.model_stamp(folder.manifest["trajectory"], variant, seed, cfg)
                group.append(train.Member(member, on_steps, on_eval, checkpoint, stamp))
            budget = None  # the run's first training decides where the time limit stops the run
            if deadline is not None and left == len(seeds) * len(variants) and bars[0].done < cfg.steps_done():
                budget = max(deadline - time.monotonic(), 0.0) / left
            left -= 1
            if len(group) == 1:
                m = group[0]
                kwargs = {"on_steps": m.on_steps, "on_eval": m.on_eval, "checkpoint": m.checkpoint, "stamp": m.stamp}
                kwargs["budget_s"] = budget
                trained = [train.train_variant(variant, seed, replace(cfg, member=m.member), corpus, **kwargs)]
            else:
                trained = together.train_members(variant, seed, cfg, corpus, group, budget)
            for bar in bars:
                bar.close()
            if bars[0].compile_s is not None:
                times.record(compiled, bars[0].compile_s)
            reached = len(trained[0].losses)
            if reached < cfg.steps_done():  # stopped by the time limit: a run stopped after the step reached
                cfg = replace(cfg, stop_after=reached - 1)
                print(f"time limit: training stops after step {cfg.stop_after}; `--resume` carries the run on")
                for folder, member in zip(folders, members):
                    train_cfg = asdict(replace(cfg, member=member))
                    folder.update(
                        config={**folder.manifest["config"], "train": train_cfg},
                        stopped_after=cfg.stop_after,
                        stopped_by=TIME_LIMIT,
                    )
            for i, (folder, result) in enumerate(zip(folders, trained)):
                write_model(folder.path / bundle, result)
                results[i].append(result)
                walls[i][model_key(variant, seed)] = round(result.wall_s, 3)
                write_run_json(folder.path / bundle, results[i], cfg)
                best = "no evaluation yet" if result.best_val is None else f"best val {result.best_val:.4f} nats"
                who = f"member {group[i].member}: " if len(folders) > 1 else ""
                print(f"{who}{variant} seed {seed}: {best} in {result.wall_s:.0f} s")
    return cfg, walls


def resume_run(path: Path, mode: str = "alone") -> tuple[runs.RunFolder, Plan]:
    """The run at `path` reopened to continue, and its plan; its log cut to the checkpoints.

    An unfinished run continues as it was planned; a finished run stopped early is carried on to
    the full schedule, and so is a run whose every model reached the stop a time limit set (the time
    limit is no plan: judging the part reached is only the segment's record). A refusal changes
    nothing: before anything is written (but a killed writer's leftovers removed), the run's stamp and
    each checkpoint's must be the present one (`training.trajectory`), every checkpoint is read whole
    and loaded into the model it is a checkpoint of (each parameter there, of its shape, finite), none
    may lie past the step the run stopped after, and the training log must be readable. Else one
    InputError naming what differs.
    """
    folder = runs.RunFolder.reopen(path)
    try:
        plan = Plan.from_manifest(folder.manifest["config"], folder.path)
        judged = folder.manifest["completed"] is True
        present = trajectory.stamp(plan.cfg, plan.preset, mode)
        differs = trajectory.mismatch(folder.manifest.get("trajectory"), present)
        if differs:
            raise InputError(f"{folder.path}: cannot resume: {differs}; resume it as it was trained")
        done = {}
        for s in plan.seeds:
            for v in plan.variants:
                done[(v, s)] = _checkpoint_of_this_run(folder.path, v, s, plan, present, judged)
        log = folder.kept_log(done)
        timed_out = folder.manifest.get("stopped_by") == TIME_LIMIT
        carry_on = judged or (timed_out and all(step == plan.cfg.steps_done() for step in done.values()))
        if carry_on:
            plan = replace(plan, cfg=replace(plan.cfg, stop_after=None))
    except BaseException:
        folder.release()
        raise
    folder.restart()
    if carry_on:
        folder.update(config=plan.manifest_config(), stopped_after=None, stopped_by=None)
    folder.write_log(log)
    for (variant, s), step in done.items():
        if step:
            print(f"{variant} seed {s}: resuming after step {step}")
    return folder, plan


def _checkpoint_of_this_run(run: Path, variant: str, seed: int, plan: Plan, present: dict, stopped: bool) -> int:
    """The steps done in a model's checkpoint, once it is found whole, of this trajectory and within the run
    (a run stopped early holds exactly its steps); else InputError."""
    path = runs.checkpoint_path(run, variant, seed)
    if not os.path.lexists(path):
        if stopped:
            raise InputError(f"{path}: missing; a run stopped early is carried on from its checkpoints")
        return 0
    arrays = runs.read_checkpoint(path, plan.cfg.steps)
    differs = trajectory.mismatch(
        runs.checkpoint_stamp(arrays), trajectory.model_stamp(present, variant, seed, plan.cfg)
    )
    if differs:
        raise InputError(f"{path}: not a checkpoint of this run's trajectory: {differs}")
    step, last = int(arrays["done"]), plan.cfg.steps_done()
    if step > last or (stopped and step != last):
        where = f"the run stopped after step {last - 1}" if plan.cfg.stop_after is not None else "the schedule"
        raise InputError(f"{path}: holds {step} steps, against {last} in {where}; not this run's checkpoint")
    _loads_whole(path, variant, seed, plan.cfg)
    return step


def _loads_whole(path: Path, variant: str, seed: int, cfg: TrainConfig) -> None:
    """The checkpoint at `path` loaded into the state of the model it belongs to, as training will load it:
    every parameter present, of its shape, and finite; else InputError (before a resume writes anything)."""
    import jax
    import numpy as np

    from attngeom.training import checkpoint, train

    loaded = checkpoint.load_checkpoint(path, train.init_state(variant, cfg, seed)[3], cfg.steps)
    for leaf in jax.tree.leaves(loaded.state[0]):
        if not np.isfinite(np.asarray(leaf, dtype=np.float64)).all():
            raise InputError(f"{path}: a parameter that is not finite; delete the checkpoint to restart that variant")


def new_plan(opts: RerunOptions) -> Plan:
    """The plan of a new run, checked whole before anything is written: every value a manifest could not
    hold or a training could not use is refused here, so that a refused run leaves no folder behind."""
    if opts.steps is not None and not 2 <= opts.steps <= MAX_STEP:
        raise InputError(f"--steps: from 2 (the maps at step 0 and after the last step) to {MAX_STEP:,}")
    if opts.lr is not None and not (math.isfinite(opts.lr) and opts.lr > 0):
        raise InputError(f"--lr: a positive finite number, got {opts.lr}")
    if opts.windows is not None and not 1 <= opts.windows <= MAX_WINDOWS:
        raise InputError(f"--windows: from 1 to {MAX_WINDOWS} (the fixed window and W - 1 more)")
    cfg = preset(opts.preset, steps=opts.steps, lr=opts.lr, stop_after=opts.stop_after, windows=opts.windows)
    if cfg.stop_after is not None and not 0 < cfg.stop_after < cfg.steps - 1:
        raise InputError(f"--stop-after: a step from 1 to {cfg.steps - 2} (the schedule has {cfg.steps} steps)")
    return Plan(cfg, opts.variants, opts.seeds, opts.preset)


def prepare_device() -> str:
    """The device settings, then the device started once in a child: its platform (cpu, gpu, ...)."""
    deterministic_device()
    return check_device()  # before a run folder is claimed: a bad XLA_FLAGS or JAX_PLATFORMS leaves none behind


def open_folder(
    opts: RerunOptions, plan: Plan | None = None, mode: str = "alone"
) -> tuple[runs.RunFolder, Plan, data.Corpus]:
    """The run folder (new, or reopened with --resume), its plan and the corpus, on a device prepared
    already (`prepare_device`), with this process's segment begun. A new run follows `plan` when given
    (an ensemble member), else the options; `mode` is how its members train (`trajectory.stamp`)."""
    if opts.resume:
        folder, plan = resume_run(opts.resume, mode)
        corpus = data.load_corpus()
    else:
        plan = plan or new_plan(opts)
        corpus = data.load_corpus()
        label = f"{plan.preset}-s{'_'.join(map(str, plan.seeds))}"
        stamp = trajectory.stamp(plan.cfg, plan.preset, mode)
        folder = runs.RunFolder(
            runs.new_run_dir(opts.out, label),
            config=plan.manifest_config(),
            stopped_after=plan.cfg.stop_after,
            windows=plan.cfg.windows,
            trajectory=stamp,
        )
    folder.begin_segment(trajectory.segment_facts(folder.manifest["trajectory"]))
    return folder, plan, corpus


def finish(folder: runs.RunFolder, plan: Plan, **verified) -> None:
    """Mark the judged run complete, then delete its checkpoints, except those of a run stopped early (kept
    for --resume): a kill between the two leaves a complete run, never one to train again."""
    folder.complete(**verified)
    if plan.cfg.stop_after is None:
        shutil.rmtree(folder.path / runs.CHECKPOINTS, ignore_errors=True)

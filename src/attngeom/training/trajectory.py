"""What decides a training trajectory besides its batches: recorded in every checkpoint, compared on `--resume`.

A resumed run is the trajectory an uninterrupted one would be only when every step after the
checkpoint runs under what the steps before it ran under. Float32 round-off depends on more than
the plan: the CPU and its XLA code generation, the cores XLA splits its reductions over (one core
and two give other losses from step 5 of a paper run), the XLA flags, jax and jaxlib, the device,
the members trained together in one vmapped step, and the code that computes the step. A
`stamp` names all of it. The manifest keeps the run's stamp (`trajectory`) and each checkpoint
the stamp of its model; `mismatch` names the first fact a resume would change, and the resume
stops there with one error line, changing nothing (`rerun.resume_run`). Each process that trains
the run adds a segment to its manifest (steps, machine, code generation, versions, wall time).

The code hash covers the modules that compute the trained numbers: every module of this package's
`training` folder but the run bookkeeping in `BOOKKEEPING` (which never touches a trained number),
and `attngeom/base/train_config.py` and `attngeom/base/variants.py` (the model and schedule, each
variant's learning rate and kernel flags). A module added to `training` is hashed unless it is named
there.

jax's own configuration decides a trajectory too (the random bits, 64-bit floats, matmul precision,
...): the stamp records every value `jax.config` holds, read from jax itself so that a setting added by
a later jax is recorded without a change here, except those that only say where compilations are cached
or how they are logged, dumped or traced (`OBSERVING`), which never change a computed number.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, replace
from pathlib import Path

from attngeom.base.files import cpu_identity, cpu_model
from attngeom.base.train_config import TrainConfig

TRAINING = Path(__file__).resolve().parent
BOOKKEEPING = frozenset(
    {
        "local_run.py",
        "runs.py",
        "progress.py",
        "fidelity.py",
        "device_probe.py",
        "original.py",
        "trajectory.py",
        "flops.py",
    }
)
"""Modules of `training` that open run folders, show progress, count FLOPs or drive the author's script:
not hashed."""
BELOW = ("train_config.py", "variants.py")
"""Modules of `attngeom/base` that decide the trained numbers: hashed."""
OBSERVING = re.compile(r"cache|log|dump|traceback|pprint|debug_info|source_url|source_file")
"""jax configuration names that only say where compilations are kept or how they are reported."""
MODEL_FACTS = ("variant", "seed", "lr")
"""The facts of a stamp that differ between the models of one run (each checkpoint's own)."""


def code_files() -> list[Path]:
    """The source files the trained numbers depend on, in a fixed order."""
    hashed = sorted(p for p in TRAINING.glob("*.py") if p.name not in BOOKKEEPING)
    return [*hashed, *(TRAINING.parent / "base" / name for name in BELOW)]


def code_hash() -> str:
    """sha256 of the trajectory's code: each file's name and bytes."""
    digest = hashlib.sha256()
    for path in code_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def jax_settings(values: dict) -> dict:
    """jax's configuration (`jax.config.values`) as the stamp records it: every value but the observing
    ones, each as JSON (an enumeration by its value's text)."""
    plain = (bool, int, float, str, type(None))
    return {
        name: value if isinstance(value, plain) else str(getattr(value, "value", value))
        for name, value in sorted(values.items())
        if not OBSERVING.search(name)
    }


def cores() -> int:
    """The cores this process may run on (XLA's CPU thread pool is sized by them)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def stamp(cfg: TrainConfig, preset: str, mode: str) -> dict:
    """The run's stamp: everything but the model's own facts, in the process as it is now (jax loaded).

    `cfg.stop_after` is left out: where a run stops is not what it trains (`--resume` of a stopped run
    carries it on to the full schedule). `mode` is how its members train: `alone`, or `together: K`.
    """
    import jax
    import jaxlib

    from attngeom.training import runs

    device = jax.devices()[0]
    return {
        "preset": preset,
        "train": asdict(replace(cfg, stop_after=None)),
        "member": cfg.member,
        "perturbation": perturbation(cfg.member),
        "members_mode": mode,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "cpu_code_generation": runs.xla_cpu_isa(),
        "cpu": f"{cpu_model()} ({cpu_identity()})",
        "cores": cores(),
        "device": f"{device.platform} {device.device_kind}",
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "jax_config": jax_settings(jax.config.values),
        "training_code": code_hash(),
    }


def perturbation(member: int) -> str | None:
    """How member `member`'s initial parameters are moved from the seed's (`train.perturb`), in words."""
    from attngeom.training.train import PERTURBATION_SEED

    return None if member == 0 else f"one float32 ulp, signs from [{PERTURBATION_SEED}, {member}]"


def model_stamp(run: dict, variant: str, seed: int, cfg: TrainConfig) -> dict:
    """A checkpoint's stamp: the run's and its model's own facts."""
    return {**run, "variant": variant, "seed": seed, "lr": cfg.lr_of(variant)}


def mismatch(recorded: dict | None, present: dict) -> str | None:
    """The first fact in which `present` differs from `recorded`, said in words; None when they agree."""
    if recorded is None:
        return "it records no trajectory (written by an earlier version)"
    for key in sorted(recorded.keys() | present.keys()):
        was, now = recorded.get(key), present.get(key)
        if was != now:
            if isinstance(was, dict) and isinstance(now, dict):  # the one setting of a record that differs
                return f"{key}: {mismatch(was, now)}"
            was, now = (json.dumps(v, sort_keys=True) for v in (was, now))
            return f"{key} was {was}, is now {now}"
    return None


def segment_facts(present: dict) -> dict:
    """What a segment of a run records of where it ran."""
    keys = ("xla_flags", "cpu_code_generation", "cpu", "cores", "device", "jax", "jaxlib", "training_code")
    return {k: present[k] for k in keys}

"""The GPU hours of `kaggle build|run --members K`, estimated before anything is pushed, and what it refuses.

Each kernel trains its variants one after another, its K members split over the machine's GPUs
(`kernel_main.member_groups`), each GPU's group one vmapped step. A kernel's time is that of its
largest group: XLA's FLOPs of that group's step (`attngeom.training.flops`, as `bench/gpu_budget.py`
takes them) for the whole schedule, at the GPU's float32 rate times the fraction of it a step is
assumed to reach, plus each variant's compilation and the kernel's install. This is an estimate,
not a measurement: no kernel has been timed on Kaggle yet. Kaggle counts a session's hours against
the weekly GPU quota, so the run's GPU hours are the sum of its kernels' hours.

`kaggle build` refuses kernels that cannot end within the session's timeout (at most Kaggle's
12 hours); each push refuses kernels whose hours exceed the GPU quota Kaggle reports as left.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from attngeom.backends.kernel_main import member_groups
from attngeom.base import schema
from attngeom.base.errors import InputError
from attngeom.base.train_config import PRESETS
from attngeom.training.device import deterministic_device
from attngeom.training.flops import EFFICIENCY, schedule_seconds, step_flops

MAX_SESSION_S = schema.MAX_KAGGLE_SESSION_S  # Kaggle's longest session (a push asking for more is refused)
INSTALL_S = 600.0  # the kernel's install of the CUDA lock (gigabytes of wheels), assumed: not measured on Kaggle


@dataclass(frozen=True)
class Machine:
    """A Kaggle machine shape: its GPUs and each one's float32 rate."""

    label: str
    gpus: int
    flops_per_s: float


MACHINES = {
    # NVIDIA T4 Tensor Core GPU datasheet: 8.1 TFLOPS peak single-precision (FP32) performance.
    "NvidiaTeslaT4": Machine("T4 x2", 2, 8.1e12),
}


def largest_group(members: int, machine: Machine) -> int:
    """The most members one GPU trains together."""
    return max(len(group) for group in member_groups(members, machine.gpus))


def kernel_seconds(flops: dict[str, float], steps: int, machine: Machine) -> float:
    """One kernel's estimated session: `flops` (variant -> FLOPs of one step of its largest group)."""
    return INSTALL_S + schedule_seconds(flops, steps, machine.flops_per_s * EFFICIENCY)


def group_flops(preset: str, variants: set[str], per_gpu: int) -> dict[str, float]:
    """FLOPs of one step of `per_gpu` vmapped members of each variant, compiled on this machine's CPU."""
    if importlib.util.find_spec("jax") is None:
        raise InputError(
            "--members: the GPU-hours estimate compiles the training step, which needs jax; "
            "this environment lacks it (jax 0.10.2 needs Python 3.11 or newer)"
        )
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the step is only compiled, never run: no GPU is claimed
    deterministic_device()  # the settings a run compiles under, and the compilation cache: a second build is quick
    return {v: step_flops(v, PRESETS[preset], per_gpu) for v in sorted(variants)}


def estimate(state: dict) -> None:
    """Record each kernel's estimated seconds in `state` (for a run with `members`), print the run's GPU
    hours, and refuse (InputError) a kernel that cannot end within the session's timeout."""
    machine = MACHINES.get(state["accelerator"])
    if machine is None:
        print(f"GPU hours: no float32 rate known for {state['accelerator']}; not estimated", flush=True)
        return
    per_gpu = largest_group(state["members"], machine)
    flops = group_flops(state["preset"], {v for k in state["kernels"] for v in k["variants"]}, per_gpu)
    steps = PRESETS[state["preset"]].steps
    for kernel in state["kernels"]:
        kernel["estimated_s"] = round(kernel_seconds({v: flops[v] for v in kernel["variants"]}, steps, machine), 1)
    print(f"estimate: {describe(state, machine)}", flush=True)
    limit = min(state["timeout"], MAX_SESSION_S)
    longest = max(state["kernels"], key=lambda k: k["estimated_s"])
    if longest["estimated_s"] > limit:
        raise InputError(
            f"{longest['id']}: estimated at {longest['estimated_s'] / 3600:.1f} h, more than the session's "
            f"{limit / 3600:g} h (--time-limit, at most Kaggle's {MAX_SESSION_S // 3600} h): fewer --members, "
            f"or a longer --time-limit up to {MAX_SESSION_S}"
        )


def describe(state: dict, machine: Machine) -> str:
    """The run's estimated GPU hours, per kernel and in all, and what they assume."""
    kernels = ", ".join(f"{k['bundle']}-s{k['seed']} {k['estimated_s'] / 3600:.2f} h" for k in state["kernels"])
    per_gpu = largest_group(state["members"], machine)
    return (
        f"{hours(state['kernels']):.2f} GPU hours on {machine.label} ({kernels}): {state['members']} members, "
        f"{per_gpu} vmapped per GPU, at {EFFICIENCY:g} of each GPU's {machine.flops_per_s / 1e12:g} TFLOP/s of float32, "
        f"with {INSTALL_S / 60:.0f} min of install per kernel"
    )


def hours(kernels: list[dict]) -> float:
    """The estimated GPU hours of `kernels` (0 for those without an estimate)."""
    return sum(k.get("estimated_s") or 0.0 for k in kernels) / 3600


def check_quota(state: dict, kernels: list[dict], left_s: float | None) -> None:
    """Print the run's estimate beside the quota just printed, and refuse to push `kernels` when their
    estimated hours exceed the quota left (`left_s`; None: not reported)."""
    machine = MACHINES.get(state["accelerator"])
    if machine is not None:
        print(f"estimate: {describe(state, machine)}", flush=True)
    if left_s is None or not any(k.get("estimated_s") for k in kernels):
        return
    if hours(kernels) > left_s / 3600:
        raise InputError(
            f"the kernels to push are estimated at {hours(kernels):.1f} GPU hours, more than the "
            f"{left_s / 3600:.1f} h of GPU quota left this week: fewer --members or --seeds, or wait for the refresh"
        )

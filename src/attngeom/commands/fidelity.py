"""`reproduce.sh fidelity`: the author's training script and this harness, side by side, on this device.

A training loss frozen on one machine is no reference on another: adamw's first updates amplify
float32 round-off, which depends on the CPU or GPU. So the reference is the author's own script
(downloaded and sha256-verified like the bundles, never copied), run here and now, for the first
N steps of the paper preset with seed 0, next to this harness's training on the same device.
Compared per variant: the parameter count, the sum and the absolute sum of the initial parameters,
the first tokens of the fixed window, every training loss and the step-0 attention maps. The verdict
and both sides' figures go to `fidelity.json`; the exit status is 0 when everything matches, 1 when
something differs, 2 for unusable input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attngeom.base.variants import PUBLISHED
from attngeom.commands.options import list_of, subcommand


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `fidelity` subcommand."""
    p = subcommand(subparsers, "fidelity", "the author's training script and this harness, side by side", __doc__)
    p.add_argument("--steps", type=int, help="training steps (default: as many as the rerun's GPU preflight compares)")
    p.add_argument(
        "--variants",
        type=list_of(str),
        default=PUBLISHED,
        help=f"comma-separated variants of the author's script (default: {','.join(PUBLISHED)})",
    )
    p.add_argument("--out", type=Path, help="a new or empty folder for fidelity.json (default: runs/<time>-fidelity)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The side-by-side check (`training.fidelity.run`)."""
    from attngeom.training import fidelity

    return fidelity.run(args.variants, args.steps, args.out)

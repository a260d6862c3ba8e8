"""`reproduce.sh rerun`: retrain the seed-0 runs on this machine, write their bundles, then judge them.

The run folder is opened (or reopened with --resume), the fidelity preflight runs on a GPU, the bundles
are trained and written, verify judges them with the rerun tolerances into `<run>/report`, and only then
is the run marked complete. The exit status is verify's. Kaggle and Docker are their own commands
(`kaggle run`, `docker run rerun`), which run this one on their machine.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attngeom.base import schema
from attngeom.base.train_config import PRESET_NAMES
from attngeom.base.variants import PUBLISHED, TRAINABLE
from attngeom.commands.options import integer, list_of, step_count, subcommand, time_limit, typed, utf8, variants_option
from attngeom.commands.options import seed as seed_option


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `rerun` subcommand."""
    p = subcommand(
        subparsers, "rerun", "retrain the seed-0 runs on this machine, write the bundles, verify them", __doc__
    )
    p.add_argument(
        "--preset",
        choices=PRESET_NAMES,
        default="paper",
        help="paper: the original runs (12,000 steps); smoke: a tiny check (minutes on a CPU)",
    )
    p.add_argument("--out", type=Path, help="the run folder, new or empty (default: runs/<time>-<preset>-s<seed>)")
    p.add_argument("--steps", type=int, help="training steps (telemetry at 0, steps/10, steps/2, steps-1)")
    p.add_argument("--seed", type=seed_option, default=0, help="the seed (default 0, the published runs)")
    p.add_argument("--seeds", type=list_of(seed_option), help="several seeds, comma-separated (overrides --seed)")
    variants_option(p, TRAINABLE, PUBLISHED)
    p.add_argument("--lr", type=float, help="one learning rate for all variants (default: the original ones)")
    for flag, kind, metavar, text in (
        ("--stop-after", int, "STEP", "stop after this step of the schedule (telemetry steps up to it are recorded)"),
        (
            "--windows",
            int,
            "W",
            "record the maps on W windows of the validation text too, the fixed one first (default 16)",
        ),
        ("--resume", Path, "RUN", "continue an interrupted run folder from its checkpoints (its own options are used)"),
        (
            "--members",
            integer(2, schema.MAX_MEMBERS, "a number of members (member 0 and at least one perturbed trajectory)"),
            "K",
            "an ensemble: K trajectories, member m >= 1 starting one float32 ulp away (see `attngeom.jobs.ensemble`)",
        ),
        (
            "--time-limit",
            time_limit,
            "SECONDS",
            "stop training after the last chunk that fits in SECONDS from the start (judging comes after): "
            "the run becomes one stopped after the step reached, judged on it, and --resume carries it on",
        ),
        (
            "--preflight",
            step_count,
            "N",
            "first compare N paper-preset steps with the author's script (`fidelity`); default 3 on a GPU, 0 (skip) on a CPU",
        ),
    ):
        p.add_argument(flag, type=kind, metavar=metavar, help=text)
    p.add_argument(
        "--members-mode",
        choices=schema.MEMBERS_MODES,
        help="an ensemble's members trained together (one vmapped step: default on a GPU) "
        "or one after another (default on a CPU, where it is faster)",
    )
    p.add_argument(
        "--member-ids",
        type=list_of(integer(0, schema.MAX_MEMBERS - 1, "a member number")),
        metavar="LIST",
        help="train only these members of the ensemble (comma-separated); the others are left to another "
        "process training into the same folder, such as one per GPU",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output or evaluation lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The options, read once; then the rerun (`jobs.rerun.run`)."""
    from attngeom.jobs import rerun
    from attngeom.training.local_run import RerunOptions

    utf8(args.out, args.resume)
    return rerun.run(typed(RerunOptions, args, seeds=args.seeds or (args.seed,)))

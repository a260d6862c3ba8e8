"""`reproduce.sh kaggle build|push|status|pull|run`: retrain the original bundles on Kaggle GPUs.

`run` builds one kernel per bundle folder and seed, pushes them with the official `kaggle` client (at most
--concurrency at a time), polls until each finishes, pulls every output into the run folder, checks each
file's sha256 against the manifest the kernel wrote, and judges the seed-0 bundles with the rerun tier
of `verify`. Everything the later steps need is recorded in `<run>/kaggle-state.json` as it happens, so
`status` and `pull` resume from another shell or after a crash. Credentials: ~/.kaggle/kaggle.json or
KAGGLE_USERNAME and KAGGLE_KEY.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from pathlib import Path

from attngeom.base import schema
from attngeom.base.train_config import PRESET_NAMES
from attngeom.commands.options import integer, list_of, positive, seed, subcommand, typed

ACTIONS = {
    "build": "write one kernel per bundle folder and seed into a new run folder, pushing nothing "
    "(with --username, no credentials are needed)",
    "push": "push the built kernels of the run with the official `kaggle` client, as many as --concurrency and "
    "the account's GPU sessions allow",
    "status": "ask Kaggle once where each kernel of the run stands, print it, and name each failed kernel with "
    "its log's tail",
    "pull": "pull the output of every finished kernel, check each file's sha256 against the kernel's manifest, "
    "and judge the seed-0 bundles once every kernel is in",
    "run": "build, push, wait, pull, check and verify, from a new run or the one named (continuing a run "
    "retries the kernels that failed)",
}
"""Each action and what it does: its own --help shows it."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `kaggle` subcommand, an action each with its own help and every option."""
    p = subcommand(subparsers, "kaggle", "retrain the original bundles on Kaggle GPUs and judge them", __doc__)
    actions = p.add_subparsers(dest="action", metavar="{" + ",".join(ACTIONS) + "}", required=True)
    for action, text in ACTIONS.items():
        doc = textwrap.fill(f"`reproduce.sh kaggle {action}`: {text}.", 100)
        doc += "\n\nThe run folder, its state and the credentials: `reproduce.sh kaggle --help`."
        options(subcommand(actions, action, text, doc))
    p.epilog = "Each action's options: `reproduce.sh kaggle ACTION --help`."
    p.set_defaults(func=run)


def options(p: argparse.ArgumentParser) -> None:
    """The options every action takes (an action reads those it needs)."""
    p.add_argument("--out", type=Path, help="the run folder (default: a new runs/<time>-kaggle, or the latest one)")
    p.add_argument("--run", dest="out", type=Path, help=argparse.SUPPRESS)  # the spelling of earlier versions
    p.add_argument(
        "--seeds", type=list_of(seed), default=(0,), help="comma-separated seeds, one kernel each (default 0)"
    )
    p.add_argument("--kernels", type=list_of(str), help="comma-separated kernel definitions in kaggle/ (default: all)")
    p.add_argument("--bundles", dest="kernels", type=list_of(str), help=argparse.SUPPRESS)  # earlier spelling
    p.add_argument("--preset", choices=PRESET_NAMES, default="paper", help="training preset inside the kernel")
    p.add_argument(
        "--members",
        type=integer(2, schema.MAX_MEMBERS, "a number of members"),
        metavar="K",
        help="each kernel trains an ensemble of K members (`rerun --members K`), split over the machine's GPUs; "
        "the GPU hours are estimated first, and a run that cannot fit the session or the quota left is refused",
    )
    p.add_argument("--accelerator", help="Kaggle machine shape (default: the GPU T4 x2 machine)")
    seconds = integer(1, schema.MAX_KAGGLE_SESSION_S, "a kernel's seconds")
    p.add_argument(
        "--time-limit",
        type=seconds,
        metavar="SECONDS",
        help="seconds a kernel may run (default 6 h; with --members 12 h, Kaggle's longest session); "
        "`run` waits that long per round of --concurrency kernels",
    )
    p.add_argument("--timeout", dest="time_limit", type=seconds, help=argparse.SUPPRESS)  # earlier spelling
    p.add_argument("--concurrency", type=positive, help="kernels running at once (default 2)")
    p.add_argument("--poll", type=float, default=30.0, help="first polling interval in seconds; it backs off to 10x")
    p.add_argument(
        "--username", type=kaggle_user, help="Kaggle user name for the kernel ids (default: from the credentials)"
    )


def kaggle_user(text: str) -> str:
    """An argparse `type=`: a Kaggle user name (`schema.KAGGLE_USER`)."""
    if not re.fullmatch(schema.KAGGLE_USER, text):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a Kaggle user name (letters, digits, . _ -; 1 to 64)")
    return text


def run(args: argparse.Namespace) -> int:
    """The options, read once; then the Kaggle run (`backends.kaggle.main`)."""
    from attngeom.backends.kaggle import KaggleOptions, main

    return main(typed(KaggleOptions, args, seeds=tuple(args.seeds)))

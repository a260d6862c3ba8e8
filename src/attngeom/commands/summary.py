"""`reproduce.sh summary RUN ... --out FILE`: judged run folders as one small JSON of statistics and verdicts.

Each run folder of `rerun` (or ensemble folder of `rerun --members K`), judged into RUN/report, becomes
an entry of FILE: its configuration, every segment of its training, its statistics by step, its
verdicts and how far its maps lie from the published run's. An entry is named by its run folder's
name: runs of other names already in FILE are kept, a run of the same name and the same training (a
stopped run's continuation) replaces its entry, and one of the same name but another training (the
member 1 of another model's ensemble, say) is refused, FILE unchanged. With --together FOLDER, each
run's bundles are also kept under FOLDER/<run name>/ and judged there as one set, every claim that
compares their models included.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attngeom.base.files import output_file
from attngeom.commands.options import subcommand, typed, utf8


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `summary` subcommand."""
    p = subcommand(sub, "summary", "judged run folders as one JSON of statistics and verdicts", __doc__)
    p.add_argument(
        "runs", nargs="+", type=Path, metavar="RUN", help="run folders of `rerun`, each judged into RUN/report"
    )
    p.add_argument(
        "--out",
        type=output_file,
        required=True,
        help="the JSON to write; runs of other names already in it are kept, one of the same name is replaced by its own training's",
    )
    p.add_argument("--what", default="", help="a sentence saying what the runs are, kept at the top of the JSON")
    p.add_argument("--note", default="", help="a remark kept with each run (such as how loaded the machine was)")
    p.add_argument(
        "--together",
        type=Path,
        metavar="FOLDER",
        help="also keep each run's bundles (not its windows) in FOLDER/<run name>/ and judge FOLDER as one set, "
        "every claim comparing their models included; kept in the summary as `together`",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The options, read once; then the summary (`jobs.summary.run_summary`)."""
    from attngeom.jobs.summary import SummaryOptions, run_summary

    utf8(*args.runs, args.out, args.together)
    return run_summary(typed(SummaryOptions, args, runs=tuple(args.runs)))

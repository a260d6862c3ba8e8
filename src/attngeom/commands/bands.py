"""`reproduce.sh bands`: the rerun bands of expected/rerun.json derived from measured trajectories.

`bands SUMMARY` derives the bands of a telemetry step (--step, default 1200) from the ensembles a
summary file holds, prints them beside those in force and, with --write FILE, writes the new rerun.json;
--judge SUMMARY judges the runs another summary keeps again with them (exit 1 when one lies outside).
`bands --final REPORT_JSON` sets each final-step band beside the full-length trajectories a report
measured (exit 1 when one lies outside its band).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attngeom.base.files import output_file
from attngeom.commands.options import subcommand, typed


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `bands` subcommand."""
    p = subcommand(sub, "bands", "derive rerun.json's bands from measured trajectories", __doc__)
    p.add_argument(
        "ensemble", type=Path, nargs="?", help="a summary file holding ensembles (`summary ENS ... --out FILE`)"
    )
    p.add_argument(
        "--final",
        type=Path,
        metavar="REPORT_JSON",
        help="instead: the final-step bands beside the full-length trajectories of the published bundles' report.json",
    )
    p.add_argument("--step", type=int, help="the telemetry step whose bands are derived (default 1200)")
    p.add_argument("--source", help="how the reason names the file (default: the path given)")
    p.add_argument(
        "--judge",
        type=Path,
        action="append",
        metavar="SUMMARY",
        help="judge the runs a summary file keeps again with the derived bands (repeatable)",
    )
    p.add_argument(
        "--write", type=output_file, metavar="FILE", help="write the rerun.json with the derived bands to FILE"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The options, read once; then the bands (`jobs.bands.run_bands`)."""
    from attngeom.jobs.bands import BandsOptions, run_bands

    return run_bands(typed(BandsOptions, args, judge=tuple(args.judge or ())))

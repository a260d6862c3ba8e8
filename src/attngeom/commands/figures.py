"""`reproduce.sh figures`: the posts' six figures drawn as GIFs from the bundles, added to the report.

The figures go into OUT/figures/; when OUT holds a verify report of the same bundles, its page
(OUT/index.html) is written again with them. The figures and the page are replaced together.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attngeom.commands.options import subcommand


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `figures` subcommand."""
    p = subcommand(subparsers, "figures", "render the posts' six figures as GIFs and add them to the report", __doc__)
    p.add_argument(
        "--bundles", type=Path, metavar="DIR", help="folder of bundles (default: fetch the author's published ones)"
    )
    p.add_argument("--out", type=Path, metavar="DIR", default=Path("report"), help="output folder (default: report)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The figures (`report.figures.run_figures`)."""
    from attngeom.report.figures import run_figures

    return run_figures(args.bundles, args.out)

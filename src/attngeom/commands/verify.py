"""`reproduce.sh [verify]`: judge every quoted number of the posts against its expected value.

Loads the bundles (the author's published ones unless --bundles names a folder), says on one line what
they are and so how they are judged, computes every statistic, judges every claim of expected/ against
it, writes the report (REPORT.md, report.json, results.json, index.html) and prints one line per claim
and a closing `N passed, M failed` line. Exit status: 0 every judged claim passes, 1 a claim fails,
2 unusable input (nothing written); the report's files are replaced together or not at all.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attngeom.base.schema import TIERS
from attngeom.base.variants import PUBLISHED
from attngeom.commands.options import list_of, subcommand


def register(sub: argparse._SubParsersAction) -> None:
    """`verify`: the default subcommand."""
    p = subcommand(sub, "verify", "judge every quoted number (default)", __doc__)
    p.add_argument("--bundles", type=Path, help="a folder of bundles in the original format (default: the author's)")
    p.add_argument("--out", type=Path, default=Path("report"), help="report folder (default: report/)")
    p.add_argument(
        "--tier",
        choices=TIERS,
        help="override the tolerances the bundles call for (default: published for the author's bundles, "
        "rerun for any other)",
    )
    p.add_argument(
        "--variants",
        type=list_of(str, PUBLISHED, "variant"),
        default=None,
        help="comma-separated variants to judge (default: each of " + ", ".join(PUBLISHED) + " the folder holds)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The default job on the bundles named (`jobs.verify.run_verify`)."""
    from attngeom.jobs.verify import run_verify

    return run_verify(args.bundles, args.out, args.tier, args.variants)

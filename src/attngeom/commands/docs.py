"""`reproduce.sh docs`: the measured figures of README.md and docs/ regenerated in place from their files.

Each figure is a block of its page that a function of `attngeom.docs` writes from a measurement file
(bench/results/, expected/measured/). `docs` writes every block again; `docs --check` changes nothing
and exits 1 naming each block whose text is not what its file gives now, as CI checks.
"""

from __future__ import annotations

import argparse

from attngeom.commands.options import subcommand


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `docs` subcommand."""
    p = subcommand(sub, "docs", "regenerate the measured figures of README.md and docs/ (--check: only check)", __doc__)
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each block out of date")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The pages regenerated or checked (`docs.pages.run_docs`)."""
    from attngeom.docs.pages import run_docs

    return run_docs(args.check)

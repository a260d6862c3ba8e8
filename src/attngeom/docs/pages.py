"""`docs`: the measured figures of README.md and docs/ regenerated in place from their files, or checked.

Each figure is a cog block (cogapp): a comment holding the Python that makes it from a measurement
file (`docs.measured`, `docs.bench`, `docs.full_length`), then its output, up to `[[[end]]]`. `./reproduce.sh docs` runs every block
and rewrites the pages; `--check` changes nothing and exits 1 naming each block whose output is not
what its file gives now (a measurement committed without regenerating the page), as CI checks.

    <!-- [[[cog from attngeom.docs.measured import *; cog.out(step1200_runs()) ]]] -->
    ...the table, generated...
    <!-- [[[end]]] -->
"""

from __future__ import annotations

from pathlib import Path

from attngeom.base.errors import EXIT_FAIL, EXIT_PASS, InputError, one_line
from attngeom.base.files import REPO, replace_together, shown

BEGIN = "[[[cog"


def pages(root: Path = REPO) -> list[Path]:
    """The pages that hold figures: README.md and every page of docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def generate(path: Path) -> str:
    """The page at `path` with every block's output made again."""
    from cogapp import Cog
    from cogapp.errors import CogError

    text = path.read_text(encoding="utf-8")
    try:
        return Cog().process_string(text, fname=str(path))
    except InputError as exc:  # a measurement file that cannot be read: its own line
        raise InputError(f"{shown(path)}: {exc}") from exc
    except CogError as exc:  # a block's own error (cog wraps what its code raises)
        raise InputError(f"{shown(path)}: a figure block fails: {one_line(exc)}") from exc


def stale_blocks(before: str, after: str) -> list[int]:
    """The line (1-based) of each block whose output differs between two versions of a page: a page's
    blocks keep their order and their code, so the i-th block of one is the i-th of the other."""

    def blocks(text: str) -> list[tuple[int, list[str]]]:
        lines = text.splitlines()
        starts = [i for i, line in enumerate(lines) if BEGIN in line]
        return [(s + 1, lines[s:e]) for s, e in zip(starts, [*starts[1:], len(lines)])]

    return [line for (line, a), (_, b) in zip(blocks(before), blocks(after)) if a != b]


def run_docs(check: bool) -> int:
    """Regenerate the figures of every page, or (--check) name the blocks that are out of date. Every page
    is made in memory first; then the changed ones replace the old together, or none does."""
    made = {path: (path.read_text(encoding="utf-8"), generate(path)) for path in pages()}
    changed = {path: after for path, (before, after) in made.items() if after != before}
    if check:
        for path in changed:
            for line in stale_blocks(made[path][0], changed[path]):
                print(f"{shown(path)}:{line}: out of date: regenerate with ./reproduce.sh docs")
        return EXIT_FAIL if changed else EXIT_PASS
    try:
        replace_together(changed)
    except OSError as exc:
        where = shown(exc.filename) if exc.filename else "a page"
        raise InputError(f"{where}: cannot be replaced ({exc.strerror or exc}); no page was changed") from exc
    for path in changed:
        print(f"regenerated: {shown(path)}")
    return EXIT_PASS

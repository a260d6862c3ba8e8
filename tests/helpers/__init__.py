"""What the tests share, imported by them (never from one another): the repository root here, and in the
modules beside it the published bundles' copies (`bundles`), the fake Kaggle server (`kaggle`), the
command line in a subprocess and the report set's checks (`reports`), signals (`signals`), tmpfs mounts
(`mounts`), the trained smoke runs (`runs`), the Docker command (`docker`), the judged runs a summary
reads (`summaries`) and the checks of a JSON rule (`rules`). The fixtures built on them are in tests/conftest.py."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository root: the checkout the tests run in."""

DEFAULT_MIRROR = REPO.parent / "shared" / "mirror"
"""Where the remote files' mirror lies when ATTNGEOM_MIRROR does not say (conftest sets it from this)."""
MIRROR = Path(os.environ.get("ATTNGEOM_MIRROR") or DEFAULT_MIRROR).resolve()
"""The mirror the session reads, as it was when the tests started (a test may change ATTNGEOM_MIRROR)."""

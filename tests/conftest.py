"""Shared fixtures: the mirror of the remote files, a private cache, and the trained smoke runs."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from trained_runs import SmokeRuns

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MIRROR = REPO.parent / "shared" / "mirror"


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("PYTHONSAFEPATH", "1")  # no Python a test starts imports from its working folder
    mirror = os.environ.get("ATTNGEOM_MIRROR")
    if mirror:  # a relative path means where the tests were started, also for commands run in other folders
        os.environ["ATTNGEOM_MIRROR"] = str(Path(mirror).resolve())
    elif DEFAULT_MIRROR.is_dir():
        os.environ["ATTNGEOM_MIRROR"] = str(DEFAULT_MIRROR)
    _private_cache(config)


def _private_cache(config: pytest.Config) -> None:
    """Downloads and compiled steps go to a fresh cache, never the user's, set before any test module loads
    jax: the session's processes, in it and started by it, share the compilation cache that training sets
    up (`training.device.compilation_cache`), as the commands of one machine do."""
    from attngeom.training.device import COMPILATION_CACHE_DIR, compilation_cache

    cache = Path(tempfile.mkdtemp(prefix="attngeom-test-cache-"))
    saved = {name: os.environ.get(name) for name in ("ATTNGEOM_CACHE", COMPILATION_CACHE_DIR)}
    os.environ["ATTNGEOM_CACHE"] = str(cache)
    os.environ.pop(COMPILATION_CACHE_DIR, None)
    compilation_cache()

    def restore() -> None:
        shutil.rmtree(cache, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    config.add_cleanup(restore)


@pytest.fixture(scope="session")
def published_root() -> Path:
    """The author's published bundles, fetched (from the mirror in CI) and verified."""
    from attngeom.fetch import fetch_bundles

    return fetch_bundles()


@pytest.fixture(scope="session")
def smoke_runs(tmp_path_factory) -> SmokeRuns:
    """The trained smoke runs of the session, by code generation (`smoke_runs["default"]`)."""
    return SmokeRuns(tmp_path_factory.mktemp("smoke-runs"), REPO)

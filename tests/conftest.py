"""Shared fixtures: the mirror of the remote files, a private download cache, and the trained smoke runs."""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory):
    """Downloads during tests go to a fresh cache, never the user's."""
    old = os.environ.get("ATTNGEOM_CACHE")
    os.environ["ATTNGEOM_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("ATTNGEOM_CACHE", None)
    else:
        os.environ["ATTNGEOM_CACHE"] = old


@pytest.fixture(scope="session")
def published_root(_private_cache) -> Path:
    """The author's published bundles, fetched (from the mirror in CI) and verified."""
    from attngeom.fetch import fetch_bundles

    return fetch_bundles()


@pytest.fixture(scope="session")
def smoke_runs(tmp_path_factory, _private_cache) -> SmokeRuns:
    """The trained smoke runs of the session, by code generation (`smoke_runs["default"]`)."""
    return SmokeRuns(tmp_path_factory.mktemp("smoke-runs"), REPO)

"""Shared fixtures: the mirror of the remote files, a private cache, the published bundles, the trained smoke
runs, the corpus, the fake Kaggle server, tmpfs mounts and the judged runs a summary reads. What they are
built on lives in tests/helpers/, which the tests import (never one another)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from helpers import DEFAULT_MIRROR, REPO
from helpers.mounts import tmpfs  # noqa: F401 (the fixture)
from helpers.runs import SmokeRuns


def pytest_configure(config: pytest.Config) -> None:
    # the session's record is this process's to write: no worker, and no `./reproduce.sh test` a test starts
    _SUITE_FILE.append(os.environ.pop(SUITE_JSON, ""))
    os.environ.setdefault("PYTHONSAFEPATH", "1")  # no Python a test starts imports from its working folder
    mirror = os.environ.get("ATTNGEOM_MIRROR")
    if mirror:  # a relative path means where the tests were started, also for commands run in other folders
        os.environ["ATTNGEOM_MIRROR"] = str(Path(mirror).resolve())
    elif DEFAULT_MIRROR.is_dir():
        os.environ["ATTNGEOM_MIRROR"] = str(DEFAULT_MIRROR)
    _private_cache(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In one process: the files that hold a slow test (`heavy` markers) first, tests marked `last` after all
    the others (in their own order): the GPU check's rehearsal then loads most of its steps from the
    session's compilation cache instead of compiling them again. Under `-n N --dist loadfile`, pytest-xdist
    hands the files out by their number of tests, most first, and this order only breaks its ties: the
    files of one to three long tests (the kill test, the GPU check's rehearsal) go out among the last,
    which still finds the cache full. (A whole run's file times, scheduled on two workers in this order and
    in xdist's, end 21 s apart, xdist's first: handing the long files out first gains nothing.)"""
    heavy = ("slow", "docker", "kaggle_runtime", "faults")  # the markers of tests that run for minutes
    slow = {item.path for item in items if any(item.get_closest_marker(m) for m in heavy)}
    items.sort(key=lambda item: (item.get_closest_marker("last") is not None, item.path not in slow))


SUITE_JSON = "ATTNGEOM_SUITE_JSON"  # a file to write the session's counts and wall time to (bench/results/suite.json)
_SUITE_FILE: list[str] = []  # its value as the session started (taken out of the environment its processes inherit)
_STARTED: list[float] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    _STARTED.append(time.monotonic())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With ATTNGEOM_SUITE_JSON set: the outcomes and the wall time of this session, where and how it ran,
    as the docs quote them (`attngeom.docs.bench.suite`)."""
    path = _SUITE_FILE[-1] if _SUITE_FILE else ""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if not path or reporter is None or not _STARTED:
        return
    import datetime as dt
    import shlex

    from attngeom.base.files import git_commit, machine, write_json_atomic

    outcomes = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
    counts = {
        k: len([r for r in reporter.stats.get(k, []) if getattr(r, "when", "call") in ("call", "setup")])
        for k in outcomes
    }
    write_json_atomic(
        Path(path),
        {
            "outcomes": counts,
            "exit_status": int(exitstatus),
            "wall_s": round(time.monotonic() - _STARTED[0], 1),
            "command": shlex.join(["./reproduce.sh", "test", *session.config.invocation_params.args]),
            "machine": machine(),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"),
            "git_commit": git_commit(),
            "load_average": [round(x, 2) for x in os.getloadavg()],  # 1, 5, 15 min: how busy the cores were
        },
    )


def _private_cache(config: pytest.Config) -> None:
    """Downloads and compiled steps go to a fresh cache, never the user's, set before any test module loads
    jax: the session's processes, in it and started by it (`-n N`'s workers too), share the compilation
    cache that training sets up (`training.device.compilation_cache`), as the commands of one machine do."""
    from attngeom.training.device import COMPILATION_CACHE_DIR, compilation_cache

    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker of `-n N`: its controller's cache, in the environment
        return
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
    from attngeom.base.fetch import fetch_bundles

    return fetch_bundles()


@pytest.fixture(scope="session")
def smoke_runs(tmp_path_factory) -> SmokeRuns:
    """The trained smoke runs of the session, by code generation (`smoke_runs["default"]`), shared by the
    workers of `-n N` (in the folder above each worker's own)."""
    base = tmp_path_factory.getbasetemp()
    return SmokeRuns((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "smoke-runs", REPO)


@pytest.fixture
def smoke_run(smoke_runs) -> Path:
    """The session's smoke rerun of seeds 0-2 under the machine's own code generation (read only)."""
    return smoke_runs["default"].path


@pytest.fixture(scope="session")
def corpus():
    """The training corpus (tiny Shakespeare), loaded once for the session (read it, never change it)."""
    from attngeom.training import data

    return data.load_corpus()


@pytest.fixture
def fake_kaggle(monkeypatch, tmp_path):
    """A fake Kaggle (`helpers.kaggle.FakeKaggle`), the real client pointed at it with valid credentials and
    a private home, retries that wait milliseconds, and a scratch working folder."""
    from helpers.kaggle import FakeKaggle, point_client_at

    from attngeom.backends import kaggle_client

    monkeypatch.setattr(kaggle_client, "RETRY_WAIT_S", (0.001, 0.01))  # the backoff's shape, not its minutes
    with FakeKaggle() as server:
        point_client_at(server, monkeypatch, tmp_path / "home")
        monkeypatch.chdir(tmp_path)
        yield server


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, published_root) -> dict[str, Path]:
    """A finished full-length run of softmax (one row of its step-1200 map reweighed: a rerun) and one of
    yat_b, each in its own folder and judged alone into RUN/report (read only)."""
    from helpers.summaries import judged_runs_of

    return judged_runs_of(published_root, tmp_path_factory.mktemp("together"))


@pytest.fixture(autouse=True)
def _no_ending_carried_over():
    """A test that notes a signal in process (`cli._Interrupt`) marks the command as ending, which silences
    progress (`streams.ENDING`): the next test in the same worker starts with a command not ending."""
    yield
    from attngeom.base import streams

    streams.ENDING.clear()

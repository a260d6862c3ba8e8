"""A run killed at any of its writes is carried on to the run an uninterrupted one is: a smoke rerun killed
(SIGKILL, strace fault injection) at the renames it makes, then resumed (or, killed before its first
manifest, started again into the same folder), ends complete with the bundles, run records and log lines
of the uninterrupted run, bit for bit: no step trained twice, nothing lost (a kill at the completing
manifest write included), and no half-written file left, listed or read (each kill leaves the temporary
of the file it stopped; the run carried on removes it).

Every file the run puts in place is killed at, at its first and at its last rename: a file written again
(a checkpoint, the log, the manifest) takes the same path through the code each time, and its first and
last writes are those whose neighbours differ (nothing before it; the run's end after it). The files
written inside a temporary folder that is put in place whole (the report) are one write, the folder's: a
kill at any of them leaves the same half-made folder, so it is killed at the first and last of them."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import REPO
from helpers.runs import same_as_the_whole_run

from attngeom.base.files import is_temporary, tmp_prefix
from attngeom.training.progress import CompileTimes
from attngeom.training.runs import require_complete

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")]
RUN = ["rerun", "--preset", "smoke", "--variants", "softmax", "--steps", "21", "--windows", "2", "--quiet"]


def attngeom(*args: str, trace: list[str] | None = None, cwd: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "attngeom", *args]
    if trace is not None:
        cmd = ["strace", "-f", "-qq", *trace, *cmd]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False)


def written(target: str) -> str:
    """What a rename onto `target` writes: the file, or the temporary folder it lies in (put in place whole)."""
    parts = Path(target).parts
    return str(Path(*parts[: next((i + 1 for i, p in enumerate(parts) if is_temporary(p)), len(parts))]))


def kill_points(targets: list[str]) -> list[int]:
    """The renames to kill at (1-based, as strace counts them): the first and last of each thing written."""
    first = {written(t): i for i, t in reversed(list(enumerate(targets, 1)))}
    last = {written(t): i for i, t in enumerate(targets, 1)}
    return sorted({*first.values(), *last.values()})


def test_each_file_is_killed_at_its_first_and_last_rename():
    assert kill_points(["a", "b", "a", "c", "a", "b"]) == [1, 2, 4, 5, 6]
    assert kill_points(["m"]) == [1] and kill_points([]) == []


def test_a_folder_put_in_place_whole_is_killed_at_its_first_and_last_file():
    folder = ["r/.report.ab12cd34.tmp/" + name for name in ("a.json", "b.json", "c.md")]
    assert kill_points(["r/m", *folder, "r/report", "r/m"]) == [1, 2, 4, 5, 6]
    assert written(folder[1]) == "r/.report.ab12cd34.tmp" and written("r/report") == "r/report"


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> tuple[Path, list[str]]:
    """The uninterrupted run, traced once the compilation cache holds its steps (so that every rename it makes
    is one of the run's own files, as in each run killed below): its folder and the targets of its renames."""
    root = tmp_path_factory.mktemp("whole")
    warm = attngeom(*RUN, "--out", str(root / "warm"), cwd=root)
    assert warm.returncode == 0, warm.stderr[-2000:]
    log = root / "renames.log"
    done = attngeom(*RUN, "--out", str(root / "run"), trace=["-o", str(log), "-e", "trace=rename"], cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    targets = re.findall(r'\brename\("[^"]*", "([^"]*)"\)', log.read_text())
    # the run's own files, and the compile times beside the compilation cache (a kill there is one mid-run too)
    ours = [t for t in targets if t.startswith(str(root / "run")) or t.endswith(CompileTimes.FILE)]
    assert len(targets) >= 10 and ours == targets, targets
    return root / "run", targets


def left_behind(target: str, whole: Path, out: Path) -> list[str]:
    """The temporaries of the write onto `target` (a path of the traced run `whole`) left in the run `out`:
    beside the file, or the temporary folder it was written in (a folder put in place whole, whose
    temporary name differs from run to run)."""
    parts = Path(target).relative_to(whole).parts
    i = next((i for i, part in enumerate(parts) if is_temporary(part)), len(parts) - 1)
    name = parts[i][1:].rsplit(".", 2)[0] if is_temporary(parts[i]) else parts[i]  # .NAME.XXXXXXXX.tmp
    return [p.name for p in out.joinpath(*parts[:i]).glob(f"{glob.escape(tmp_prefix(name))}*.tmp")]


def killed_then_carried_on(
    root: Path, whole: Path, target: str, at: int
) -> tuple[int, list[str] | None, subprocess.CompletedProcess]:
    """The run killed at its `at`-th rename (onto `target`), then carried on: (at, the temporaries of the
    target the kill left, None for a target outside the run's folder, the carrying command)."""
    work = root / f"kill-{at}"
    work.mkdir()
    out = work / "run"
    killed = attngeom(*RUN, "--out", str(out), trace=["-e", f"inject=rename:signal=KILL:when={at}"], cwd=work)
    if killed.returncode == 0:
        return at, None, subprocess.CompletedProcess(killed.args, 1, "", f"rename {at}: the run was not killed")
    left = left_behind(target, whole, out) if Path(target).is_relative_to(whole) else None  # the compile times
    carried = (
        attngeom("rerun", "--resume", str(out), "--quiet", cwd=work)
        if (out / "manifest.json").is_file()
        else attngeom(*RUN, "--out", str(out), cwd=work)  # killed before it could say what it is
    )
    return at, left, carried


def test_a_kill_at_every_rename_is_carried_on_to_the_uninterrupted_run(traced, tmp_path):
    whole, targets = traced
    points = kill_points(targets)
    assert len({written(targets[at - 1]) for at in points}) == len({written(t) for t in targets}) > 3  # all written
    with ThreadPoolExecutor(max_workers=2) as pool:  # two at a time: much of a smoke run is single-threaded
        results = list(pool.map(lambda at: killed_then_carried_on(tmp_path, whole, targets[at - 1], at), points))
    failed = [(at, carried.stderr[-300:]) for at, _, carried in results if carried.returncode != 0]
    assert failed == []
    assert [at for at, left, _ in results if left == []] == []  # each kill stopped a write half-way
    for at, _, _ in results:
        out = tmp_path / f"kill-{at}" / "run"
        same_as_the_whole_run(whole, out, ("softmax",), 0)
        listed = require_complete(out)["files"]
        assert not [n for n in listed if any(is_temporary(part) for part in n.split("/"))], at
        assert not [p for p in out.rglob("*") if is_temporary(p.name)], at

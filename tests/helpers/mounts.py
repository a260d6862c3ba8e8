"""Real file systems for the tests of full disks, read-only folders and mount points: a tmpfs,
mounted where the test asks (root only; the test is skipped where mounting is not allowed)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator:
    """`tmpfs(folder, size="1m", read_only=False)` mounts a fresh tmpfs at `folder`; at the end every
    mount under the test's folder is unmounted, also one that a faulty swap moved elsewhere in it."""
    mounted: list[Path] = []

    def mount(folder: Path, size: str = "1m", read_only: bool = False) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        options = f"size={size}" + (",ro" if read_only else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
        mounted.append(folder)
        return folder

    yield mount
    if not mounted:
        return
    with open("/proc/mounts", encoding="utf-8") as table:
        points = [line.split()[1].encode().decode("unicode_escape") for line in table]
    for point in reversed(points):
        if Path(point).is_relative_to(tmp_path):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def fill(folder: Path) -> None:
    """Fill the file system of `folder` to the last byte."""
    with open(folder / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass

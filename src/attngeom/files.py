"""Helpers shared by the report and the run folders: hashes, atomic writes, the commit, versions."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import BinaryIO

import numpy as np

REPO = Path(__file__).resolve().parents[2]
LIBRARIES = ("numpy", "scipy", "pooch", "matplotlib", "jax", "jaxlib", "flax", "optax", "kaggle")


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary file that replaces `path` only when the block ends without error.

    It is written under a temporary name unique to this process beside `path` and renamed over
    it, so a reader, a crash or a concurrent writer never sees half a file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write text (UTF-8) or bytes to `path` through `atomic_file`."""
    with atomic_file(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def _to_json(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def write_json_atomic(path: Path, doc: dict) -> None:
    """`write_atomic` of a JSON document (numpy scalars allowed)."""
    write_atomic(path, json.dumps(doc, indent=1, ensure_ascii=False, default=_to_json) + "\n")


def git_commit() -> str | None:
    """The commit of the source tree this package runs from, if it is a git checkout."""
    if not (REPO / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


def versions() -> dict[str, str]:
    """Python, this package and every installed library the results depend on."""
    from attngeom import __version__

    found = {"attngeom": __version__, "python": platform.python_version()}
    for lib in LIBRARIES:
        try:
            found[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            continue
    return found

"""Fill the checkout's carry/ folder for the GPU check on a machine without network, and print what travels.

    .venv/bin/python bench/gpu_carry.py [--mirror DIR] [--python-version 3.12]

- `carry/mirror/`: every remote file the package reads (`fetch.REGISTRY`: the corpus, the author's script,
  the published bundles, the companion's runs), copied from the mirror (`--mirror`, else ATTNGEOM_MIRROR,
  else ../shared/mirror beside the checkout), each checked against its sha256;
- `carry/wheels/`: the locked wheels of the pure-Python packages a GPU image often lacks
  (`environment.CARRIED`), by `pip download --require-hashes` for that machine's Python (`--python-version`).

`bench/gpu_check.sh` reads both when they are there (the mirror as ATTNGEOM_MIRROR, the wheels installed
into carry/site, never into the interpreter's own folders). carry/ is ignored by git: name it among the
paths a remote machine is sent. It prints the size of what travels, the checkout's files and carry/, and
exits 2 when that is over 64 MiB.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from attngeom.base import environment, fetch  # noqa: E402
from attngeom.base.errors import InputError  # noqa: E402
from attngeom.base.files import sha256_file  # noqa: E402
from attngeom.cli import Parser, entry  # noqa: E402

CARRY = REPO / "carry"
LIMIT_BYTES = 64 << 20  # what a lent machine is sent: the checkout and its carried folders


def fill_mirror(source: Path, to: Path) -> None:
    """Copy every file of fetch.REGISTRY from the mirror `source` to `to`, each checked against its sha256
    first (a mirror that lacks one, or holds another, leaves `to` as it was)."""
    for url, sha in fetch.REGISTRY.items():
        src = source / fetch.url_path(url)
        if not src.is_file():
            raise InputError(f"{src}: not in the mirror {source} (the GPU check reads it)")
        if sha256_file(src) != sha:
            raise InputError(f"{src}: sha256 differs from the pinned one; the mirror is corrupt")
    shutil.rmtree(to, ignore_errors=True)
    for url in fetch.REGISTRY:
        (to / fetch.url_path(url)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / fetch.url_path(url), to / fetch.url_path(url))


def fill_wheels(to: Path, python_version: str) -> list[str]:
    """Download the locked wheels of environment.CARRIED for Python `python_version` into `to`; their names."""
    major, minor = python_version.split(".")[:2]
    pinned = environment.entries(
        environment.lock_path(), {"python_version": f"{major}.{minor}", "python_full_version": f"{major}.{minor}.0"}
    )
    lines = []
    for name in environment.CARRIED:
        if name not in pinned:
            raise InputError(f"{environment.lock_path()}: {name} is not pinned for Python {python_version}")
        version, hashes = pinned[name]
        lines.append(f"{name}=={version} " + " ".join(f"--hash={h}" for h in hashes))
    shutil.rmtree(to, ignore_errors=True)
    to.mkdir(parents=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as req:
        req.write("\n".join(lines) + "\n")
        req.flush()
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]
            + ["--only-binary=:all:", "--python-version", python_version, "--require-hashes"]
            + ["-r", req.name, "-d", str(to)],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InputError(f"pip download of {', '.join(environment.CARRIED)} failed: {last}")
    return sorted(p.name for p in to.glob("*.whl"))


def travelling_bytes() -> int:
    """The bytes a remote machine is sent: the checkout's files git does not ignore, and carry/."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=False,
    )
    if listed.returncode == 0:
        files = [REPO / os.fsdecode(name) for name in listed.stdout.split(b"\0") if name]
    else:  # not a git checkout: every file outside the environment and carry/
        files = [p for p in REPO.rglob("*") if not {".venv", ".git", "carry"} & set(p.relative_to(REPO).parts)]
    files += CARRY.rglob("*")
    return sum(p.stat().st_size for p in files if p.is_file() and not p.is_symlink())


def python_version(text: str) -> str:
    """An argparse `type=`: the MAJOR.MINOR of a Python the lock has wheels for (3.10 to 3.13)."""
    if not re.fullmatch(r"3\.1[0-3]", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Python version from 3.10 to 3.13 (as MAJOR.MINOR)")
    return text


def main() -> int:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--mirror", type=Path, help="the mirror to copy (default: ATTNGEOM_MIRROR, else ../shared/mirror)"
    )
    parser.add_argument(
        "--python-version",
        type=python_version,
        default="3.12",
        help="the Python of the GPU machine, MAJOR.MINOR from 3.10 to 3.13 (default 3.12)",
    )
    args = parser.parse_args()
    source = args.mirror or fetch.mirror_dir() or REPO.parent / "shared" / "mirror"
    if not source.is_dir():
        raise InputError(f"{source}: no mirror there (give --mirror DIR or set ATTNGEOM_MIRROR)")
    fill_mirror(source.resolve(), CARRY / "mirror")
    wheels = fill_wheels(CARRY / "wheels", args.python_version)
    size = travelling_bytes()
    print(f"gpu_carry: {CARRY}: the mirror ({len(fetch.REGISTRY)} files) and {len(wheels)} wheels: {', '.join(wheels)}")
    print(f"gpu_carry: the checkout and carry/ together: {size / 2**20:.1f} MiB (at most {LIMIT_BYTES >> 20} MiB)")
    if size > LIMIT_BYTES:
        raise InputError(f"what travels is {size / 2**20:.1f} MiB, over {LIMIT_BYTES >> 20} MiB: carry less")
    return 0


if __name__ == "__main__":
    entry(main)

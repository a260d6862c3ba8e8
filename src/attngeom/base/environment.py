"""The Python environment a command runs in: the modules each command needs, and the versions in use
against the lock's pins.

`./reproduce.sh` runs on the environment it builds from the lock, or, with ATTNGEOM_SYSTEM_PYTHON, on an
interpreter that already holds the packages (a GPU image, a shared server): there every module the
command needs is looked for before it starts (`require`; found, not imported: jax reads its settings
when it loads, and the command sets them first), and a report's provenance and a run's manifest say
whether the versions used are the lock's (`against_lock`). Standard library only at import: the check
runs before anything else.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
LOCK = "requirements.lock"  # ATTNGEOM_LOCK names another (the Docker image's requirements-cuda.lock)
SYSTEM_PYTHON = "ATTNGEOM_SYSTEM_PYTHON"  # set by reproduce.sh: the interpreter given, no environment built
NOT_LOCKED = "not the locked environment"

EVERY_COMMAND = ("numpy", "scipy", "pooch", "requests", "matplotlib", "threadpoolctl", "tenacity")
"""The modules the command line imports whatever the command (each also its distribution's name)."""
TRAINING = ("jax", "jaxlib", "flax", "optax", "tqdm")
NEEDS = {
    "rerun": TRAINING,
    "fidelity": TRAINING,
    "bench-train": TRAINING,
    "bench-profile": TRAINING,
    "bench-verify": (),
    "test": (*TRAINING, "pytest", "hypothesis"),
    "kaggle": ("kaggle",),
    "docs": ("cogapp",),
}
"""The modules a command needs beyond EVERY_COMMAND, by its name as reproduce.sh gives it."""
CARRIED = ("pooch", "platformdirs", "tenacity")
"""The pure-Python packages (and their own needs) that GPU images often lack: bench/gpu_carry.py
carries their locked wheels to such a machine; the lent machine's image has every other one the
GPU check needs (numpy, scipy, requests, matplotlib, threadpoolctl, jax, flax, optax, tqdm, packaging)."""


def needed(command: str) -> tuple[str, ...]:
    """Every module `command` imports (an unknown name or an option: the command line's own)."""
    return EVERY_COMMAND + NEEDS.get(command, ())


def missing(command: str) -> list[str]:
    """The modules `command` needs that this interpreter does not find."""
    return [name for name in needed(command) if importlib.util.find_spec(name) is None]


def require(command: str) -> None:
    """Exit 2 with one `error:` line naming the modules `command` needs that this interpreter lacks."""
    lacking = missing(command)
    if lacking:
        given = os.environ.get(SYSTEM_PYTHON) or sys.executable
        sys.stderr.write(
            f"error: {SYSTEM_PYTHON}={given}: `{command.replace('-', ' ')}` needs the module(s) {', '.join(lacking)}, which this "
            "interpreter does not have (install them, or carry their wheels: bench/gpu_carry.sh)\n"
        )
        sys.exit(2)


def lock_path() -> Path:
    """The lock the environment is compared with: ATTNGEOM_LOCK, else the checkout's requirements.lock."""
    return Path(os.environ.get("ATTNGEOM_LOCK") or REPO / LOCK)


def entries(lock: Path, marker_environment: dict[str, str] | None = None) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, sha256 hashes) of every `name==version` pin of a `uv pip compile --generate-hashes`
    lock whose marker holds for this interpreter (or for `marker_environment`: PEP 508 names such as
    python_version overriding this interpreter's)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: dict[str, tuple[str, list[str]]] = {}
    hashes: list[str] = []  # those of the pin being read, or of one whose marker does not hold
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line.startswith("    --hash="):
            hashes.append(line.split("=", 1)[1].rstrip(" \\"))
        elif line[:1].isalnum() and "==" in line:
            req = Requirement(line.rstrip(" \\"))
            hashes = []
            if req.marker is None or req.marker.evaluate(marker_environment):
                found[canonicalize_name(req.name)] = (next(iter(req.specifier)).version, hashes)
    return found


def pins(lock: Path) -> dict[str, str]:
    """name -> version of every pin of the lock that holds for this interpreter."""
    return {name: version for name, (version, _) in entries(lock).items()}


def against_lock(used: dict[str, str]) -> dict:
    """Whether the versions `used` (files.versions: library -> version) are the lock's, and where not:
    {"lock", "locked", "differences": library -> {"used", "locked"}, "line": `describe`'s} (a library the
    lock pins and this interpreter lacks is used as null). `locked` is null when the lock cannot be read."""
    from packaging.utils import canonicalize_name

    from attngeom.base.files import LIBRARIES

    lock = lock_path()
    try:
        pinned = pins(lock)
    except (OSError, ValueError, ImportError) as e:
        doc = {"lock": lock.name, "locked": None, "note": f"the lock could not be read ({e.__class__.__name__})"}
        return doc | {"line": describe(doc)}
    differences = {}
    for lib in LIBRARIES:
        want = pinned.get(canonicalize_name(lib))
        if want is not None and used.get(lib) != want:
            differences[lib] = {"used": used.get(lib), "locked": want}
    doc = {"lock": lock.name, "locked": not differences, "differences": differences}
    if os.environ.get(SYSTEM_PYTHON):
        doc["interpreter"] = os.environ[SYSTEM_PYTHON]
    return doc | {"line": describe(doc)}


def describe(env: dict | None) -> str:
    """One line for a reader: `the locked environment (requirements.lock)`, or what differs."""
    if not env:
        return "not recorded"
    if env.get("locked") is None:
        return f"unknown against {env.get('lock')}: {env.get('note', '')}"
    if env["locked"]:
        return f"the locked environment ({env['lock']})"
    diffs = ", ".join(f"{k} {v['used'] or 'absent'} (locked {v['locked']})" for k, v in env["differences"].items())
    return f"{NOT_LOCKED} ({env['lock']}): {diffs}"

"""`<run>/kaggle-state.json`: what a Kaggle run has recorded so far, read only after one schema accepts it.

The file is rewritten atomically at every step of a run, and `status`, `pull` and `run --out DIR`
continue from it, so it is read as untrusted input: valid JSON of another shape (a list, an empty
object, a kernel without its id, a path out of the run folder, deep nesting) is one clear error.
"""

from __future__ import annotations

from pathlib import Path

from attngeom.base import json_rules, schema
from attngeom.base.errors import InputError
from attngeom.base.files import write_json_atomic

STATE_FILE = "kaggle-state.json"
MAX_STATE_BYTES = 1 << 20  # a few hundred kernels' worth


def load_state(run: Path) -> dict:
    """What was recorded about the run so far, checked against `schema.KAGGLE_STATE_JSON`."""
    path = Path(run) / STATE_FILE
    if not path.is_file():
        raise InputError(f"{run}: no {STATE_FILE} here; start with `./reproduce.sh kaggle run` or `kaggle build`")
    try:
        state = json_rules.read_json(path, max_bytes=MAX_STATE_BYTES)
    except InputError as exc:
        raise InputError(f"{path}: not a readable {STATE_FILE} ({str(exc)[:200]})") from exc
    check_state(state, f"{path}: not a {STATE_FILE} this version wrote")
    return state


def check_state(state: dict, what: str = f"not a {STATE_FILE} `kaggle status` could read") -> None:
    """Refuse a state `load_state` would refuse (`schema.KAGGLE_STATE_JSON`), naming the first problem."""
    for where, problem in schema.KAGGLE_STATE_JSON.errors(state, ""):
        raise InputError(f"{what}: at {where or 'the top level'}, {problem[:200]}")


def save_state(run: Path, state: dict) -> None:
    """Atomically, and only a state `load_state` reads back: a crash leaves the old or the new state, never
    half of one."""
    check_state(state)
    write_json_atomic(Path(run) / STATE_FILE, state)

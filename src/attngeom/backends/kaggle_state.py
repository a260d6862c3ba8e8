"""`<run>/kaggle-state.json`: what a Kaggle run has recorded so far, read only after one schema accepts it.

The file is rewritten atomically at every step of a run, and `status`, `pull` and `run --run DIR`
continue from it, so it is read as untrusted input: valid JSON of another shape (a list, an empty
object, a kernel without its id, a path out of the run folder, deep nesting) is one clear error.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from attngeom.errors import InputError
from attngeom.files import write_json_atomic
from attngeom.training.rerun import PRESET_NAMES

STATE_FILE = "kaggle-state.json"
MAX_STATE_BYTES = 1 << 20  # a few hundred kernels' worth

_TIME = {"type": ["number", "null"], "minimum": 0}
_TEXT = {"type": "string", "maxLength": 65536}
KERNEL_SCHEMA = {
    "type": "object",
    "required": ["bundle", "seed", "id", "variants", "folder", "state"],
    "additionalProperties": False,
    "properties": {
        "bundle": {"type": "string", "pattern": "^[A-Za-z0-9._-]+$"},
        "seed": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
        "id": {"type": "string", "pattern": "^[^/\\s]+/[A-Za-z0-9._-]+$"},
        "variants": {"type": "array", "items": {"type": "string", "maxLength": 64}, "maxItems": 64},
        "folder": {"type": "string", "pattern": "^kernels/[A-Za-z0-9._-]+$"},
        "state": {"type": "string", "pattern": "^[A-Z_]+$"},
        "pushed": _TIME,
        "finished": _TIME,
        "version": {"type": ["integer", "null"], "minimum": 1, "maximum": 2**31 - 1},
        "url": _TEXT,
        "message": {"type": ["string", "null"], "maxLength": 65536},
    },
}
STATE_SCHEMA = {
    "type": "object",
    "required": ["username", "created", "preset", "accelerator", "timeout", "concurrency", "kernels"],
    "additionalProperties": False,
    "properties": {
        "username": {"type": "string", "minLength": 1, "maxLength": 256},
        "created": _TEXT,
        "run_id": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
        "preset": {"enum": list(PRESET_NAMES)},
        "accelerator": {"type": "string", "minLength": 1, "maxLength": 256},
        "timeout": {"type": "integer", "minimum": 1, "maximum": 10**7},
        "concurrency": {"type": "integer", "minimum": 1, "maximum": 1000},
        "kernels": {"type": "array", "minItems": 1, "maxItems": 10_000, "items": KERNEL_SCHEMA},
    },
}


def load_state(run: Path) -> dict:
    """What was recorded about the run so far, checked against `STATE_SCHEMA`."""
    path = Path(run) / STATE_FILE
    if not path.is_file():
        raise InputError(f"{run}: no {STATE_FILE} here; start with `./reproduce.sh kaggle run` or `kaggle build`")
    try:
        if path.stat().st_size > MAX_STATE_BYTES:
            raise ValueError(f"larger than {MAX_STATE_BYTES} bytes")
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than Python's stack
        raise InputError(f"{path}: not a readable {STATE_FILE} ({type(exc).__name__}: {str(exc)[:200]})") from exc
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(STATE_SCHEMA).iter_errors(state))
    if error is not None:
        where = error.json_path if error.path else "the top level"
        raise InputError(f"{path}: not a {STATE_FILE} this version wrote: at {where}, {error.message[:200]}")
    return state


def save_state(run: Path, state: dict) -> None:
    """Atomically: a crash leaves the old or the new state, never half of one."""
    write_json_atomic(Path(run) / STATE_FILE, state)

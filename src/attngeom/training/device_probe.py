"""The device a run would train on, started once in a child process before the run folder is claimed.

XLA reads `XLA_FLAGS` and jax `JAX_PLATFORMS` when the backend starts: an unknown flag ends the
process from C++ with one log line and status 1 (no Python handler sees it), and a platform this
machine lacks fails with an empty `AssertionError`. Either would otherwise strike after the run
folder was claimed and leave a folder holding only its lock. A child with the same environment
starts the backend first (under a second), and any failure is one `error:` line and status 2.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from attngeom.errors import InputError

PROBE = """
import jax
try:
    print(jax.devices()[0].platform)
except Exception as exc:
    raise SystemExit(f"{type(exc).__name__}: {exc}")
"""
TIMEOUT_S = 600  # a GPU's first start (driver, compilation cache) takes seconds, never minutes
_LOG_PREFIX = re.compile(r"^[FEWI]\d{4} [\d:.]+\s+\d+ \S+\] ")  # absl/glog: F1201 13:41:20.47 17238 file.cc:234]


def _settings() -> str:
    named = [f"{k}={os.environ[k]!r}" for k in ("XLA_FLAGS", "JAX_PLATFORMS") if os.environ.get(k)]
    return f" ({', '.join(named)})" if named else ""


def check_device() -> str:
    """Start jax's backend in a child with this environment; its platform, or InputError saying why not."""
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", PROBE], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise InputError(f"the device did not start within {TIMEOUT_S} s{_settings()}") from exc
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip().splitlines()[-1]
    lines = [line for line in done.stderr.splitlines() if line.strip()] or [f"exit status {done.returncode}"]
    raise InputError(f"the device cannot start{_settings()}: {_LOG_PREFIX.sub('', lines[-1].strip())}")

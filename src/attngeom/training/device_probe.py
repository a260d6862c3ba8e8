"""The device a run would train on, started once in a child process before the run folder is claimed.

XLA reads `XLA_FLAGS` and jax `JAX_PLATFORMS` when the backend starts: an unknown flag ends the
process from C++ with one log line and status 1 (no Python handler sees it), and a platform this
machine lacks fails with an empty `AssertionError`. Either would otherwise strike after the run
folder was claimed and leave a folder holding only its lock. A child with the same environment
starts the backend first (under a second), and any failure is one `error:` line and status 2.

Memory is checked here too, where the process can still speak. An address-space limit (`ulimit -v`)
below what a rerun maps is refused first: under 2 GiB XLA's compiler aborts the process with
`std::bad_alloc` (status 134, no line), and at 2 GiB a smoke step's buffers fail to allocate and its
first loss is NaN, which would read as a training failure; a smoke rerun needs between 2 and 4 GiB
of address space, and a paper rerun on 2 cores maps 3.4 GiB (VmPeak). A child that cannot start
for want of memory says so. Past this point an allocation that XLA cannot survive ends the process
from C++ (134) or the kernel's OOM killer ends it (137), with no line: its checkpoints stay, and
`--resume` carries it on with more memory.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from attngeom.base.errors import InputError

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


MIN_ADDRESS_SPACE = 4 << 30  # bytes a rerun may need to map (see above)
_OUT_OF_MEMORY = re.compile(
    r"bad_alloc|cannot allocate memory|MemoryError|out of memory|resource exhausted|pthread_create\(\) failed"
    r"|failed to map segment",  # the dynamic loader's ENOMEM, as jaxlib's libraries load
    re.IGNORECASE,
)


def check_memory() -> None:
    """InputError ("out of memory: ...") when this process may map less than a rerun needs (`ulimit -v`, `-d`)."""
    import resource

    for name, which in (("-v", resource.RLIMIT_AS), ("-d", resource.RLIMIT_DATA)):
        soft = resource.getrlimit(which)[0]
        if soft != resource.RLIM_INFINITY and soft < MIN_ADDRESS_SPACE:
            raise InputError(
                f"out of memory: this process may map {soft >> 20} MiB (ulimit {name}), a rerun needs about "
                f"{MIN_ADDRESS_SPACE >> 30} GiB; raise the limit (ulimit {name} unlimited)"
            )


def check_device() -> str:
    """Start jax's backend in a child with this environment; its platform, or InputError saying why not."""
    check_memory()
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", PROBE], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise InputError(f"the device did not start within {TIMEOUT_S} s{_settings()}") from exc
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip().splitlines()[-1]
    lines = [line for line in done.stderr.splitlines() if line.strip()] or [f"exit status {done.returncode}"]
    why = _LOG_PREFIX.sub("", lines[-1].strip())
    if _OUT_OF_MEMORY.search(done.stderr):
        shown = next(_LOG_PREFIX.sub("", line.strip()) for line in lines if _OUT_OF_MEMORY.search(line))
        raise InputError(f"out of memory: the device cannot start{_settings()}: {shown}")
    raise InputError(f"the device cannot start{_settings()}: {why}")

"""The device settings every training in this package runs under (the harness and the author's script alike).

Applied before jax loads: deterministic GPU kernels, one GPU, full-precision float32 matmuls, and jax's
persistent compilation cache in a folder of this machine's own. Its
own module so that the rerun, the fidelity check and the driver of the author's script share
it without importing one another.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from attngeom.base.errors import InputError
from attngeom.base.files import cpu_identity, shown

DETERMINISTIC_XLA_FLAGS = ("--xla_gpu_deterministic_ops=true",)


def deterministic_device() -> None:
    """Before the first computation: deterministic GPU kernels, one GPU, full-precision matmuls, and the
    compilation cache."""
    if importlib.util.find_spec("jax") is None:
        raise InputError(
            f"training needs jax, which this environment lacks (Python {sys.version.split()[0]}); "
            "jax 0.10.2 needs Python 3.11 or 3.12: delete .venv and run again with ATTNGEOM_PYTHON=python3.12"
        )
    flags = os.environ.get("XLA_FLAGS", "").split()
    os.environ["XLA_FLAGS"] = " ".join(flags + [f for f in DETERMINISTIC_XLA_FLAGS if f not in flags])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = "0" if visible is None else visible.split(",")[0]
    os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = "highest"  # read when jax loads
    cache, min_compile_s = compilation_cache()
    if "jax" in sys.modules:  # loaded already (a caller in the same process): set it there too
        jax_config = sys.modules["jax"].config
        jax_config.update("jax_default_matmul_precision", "highest")
        jax_config.update("jax_compilation_cache_dir", cache or None)
        jax_config.update("jax_persistent_cache_min_compile_time_secs", min_compile_s)


COMPILATION_CACHE_DIR = "JAX_COMPILATION_CACHE_DIR"


def compilation_cache() -> tuple[str, float]:
    """jax's persistent compilation cache, set (if not set already) in the process's environment: its folder
    and the shortest compilation it keeps.

    Each step function is then compiled once per machine, not once per process: a resumed run, every
    ensemble member and every rerun of a configuration load it (a smoke rerun: 30 s, 11 s with the cache).
    The executables are the same, so are the results, bit for bit. jax's key holds the program, jaxlib,
    the XLA flags and the device, not the CPU: an Intel's executable found in a home folder shared with an
    AMD would run there with the Intel's round-off (or not at all). So the cache lies under the download
    cache in a folder named by `files.cpu_identity`. A JAX_COMPILATION_CACHE_DIR already set wins (empty:
    no cache)."""
    from attngeom.base.fetch import cache_dir

    folder = os.environ.setdefault(COMPILATION_CACHE_DIR, str(cache_dir() / "xla" / cpu_identity()))
    if folder:  # one line where jax would warn at every compilation
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            writable = os.access(folder, os.W_OK | os.X_OK)
        except OSError:
            writable = False
        if not writable:
            print(f"warning: compiled steps are not kept: cannot write to {shown(folder)}", file=sys.stderr)
            folder = os.environ[COMPILATION_CACHE_DIR] = ""
    min_compile_s = os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # smoke steps too
    return folder, float(min_compile_s)

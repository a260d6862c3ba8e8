"""The device settings every training in this package runs under (the harness and the author's script alike).

Applied before jax loads: deterministic GPU kernels, one GPU, full-precision float32 matmuls. Its
own module so that the rerun, the fidelity check and the driver of the author's script share
it without importing one another.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from attngeom.errors import InputError

DETERMINISTIC_XLA_FLAGS = ("--xla_gpu_deterministic_ops=true",)


def deterministic_device() -> None:
    """Before the first computation: deterministic GPU kernels, one GPU, full-precision matmuls."""
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
    if "jax" in sys.modules:  # loaded already (a caller in the same process): set it there too
        sys.modules["jax"].config.update("jax_default_matmul_precision", "highest")

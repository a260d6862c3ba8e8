"""The device settings: the compilation cache's folder, and what a second process finds in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO

from attngeom.base import files
from attngeom.base.errors import InputError
from attngeom.training import device

_STEP = """
import json, sys
from attngeom.training.device import deterministic_device
deterministic_device()
import jax, jax.numpy as jnp, numpy as np
hits = []
jax.monitoring.register_event_listener(lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None)
x = jnp.asarray(np.linspace(-3, 3, 256 * 256, dtype=np.float32).reshape(256, 256))
y = jax.jit(lambda a: jnp.tanh(a @ a.T).sum(axis=0))(x)
print(json.dumps({"bits": np.asarray(y).view(np.uint32).tolist(), "hits": len(hits)}))
"""


def _step(env: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _STEP], env=env, cwd=REPO, capture_output=True, text=True, check=False, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_the_compilation_cache_lies_in_a_folder_of_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNGEOM_CACHE", str(tmp_path))
    for name in (device.COMPILATION_CACHE_DIR, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
        monkeypatch.delenv(name, raising=False)
    assert device.compilation_cache() == (str(tmp_path / "xla" / files.cpu_identity()), 0.0)
    monkeypatch.setenv(device.COMPILATION_CACHE_DIR, str(tmp_path / "mine"))  # the user's own wins
    assert device.compilation_cache()[0] == str(tmp_path / "mine")
    monkeypatch.setenv(device.COMPILATION_CACHE_DIR, "")  # and an empty one turns it off
    assert device.compilation_cache()[0] == ""


def test_a_cache_folder_that_cannot_be_written_is_one_warning_and_no_cache(tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(device.COMPILATION_CACHE_DIR, str(tmp_path / "file" / "xla"))  # under a file: never a folder
    assert device.compilation_cache()[0] == "" and os.environ[device.COMPILATION_CACHE_DIR] == ""
    assert capsys.readouterr().err == f"warning: compiled steps are not kept: cannot write to {tmp_path}/file/xla\n"


def test_the_cpu_identity_follows_the_instruction_sets(monkeypatch):
    real = files._cpuinfo
    first = files.cpu_identity()
    assert len(first) == 16 and first == files.cpu_identity()
    monkeypatch.setattr(files, "_cpuinfo", lambda keys: "fpu sse2" if "flags" in keys else real(keys))
    fewer = files.cpu_identity()
    monkeypatch.setattr(files, "_cpuinfo", lambda keys: "fpu sse2 avx512f" if "flags" in keys else real(keys))
    assert len({first, fewer, files.cpu_identity()}) == 3


def test_a_second_process_loads_the_step_and_gets_the_same_bits_and_another_isa_compiles_its_own(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), ATTNGEOM_CACHE=str(tmp_path))
    env.pop(device.COMPILATION_CACHE_DIR, None)
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split() if "max_isa" not in f)
    first, second = _step(env), _step(env)
    assert first["hits"] == 0 and second["hits"] > 0 and first["bits"] == second["bits"]
    assert list((tmp_path / "xla").iterdir()) == [tmp_path / "xla" / files.cpu_identity()]
    older = _step({**env, "XLA_FLAGS": f"{env['XLA_FLAGS']} --xla_cpu_max_isa=SSE4_2".strip()})
    assert older["hits"] == 0  # XLA's flags are in jax's key: never the other code generation's executable


def test_training_without_jax_is_one_clear_error(monkeypatch):
    """Python 3.10 environments verify but cannot train: say so, no traceback."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a))
    with pytest.raises(InputError, match="Python 3.11 or 3.12"):
        device.deterministic_device()

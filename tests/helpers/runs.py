"""The trained smoke runs the slow tests share: each configuration trained once per test session."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attngeom.base.train_config import ModelConfig, TrainConfig
from attngeom.base.variants import BUNDLES
from attngeom.bundles.layout import RUN_JSON
from attngeom.training import runs

SMOKE_SEEDS = (0, 1, 2)
TINY = TrainConfig(
    model=ModelConfig(d_model=16, layers=2, heads=2, seq_len=16, d_ff=32),
    batch=4,
    steps=23,
    eval_every=10,
    val_batches=2,
    chunk=4,
)
"""A model and schedule small enough to train in a test: 23 steps of two layers, evaluated every 10."""
XLA_ISAS = {"default": "", "SSE4_2": "--xla_cpu_max_isa=SSE4_2"}
"""The CPU code generations the trained tests run under: the machine's own and XLA's oldest x86 target.
Their float32 round-off differs (on an AVX-512 Intel, a 512x512 matmul, tanh and sum gives 81.831596 by
default and 81.831894 with SSE4_2), so the rows near an acceptance rule's edge differ too."""


@dataclass(frozen=True)
class TrainedRun:
    """A finished smoke rerun through the command line: its folder (read it, never write into it) and its process."""

    path: Path
    proc: subprocess.CompletedProcess


class SmokeRuns:
    """`rerun --preset smoke --seeds 0,1,2` (16 windows, judged) under each code generation of XLA_ISAS,
    trained on first use and kept for the whole test session: every test that only needs a trained run
    reads one of these instead of training its own. The workers of `-n N` share one set: the first to
    need it trains it under a file lock, the others wait for it and read what it recorded."""

    def __init__(self, root: Path, repo: Path):
        self.root, self.repo = root, repo
        self._runs: dict[str, TrainedRun] = {}

    def _start(self, isa: str) -> tuple[Path, subprocess.Popen]:
        out = self.root / isa / "run"
        flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith("--xla_cpu_max_isa=")]
        env = dict(os.environ, PYTHONPATH=str(self.repo / "src"), XLA_FLAGS=" ".join([*flags, XLA_ISAS[isa]]).strip())
        cmd = [sys.executable, "-m", "attngeom", "rerun", "--preset", "smoke"]
        cmd += ["--seeds", ",".join(map(str, SMOKE_SEEDS)), "--out", str(out), "--quiet"]
        pipe = subprocess.PIPE
        return out, subprocess.Popen(cmd, env=env, cwd=self.repo, stdout=pipe, stderr=pipe, text=True)

    def _train(self) -> dict[str, dict]:
        """Every code generation's run at once, since much of a smoke run (compiling, verifying) is
        single-threaded and two of them share two cores well: each one's folder and process, as recorded."""
        started = {name: self._start(name) for name in XLA_ISAS}
        done = {}
        for name, (out, popen) in started.items():
            stdout, stderr = popen.communicate(timeout=1800)
            done[name] = {"path": str(out), "args": popen.args, "returncode": popen.returncode}
            done[name] |= {"stdout": stdout, "stderr": stderr}
        return done

    def __getitem__(self, isa: str) -> TrainedRun:
        """The run of `isa`, trained with the others by the first worker that asks."""
        if not self._runs:
            self.root.mkdir(parents=True, exist_ok=True)
            record = self.root / "trained.json"
            with open(self.root / ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
                if not record.is_file():
                    record.write_text(json.dumps(self._train()))
                done = json.loads(record.read_text())
            for name, d in done.items():
                proc = subprocess.CompletedProcess(d["args"], d["returncode"], d["stdout"], d["stderr"])
                self._runs[name] = TrainedRun(Path(d["path"]), proc)
        return self._runs[isa]


def same_files(a_dir: Path, b_dir: Path, names) -> None:
    """The named files of two folders hold the same arrays (npz) or text, bit for bit."""
    for name in names:
        a, b = a_dir / name, b_dir / name
        if name.endswith(".npz"):
            with np.load(a) as za, np.load(b) as zb:
                assert za.files == zb.files and all(np.array_equal(za[k], zb[k]) for k in za.files), name
        else:
            assert a.read_text() == b.read_text(), name


def same_as_the_whole_run(whole: Path, part: Path, variants: tuple[str, ...], seed: int) -> None:
    """`part`, a run of some variants of one seed, holds the bundles, run records and log lines that the
    session's run of every variant and seed (`whole`) has for them, bit for bit."""
    manifest = runs.require_complete(part)
    assert not (part / runs.CHECKPOINTS).exists()
    for bundle, members in BUNDLES.items():
        chosen = [v for v in members if v in variants]
        if not chosen:
            continue
        names = [f"{kind}_{v}_s{seed}.npz" for v in chosen for kind in ("attn", "geom", "windows")]
        assert {f"{bundle}/{n}" for n in names} <= set(manifest["files"])
        same_files(whole / bundle, part / bundle, names)
        records = [json.loads((f / bundle / RUN_JSON).read_text())["runs"] for f in (whole, part)]
        assert [r for r in records[0] if r["seed"] == seed and r["variant"] in chosen] == records[1]
    logged = [
        [line for line in (f / runs.TRAIN_LOG).read_text().splitlines() if json.loads(line)["seed"] == seed]
        for f in (whole, part)
    ]
    assert [line for line in logged[0] if json.loads(line)["variant"] in variants] == logged[1]  # no step twice


def restore_device_settings(monkeypatch):
    """`rerun` sets these for its process; give them back after an in-process call."""
    for name in ("XLA_FLAGS", "CUDA_VISIBLE_DEVICES", "JAX_DEFAULT_MATMUL_PRECISION"):
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])
        else:
            monkeypatch.delenv(name, raising=False)


def interrupt_training(monkeypatch, step: int, variant: str | None = None, member: int | None = None) -> None:
    """Raise KeyboardInterrupt once, as Ctrl-C would, in the training of `variant` of ensemble member
    `member` (None: any) once it has logged the chunk at `step`."""
    from attngeom.training import train

    real, fired = train.train_variant, []

    def train_variant(v, seed, cfg, corpus, on_steps, **kwargs):
        def stop(first, losses):
            on_steps(first, losses)
            if variant in (None, v) and member in (None, cfg.member) and first >= step and not fired:
                fired.append(first)
                raise KeyboardInterrupt

        return real(v, seed, cfg, corpus, on_steps=stop, **kwargs)

    monkeypatch.setattr(train, "train_variant", train_variant)


def trained_in_process(folder: Path, argv: list[str]) -> Path:
    """`argv` (a `rerun` command line) run in this process into `folder`, the device settings given back after."""
    import pytest

    from attngeom import cli

    with pytest.MonkeyPatch.context() as m:
        restore_device_settings(m)
        assert cli.main([*argv, "--out", str(folder)]) == 0
    return folder

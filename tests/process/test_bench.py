"""The benchmarks run as documented: without PYTHONPATH, one command away, smoke-sized."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO


def _env_without_pythonpath() -> dict:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.mark.parametrize("script", ["bench_train.py", "bench_verify.py", "bench_profile.py"])
def test_bench_scripts_run_as_they_are(script, tmp_path):
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--help"],
        cwd=tmp_path,
        env=_env_without_pythonpath(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--quick" in done.stdout and "./reproduce.sh bench " in done.stdout
    assert done.stdout.startswith(f"usage: reproduce.sh bench {script.removeprefix('bench_').removesuffix('.py')} ")


def test_the_mutation_check_names_its_modules_and_refuses_an_unlisted_one(tmp_path):
    """`bench mutation`: its help, and a module not listed in pyproject.toml refused before mutmut starts."""
    script = [sys.executable, str(REPO / "bench" / "bench_mutation.py")]
    env = _env_without_pythonpath()
    done = subprocess.run([*script, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "./reproduce.sh bench mutation [MODULE...]" in done.stdout, done.stderr[-2000:]
    assert done.stdout.startswith("usage: reproduce.sh bench mutation ")
    record = tmp_path / "record.json"
    done = subprocess.run(
        [*script, "judgement.judge", "nope", "--record", str(record)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and done.stderr.startswith(
        "error: mutation: not a listed module: nope (listed: judgement.judge,"
    )
    assert not record.exists()


def test_an_unknown_benchmark_is_one_error_line():
    done = subprocess.run([str(REPO / "reproduce.sh"), "bench", "nope"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: bench: which benchmark, verify, train, profile or mutation? usage: reproduce.sh bench verify|train|profile [--quick] "
        "or bench mutation [MODULE...] (see bench/)"
    ]


@pytest.mark.parametrize("variant", ["softmax", "yat_b", "goat_v"])
def test_the_step_matmuls_are_the_products_of_the_compiled_step(variant):
    """`bench train`'s matmul rate times the step's own products: the same shapes and operations as the
    dot_generals of the lowered training step, counted from its program text."""
    import re

    import jax
    import numpy as np

    sys.path.insert(0, str(REPO / "bench"))
    import bench_train

    from attngeom.base import train_config
    from attngeom.training import data, train

    cfg = train_config.preset("smoke", chunk=1)
    graphdef, _, tx, state = train.init_state(variant, cfg, seed=0)
    x_BT, y_BT = (a[0] for a in train.chunk_batches(data.load_corpus(), cfg, 0, 0, 1)[:2])
    text = jax.jit(train.make_step(graphdef, tx)).lower(state, x_BT, y_BT).as_text()
    found = []
    for m in re.finditer(
        r"stablehlo\.dot_general.*contracting_dims = \[([\d, ]*)\] x .*: \(tensor<([\dx]+)xf32>", text
    ):
        lhs = [int(n) for n in m.group(2).split("x")]
        out = re.search(r"-> tensor<([\dx]+)xf32>", text[m.end() : m.end() + 400]).group(1)
        contracted = np.prod([lhs[int(d)] for d in m.group(1).split(",")])
        found.append(2 * int(np.prod([int(n) for n in out.split("x")])) * int(contracted))
    listed = [
        2 * int(np.prod(a)) * b[-1] for a, b, count in bench_train.step_matmuls(variant, cfg) for _ in range(count)
    ]
    assert found and sorted(found) == sorted(listed)


def test_a_benchmarks_figures_name_the_command_machine_and_date(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO / "bench"))
    import measured

    from attngeom.base.files import machine

    argv = [str(REPO / "bench" / "bench_train.py"), "--quick", "--json", str(tmp_path / "t.json"), "--steps", "5"]
    monkeypatch.setattr(sys, "argv", argv)
    measured.write_figures(tmp_path / "t.json", {"variants": {"softmax": {"harness_steps_per_s": 2.5}}})
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["measured"]["command"] == "./reproduce.sh bench train --quick --steps 5"
    assert doc["measured"]["machine"] == machine() and len(doc["measured"]["date"]) == 10
    assert doc["variants"]["softmax"]["harness_steps_per_s"] == 2.5
    assert (
        measured.command(["bench/gpu_budget.py", "--seconds", "9", "--json=x"])
        == "python bench/gpu_budget.py --seconds 9"
    )


def test_a_module_named_with_a_function_is_scored_on_that_functions_mutants_alone(tmp_path):
    """`training.train:perturb`: train.py mutated, the record reading only perturb's mutants (not those of
    perturbation, whose name it begins), and the run folder's name free of the ':' a PYTHONPATH splits at."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_mutation", REPO / "bench" / "bench_mutation.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.source_of("training.train:perturb") == Path("src/attngeom/training/train.py")
    assert bench.source_of("base.files") == Path("src/attngeom/base/files.py")
    assert bench.mutant_prefix("training.train:perturb") == "attngeom.training.train.x_perturb__mutmut_"
    assert bench.mutant_prefix("base.files") == "attngeom.base.files."
    meta = tmp_path / "mutants" / "src" / "attngeom" / "training" / "train.py.meta"
    meta.parent.mkdir(parents=True)
    codes = {"x_perturb__mutmut_1": 1, "x_perturb__mutmut_2": 0, "x_perturbation__mutmut_1": 0, "x_run__mutmut_1": 1}
    meta.write_text(json.dumps({"exit_code_by_key": {f"attngeom.training.train.{k}": v for k, v in codes.items()}}))
    assert bench.statuses(tmp_path, "training.train:perturb") == {
        "attngeom.training.train.x_perturb__mutmut_1": "killed",
        "attngeom.training.train.x_perturb__mutmut_2": "survived",
    }
    assert len(bench.statuses(tmp_path, "training.train")) == 4
    bench.WORK = tmp_path / "work"  # this module object's own, loaded above
    folder = bench.prepare("training.train:perturb", ["tests/training/test_train.py"])
    assert folder == tmp_path / "work" / "training.train-perturb"
    assert (folder / "reproduce.sh").resolve() == REPO / "reproduce.sh"  # the tests run the copy's command
    text = (folder / "pyproject.toml").read_text(encoding="utf-8")
    assert (
        'only_mutate = ["src/attngeom/training/train.py"]\npytest_add_cli_args_test_selection = ["tests/training/test_train.py"]'
        in text
    )

"""The benchmarks' figures the docs quote: each made from its file in bench/results/, naming how and where
it was measured; the mutation table against the modules pyproject.toml lists."""

from __future__ import annotations

import json

from attngeom.docs import bench
from attngeom.docs.measured import relative

MEASURED = {
    "command": "./reproduce.sh bench verify",
    "machine": "Linux (x86_64, some CPU, 2 cores)",
    "date": "2026-12-01",
    "git_commit": "0123456789abcdef",
    "load_average": [1.0, 0.5, 2.25],
}


def test_the_provenance_names_the_command_machine_date_commit_and_load():
    line = bench.provenance({"measured": MEASURED})
    assert line == (
        "`./reproduce.sh bench verify` on Linux (x86_64, some CPU, 2 cores), 2026-12-01 "
        "(commit 0123456; load average 1, 0.5, 2.25)"
    )
    assert "(commit ?;" in bench.provenance({"measured": {**MEASURED, "git_commit": None}})


def test_the_verify_figures_are_the_files(tmp_path, monkeypatch):
    doc = {"verify_s": 1.234, "runs": 5, "windows": 8, "verify_with_windows_s": 3.0, "census_keys": 12345}
    doc |= {"census_s": 0.0123, "measured": MEASURED}
    (tmp_path / "verify.json").write_text(json.dumps(doc))
    monkeypatch.setattr(bench, "BENCH", tmp_path)
    text = bench.bench_verify()
    assert "median 1.23 s over 5 runs" in text and "(2.4x the plain stage)" in text and "12,345 keys: 0.012 s." in text
    assert bench.verify_time().startswith("The verify stage takes 1.23 s (median of 5 runs on Linux")


def test_the_suites_time_in_short_is_its_minutes_cores_and_counts(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "BENCH", tmp_path)
    assert bench.suite_time() == "its time not recorded yet"
    doc = {"outcomes": {"passed": 10, "failed": 0, "skipped": 2}, "exit_status": 0, "wall_s": 999.3}
    doc |= {k: MEASURED[k] for k in ("command", "machine", "date", "git_commit", "load_average")}
    (tmp_path / "suite.json").write_text(json.dumps(doc))
    assert bench.suite_time() == "17 min on 2 cores when last recorded (10 passed, 2 skipped)"
    (tmp_path / "suite.json").write_text(json.dumps(doc | {"wall_s": 42.0, "machine": "Linux (x86_64)"}))
    assert bench.suite_time() == "42 s on Linux (x86_64) when last recorded (10 passed, 2 skipped)"


def test_the_gpu_ensembles_estimate_is_its_files_arithmetic(tmp_path, monkeypatch):
    doc = {"preset": "paper", "members": 4, "tflops": 50.0, "efficiency": 0.25, "compile_s": 40.0}
    doc |= {"step_flops": {"yat_b": 6.0e11, "softmax": 5.0e11}, "assumed_flops_per_s": 12.5e12, "measured": MEASURED}
    (tmp_path / "gpu-budget-h100.json").write_text(json.dumps(doc))
    monkeypatch.setattr(bench, "BENCH", tmp_path)
    text = bench.gpu_ensemble_estimate()
    assert "(0.60 TFLOP for yat_b, 0.50 for softmax, about 150 GFLOP per member-step of yat_b;" in text
    # 12,000 steps of 0.6 TFLOP at 50 TFLOP/s x 25%, then 40 s of compilation
    assert text.endswith(
        "50 TFLOP/s of float32 reached to 25% (an assumed share), estimates yat_b's 4 x 12,000 "
        "member-steps at about 616 s with its compilation (40 s, assumed)"
    )


def test_the_repositorys_own_benchmark_files_make_their_figures():
    assert bench.kaggle_estimate(4, short=True).endswith(" of the GPU's peak")
    assert bench.kaggle_estimate(4).startswith(bench.kaggle_estimate(4, short=True).split(",")[0] + " (")
    for figure in (bench.bench_verify, bench.verify_time, bench.suite, bench.suite_time, bench.gpu_ensemble_estimate):
        text = figure()
        assert text.strip() and "{" not in text, figure.__name__


def write_listing(tmp_path, modules: dict, least: float = 0.9) -> None:
    listed = "\n".join(f'"{m}" = ["tests/x.py"]' for m in modules)
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.attngeom.mutation]\nleast_score = {least}\n\n[tool.attngeom.mutation.modules]\n{listed}\n"
    )


def record(score, mutants=10, equivalent=1, survivors=(), clean=True) -> dict:
    return {
        "date": "2026-12-03",
        "commit": "abcdef0123",
        "clean": clean,
        "mutants": mutants,
        "equivalent": equivalent,
        "score": score,
        "survivors": list(survivors),
    }


def test_the_mutation_table_rows_the_measured_and_names_the_weak_and_the_unmeasured(tmp_path, monkeypatch):
    write_listing(tmp_path, {"judgement.judge": 1, "measures.stats": 1, "base.files": 1})
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    modules = {"judgement.judge": record(1.0), "measures.stats": record(0.5, survivors=["m1"], clean=False)}
    (results / "mutation.json").write_text(json.dumps({"modules": modules}))
    monkeypatch.setattr(bench, "REPO", tmp_path)
    monkeypatch.setattr(bench, "BENCH", results)
    table = bench.mutation_table()
    assert "| `judgement.judge` | 100.0% | 9 | 0 | 2026-12-03, commit abcdef0 |" in table
    assert "| `measures.stats` | 50.0% | 9 | 1 | 2026-12-03, commit abcdef0 (with changes) |" in table
    assert "Below 90%: `measures.stats`." in table and "Not measured yet: `base.files`." in table
    assert f"(from `{relative(results / 'mutation.json')}`)" in table


def test_the_recorded_mutation_scores_are_of_modules_pyproject_lists():
    import tomllib

    from attngeom.base.files import REPO

    listed = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["attngeom"]["mutation"]
    recorded = json.loads((bench.BENCH / "mutation.json").read_text(encoding="utf-8"))["modules"]
    assert set(recorded) <= set(listed["modules"])  # one naming for both: the module's path under attngeom
    assert all(f"`{m}`" in bench.mutation_table() for m in recorded)

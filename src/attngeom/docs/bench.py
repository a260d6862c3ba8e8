"""The benchmarks' figures of README.md and docs/, as Markdown made from the files that hold them.

Each function reads one benchmark's `--json` output in `bench/results/` (the suite's own record
included) and returns the table or sentence the docs quote from a cog block (`docs.pages`), with the
command, the machine, the date or commit and how loaded the cores were. The figures of the evidence
(`expected/measured/`, the published bundles) are `docs.measured`'.
"""

from __future__ import annotations

import re

from attngeom.base import json_rules, schema_results
from attngeom.base.files import REPO
from attngeom.docs.measured import relative

BENCH = REPO / "bench" / "results"


def provenance(doc: dict) -> str:
    """Where a benchmark's figures were measured, as its file says."""
    m = doc["measured"]
    load = ", ".join(f"{x:g}" for x in m["load_average"])
    return (
        f"`{m['command']}` on {m['machine']}, {m['date']} (commit {(m['git_commit'] or '?')[:7]}; load average {load})"
    )


def bench_verify() -> str:
    """The verify stage and the hull census, from bench/results/verify.json."""
    path = BENCH / "verify.json"
    d = json_rules.read_json(path, schema_results.BENCH_VERIFY_JSON)
    lines = [
        f"- verify stage (3 models, all claims, report): median {d['verify_s']:.2f} s over {d['runs']} runs;",
        f"- with {d['windows']} extra windows per model: {d['verify_with_windows_s']:.2f} s "
        f"({d['verify_with_windows_s'] / d['verify_s']:.1f}x the plain stage);",
        f"- hull census of {d['census_keys']:,} keys: {d['census_s']:.3f} s",
    ]
    if "census_baseline_s" in d:
        lines[-1] += (
            f", against {d['census_baseline_s']:.1f} s for one LP per key ({d['census_speedup']:,.0f}x, identical verdicts)"
        )
    lines[-1] += "."
    return f"Measured by {provenance(d)}, `{relative(path)}`:\n\n" + "\n".join(lines)


def verify_time() -> str:
    """One sentence: the verify stage's median time, from bench/results/verify.json (in full: `bench_verify`)."""
    d = json_rules.read_json(BENCH / "verify.json", schema_results.BENCH_VERIFY_JSON)
    return (
        f"The verify stage takes {d['verify_s']:.2f} s (median of {d['runs']} runs on {d['measured']['machine']}; "
        "[speed](docs/speed.md))."
    )


def bench_train() -> str:
    """The training harness against a per-step loop, from bench/results/train-*.json."""
    out = []
    for path in sorted(BENCH.glob("train-*.json")):
        d = json_rules.read_json(path, schema_results.BENCH_TRAIN_JSON)
        rows = [
            "| variant | harness steps/s | per-step loop steps/s | ratio | losses | the step's share of its matmuls' rate alone |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for v, f in d["variants"].items():
            rows.append(
                f"| {v} | {f['harness_steps_per_s']:.2f} | {f['baseline_steps_per_s']:.2f} | {f['ratio']:.2f}x "
                f"| {'identical' if f['identical_losses'] else 'DIFFER'} | {f['matmul_rate_share']:.2f} |"
            )
        out.append(
            f"Measured by {provenance(d)}, `{relative(path)}` ({d['preset']} preset, {d['steps']} steps x {d['repeats']} runs):\n\n"
            + "\n".join(rows)
        )
    return "\n\n".join(out)


def bench_profile() -> str:
    """Where a training step's time goes, from bench/results/profile-*.json (`bench profile`)."""
    out = []
    for path in sorted(BENCH.glob("profile-*.json")):
        d = json_rules.read_json(path)
        classes = list(next(iter(d["variants"].values()))["shares"])
        rows = [
            "| variant | s/step | inside operations | " + " | ".join(classes) + " |",
            "| --- | --- | --- | " + " | ".join("---" for _ in classes) + " |",
        ]
        for v, f in d["variants"].items():
            shares = " | ".join(f"{f['shares'][c]:.1%}" for c in classes)
            rows.append(
                f"| {v} | {f['wall_s_per_step']:.2f} | {f['op_s_per_step'] / f['wall_s_per_step']:.0%} | {shares} |"
            )
        out.append(
            f"Measured by {provenance(d)}, `{relative(path)}` ({d['preset']} preset, {d['steps']} steps traced; "
            "the shares are of the operations' own time):\n\n" + "\n".join(rows)
        )
    return "\n\n".join(out)


def suite() -> str:
    """The test suite's counts and time, from bench/results/suite.json (written by the suite itself)."""
    path = BENCH / "suite.json"
    if not path.exists():
        return "no whole run of the suite recorded yet"
    d = json_rules.read_json(path, schema_results.SUITE_JSON)
    counts = ", ".join(f"{n} {k}" for k, n in d["outcomes"].items() if n)
    load = ", ".join(f"{x:g}" for x in d["load_average"])
    return (
        f"{counts} in {d['wall_s'] / 60:.1f} min: `{d['command']}` on {d['machine']}, {d['date']} "
        f"(commit {(d['git_commit'] or '?')[:7]}; load average {load} as it ended)"
    )


def suite_time() -> str:
    """The suite's time in short, for the README's quick start (in full: `suite`): minutes, cores, counts."""
    path = BENCH / "suite.json"
    if not path.exists():
        return "its time not recorded yet"
    d = json_rules.read_json(path, schema_results.SUITE_JSON)
    cores = re.search(r"(\d+) cores?\)$", d["machine"])
    wall = d["wall_s"]
    took = f"{wall / 60:.0f} min" if wall >= 90 else f"{wall:.0f} s"
    counts = ", ".join(f"{n} {k}" for k, n in d["outcomes"].items() if n)
    return f"{took} on {cores.group(1) + ' cores' if cores else d['machine']} when last recorded ({counts})"


def kaggle_estimate(members: int = 4, short: bool = False) -> str:
    """The GPU hours `kaggle run --members K` estimates on the T4 x2 machine, by the command's own arithmetic
    (`backends.kaggle_budget`), from the FLOPs per step of the largest group in bench/results/gpu-budget-t4.json;
    `short`: the hours in all and what they assume, in a few words."""
    from attngeom.backends import kaggle_budget
    from attngeom.backends.kaggle_kernel import definitions
    from attngeom.base.errors import InputError
    from attngeom.base.train_config import PRESETS

    path = BENCH / "gpu-budget-t4.json"
    d = json_rules.read_json(path)
    machine = kaggle_budget.MACHINES["NvidiaTeslaT4"]
    per_gpu = kaggle_budget.largest_group(members, machine)
    if d["members"] != per_gpu:
        raise InputError(
            f"{relative(path)}: FLOPs of {d['members']} vmapped members; {members} on {machine.label} need {per_gpu}"
        )
    steps = PRESETS[d["preset"]].steps
    kernels = [
        {
            "bundle": name,
            "seed": 0,
            "estimated_s": kaggle_budget.kernel_seconds({v: d["step_flops"][v] for v in defn.variants}, steps, machine),
        }
        for name, defn in definitions().items()
    ]
    if short:
        return (
            f"{kaggle_budget.hours(kernels):.2f} GPU hours on {machine.label}, from XLA's FLOPs per step at an assumed "
            f"{kaggle_budget.EFFICIENCY:g} of the GPU's peak"
        )
    estimate = kaggle_budget.describe({"members": members, "kernels": kernels}, machine)
    return f"{estimate} (FLOPs per step by {provenance(d)}, `{relative(path)}`)"


def gpu_ensemble_estimate() -> str:
    """The FLOPs of a step of 4 vmapped members of each variant and yat_b's estimated 4 x 12,000 member-steps
    on an H100/H200 (bench/results/gpu-budget-h100.json, `bench/gpu_budget.py`), as the ensemble sizes it."""
    from attngeom.base.train_config import PRESETS
    from attngeom.training.flops import schedule_seconds

    path = BENCH / "gpu-budget-h100.json"
    d = json_rules.read_json(path)
    tflop = {v: f / 1e12 for v, f in d["step_flops"].items()}
    per_member_gflop = 1e3 * tflop["yat_b"] / d["members"]
    steps = PRESETS[d["preset"]].steps
    yat_b_s = schedule_seconds({"yat_b": d["step_flops"]["yat_b"]}, steps, d["assumed_flops_per_s"], d["compile_s"])
    each = ", ".join(f"{t:.2f}{' TFLOP' if i == 0 else ''} for {v}" for i, (v, t) in enumerate(tflop.items()))
    return (
        f"the FLOPs of one step of {d['members']} vmapped members from XLA's `cost_analysis()` ({each}, about "
        f"{per_member_gflop:.0f} GFLOP per member-step of yat_b; {provenance(d)}, `{relative(path)}`) and, at an "
        f"H100/H200's {d['tflops']:g} TFLOP/s of float32 reached to {d['efficiency']:.0%} (an assumed share), "
        f"estimates yat_b's {d['members']} x {steps:,} member-steps at about {yat_b_s:.0f} s with its "
        f"compilation ({d['compile_s']:g} s, assumed)"
    )


def mutation_table() -> str:
    """The mutation score of each module (bench/results/mutation.json, `bench mutation`), and the listed
    modules (pyproject.toml's `[tool.attngeom.mutation]`) not measured yet."""
    import tomllib  # Python 3.11 on, as the benchmark itself

    listed = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["attngeom"]["mutation"]
    path = BENCH / "mutation.json"
    record = json_rules.read_json(path)["modules"] if path.exists() else {}
    rows = ["| module | caught | mutants (less equivalent) | survivors | measured |", "| --- | --- | --- | --- | --- |"]
    for module, m in record.items():
        judged = m["mutants"] - m["equivalent"]
        score = "-" if m["score"] is None else f"{m['score']:.1%}"
        where = f"{m['date']}, commit {(m['commit'] or '?')[:7]}{'' if m['clean'] else ' (with changes)'}"
        rows.append(f"| `{module}` | {score} | {judged} | {len(m['survivors'])} | {where} |")
    missing = [f"`{m}`" for m in listed["modules"] if m not in record]
    below = [f"`{m}`" for m, r in record.items() if (r["score"] or 0) < listed["least_score"]]
    notes = [f"Below {listed['least_score']:.0%}: {', '.join(below)}." if below else ""]
    notes.append(f"Not measured yet: {', '.join(missing)}." if missing else "")
    return "\n".join(rows) + "\n\n" + " ".join(n for n in notes if n).strip() + f"\n\n(from `{relative(path)}`)\n"

"""`reproduce.sh fidelity`: the author's training script and this harness, side by side, on this device.

A training loss frozen on one machine is no reference on another: adamw's first updates amplify
float32 round-off, which depends on the CPU or GPU. So the reference is the author's own script
(downloaded and sha256-verified like the bundles, never copied), run here and now, for the first
N steps of the paper preset with seed 0, next to this harness's `train_variant` on the same
device. Compared per variant: the parameter count, the sum and the absolute sum of the initial
parameters, the first tokens of the fixed window, every training loss and the step-0 attention
maps on the fixed window. The verdict and both sides' figures go to `fidelity.json`; the exit
status is 0 when everything matches, 1 when something differs, 2 for unusable input.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

import attngeom
from attngeom.base.errors import EXIT_FAIL, EXIT_PASS, InputError
from attngeom.base.files import cpu_model

FIDELITY_JSON = "fidelity.json"
DEFAULT_STEPS = 3
SCRIPT_VARIANTS = ("softmax", "yat_b", "goat_v", "goat_nov")  # those the harness and the script share
LOSS_RTOL = 1e-5
MAP_ULPS = 1
TOLERANCE = {
    "parameters": "equal",
    "initial sums": "equal (same initialisers and rng stream: the same float32 values, summed the same way)",
    "window tokens": "equal",
    "losses": f"relative {LOSS_RTOL:g}: each loss is a float32 mean over 8,192 tokens; summed in another "
    "order it moves by about sqrt(8192) float32 epsilons (5e-6 relative). A change of model, data or "
    "optimiser moves the losses by 1e-3 or more.",
    "step-0 maps": f"{MAP_ULPS} float16 ulp: the maps are float32 rounded to float16, and a float32 round-off "
    "difference can move a value across a float16 rounding boundary",
}


def _map_summary(attn_LHTT: np.ndarray) -> dict:
    return {
        "sha256": hashlib.sha256(np.ascontiguousarray(attn_LHTT).tobytes()).hexdigest(),
        "sum": float(attn_LHTT.astype(np.float64).sum()),
    }


def _check(original, harness, ok: bool, diff: float) -> dict:
    return {"original": original, "harness": harness, "diff": diff, "pass": bool(ok)}


def compare_variant(original: dict, harness: dict) -> dict[str, dict]:
    """The checks of one variant from both sides' figures (see `TOLERANCE`)."""
    checks = {}
    for key in ("parameters", "param_sum", "param_abs_sum"):
        checks[key] = _check(
            original[key], harness[key], original[key] == harness[key], abs(original[key] - harness[key])
        )
    checks["tokens"] = _check(
        original["tokens"],
        harness["tokens"],
        original["tokens"] == harness["tokens"],
        float(original["tokens"] != harness["tokens"]),
    )
    ours, theirs = np.asarray(harness["losses"], np.float64), np.asarray(original["losses"], np.float64)
    if ours.shape != theirs.shape:
        raise InputError(f"the two sides trained {theirs.size} and {ours.size} steps; expected the same number")
    for step, (a, b) in enumerate(zip(theirs.tolist(), ours.tolist())):
        checks[f"loss step {step}"] = _check(a, b, abs(a - b) <= LOSS_RTOL * abs(a), abs(a - b))
    a_LHTT, b_LHTT = original["attn_step0"], harness["attn_step0"]
    if a_LHTT.shape != b_LHTT.shape:
        raise InputError(f"step-0 maps of shapes {a_LHTT.shape} and {b_LHTT.shape}; expected the same")
    ulp = np.spacing(np.maximum(np.abs(a_LHTT), np.abs(b_LHTT))).astype(np.float32)
    diff = np.abs(a_LHTT.astype(np.float32) - b_LHTT.astype(np.float32))
    checks["step-0 maps"] = _check(
        _map_summary(a_LHTT), _map_summary(b_LHTT), bool((diff <= MAP_ULPS * ulp).all()), float(diff.max())
    )
    checks["step-0 maps"]["entries_differing"] = int((diff > 0).sum())
    return checks


def compare(original: dict, harness: dict) -> dict:
    """Per-variant checks, the verdict (PASS or FAIL) and whether every figure is exactly equal."""
    if set(original) != set(harness):
        raise InputError(f"the sides ran different variants: {sorted(original)} and {sorted(harness)}")
    checks = {v: compare_variant(original[v], harness[v]) for v in original}
    flat = [c for per in checks.values() for c in per.values()]
    verdict = "PASS" if all(c["pass"] for c in flat) else "FAIL"
    return {"verdict": verdict, "exact": all(c["diff"] == 0 for c in flat), "checks": checks}


def _child_env() -> dict:
    """The parent's environment, with this package importable and no GPU memory taken up front."""
    package_root = str(Path(attngeom.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": package_root + (os.pathsep + path if path else ""),
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
    }


@contextlib.contextmanager
def original_side(variants: tuple[str, ...], steps: int) -> Iterator[Callable[[], tuple[dict, dict]]]:
    """The author's script run by `attngeom.training.original` in a subprocess, started on entry so that it
    trains while this process trains the harness (compilation is mostly one core's work: on two cores
    the check takes about half the time). The block gets a function that waits for the script and gives
    (figures, device); leaving the block stops a script still running. Both sides keep their own XLA
    thread pool and their own round-off: running side by side changes when they finish, not what."""
    from attngeom.base.fetch import fetch_author_script, fetch_corpus
    from attngeom.training import original

    script, corpus = fetch_author_script(), fetch_corpus()
    with tempfile.TemporaryDirectory(prefix="attngeom-fidelity-") as tmp:
        work = Path(tmp)
        job = {
            "script": str(script),
            "corpus": str(corpus),
            "workdir": tmp,
            "steps": steps,
            "lrs": learning_rates(variants),
        }
        (work / "job.json").write_text(json.dumps(job), encoding="utf-8")
        command = [sys.executable, "-m", "attngeom.training.original", str(work / "job.json")]
        with open(work / "stderr.txt", "w+", encoding="utf-8", errors="replace") as err:  # a file: a pipe would fill
            child = subprocess.Popen(command, env=_child_env(), stdout=subprocess.DEVNULL, stderr=err)

            def finished() -> tuple[dict, dict]:
                code = child.wait()
                if code != 0 or not (work / original.RESULT).is_file():
                    err.seek(0)
                    last = (err.read().strip().splitlines() or ["no output"])[-1]
                    raise InputError(f"the author's training script failed (exit {code}): {last}")
                doc = json.loads((work / original.RESULT).read_text(encoding="utf-8"))
                with np.load(work / original.MAPS) as z:
                    for v in variants:
                        doc["variants"][v]["attn_step0"] = z[v]
                return doc["variants"], doc["device"]

            try:
                yield finished
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()


def learning_rates(variants: tuple[str, ...]) -> dict[str, float]:
    """Each variant's learning rate in the paper preset: both sides train with it."""
    from attngeom.base import train_config

    cfg = train_config.preset("paper")
    return {v: cfg.lr_of(v) for v in variants}


def harness_side(variants: tuple[str, ...], steps: int) -> dict:
    """This harness's `train_variant` on the paper preset, seed 0: its figures."""
    from attngeom.base import train_config
    from attngeom.training import data, train
    from attngeom.training.model import build, param_stats

    cfg = train_config.preset("paper", steps=steps, val_batches=1)  # evaluation only; training is the paper's
    corpus = data.load_corpus()
    figures = {}
    for variant in variants:
        count, total, absolute = param_stats(build(variant, cfg.model, 0))
        result = train.train_variant(variant, 0, cfg, corpus)
        figures[variant] = {
            "parameters": count,
            "param_sum": total,
            "param_abs_sum": absolute,
            "losses": result.losses.astype(np.float64).tolist(),
            "tokens": result.tokens_T[:12].tolist(),
            "attn_step0": result.maps[0],
        }
    return figures


def _figures_json(figures: dict) -> dict:
    return {v: {k: (_map_summary(x) if k == "attn_step0" else x) for k, x in f.items()} for v, f in figures.items()}


def _validate(variants: tuple[str, ...], steps: int) -> None:
    """Refuse what cannot be compared; fetch (and so verify) the script and the corpus before training."""
    from attngeom.base.fetch import fetch_author_script, fetch_corpus

    if steps < 1:
        raise InputError("--steps: at least 1")
    unknown = [v for v in variants if v not in SCRIPT_VARIANTS]
    if unknown or not variants:
        raise InputError(
            f"fidelity: {unknown[0] if unknown else 'no variant'!r} is not a variant of the author's script"
        )
    fetch_author_script(), fetch_corpus()


def check(variants: tuple[str, ...], steps: int, out_file: Path) -> dict:
    """Run both sides, compare, write `out_file` (fidelity.json) and return its document."""
    from attngeom.base.files import write_json_atomic
    from attngeom.training.runs import environment

    _validate(variants, steps)
    print(
        f"fidelity: {steps} steps of {', '.join(variants)} with this harness and, beside it, with the author's "
        "script (a subprocess, offline)",
        file=sys.stderr,
        flush=True,
    )
    with original_side(variants, steps) as original_finished:
        harness = harness_side(variants, steps)
        original, original_device = original_finished()
    result = compare(original, harness)
    doc = {
        "verdict": result["verdict"],
        "exact": result["exact"],
        "steps": steps,
        "preset": "paper",
        "seed": 0,
        "variants": list(variants),
        "learning_rates": learning_rates(variants),
        **environment(),
        "cpu": {"model": cpu_model(), "cores": os.cpu_count()},
        "original_device": original_device,
        "tolerance": TOLERANCE,
        "original": _figures_json(original),
        "harness": _figures_json(harness),
        "checks": result["checks"],
    }
    write_json_atomic(out_file, doc)
    return doc


def table(doc: dict) -> str:
    """The comparison as a plain-text table, one line per check."""
    rows = [f"{'variant':8} {'figure':14} {'author script':>20} {'harness':>20} {'difference':>11}  verdict"]
    for variant, checks in doc["checks"].items():
        for name, c in checks.items():
            if name == "step-0 maps":
                a, b = c["original"]["sha256"][:12], c["harness"]["sha256"][:12]
            elif name == "tokens":
                a, b = " ".join(map(str, c["original"][:6])), " ".join(map(str, c["harness"][:6]))
            else:
                a, b = (f"{x:.7f}" if isinstance(x, float) else f"{x:,}" for x in (c["original"], c["harness"]))
            word = "equal" if c["diff"] == 0 else ("within tol." if c["pass"] else "DIFFERS")
            rows.append(f"{variant:8} {name:14} {a:>20} {b:>20} {c['diff']:11.3g}  {word}")
    return "\n".join(rows)


def summary_line(doc: dict) -> str:
    """One line: the verdict, on which device, over how many steps."""
    flat = [c for per in doc["checks"].values() for c in per.values()]
    equal = sum(c["diff"] == 0 for c in flat)
    how = f"{equal} of {len(flat)} figures exactly equal" + (
        "" if doc["verdict"] == "FAIL" or equal == len(flat) else ", the others within the tolerance"
    )
    device = doc["device"]["kind"] if doc["device"]["platform"] != "cpu" else doc["cpu"]["model"]
    return f"fidelity: {doc['verdict']} ({how}; {doc['steps']} step{'s' if doc['steps'] != 1 else ''} on {device})"


def preflight(run_dir: Path, variants: tuple[str, ...], steps: int) -> dict:
    """The fidelity check before a rerun: `fidelity.json` in the run folder, the manifest's record of it."""
    chosen = tuple(v for v in variants if v in SCRIPT_VARIANTS)
    try:
        doc = check(chosen, steps, run_dir / FIDELITY_JSON)
    except InputError as exc:
        print(f"preflight: the fidelity check could not run ({exc}); training continues", file=sys.stderr)
        return {"verdict": "ERROR", "steps": steps, "device": None, "file": None, "error": str(exc)}
    print(table(doc))
    print(summary_line(doc).replace("fidelity:", "preflight fidelity:", 1))
    return {"verdict": doc["verdict"], "steps": steps, "device": doc["device"]["kind"], "file": FIDELITY_JSON}


def run_preflight(folder, variants: tuple[str, ...], requested: int | None) -> None:
    """Before a rerun: the check of `requested` steps (default: 3 on a GPU, none on a CPU) into its manifest.

    A failed or impossible check does not stop the run; the manifest's `preflight` records it.
    """
    import jax

    on_gpu = jax.devices()[0].platform == "gpu"
    steps = requested if requested is not None else (DEFAULT_STEPS if on_gpu else 0)
    if steps:
        record = preflight(folder.path, variants, steps)
        folder.update(preflight=record)
        if record["verdict"] != "PASS":
            print(
                f"warning: preflight fidelity {record['verdict']}; training continues, the manifest records it",
                file=sys.stderr,
            )


def run(variants: tuple[str, ...], steps: int | None, out: Path | None) -> int:
    """Check, print the table, write fidelity.json into `out` (new or empty; None: a new runs/ folder);
    0 match, 1 mismatch."""
    from attngeom.training.device import deterministic_device
    from attngeom.training.runs import new_run_dir

    steps = DEFAULT_STEPS if steps is None else steps
    _validate(variants, steps)
    deterministic_device()
    out = new_run_dir(out, "fidelity")
    doc = check(variants, steps, out / FIDELITY_JSON)
    print(table(doc))
    print(summary_line(doc))
    print(f"written: {out / FIDELITY_JSON}")
    return EXIT_PASS if doc["verdict"] == "PASS" else EXIT_FAIL

"""How much of a rerun or an ensemble fits in a time on a GPU, from the FLOPs of its training step.

XLA's `cost_analysis()` of one training step as jax lowers it, nothing compiled (K members vmapped
when K > 1; `attngeom.training.flops`, which `kaggle build --members K` uses too) gives its FLOPs;
at a GPU's float32 rate (`--tflops`, an H100/H200's 67 without tensor cores, as `highest` matmul
precision asks) and an assumed fraction of it reached (`--efficiency`), the steps of every variant
take an estimated time, to which each variant's compilation is added (`--compile-s`). Writes one
JSON (`--json FILE`, with where and when it was measured): the FLOPs per step of each variant, the
estimated seconds of the whole schedule, and the step to stop after so that it fits in `--seconds`
(null when all of it fits); and prints the rerun's option that sizes it, `--stop-after STEP`, one
word a line (nothing when it fits).

    python bench/gpu_budget.py --seconds 300 --members 4 --json FILE [--preset paper] [--variants ...]

bench/gpu_check.sh sizes its rerun and its ensemble with it; the run checks its own time as well
(`rerun --time-limit`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: PYTHONSAFEPATH leaves the script's folder out
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from measured import write_figures  # bench/, beside this script

from attngeom.base import train_config
from attngeom.base.files import output_file
from attngeom.cli import Parser, entry
from attngeom.training import data
from attngeom.training.flops import COMPILE_S, EFFICIENCY, schedule_seconds, step_flops


def main() -> int:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, required=True, help="the training time available")
    parser.add_argument("--members", type=int, default=1, help="ensemble members trained together (default 1)")
    parser.add_argument("--preset", choices=tuple(train_config.PRESETS), default="paper")
    parser.add_argument("--variants", default="softmax,yat_b,goat_v")
    parser.add_argument("--tflops", type=float, default=67.0, help="the GPU's float32 rate (default: H100/H200)")
    parser.add_argument(
        "--efficiency", type=float, default=EFFICIENCY, help=f"the fraction of it reached (default {EFFICIENCY:g})"
    )
    parser.add_argument(
        "--compile-s", type=float, default=COMPILE_S, help=f"compilation per variant (default {COMPILE_S:g} s)"
    )
    parser.add_argument("--json", type=output_file, required=True, metavar="FILE", help="where the estimate goes")
    args = parser.parse_args()
    if not (args.seconds > 0 and args.members >= 1 and args.tflops > 0 and 0 < args.efficiency <= 1):
        parser.error("--seconds, --tflops, --efficiency and --members: positive (efficiency at most 1)")
    cfg = train_config.PRESETS[args.preset]
    variants = args.variants.split(",")
    data.load_corpus()  # the same files a run reads: a missing corpus is the same one-line error
    flops = {v: step_flops(v, cfg, args.members) for v in variants}
    rate = args.tflops * 1e12 * args.efficiency
    per_step_s = sum(flops.values()) / rate  # one step of every variant
    training_s = args.seconds - args.compile_s * len(variants)
    fit = int(training_s / per_step_s) if training_s > 0 else 0
    stop_after = None if fit >= cfg.steps else min(max(fit - 1, 1), cfg.steps - 2)
    doc = {
        "preset": args.preset,
        "members": args.members,
        "step_flops": flops,
        "tflops": args.tflops,
        "efficiency": args.efficiency,
        "compile_s": args.compile_s,
        "assumed_flops_per_s": rate,
        "estimated_s": round(schedule_seconds(flops, cfg.steps, rate, args.compile_s), 1),
        "seconds": args.seconds,
        "stop_after": stop_after,
    }
    write_figures(args.json, doc)
    if stop_after is not None:
        print(f"--stop-after\n{stop_after}")
    return 0


if __name__ == "__main__":
    entry(main)

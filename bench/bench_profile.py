"""Where a training step's time goes on this device: one chunk of the harness's steps traced with
`jax.profiler`, each XLA operation's own time (its nested operations' taken out) put in a class by
the source of its instruction in the compiled step (the `op_name` XLA keeps in its metadata).

    ./reproduce.sh bench profile [--quick] [--variants softmax,yat_b] [--steps 3] [--json FILE]

The classes (`CLASSES`, first match wins): the dropout's random bits (threefry, drawn as the author's
model draws them: other bits would be another trajectory), the matrix products, copies and
transposes (layout changes between products), reductions (sums and maxima: layer norms, softmax,
gradients of biases), and the rest, elementwise. The shares are of the time the device's threads
spent in operations, not of wall time; `bench train` gives the step's rate against its matrix
products' rate alone, this says what the rest of the step is.

--quick: the smoke preset; the default is the paper preset (on 2 CPU cores a paper step takes seconds).
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import itertools
import json
import re
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: PYTHONSAFEPATH leaves the script's folder out
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from measured import write_figures  # bench/, beside this script

from attngeom.base import train_config
from attngeom.base.files import output_file
from attngeom.base.variants import TRAINABLE
from attngeom.cli import Parser, entry
from attngeom.commands.options import integer, variants_option
from attngeom.training import data, train

RANDOM_BITS = ("_bernoulli", "_uniform", "random_bits", "threefry")
"""Parts of the op_name of an instruction that draws the dropout's random bits."""

CLASSES = (
    ("dropout random bits", lambda kind, op: any(part in op for part in RANDOM_BITS)),
    ("matrix products", lambda kind, op: kind in ("dot", "dot_general") or op.endswith("/dot_general")),
    ("copies and transposes", lambda kind, op: kind.startswith(("copy", "transpose")) or op.endswith("/transpose")),
    ("reductions", lambda kind, op: re.search(r"/reduce_\w+$|/(argmax|argmin|cumsum)$", op) is not None),
    ("elementwise", lambda kind, op: True),
)
"""The classes of an XLA operation, by its kind (its instruction's name without the number: `dot`,
`copy_bitcast_fusion`, `ynn_fusion`) and its source (`op_name`); the first that matches."""


def classify(instruction: str, op_name: str) -> str:
    """The class (`CLASSES`) of the compiled instruction `instruction` whose source is `op_name`."""
    kind = re.sub(r"\.\d+$", "", instruction)
    return next(name for name, matches in CLASSES if matches(kind, op_name))


def op_names(hlo_text: str) -> dict[str, str]:
    """Each instruction of a compiled module's text, to the `op_name` of its metadata (the jax source;
    empty for those XLA adds itself, such as the copies of a loop's buffers)."""
    out = {}
    for m in re.finditer(r"^\s*(?:ROOT )?%([\w.\-]+) = ([^\n]*)", hlo_text, re.M):
        source = re.search(r'op_name="([^"]*)"', m.group(2))
        out[m.group(1)] = source.group(1) if source else ""
    return out


def self_times(events: list[dict]) -> dict[str, float]:
    """The microseconds each operation spent in itself: a trace's complete events (`ph` X) of XLA
    operations (those naming their `hlo_op`), less the time of the events nested in them on their thread."""
    ops = sorted(
        (e for e in events if e.get("ph") == "X" and "hlo_op" in e.get("args", {})),
        key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]),
    )
    own: collections.Counter = collections.Counter()
    for _, on_thread in itertools.groupby(ops, key=lambda e: (e["pid"], e["tid"])):
        stack: list[dict] = []  # the events that enclose this one
        for e in on_thread:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            if stack:
                own[stack[-1]["args"]["hlo_op"]] -= e["dur"]
            own[e["args"]["hlo_op"]] += e["dur"]
            stack.append(e)
    return dict(own)


def shares(times: dict[str, float], sources: dict[str, str]) -> dict[str, float]:
    """The share of the operations' time of each class, every class named (0 if none of its kind ran)."""
    total = sum(times.values())
    out = dict.fromkeys((name for name, _ in CLASSES), 0.0)
    for instruction, us in times.items():
        out[classify(instruction, sources.get(instruction, ""))] += us / total
    return out


def profile(variant: str, cfg: train_config.TrainConfig, corpus: data.Corpus, steps: int) -> dict:
    """One chunk of `steps` harness steps, compiled and run once, then traced: wall seconds per step, the
    operations' own seconds per step (summed over the threads that ran them), the share of each class,
    and the share of operations whose instruction the compiled module's text does not name."""
    cfg = replace(cfg, chunk=steps)
    graphdef, _, tx, state = train.init_state(variant, cfg, seed=0)
    batches = train.chunk_batches(corpus, cfg, 0, 0, steps)
    run_chunk = train.make_chunk(train.make_step(graphdef, tx)).lower(state, *batches).compile()
    sources = op_names(run_chunk.as_text())  # the executable traced below: compiled once
    state, loss_K = run_chunk(state, *batches)
    jax.block_until_ready(loss_K)
    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder):
            t0 = time.perf_counter()  # the steps alone: starting and writing the trace take seconds
            jax.block_until_ready(run_chunk(state, *batches))
            wall = time.perf_counter() - t0
        (trace,) = glob.glob(f"{folder}/plugins/profile/*/*.trace.json.gz")
        with gzip.open(trace) as f:
            times = self_times(json.load(f)["traceEvents"])
    total = sum(times.values())
    return {
        "wall_s_per_step": wall / steps,
        "op_s_per_step": total / 1e6 / steps,  # the operations' own time: the part of the wall time inside them
        "shares": shares(times, sources),
        "unattributed": sum(us for op, us in times.items() if op not in sources) / total,  # not in the module's text
    }


def main() -> int:
    parser = Parser(
        prog="reproduce.sh bench profile", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the smoke preset")
    variants_option(parser, TRAINABLE, ("softmax", "yat_b"))
    parser.add_argument("--steps", type=integer(1, 1000, "a number of steps"), default=3, help="steps traced")
    parser.add_argument("--json", type=output_file, metavar="FILE", help="also write the figures to FILE")
    args = parser.parse_args()
    preset = "smoke" if args.quick else "paper"
    cfg, corpus = train_config.PRESETS[preset], data.load_corpus()
    device = jax.devices()[0]
    print(f"device: {device.platform} ({device.device_kind}); preset {preset}; {args.steps} steps traced")
    figures = {}
    for variant in args.variants:
        figures[variant] = found = profile(variant, cfg, corpus, args.steps)
        each = ", ".join(f"{name} {share:.1%}" for name, share in found["shares"].items())
        print(f"{variant:8} {found['wall_s_per_step']:.3f} s/step: {each}", flush=True)
    if args.json:
        doc = {"device": {"platform": device.platform, "kind": device.device_kind}, "preset": preset}
        write_figures(args.json, {**doc, "steps": args.steps, "variants": figures})
    return 0


if __name__ == "__main__":
    entry(main)  # the exit statuses of every command: a bad option is one `error:` line and 2

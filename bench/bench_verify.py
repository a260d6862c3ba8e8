"""Benchmark the verify stage and the hull census on the published bundles.

Prints the median wall time over several runs of (a) the whole verify stage (load, all claims,
three models, report written), (b) the same stage on a copy of the bundles with W extra windows
per model (the test suite's windows writer: window 0 the fixed window, the others its keys and
queries in shuffled positions), against (a) as the baseline, and (c) the hull census of all three
models, compared with the baseline of the author's analysis, one HiGHS linear program per key,
run in the same process on the same keys (with identical results asserted). The census is timed
on one BLAS thread, as the verify stage runs it (verify.BLAS_THREADS): beside a busy process, a
threaded BLAS made it 17x slower (0.16 s against 0.009 s on layer 0's keys).

    ./reproduce.sh bench verify [--quick]   # or, in the environment: python bench/bench_verify.py

--quick: 3 runs, the census and the baseline on the keys of layer 0 only, 4 windows per model.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "bench")]

from helpers.bundles import add_windows, copy_published  # noqa: E402 - after the path set-up above (tests/helpers)
from measured import write_figures  # noqa: E402 - bench/, beside this script

from attngeom.base import fetch  # noqa: E402
from attngeom.base.files import output_file  # noqa: E402
from attngeom.bundles import layout  # noqa: E402
from attngeom.cli import Parser, entry  # noqa: E402
from attngeom.geometry import hull  # noqa: E402
from attngeom.jobs import verify  # noqa: E402


def median_time(fn, runs: int):
    """(median wall time of `runs` calls of `fn`, the last call's result)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def lp_census(k_LHTD: np.ndarray) -> np.ndarray:
    """The baseline: one linear program per key, as the author's analysis did."""
    flat = k_LHTD.astype(np.float64).reshape(-1, *k_LHTD.shape[-2:])
    return np.array([[hull.inside_by_lp(keys, j) for j in range(len(keys))] for keys in flat])


def main() -> int:
    parser = Parser(
        prog="reproduce.sh bench verify", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="3 runs; census and baseline on layer 0's keys only")
    parser.add_argument("--runs", type=int, help="timed runs of the verify stage and the census (default 7, quick 3)")
    parser.add_argument(
        "--baseline-runs", type=int, default=1, help="runs of the per-key LP baseline (about 40 s each; 0 skips it)"
    )
    parser.add_argument("--windows", type=int, help="windows per model in the windows case (default 16, quick 4)")
    parser.add_argument("--json", type=output_file, metavar="FILE", help="also write the figures to FILE")
    args = parser.parse_args()
    args.runs = args.runs or (3 if args.quick else 7)
    args.windows = args.windows or (4 if args.quick else 16)

    root = fetch.fetch_bundles()
    models = layout.load_models(root)
    keys = [m.k_LHTD[:1] if args.quick else m.k_LHTD for m in models.values()]

    with tempfile.TemporaryDirectory() as tmp:
        windowed = copy_published(root, Path(tmp) / "windowed")
        for m in layout.load_models(windowed).values():
            add_windows(m, args.windows)

        def verify_stage(bundles_root: Path):
            with contextlib.redirect_stdout(io.StringIO()):
                verify.run_verify(bundles_root, Path(tmp) / "out")

        verify_stage(root)  # warm caches (imports, page cache)
        # Alternate the two cases so a change in the machine's load hits both alike.
        pairs = [
            (median_time(lambda: verify_stage(root), 1)[0], median_time(lambda: verify_stage(windowed), 1)[0])
            for _ in range(args.runs)
        ]
        t_verify, t_windows = (statistics.median(p[i] for p in pairs) for i in (0, 1))
    with threadpool_limits(limits=1, user_api="blas"):  # as in the verify stage
        t_hull, ours = median_time(lambda: [hull.inside_hull(k) for k in keys], args.runs)

    print(f"verify stage (3 models, all claims, report): median {t_verify:.3f} s over {args.runs} runs")
    print(
        f"verify stage with {args.windows} windows per model: median {t_windows:.3f} s over {args.runs} runs; "
        f"the windows pass costs {t_windows - t_verify:.3f} s, {(t_windows - t_verify) / t_verify:.2f}x the plain "
        f"stage (the whole stage with them: {t_windows / t_verify:.2f}x)"
    )
    n_keys = f"3 x {keys[0][..., 0].size:,} keys"
    print(f"hull census ({n_keys}), certificates + LP: median {t_hull:.3f} s over {args.runs} runs")
    if args.baseline_runs:
        t_base, base = median_time(lambda: [lp_census(k) for k in keys], args.baseline_runs)
        assert all(np.array_equal(a, b.reshape(a.shape)) for a, b in zip(ours, base)), (
            "census differs from the baseline"
        )
        print(f"hull census, one LP per key (baseline): median {t_base:.3f} s over {args.baseline_runs} runs")
        print(
            f"speed-up of the census: {t_base / t_hull:.0f}x, identical verdicts ({sum(int(a.sum()) for a in ours)} inside)"
        )
    if args.json:
        figures = {
            "runs": args.runs,
            "verify_s": t_verify,
            "windows": args.windows,
            "verify_with_windows_s": t_windows,
            "census_keys": 3 * int(keys[0][..., 0].size),
            "census_s": t_hull,
        }
        if args.baseline_runs:
            figures |= {
                "baseline_runs": args.baseline_runs,
                "census_baseline_s": t_base,
                "census_speedup": t_base / t_hull,
            }
        write_figures(args.json, figures)
    return 0


if __name__ == "__main__":
    entry(main)  # the exit statuses of every command: a bad option is one `error:` line and 2

"""Benchmark the verify stage and the hull census on the published bundles.

Prints the median wall time over several runs of (a) the whole verify stage (load, all claims,
three models, report written) and (b) the hull census of all three models, and compares (b)
with the baseline of the author's analysis, one HiGHS linear program per key, run in the same
process on the same keys (with identical results asserted).

    ./reproduce.sh bench verify [--quick]   # or, in the environment: python bench/bench_verify.py

--quick: 3 runs, and the baseline on the keys of layer 0 only (under a minute on 2 CPU cores).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from attngeom import bundles, fetch, hull, verify  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 runs; census and baseline on layer 0's keys only")
    parser.add_argument("--runs", type=int, help="timed runs of the verify stage and the census (default 7, quick 3)")
    parser.add_argument("--baseline-runs", type=int, default=1, help="runs of the per-key LP baseline (about 40 s each)")
    args = parser.parse_args()
    args.runs = args.runs or (3 if args.quick else 7)

    root = fetch.fetch_bundles()
    models = bundles.load_models(root)
    keys = [m.k_LHTD[:1] if args.quick else m.k_LHTD for m in models.values()]

    with tempfile.TemporaryDirectory() as out:
        def verify_stage():
            with contextlib.redirect_stdout(io.StringIO()):
                verify.run_verify(root, Path(out))

        verify_stage()  # warm caches (imports, page cache)
        t_verify, _ = median_time(verify_stage, args.runs)
    t_hull, ours = median_time(lambda: [hull.inside_hull(k) for k in keys], args.runs)
    t_base, base = median_time(lambda: [lp_census(k) for k in keys], args.baseline_runs)
    assert all(np.array_equal(a, b.reshape(a.shape)) for a, b in zip(ours, base)), "census differs from the LP baseline"

    print(f"verify stage (3 models, all claims, report): median {t_verify:.3f} s over {args.runs} runs")
    n_keys = f"3 x {keys[0][..., 0].size:,} keys"
    print(f"hull census ({n_keys}), certificates + LP: median {t_hull:.3f} s over {args.runs} runs")
    print(f"hull census, one LP per key (baseline): median {t_base:.3f} s over {args.baseline_runs} runs")
    print(f"speed-up of the census: {t_base / t_hull:.0f}x, identical verdicts ({sum(int(a.sum()) for a in ours)} inside)")


if __name__ == "__main__":
    main()

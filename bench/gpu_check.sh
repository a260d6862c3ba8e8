#!/usr/bin/env bash
# The GPU check, in order: `fidelity` on the GPU (the author's script against the harness), the
# training benchmark (steps/s, the harness against the per-step loop, per variant), the full
# paper rerun of softmax, yat_b and goat_v judged with the rerun tier, then the Kaggle kernel's
# CUDA libraries (bench/kaggle_cuda_check.py: the CUDA lock installed as the kernel does, with a
# folder of CUDA 12.8 libraries on LD_LIBRARY_PATH as in Kaggle's image; whether jax sees the
# GPU with and without the kernel's cleanup of that path). Its figures go into one
# small JSON, gpu_check.json, beside each step's own output. Meant to fit in 10 minutes on one
# GPU (not yet run on one).
#
#   bench/gpu_check.sh [OUTDIR]          results under $OUT if set, else OUTDIR
#   bench/gpu_check.sh --smoke OUTDIR    every step, tiny, the rerun of softmax alone (any machine; a test runs it on a CPU)
#   bench/gpu_check.sh [--smoke] --ensemble OUTDIR
#       instead: the ensemble of 4 members of each variant (paper preset, vmapped) in one command
#       of at most ATTNGEOM_ENSEMBLE_S seconds (540; with --smoke: 1800, 2 members of yat_b): bench/gpu_budget.py sizes
#       it from the FLOPs of the compiled step (the step to stop after, when the 12,000 do not
#       fit), `rerun --time-limit`
#       stops it in time to judge every member, and `timeout` ends it as a signal would; whatever
#       stops it, OUTDIR/ensemble-paper.json holds what finished, and OUTDIR/ensemble/ carries on
#       with `rerun --resume`. Its figures go into gpu_ensemble.json.
#
# The rerun is sized to the time left of ATTNGEOM_CHECK_S seconds (540; 3600 with --smoke) once
# the Kaggle check (ATTNGEOM_KAGGLE_S, 90) and judging (ATTNGEOM_JUDGE_S, 40) are kept:
# bench/gpu_budget.py estimates it from the FLOPs of the compiled step and stops it after the step
# that fits, and `rerun --time-limit` holds it to that time.
#
# A step that fails is recorded with its exit status and the next one still runs; the script's
# own exit status is 0 when every step ran and passed, 1 when one failed or missed.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
smoke=0
ensemble=0
while [ "${1:-}" = "--smoke" ] || [ "${1:-}" = "--ensemble" ]; do
  [ "$1" = "--smoke" ] && smoke=1
  [ "$1" = "--ensemble" ] && ensemble=1
  shift
done
out="${OUT:-${1:-}}"
if [ -z "$out" ]; then echo "usage: bench/gpu_check.sh [--smoke] [--ensemble] OUTDIR (or set OUT)" >&2; exit 2; fi
mkdir -p "$out" || exit 2
out="$(cd "$out" && pwd)"
repro="$here/reproduce.sh"

if [ "$ensemble" = 1 ]; then
  exec "$here/bench/gpu_ensemble.sh" "$smoke" "$out"
fi

if [ "$smoke" = 1 ]; then
  fidelity_args=(--steps 1 --variants softmax)
  bench_args=(--quick --steps 5 --repeats 1 --variants softmax --members 2)
  preset=smoke check_s="${ATTNGEOM_CHECK_S:-3600}" rerun_variants=softmax
else
  fidelity_args=(--steps 3)
  bench_args=(--steps 100 --repeats 3 --members 4)
  preset=paper check_s="${ATTNGEOM_CHECK_S:-540}" rerun_variants=softmax,yat_b,goat_v
fi
rerun_args=(--preset "$preset")
# The fidelity step has just run; the rerun's own preflight would repeat it.
rerun_args+=(--variants "$rerun_variants" --preflight 0)
if "$repro" rerun --help 2>/dev/null | grep -q -- "--windows"; then
  rerun_args+=(--windows "${ATTNGEOM_WINDOWS:-16}")
fi

step() {  # step NAME CMD...: run, log to NAME.log, record exit status and wall seconds
  local name="$1" start rc
  shift
  echo "gpu_check: $name: $*" >&2
  start=$SECONDS
  "$@" >"$out/$name.log" 2>&1
  rc=$?
  echo "$name $rc $((SECONDS - start))" >>"$out/steps.txt"
  tail -n 3 "$out/$name.log" >&2
}

rm -f "$out/steps.txt"
step fidelity "$repro" fidelity "${fidelity_args[@]}" --out "$out/fidelity"
step bench_train "$repro" bench train "${bench_args[@]}" --json "$out/bench_train.json"
reserve=$((${ATTNGEOM_KAGGLE_S:-90} + ${ATTNGEOM_JUDGE_S:-40} + 20))
train_s=$((check_s - SECONDS - reserve))
train_s=$((train_s < 1 ? 1 : train_s))
mapfile -t sized < <("${ATTNGEOM_VENV:-$here/.venv}/bin/python" "$here/bench/gpu_budget.py" --seconds "$train_s" \
  --preset "$preset" --json "$out/rerun_budget.json" 2>"$out/rerun_budget.log")
train_s=$((check_s - SECONDS - reserve))  # the sizing took its time: measured again
rerun_args+=("${sized[@]}" --time-limit "$((train_s < 1 ? 1 : train_s))")
step rerun "$repro" rerun "${rerun_args[@]}" --out "$out/rerun"
kaggle_args=("$out")
[ "$smoke" = 1 ] && kaggle_args=(--smoke "$out")
step kaggle_cuda "${ATTNGEOM_VENV:-$here/.venv}/bin/python" "$here/bench/kaggle_cuda_check.py" "${kaggle_args[@]}"

"${ATTNGEOM_VENV:-$here/.venv}/bin/python" - "$out" "$smoke" <<'EOF'
import json, sys
from pathlib import Path

out, smoke = Path(sys.argv[1]), sys.argv[2] == "1"


def read(name):
    try:
        return json.loads((out / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


steps = {n: {"exit": int(rc), "wall_s": int(s)}
         for n, rc, s in (line.split() for line in (out / "steps.txt").read_text().splitlines())}
fid, bench, manifest = read("fidelity/fidelity.json"), read("bench_train.json"), read("rerun/manifest.json")
budget = read("rerun_budget.json")
report, kaggle_cuda = read("rerun/report/report.json"), read("kaggle_cuda.json")
doc = {
    "smoke": smoke,
    "steps": steps,
    "device": fid and fid["device"],
    "versions": fid and fid["versions"],
    "fidelity": fid and {
        "verdict": fid["verdict"], "exact": fid["exact"], "steps": fid["steps"],
        "losses": {v: {"original": fid["original"][v]["losses"], "harness": fid["harness"][v]["losses"]}
                   for v in fid["variants"]},
    },
    "bench_train": bench,
    "rerun": manifest and {
        "completed": manifest.get("completed"), "wall_s": manifest.get("wall_s"),
        "variant_wall_s": manifest.get("variant_wall_s"), "verify_exit": manifest.get("verify_exit"),
        "steps": manifest["config"]["train"]["steps"], "windows": manifest.get("windows"),
        "stopped_after": manifest.get("stopped_after"), "budget": budget,
        "summary": report and report.get("summary"),
    },
    "kaggle_cuda": kaggle_cuda,
}
ok = all(s["exit"] == 0 for s in steps.values())
doc["verdict"] = "PASS" if ok else "FAIL"
(out / "gpu_check.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
print(f"gpu_check: {doc['verdict']}; " + ", ".join(f"{n} exit {s['exit']} ({s['wall_s']} s)" for n, s in steps.items()))
print(f"gpu_check: figures in {out / 'gpu_check.json'}")
sys.exit(0 if ok else 1)
EOF

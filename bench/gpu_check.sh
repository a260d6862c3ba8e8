#!/usr/bin/env bash
# The GPU check, one command of at most 9 minutes, meant for a lent GPU machine without network that
# has its own Python with jax (docs/speed.md, "The GPU check"). In order: `fidelity` on the GPU (the
# author's script against the harness), the training benchmark (steps/s, the harness against the
# per-step loop, per variant), the full paper rerun of softmax, yat_b and goat_v judged with the rerun
# tier, then the Kaggle kernel's CUDA libraries (bench/kaggle_cuda_check.py: the CUDA lock installed as
# the kernel does, with a folder of CUDA 12.8 libraries on LD_LIBRARY_PATH as in Kaggle's image; it
# needs a package index, so offline it is recorded as skipped).
#
#   .venv/bin/python bench/gpu_carry.py   here, first: fills carry/ (the mirror's files, a few wheels)
#   ATTNGEOM_SYSTEM_PYTHON=python3 bench/gpu_check.sh [OUTDIR]    there: results under $OUT if set, else OUTDIR
#   bench/gpu_check.sh --smoke OUTDIR    every step, tiny, the rerun of softmax alone (any machine; a test
#                                        rehearses it on a CPU, offline, as on the GPU machine)
#   bench/gpu_check.sh [--smoke] --ensemble OUTDIR
#       instead: the ensemble (bench/gpu_ensemble.sh): 4 members of yat_b for all 12,000 steps, vmapped,
#       when the FLOP estimate fits, then softmax and goat_v for as many steps as fit, in one command of
#       at most ATTNGEOM_ENSEMBLE_S seconds (540; with --smoke: 1800, 2 members, the smoke preset).
#
# Environment (bench/gpu_env.sh): ATTNGEOM_SYSTEM_PYTHON runs everything on that interpreter (nothing
# built; the carried wheels go into carry/site), else the environment reproduce.sh builds from the lock;
# the mirror is carry/mirror when it is there and ATTNGEOM_MIRROR is not set.
#
# Results, as a lent machine hands them back (at most 8 files of at most 16 MiB): OUTDIR holds
# gpu_check.json (every figure: device, versions and how they differ from the lock, the fidelity
# verdict and losses, steps/s, the rerun's wall times and verdicts, the Kaggle library check, each
# step's exit status and wall time) and gpu_check.tar.gz (every step's log, manifests, reports and
# summaries, no bundle arrays or checkpoints); the steps' own folders stay in a work folder it names.
#
# The rerun is sized to the time left of ATTNGEOM_CHECK_S seconds (540; 3600 with --smoke) once the
# Kaggle check (ATTNGEOM_KAGGLE_S, 90, when it runs) and judging (ATTNGEOM_MODEL_JUDGE_S, 15, per model)
# are kept: bench/gpu_budget.py estimates it from the FLOPs of the step and stops it after the
# step that fits, and `rerun --time-limit` holds it to that time.
#
# A step that fails is recorded with its exit status and the next one still runs; the script's own exit
# status is 0 when every step that ran passed, 1 when one failed, 2 when it could not start.
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
# The results folder must take a file before any step runs (usage above: 2 is "could not start").
if ! mkdir -p "$out" 2>/dev/null || ! probe="$(mktemp "$out/.gpu_check.XXXXXX" 2>/dev/null)"; then
  echo "error: $out: cannot write the results there; give a writable OUTDIR (or OUT)" >&2
  exit 2
fi
rm -f "$probe"
out="$(cd "$out" && pwd)"
. "$here/bench/gpu_env.sh"

if [ "$ensemble" = 1 ]; then
  . "$here/bench/gpu_ensemble.sh"
  exit
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
# The fidelity step has just run; the rerun's own preflight would repeat it.
rerun_args=(--preset "$preset" --variants "$rerun_variants" --preflight 0 --windows "${ATTNGEOM_WINDOWS:-16}")

step() {  # step NAME CMD...: run, log to NAME.log, record exit status and wall seconds
  local name="$1" start rc
  shift
  echo "gpu_check: $name: $*" >&2
  start=$SECONDS
  "$@" >"$work/$name.log" 2>&1
  rc=$?
  echo "$name $rc $((SECONDS - start))" >>"$work/steps.txt"
  tail -n 3 "$work/$name.log" >&2
}

# The Kaggle check installs the CUDA lock: with a package index only (or pip's own offline settings).
kaggle=1
if [ "$smoke" = 0 ] && [ -z "${PIP_NO_INDEX:-}" ] &&
   ! "$python" -c 'import socket; socket.create_connection(("pypi.org", 443), timeout=5).close()' 2>/dev/null; then
  kaggle=0
  echo "kaggle_cuda skipped no package index reachable (offline); bench/kaggle_cuda_check.py needs one" >>"$work/steps.txt"
fi

step fidelity "$repro" fidelity "${fidelity_args[@]}" --out "$work/fidelity"
step bench_train "$repro" bench train "${bench_args[@]}" --json "$work/bench_train.json"
models=$(($(tr -cd , <<<"$rerun_variants" | wc -c) + 1))
reserve=$((${ATTNGEOM_KAGGLE_S:-90} * kaggle + ${ATTNGEOM_MODEL_JUDGE_S:-15} * models + 20))
train_s=$((check_s - SECONDS - reserve))
mapfile -t sized < <("$python" "$here/bench/gpu_budget.py" --seconds "$((train_s < 1 ? 1 : train_s))" \
  --preset "$preset" --variants "$rerun_variants" --json "$work/rerun_budget.json" 2>"$work/rerun_budget.log")
train_s=$((check_s - SECONDS - reserve))  # the sizing took its time: measured again
rerun_args+=("${sized[@]}" --time-limit "$((train_s < 1 ? 1 : train_s))")
step rerun "$repro" rerun "${rerun_args[@]}" --out "$work/rerun"
if [ "$kaggle" = 1 ]; then
  kaggle_args=("$work")
  [ "$smoke" = 1 ] && kaggle_args=(--smoke "$work")
  step kaggle_cuda "$python" "$here/bench/kaggle_cuda_check.py" "${kaggle_args[@]}"
fi
"$python" "$here/bench/gpu_results.py" check "$work" "$out" "$smoke"

#!/usr/bin/env bash
# The GPU check's ensemble (run as `bench/gpu_check.sh [--smoke] --ensemble OUTDIR`, which documents it):
# 4 members of each variant trained together to 12,000 steps, or as many as fit in one command.
#
#   bench/gpu_ensemble.sh SMOKE(0|1) OUTDIR
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
smoke="$1"
out="$2"
repro="$here/reproduce.sh"
python="${ATTNGEOM_VENV:-$here/.venv}/bin/python"
judge_s="${ATTNGEOM_JUDGE_S:-40}"    # judging one member's run, seconds (verify of three variants)
if [ "$smoke" = 1 ]; then  # limit: the whole command, seconds; the smoke check trains one kernel variant
  preset=smoke members=2 windows=2 variants=yat_b limit="${ATTNGEOM_ENSEMBLE_S:-1800}"
else
  preset=paper members=4 windows="${ATTNGEOM_WINDOWS:-16}" variants=softmax,yat_b,goat_v limit="${ATTNGEOM_ENSEMBLE_S:-540}"
fi
start=$SECONDS
left() {  # left N: the seconds left once N more are kept, at least 1
  local s=$((limit - (SECONDS - start) - $1))
  echo $((s < 1 ? 1 : s))
}

train_s=$(left $((judge_s * members + 30)))
echo "gpu_ensemble: sizing $members members of $variants ($preset) to train in $train_s s" >&2
mapfile -t sized < <("$python" "$here/bench/gpu_budget.py" --seconds "$train_s" --members "$members" \
  --preset "$preset" --variants "$variants" --json "$out/ensemble_budget.json" 2>"$out/ensemble_budget.log")
args=(rerun --preset "$preset" --members "$members" --members-mode together --variants "$variants")
args+=(--windows "$windows" --preflight 0 --quiet --out "$out/ensemble" "${sized[@]}")
args+=(--time-limit "$(left $((judge_s * members + 15)))")  # the sizing took its time: measured again
rm -rf "$out/ensemble"
echo "gpu_ensemble: $repro ${args[*]}" >&2
rerun_start=$SECONDS
timeout -s INT -k 20 "$(left 5)" "$repro" "${args[@]}" >"$out/ensemble.log" 2>&1
rc=$?
rerun_s=$((SECONDS - rerun_start))
tail -n 3 "$out/ensemble.log" >&2
cp "$out/ensemble/ensemble.json" "$out/ensemble-$preset.json" 2>/dev/null

"$python" - "$out" "$preset" "$rc" "$rerun_s" "$((SECONDS - start))" "$limit" <<'PY'
import json, sys
from pathlib import Path

out, preset = Path(sys.argv[1]), sys.argv[2]
rc, rerun_s, wall_s, limit = map(int, sys.argv[3:])
try:
    ens = json.loads((out / f"ensemble-{preset}.json").read_text(encoding="utf-8"))
except (OSError, ValueError):
    ens = None
try:
    budget = json.loads((out / "ensemble_budget.json").read_text(encoding="utf-8"))
except (OSError, ValueError):
    budget = None  # the estimate failed: ensemble_budget.log says why
runs = ens["member_runs"] if ens else {}
done = sorted(int(m) for m, r in runs.items() if r["state"] == "complete")
doc = {
    "preset": preset, "limit_s": limit, "wall_s": wall_s, "rerun_s": rerun_s, "rerun_exit": rc, "budget": budget,
    "members_complete": done, "stopped_after": {m: r.get("stopped_after") for m, r in runs.items()},
    "member_runs": runs, "summary": f"ensemble-{preset}.json" if ens else None,
}
doc["verdict"] = "PASS" if rc in (0, 1) and ens and len(done) == ens["members"] else "FAIL"
(out / "gpu_ensemble.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
print(f"gpu_ensemble: {doc['verdict']}; rerun exit {rc} in {rerun_s} s; members complete {done}; "
      f"stopped after {doc['stopped_after']}; figures in {out / 'gpu_ensemble.json'}")
sys.exit(0 if doc["verdict"] == "PASS" else 1)
PY

# The GPU check's ensemble, sourced by `bench/gpu_check.sh [--smoke] --ensemble OUTDIR` (which documents
# it) after bench/gpu_env.sh: with `here`, `out`, `smoke`, `python`, `repro` and `work` set.
#
# First goal, the ensemble the final-step bands wait for: 4 members of yat_b trained together (vmapped)
# for all 12,000 steps, when bench/gpu_budget.py's FLOP estimate says they fit (else stopped after the
# step that fits); then, in the time left, softmax and goat_v, 4 members each, for as many steps as fit.
# Each is one `rerun --members 4 --members-mode together` held to its time by `--time-limit` (which
# stops it in time to judge every member) and ended by `timeout` as Ctrl-C would; whatever stops them,
# `summary` keeps both ensembles in OUTDIR/ensemble-PRESET.json, the file `bands` reads, and the work
# folder's ensembles carry on with `rerun --resume`. The whole command takes at most ATTNGEOM_ENSEMBLE_S
# seconds (540; with --smoke 1800: 2 members, the smoke preset, softmax second).
judge_s="${ATTNGEOM_MODEL_JUDGE_S:-15}"  # judging one model of one member, seconds (verify with 16 windows: a few)
keep_s=30                          # the summary and the results at the end, seconds
if [ "$smoke" = 1 ]; then
  preset=smoke members=2 windows=2 more=softmax limit="${ATTNGEOM_ENSEMBLE_S:-1800}"
else
  preset=paper members=4 windows="${ATTNGEOM_WINDOWS:-16}" more=softmax,goat_v limit="${ATTNGEOM_ENSEMBLE_S:-540}"
fi
start=$SECONDS
left() {  # left N: the seconds left once N more are kept, at least 1
  local s=$((limit - (SECONDS - start) - $1))
  echo $((s < 1 ? 1 : s))
}

ensemble() {  # ensemble NAME VARIANTS: one ensemble sized to the time left, into $work/NAME; recorded in steps.txt
  local name="$1" variants="$2" began=$SECONDS rc sized
  local reserve=$((judge_s * members * ($(tr -cd , <<<"$variants" | wc -c) + 1) + keep_s))
  echo "gpu_ensemble: sizing $members members of $variants ($preset) to train in $(left "$reserve") s" >&2
  mapfile -t sized < <("$python" "$here/bench/gpu_budget.py" --seconds "$(left "$reserve")" --members "$members" \
    --preset "$preset" --variants "$variants" --json "$work/${name}_budget.json" 2>"$work/${name}_budget.log")
  local args=(rerun --preset "$preset" --members "$members" --members-mode together --variants "$variants")
  args+=(--windows "$windows" --preflight 0 --quiet --out "$work/$name" "${sized[@]}")
  args+=(--time-limit "$(left "$reserve")")  # the sizing took its time: measured again
  echo "gpu_ensemble: $repro ${args[*]}" >&2
  timeout -s INT -k 20 "$(left "$keep_s")" "$repro" "${args[@]}" >"$work/$name.log" 2>&1
  rc=$?
  echo "$name $rc $((SECONDS - began))" >>"$work/steps.txt"
  tail -n 3 "$work/$name.log" >&2
}

ensemble ensemble-yat_b yat_b
# The second ensemble compiles its own steps: worth it with a minute of training left beyond that.
if [ "$(left $((judge_s * members * 2 + keep_s + 60)))" -gt 60 ]; then
  ensemble "ensemble-${more//,/-}" "$more"
else
  echo "ensemble-${more//,/-} skipped $(left 0) s left after yat_b" >>"$work/steps.txt"
fi
summarised=()
for folder in "$work"/ensemble-*/; do [ -f "$folder/ensemble.json" ] && summarised+=("$folder"); done
if [ "${#summarised[@]}" -gt 0 ]; then
  began=$SECONDS
  "$repro" summary "${summarised[@]}" --out "$out/ensemble-$preset.json" \
    --what "bench/gpu_check.sh --ensemble: the ensembles of one command" >"$work/summary.log" 2>&1
  echo "summary $? $((SECONDS - began))" >>"$work/steps.txt"
fi
"$python" "$here/bench/gpu_results.py" ensemble "$work" "$out" "$preset" "$limit" "$((SECONDS - start))"

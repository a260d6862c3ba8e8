# The environment both GPU commands run in (sourced by bench/gpu_check.sh and bench/gpu_ensemble.sh,
# with `here` the checkout and `out` the results folder). Sets:
#   python  ATTNGEOM_SYSTEM_PYTHON when given (the machine's own interpreter, nothing built), else the
#           environment reproduce.sh builds from the lock (built here when missing); either way its
#           modules are checked first (`rerun --help`: a missing one is one `error:` line and 2)
#   repro   reproduce.sh, which runs every command on that same interpreter
#   work    a new folder outside the results for the steps' own output (run folders, checkpoints),
#           kept so that a stopped ensemble can be carried on with `rerun --resume`
# and, when bench/gpu_carry.py filled carry/: ATTNGEOM_MIRROR=carry/mirror (unless a mirror is set),
# and, on a given interpreter, the carried wheels installed into carry/site, first on PYTHONPATH (never
# into the interpreter's own folders).
repro="$here/reproduce.sh"
if [ -n "${ATTNGEOM_SYSTEM_PYTHON:-}" ]; then
  python="$ATTNGEOM_SYSTEM_PYTHON"
  if [ -d "$here/carry/wheels" ]; then
    rm -rf "$here/carry/site"
    "$python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile \
      --find-links "$here/carry/wheels" --target "$here/carry/site" "$here"/carry/wheels/*.whl >&2 ||
      { echo "error: $python: cannot install the carried wheels of $here/carry/wheels into carry/site" >&2; exit 2; }
    export PYTHONPATH="$here/carry/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
else
  python="${ATTNGEOM_VENV:-$here/.venv}/bin/python"
fi
"$repro" rerun --help >/dev/null || exit 2
if [ -z "${ATTNGEOM_MIRROR:-}" ] && [ -d "$here/carry/mirror" ]; then
  export ATTNGEOM_MIRROR="$here/carry/mirror"
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/attngeom-gpu.XXXXXX")" || { echo "error: cannot create a work folder" >&2; exit 2; }
echo "gpu: $python; mirror ${ATTNGEOM_MIRROR:-none (network)}; work folder $work" >&2

"""Mutation testing: the share of small changes to a module that its tests catch (mutmut), per module.

mutmut changes one thing at a time in a module (an operator, a constant, a comparison's edge) and runs
the tests that reach the changed function; a change no test fails on is a survivor, a behaviour no
test pins. The modules are those that decide a verdict, a number or an exit status (`modules` in
pyproject.toml's `[tool.attngeom.mutation]`, each with the test files that judge it); mutmut's own
settings are in `[tool.mutmut]`. A module named `MODULE:FUNCTION` (`training.train:perturb`) is
scored on that one function's mutants alone (mutmut names them `attngeom.MODULE.x_FUNCTION__mutmut_N`).
A survivor that cannot change any output (an equivalent mutant) is listed under
`[tool.attngeom.mutation.equivalent]` with one line on why, and counted out of the score.

    ./reproduce.sh bench mutation [MODULE...] [--record FILE]   # e.g. bench mutation judgement.judge measures.stats

Each module runs in a folder of its own (`.mutation/<module>/`, rebuilt each time, so no result is
carried over from code that has since changed): links to the checkout, and pyproject.toml with the
module's selection added to `[tool.mutmut]` (the folder of `MODULE:FUNCTION` is `MODULE-FUNCTION`).
mutmut copies the source there to `mutants/`, with what the tests read and run (expected/, bench/,
reproduce.sh: a test's `reproduce.sh` runs the mutated copy), and runs the non-slow tests on that copy,
which the tests import. PYTHONPATH holds only bench/, for the pytest plugin `mutation_children`,
without which a test that starts the mutated code in a subprocess fails in mutmut's first pass. A
function only such tests reach has "no tests" (mutmut sees the calls of the test process alone): it
needs an in-process test to be scored. The score per module (caught / (mutants - equivalent); a
mutant that times out is caught) is written to the record (default bench/results/mutation.json) with
the date, the commit and whether the tree was clean, beside the scores of the modules not run this time. Too slow for every CI run: run it on a module
before changing it, and after.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from attngeom.base.errors import InputError  # noqa: E402
from attngeom.base.files import git_commit, write_json_atomic  # noqa: E402
from attngeom.cli import Parser, entry  # noqa: E402

RECORD = REPO / "bench" / "results" / "mutation.json"
WORK = REPO / ".mutation"
CAUGHT = {"killed", "timeout", "segfault", "caught by type check"}


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]


def settings() -> dict:
    """`[tool.attngeom.mutation]` of pyproject.toml: modules -> test files, equivalent mutant -> why."""
    return pyproject()["attngeom"]["mutation"]


def linked() -> list[str]:
    """What mutmut copies to `mutants/` (its source_paths, tests/ and the also_copy of `[tool.mutmut]`)."""
    mutmut = pyproject()["mutmut"]
    return [*mutmut["source_paths"], "tests", *(name.rstrip("/") for name in mutmut["also_copy"])]


def source_of(module: str) -> Path:
    """src/attngeom/<module path>.py of a module named as in the settings (`training.train`, `files:shown`)."""
    return Path("src", "attngeom", *module.partition(":")[0].split(".")).with_suffix(".py")


def mutant_prefix(module: str) -> str:
    """What the names of the module's mutants begin with (those of one function for `MODULE:FUNCTION`)."""
    name, _, function = module.partition(":")
    return f"attngeom.{name}." + (f"x_{function}__mutmut_" if function else "")


def prepare(module: str, tests: list[str]) -> Path:
    """The module's run folder, new: links to the checkout, pyproject.toml selecting the module and its tests."""
    folder = WORK / module.replace(":", "-")  # a ':' would split the PYTHONPATH the tests give subprocesses
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name in linked():
        (folder / name).symlink_to(REPO / name, target_is_directory=(REPO / name).is_dir())
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    selection = f"only_mutate = {json.dumps([str(source_of(module))])}\n"
    selection += f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
    if text.count("[tool.mutmut]\n") != 1:
        raise InputError("pyproject.toml: needs one [tool.mutmut] table")
    (folder / "pyproject.toml").write_text(text.replace("[tool.mutmut]\n", "[tool.mutmut]\n" + selection))
    return folder


def statuses(folder: Path, module: str) -> dict[str, str]:
    """Every mutant of the module (or its function) and what became of it (mutmut's words: killed, survived,
    no tests, ...)."""
    from mutmut.stats import status_by_exit_code

    meta = json.loads((folder / "mutants" / (str(source_of(module)) + ".meta")).read_text(encoding="utf-8"))
    codes = meta["exit_code_by_key"]
    return {name: status_by_exit_code[codes[name]] for name in sorted(codes) if name.startswith(mutant_prefix(module))}


def measure(module: str, tests: list[str], equivalent: dict[str, str], children: int) -> dict:
    """Run mutmut on one module; its counts and score."""
    missing = [str(p) for p in (source_of(module), *tests) if not (REPO / p).is_file()]
    if missing:
        raise InputError(f"mutation: {module}: no such file: {', '.join(missing)} (pyproject.toml's modules)")
    commit, clean = git_commit(), clean_tree()  # of the code copied now
    folder = prepare(module, tests)
    env = {**os.environ, "PYTHONPATH": str(REPO / "bench")}  # the tests import the mutated copy
    log = folder / "mutmut.log"
    started = time.monotonic()
    only = [mutant_prefix(module) + "*"] if ":" in module else []  # one function's mutants; all by default
    with open(log, "w", encoding="utf-8") as out:
        status = subprocess.run(
            [str(Path(sys.executable).with_name("mutmut")), "run", "--max-children", str(children), *only],
            cwd=folder,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    seconds = round(time.monotonic() - started)
    if status != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
        raise InputError(f"mutation: {module}: mutmut failed (status {status}; log: {log}):\n" + "\n".join(tail))
    found = statuses(folder, module)
    mine = {name: why for name, why in equivalent.items() if name.startswith(mutant_prefix(module))}
    stale = sorted(name for name in mine if found.get(name) != "survived")
    counts: dict[str, int] = {}
    for status in found.values():
        counts[status] = counts.get(status, 0) + 1
    caught = sum(n for status, n in counts.items() if status in CAUGHT)
    judged = len(found) - (len(mine) - len(stale))
    survivors = sorted(n for n, s in found.items() if s not in CAUGHT and n not in mine)
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"),
        "commit": commit,
        "clean": clean,
        "tests": tests,
        "mutants": len(found),
        "counts": dict(sorted(counts.items())),
        "equivalent": len(mine) - len(stale),
        "score": round(caught / judged, 4) if judged else None,
        "survivors": survivors,
        "stale_equivalent": stale,  # listed as equivalent, but killed or gone: take them off the list
        "seconds": seconds,
    }


def clean_tree() -> bool | None:
    """Whether the source, the tests and the settings are as committed (None: not a checkout)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "src", "tests", "pyproject.toml"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError:
        return None
    return out.stdout.strip() == "" if out.returncode == 0 else None


def read_record(path: Path) -> dict:
    """The record so far (an empty one when there is none)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"modules": {}}
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a mutation record ({exc})") from exc


def main() -> int:
    parser = Parser(
        prog="reproduce.sh bench mutation", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("modules", nargs="*", metavar="MODULE", help="modules to run (default: every listed module)")
    parser.add_argument("--record", type=Path, default=RECORD, help="the record to update (default %(default)s)")
    parser.add_argument("--max-children", type=int, default=2, help="mutants tested at once (default 2)")
    args = parser.parse_args()
    config = settings()
    unknown = [m for m in args.modules if m not in config["modules"]]
    if unknown:
        raise InputError(
            f"mutation: not a listed module: {', '.join(unknown)} (listed: {', '.join(config['modules'])})"
        )
    read_record(args.record)  # refused before any run if it is not a record
    worst = 1.0
    for module in args.modules or list(config["modules"]):
        print(f"{module}: mutating {source_of(module)} against {' '.join(config['modules'][module])}", flush=True)
        result = measure(module, config["modules"][module], config.get("equivalent", {}), args.max_children)
        record = read_record(args.record)  # again: another run may have added a module meanwhile
        record["modules"][module] = result
        record["modules"] = dict(sorted(record["modules"].items()))
        write_json_atomic(args.record, record)
        score = result["score"] if result["score"] is not None else 0.0
        worst = min(worst, score)
        print(f"{module}: {score:.1%} of {result['mutants'] - result['equivalent']} caught in {result['seconds']} s")
        for name in result["survivors"]:
            print(f"  survived: {name}")
        for name in result["stale_equivalent"]:
            print(f"  listed as equivalent but not a survivor: {name}")
    return 0 if worst >= config["least_score"] else 1


if __name__ == "__main__":
    entry(main)

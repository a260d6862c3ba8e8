"""The GPU commands' results as a lent machine hands them back: one JSON of figures and one archive.

    python bench/gpu_results.py check WORK OUT SMOKE
    python bench/gpu_results.py ensemble WORK OUT PRESET LIMIT_S WALL_S

Such a machine hands back at most 8 files of at most 16 MiB each (LIMITS), so the steps write into WORK
and OUT gets: `gpu_check.json` (every figure of the check) and `gpu_check.tar.gz` (every log, manifest,
report and summary under WORK: text files only, no bundles or checkpoints); the ensemble,
`gpu_ensemble.json`, `gpu_ensemble.tar.gz` and `ensemble-PRESET.json` (the summary `bands` reads).
Standard library only: it runs on whatever interpreter the check runs on. Exit 0 when the check passed, 1
when not.
"""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

LIMITS = {"files": 8, "file_bytes": 16 << 20}
TEXT = (".json", ".jsonl", ".log", ".md", ".txt")  # logs, manifests, reports, summaries
ARCHIVED_FILE_BYTES = 8 << 20  # a larger one is left out (and named): the archive stays under the limit


def read(path: Path) -> dict | None:
    """A JSON file's document; None when a step did not write it (its log says why)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def pack(work: Path, archive: Path) -> dict:
    """Every text file under `work` into the tar.gz `archive` (paths relative to `work`); what went in."""
    files = sorted(p for p in work.rglob("*") if p.is_file() and not p.is_symlink() and p.suffix in TEXT)
    kept = [p for p in files if p.stat().st_size <= ARCHIVED_FILE_BYTES]
    with tarfile.open(archive, "w:gz") as tar:
        for p in kept:
            tar.add(p, arcname=str(p.relative_to(work)))
    return {
        "file": archive.name,
        "files": len(kept),
        "bytes": archive.stat().st_size,
        "left_out": [str(p.relative_to(work)) for p in files if p not in kept],
    }


def steps(work: Path) -> dict:
    """steps.txt (`NAME EXIT WALL_S` a line, `NAME skipped REASON...` for a step not run) as a dict."""
    done = {}
    for line in (work / "steps.txt").read_text(encoding="utf-8").splitlines():
        name, status, *rest = line.split()
        if status == "skipped":
            done[name] = {"skipped": " ".join(rest)}
        else:
            done[name] = {"exit": int(status), "wall_s": int(rest[0])}
    return done


def check(work: Path, out: Path, smoke: bool) -> int:
    """gpu_check.json and gpu_check.tar.gz; 0 when every step that ran passed."""
    ran = steps(work)
    fid, bench = read(work / "fidelity/fidelity.json"), read(work / "bench_train.json")
    manifest = read(work / "rerun/manifest.json")
    report = read(work / "rerun/report/report.json")
    doc = {
        "smoke": smoke,
        "steps": ran,
        "device": fid and fid["device"],
        "versions": fid and fid["versions"],
        "environment": manifest and manifest.get("environment"),
        "fidelity": fid
        and {
            "verdict": fid["verdict"],
            "exact": fid["exact"],
            "steps": fid["steps"],
            "losses": {
                v: {"original": fid["original"][v]["losses"], "harness": fid["harness"][v]["losses"]}
                for v in fid["variants"]
            },
        },
        "bench_train": bench,
        "rerun": manifest
        and {
            "completed": manifest.get("completed"),
            "wall_s": manifest.get("wall_s"),
            "variant_wall_s": manifest.get("variant_wall_s"),
            "verify_exit": manifest.get("verify_exit"),
            "steps": manifest["config"]["train"]["steps"],
            "windows": manifest.get("windows"),
            "stopped_after": manifest.get("stopped_after"),
            "budget": read(work / "rerun_budget.json"),
            "summary": report and report.get("summary"),
        },
        "kaggle_cuda": read(work / "kaggle_cuda.json") or ran.get("kaggle_cuda"),
    }
    ok = all(s.get("exit", 0) == 0 for s in ran.values())
    doc["verdict"] = "PASS" if ok else "FAIL"
    doc["archive"] = pack(work, out / "gpu_check.tar.gz")
    (out / "gpu_check.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    said = (f"{n} exit {s['exit']} ({s['wall_s']} s)" if "exit" in s else f"{n} skipped" for n, s in ran.items())
    print(f"gpu_check: {doc['verdict']}; " + ", ".join(said))
    print(f"gpu_check: figures in {out / 'gpu_check.json'}, logs and reports in {out / 'gpu_check.tar.gz'}")
    return 0 if ok else 1


def ensemble(work: Path, out: Path, preset: str, limit_s: int, wall_s: int) -> int:
    """gpu_ensemble.json and gpu_ensemble.tar.gz (ensemble-PRESET.json is `summary`'s); 0 when every step
    that ran passed (a rerun's 1, a claim failed, counts as run) and every member of each ensemble is complete."""
    ran = steps(work)
    parts = {}
    for name in ran:
        ens = read(work / name / "ensemble.json")
        if ens is None:
            continue
        runs = ens["member_runs"]
        parts[name] = {
            "variants": ens["config"]["variants"],
            "members": ens["members"],
            "members_complete": sorted(int(m) for m, r in runs.items() if r["state"] == "complete"),
            "stopped_after": {m: r.get("stopped_after") for m, r in runs.items()},
            "budget": read(work / f"{name}_budget.json"),
            "member_runs": runs,
        }
    summary = out / f"ensemble-{preset}.json"
    doc = {
        "preset": preset,
        "limit_s": limit_s,
        "wall_s": wall_s,
        "steps": ran,
        "ensembles": parts,
        "summary": summary.name if read(summary) else None,
    }
    ran_ok = all(s.get("exit", 0) in ((0, 1) if n in parts else (0,)) for n, s in ran.items())
    complete = all(len(p["members_complete"]) == p["members"] for p in parts.values())
    doc["verdict"] = "PASS" if ran_ok and parts and complete and doc["summary"] else "FAIL"
    doc["archive"] = pack(work, out / "gpu_ensemble.tar.gz")
    (out / "gpu_ensemble.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    said = (f"{n} exit {s['exit']} ({s['wall_s']} s)" if "exit" in s else f"{n} skipped" for n, s in ran.items())
    print(f"gpu_ensemble: {doc['verdict']}; " + ", ".join(said))
    print(f"gpu_ensemble: figures in {out / 'gpu_ensemble.json'}, the summary `bands` reads in {summary}")
    return 0 if doc["verdict"] == "PASS" else 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["check"] and len(argv) == 4:
        return check(Path(argv[1]), Path(argv[2]), argv[3] == "1")
    if argv[:1] == ["ensemble"] and len(argv) == 6:
        return ensemble(Path(argv[1]), Path(argv[2]), argv[3], int(argv[4]), int(argv[5]))
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

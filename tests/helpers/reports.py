"""The command line in a subprocess, the check that a report folder holds one run's set, and a GIF's frames."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from attngeom.judgement import expected, judge
from attngeom.judgement.claims import CLAIM_FUNCTIONS

from . import REPO


def command(*args: str | bytes) -> list:
    return [sys.executable, "-m", "attngeom", *args]


def environment(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO / "src"), **extra}


def run(argv: list, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=cwd, env=environment(**extra), capture_output=True, text=True, timeout=600, check=False
    )


def cli(*args: str | bytes, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    return run(command(*args), cwd, **extra)


def assert_one_error_line(proc: subprocess.CompletedProcess, status: int, starts: str = "error: ") -> None:
    assert proc.returncode == status, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr.startswith(starts) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout


def assert_consistent_set(out: Path) -> dict:
    """REPORT.md, report.json, results.json, index.html and the figures describe one and the same run."""
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    md = (out / "REPORT.md").read_text(encoding="utf-8")
    page = (out / "index.html").read_text(encoding="utf-8")
    p, s = report["provenance"], report["summary"]
    assert f"`{p['command']}`" in md and p["date"] in md
    flat = " ".join(md.split())
    assert md.startswith(f"# attngeom: verification report\n\n**{s['verdict']}**")
    assert f"{s['passed']} of {s['passed'] + s['failed']} judged claims pass, {s['failed']} fail" in flat
    assert html.escape(report["bundles"]) in page and html.escape(p["date"]) in page
    args = {e["id"]: e["args"] for e in expected.load_claims()}
    for row in report["claims"]:
        if row["verdict"] == "SKIP":
            continue
        measured = CLAIM_FUNCTIONS[row["function"]](results, **args[row["id"]])
        assert judge.fmt(measured) == row["measured"], row["id"]
    if report["tier"] == "published":  # there a claim is skipped only when its model is absent
        verdicts = {r["id"]: r["verdict"] for r in report["claims"]}
        skipped = {args[cid].get("model") for cid, v in verdicts.items() if v == "SKIP"}
        assert not skipped & set(results["models"]), "a model in results.json was not judged"
    figures = out / "figures"
    if figures.exists():
        drawn = json.loads((figures / "figures.json").read_text(encoding="utf-8"))
        assert set(drawn["inputs"]) <= set(p["inputs"].values())
        for entry in drawn["figures"]:
            with Image.open(figures / entry["file"]) as gif:
                assert gif.n_frames >= 1 and (figures / entry["file"]).stat().st_size == entry["bytes"]
    return report


def stray_temporaries(folder: Path) -> list[Path]:
    """Temporary files or folders the writers left behind under `folder`."""
    return [p for p in folder.rglob("*") if p.name.startswith(".") and p.name.endswith((".tmp", ".old"))]


def gif_frames(path: Path) -> list[np.ndarray]:
    """Every frame of a GIF, as RGB arrays."""
    with Image.open(path) as gif:
        out = []
        for i in range(gif.n_frames):
            gif.seek(i)
            out.append(np.asarray(gif.convert("RGB")))
        return out


def claim_row(cid: str, verdict: str, reason: str = "why") -> dict:
    """A judged claim's row of report.json, every field a report shows."""
    return {
        "id": cid,
        "claim": "a | b",
        "quote": "q\nq",
        "source": "post",
        "expected": "= 0",
        "measured": "1",
        "tolerance_reason": reason,
        "verdict": verdict,
    }


def report_doc(rows: list[dict]) -> dict:
    """A report.json holding `rows`, its summary counted from them."""
    prov = {
        "command": "reproduce.sh",
        "machine": "m",
        "git_commit": None,
        "versions": {"attngeom": "0.1.0", "numpy": "2"},
        "expected_sha256": {"claims.json": "ab"},
        "inputs": {"x.npz": "cd"},
        "date": "2026-01-01T00:00:00+00:00",
    }
    passed = sum(r["verdict"] == "PASS" for r in rows)
    failed = sum(r["verdict"] == "FAIL" for r in rows)
    summary = {
        "passed": passed,
        "failed": failed,
        "skipped": len(rows) - passed - failed,
        "verdict": "FAIL" if failed else "PASS",
    }
    return {"summary": summary, "tier": "published", "claims": rows, "provenance": prov}


def trajectory_report() -> dict:
    """A report whose trajectories section holds a statistic measured on two trajectories, one measured on
    none, and a comparison that one trajectory breaks at step 1200."""
    from attngeom.judgement import expected, trajectories
    from attngeom.judgement.trajectories import Trajectory

    claims = [
        e for e in expected.load_claims() if e["id"] in ("occupancy.yat_b.final", "scale.yat_b.0.5x", "inversion")
    ]

    def run(name: str, variant: str, winners: float, entropy: float, end: float) -> Trajectory:
        steps = {"distinct_winners": {"0": 30.0, "1200": winners, "11999": end}, "mean_norm_entropy": {"1200": entropy}}
        return Trajectory(name, variant, 12000, steps)

    runs = [
        run("s", "softmax", 65.2, 0.557, 72.0),
        run("y0", "yat_b", 47.5, 0.76, 53.0),
        run("y1", "yat_b", 66.0, 0.75, 54.2),
    ]
    rows = [
        {**claim_row(e["id"], "PASS"), "claim": e["claim"], "measured_value": e["kind"] == "comparison" or 53.9583}
        for e in claims
    ]
    doc = report_doc(rows)
    doc["trajectories"] = trajectories.section(claims, rows, runs, ["expected/measured/x.json"], expected.load_rerun())
    return doc


def refused(capsys, argv: list[str], says: str) -> None:
    """The command line `argv`, run in process, ends in exit 2 with one `error:` line that says `says`."""
    from attngeom import cli

    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and says in err, err

"""`summary`: a judged run folder as the small JSON kept in expected/measured/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import REPO
from helpers.bundles import copy_published, stop_after
from helpers.summaries import even_row, finished_manifest

from attngeom import cli
from attngeom.base.files import sha256_file
from attngeom.jobs.summary import _verdicts, judged_runs, shown_command, training_of
from attngeom.training import runs


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory, published_root) -> Path:
    """The published bundles cut at step 1200 as a finished stopped run of softmax, judged into RUN/report."""
    run = copy_published(published_root, tmp_path_factory.mktemp("summary") / "softmax")
    stop_after(run, 1200)
    (run / runs.MANIFEST).write_text(json.dumps(finished_manifest()))
    assert cli.main(["--bundles", str(run), "--variants", "softmax", "--out", str(run / "report")]) == 0
    return run


def test_the_command_is_shown_as_typed_without_the_run_folder():
    assert shown_command("python -m attngeom rerun --out '/a b/c' --steps 3 --out=/x --quiet") == (
        "./reproduce.sh rerun --steps 3 --quiet"
    )
    assert shown_command("python -m attngeom rerun --resume /home/me/ens --quiet") == (
        "./reproduce.sh rerun --resume RUN --quiet"
    )
    assert shown_command("python -m attngeom rerun --resume=/e") == "./reproduce.sh rerun --resume=RUN"


def test_a_stopped_run_is_summarised_with_its_statistics_distances_and_verdicts(judged_run, tmp_path, capsys):
    out = tmp_path / "measured.json"
    assert cli.main(["summary", str(judged_run), "--out", str(out), "--what", "a test", "--note", "quiet"]) == 0
    assert "softmax: " in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["what"] == "a test" and list(doc["runs"]) == ["softmax"]
    run = doc["runs"]["softmax"]
    assert run["command"] == "./reproduce.sh rerun --preset paper --stop-after 1200 --variants softmax --quiet"
    assert run["stopped_after"] == 1200 and run["note"] == "quiet" and run["judged_by"]["tier"] == "rerun"
    assert (run["trajectory"], run["segments"]) == (finished_manifest()["trajectory"], finished_manifest()["segments"])
    assert run["wall_s"] == 5000.0  # a segment without its wall time: the manifest's
    stats = run["statistics"]["softmax_s0"]
    assert stats["run"] == {
        "distinct_winners": {"0": 26.9167, "1200": 65.2083},
        "mean_norm_entropy": {"0": 0.942837, "1200": 0.557366},
        "validation_loss": {"500": 2.126438, "1000": 1.836924},
    }
    assert stats["published_seed0"] == stats["run"]  # the same bundles, at the steps the run reached
    assert stats["maps_against_published_seed0"] == {
        s: {"max_abs_difference": 0.0, "entries_that_differ": 0.0} for s in ("0", "1200")
    }
    report = json.loads((judged_run / "report" / "report.json").read_text())
    assert run["verdict"] == report["summary"] and report["summary"]["failed"] == 0
    judged = {c["id"]: c["verdict"] for c in run["judged"]}
    assert judged["step1200.softmax.occupancy"] == "PASS" and "SKIP" not in judged.values()
    assert len(judged) == report["summary"]["passed"] + report["summary"]["failed"]


def test_a_resumed_runs_wall_time_is_that_of_all_its_segments():
    from attngeom.jobs.summary import run_wall_s

    manifest = finished_manifest()
    manifest["segments"][0]["wall_s"] = 100.25
    assert run_wall_s(manifest) == 109.75  # the manifest's own 5000 s is its last process's
    assert run_wall_s(finished_manifest(segments=None)) == run_wall_s(finished_manifest(segments=[])) == 5000.0


def test_a_changed_map_moves_the_distance_and_other_runs_in_the_file_are_kept(judged_run, tmp_path):
    out = tmp_path / "measured.json"
    kept = json.loads((REPO / "expected" / "measured" / "paper-step1200.json").read_text())["runs"]
    out.write_text(json.dumps({"what": "kept", "runs": {"goat_v": next(iter(kept.values()))}}))
    run = tmp_path / "softmax"
    copy_published(judged_run, run)
    (run / runs.MANIFEST).write_text(json.dumps(finished_manifest()))
    size = even_row(run)
    assert cli.main(["--bundles", str(run), "--variants", "softmax", "--out", str(run / "report")]) in (0, 1)
    assert cli.main(["summary", str(run), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["what"] == "kept" and set(doc["runs"]) == {"goat_v", "softmax"}
    moved = doc["runs"]["softmax"]["statistics"]["softmax_s0"]["maps_against_published_seed0"]["1200"]
    assert 0 < moved["entries_that_differ"] <= 6 / size and moved["max_abs_difference"] > 0


def test_an_ensemble_is_summarised_loading_each_member_once(judged_run, tmp_path, monkeypatch):
    from attngeom.bundles import layout
    from attngeom.jobs import ensemble, summary

    ens = tmp_path / "ens"
    for m in (0, 1):
        shutil.copytree(judged_run, ensemble.member_dir(ens, m))
    one = ensemble.member_dir(ens, 1)  # member 1: its own number, and bundles of its own, judged
    manifest = finished_manifest()
    manifest["config"]["train"]["member"] = 1
    (one / runs.MANIFEST).write_text(json.dumps(manifest))
    even_row(one)
    assert cli.main(["--bundles", str(one), "--variants", "softmax", "--out", str(one / "report")]) in (0, 1)
    plan = {"what": "two", "members": 2, "config": finished_manifest()["config"]}
    (ens / ensemble.SUMMARY).write_text(json.dumps(plan))
    loaded = []

    def counting(folder, variant, seed):
        loaded.append(Path(folder).parent.name)
        return layout.load_model(folder, variant, seed)

    for module in (summary, ensemble):
        monkeypatch.setattr(module, "load_model", counting)
    out = tmp_path / "measured.json"
    assert cli.main(["summary", str(ens), "--out", str(out)]) == 0
    assert sorted(loaded) == ["member-0", "member-1"]
    kept = json.loads(out.read_text())["runs"]["ens"]
    assert sorted(kept["members"]) == ["member-0", "member-1"]
    fresh = ensemble.summarise(ens, plan, {"softmax": judged_run / "kgl_blog-attngeom-qk"})  # each member loaded anew
    assert kept["ensemble"]["statistics"] == fresh["statistics"]
    spread = kept["ensemble"]["statistics"]["softmax_s0"]["distinct_winners"]["1200"]
    assert spread["members"][0] == 65.2083 and len(spread["members"]) == 2


@pytest.mark.parametrize(
    "damage, message",
    [
        ("unjudged", "no report; judge the run first"),
        ("rejudge", "a report of other bundles"),
        ("incomplete", "has not completed"),
        ("no-manifest", "manifest.json"),
        ("bad-out", "measured.json"),
        ("nan-out", "nan is not a finite number"),
        ("infinite-out", "-inf is not a finite number"),
    ],
)
def test_what_cannot_be_summarised_is_one_error_line_and_nothing_is_written(
    judged_run, tmp_path, capsys, damage, message
):
    run = tmp_path / "softmax"
    shutil.copytree(judged_run, run)
    out = tmp_path / "measured.json"
    if damage == "unjudged":
        shutil.rmtree(run / "report")
    elif damage == "rejudge":
        even_row(run)
    elif damage == "incomplete":
        (run / runs.MANIFEST).write_text(json.dumps(finished_manifest(completed=False)))
    elif damage == "no-manifest":
        (run / runs.MANIFEST).unlink()
    elif damage == "bad-out":
        out.write_text("{not json")
    elif damage in ("nan-out", "infinite-out"):  # a kept file whose statistic is not a number: not written back
        kept = json.loads((REPO / "expected" / "measured" / "paper-step1200.json").read_text())
        one = next(iter(kept["runs"].values()))["statistics"]
        next(iter(one.values()))["run"]["mean_norm_entropy"]["1200"] = float("nan" if damage == "nan-out" else "-inf")
        out.write_text(json.dumps(kept))
    before = out.read_bytes() if out.exists() else None
    capsys.readouterr()
    assert cli.main(["summary", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert (out.read_bytes() if out.exists() else None) == before


def test_runs_kept_together_are_judged_as_one_set_as_the_kept_folder_is_judged_again(two_runs, tmp_path, capsys):
    """--together keeps the bundles (not the windows) and judges them side by side: the claims comparing
    the models, skipped in each run's own report, are judged; the kept folder judged again gives the same."""
    kept, out = tmp_path / "kept", tmp_path / "measured.json"
    runs_ = [str(two_runs["softmax"]), str(two_runs["yat_b"])]
    capsys.readouterr()
    assert cli.main(["summary", *runs_, "--out", str(out), "--together", str(kept)]) == 0
    printed = capsys.readouterr().out.splitlines()
    doc = json.loads(out.read_text())
    together = doc["together"]
    assert printed[2] == "together: {passed} passed, {failed} failed, {skipped} skipped: {verdict}".format(
        **together["verdict"]
    )
    assert together["judged_by"]["tier"] == "rerun" and together["bundles"] == str(kept)
    assert together["command"] == f"./reproduce.sh --bundles {kept} --variants softmax,yat_b"
    assert sorted(together["files"]) == sorted(
        [
            f"softmax/kgl_blog-attngeom-qk/{f}"
            for f in ("attn_softmax_s0.npz", "geom_softmax_s0.npz", "yat_attention.json")
        ]
        + [f"yat_b/kgl_blog-attngeom-qk/{f}" for f in ("attn_yat_b_s0.npz", "geom_yat_b_s0.npz", "yat_attention.json")]
    )
    alone = {c["id"] for name in ("softmax", "yat_b") for c in doc["runs"][name]["judged"]}
    both = {c["id"]: c for c in together["judged"]}
    assert {"inversion", "census.kernel_fewer"} <= set(both) - alone
    assert all(both[c["id"]] == c for name in ("softmax", "yat_b") for c in doc["runs"][name]["judged"])
    assert cli.main(["--bundles", str(kept), "--variants", "softmax,yat_b", "--out", str(tmp_path / "again")]) in (0, 1)
    again = json.loads((tmp_path / "again" / "report.json").read_text())
    assert [
        {k: c[k] for k in ("id", "verdict", "measured", "expected")} for c in again["claims"] if c["verdict"] != "SKIP"
    ] == together["judged"]
    assert all(sha256_file(kept / name) == sha for name, sha in together["files"].items())
    assert "this run" in again["trajectories"]["sources"]  # expected/measured/ does not keep these runs
    renewed = kept / "softmax" / "kgl_blog-attngeom-qk" / "attn_softmax_s0.npz"
    renewed.unlink()  # a second --together renews each run's folder it names
    assert cli.main(["summary", runs_[0], "--out", str(out), "--together", str(kept)]) == 0
    assert json.loads(out.read_text())["together"]["files"] == together["files"] and renewed.is_file()


def test_kept_bundles_judged_again_add_no_trajectory_their_summary_holds(two_runs, tmp_path, monkeypatch):
    from attngeom.judgement import trajectories

    measured, kept = tmp_path / "measured", tmp_path / "measured" / "paper-step12000"
    measured.mkdir()
    (measured / "elsewhere.json").write_text(json.dumps({"what": "kept elsewhere", "runs": {}}))
    runs_ = [str(two_runs["softmax"]), str(two_runs["yat_b"])]
    assert cli.main(["summary", *runs_, "--out", str(measured / "full.json"), "--together", str(kept)]) == 0
    monkeypatch.setattr(trajectories, "MEASURED_DIR", measured)
    assert cli.main(["--bundles", str(kept), "--variants", "softmax,yat_b", "--out", str(tmp_path / "r")]) in (0, 1)
    section = json.loads((tmp_path / "r" / "report.json").read_text())["trajectories"]
    assert "this run" not in section["sources"] and str(measured / "full.json") in section["sources"]
    assert section["trajectories"] == [  # each run once, by the summary that keeps it
        "full.json: softmax",
        "full.json: yat_b",
        "the author's rerun kgl_blog-goat-telem",
        "the author's rerun kgl_blog-yatattn-b-telem",
    ]
    monkeypatch.setattr(trajectories, "MEASURED_DIR", tmp_path / "none")
    assert cli.main(["--bundles", str(kept), "--variants", "softmax,yat_b", "--out", str(tmp_path / "r")]) in (0, 1)
    assert "this run" in json.loads((tmp_path / "r" / "report.json").read_text())["trajectories"]["sources"]


def test_runs_that_cannot_be_kept_together_are_one_error_line_and_nothing_is_written(two_runs, tmp_path, capsys):
    out, kept = tmp_path / "measured.json", tmp_path / "kept"
    twice, renamed = tmp_path / "again" / "softmax", tmp_path / "again" / "softmax-2"
    shutil.copytree(two_runs["softmax"], twice)
    shutil.copytree(two_runs["softmax"], renamed)
    for runs_, where, message in (
        ([two_runs["softmax"], twice], kept, "two run folders with the same name"),
        ([two_runs["softmax"], renamed], kept, "a second bundle for softmax seed 0"),  # found once copied: no swap
        ([two_runs["softmax"]], tmp_path / "file", "exists and is not a folder"),
    ):
        (tmp_path / "file").write_text("a file, not a folder")
        capsys.readouterr()
        assert cli.main(["summary", *map(str, runs_), "--out", str(out), "--together", str(where)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
        assert not out.exists() and not kept.exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["again", "file"]  # no half-kept folder left


def test_the_committed_summaries_agree_with_their_own_verdicts():
    paths = sorted((REPO / "expected" / "measured").glob("*.json"))
    summaries = [doc for doc in (json.loads(p.read_text()) for p in paths) if "runs" in doc]
    assert summaries
    for doc in summaries:
        for _, run in judged_runs(doc["runs"]):  # a run, or each member of an ensemble
            assert run["command"].startswith("./reproduce.sh rerun ") and run["statistics"]
            v, judged = run["verdict"], [c["verdict"] for c in run["judged"]]
            assert v["passed"] == judged.count("PASS") and v["failed"] == judged.count("FAIL")
            assert len(judged) == v["passed"] + v["failed"]
            assert v["verdict"] == ("FAIL" if v["failed"] else "PASS")


def test_the_committed_bundles_kept_together_are_judged_again_to_the_verdicts_their_summary_records(tmp_path):
    """Each committed summary's `together` folder holds the files it hashed, and judging it again as its
    `command` says gives every verdict, measured value and count the summary records."""
    from attngeom.jobs import verify

    paths = sorted((REPO / "expected" / "measured").glob("*.json"))
    kept = [doc["together"] for doc in map(json.loads, (p.read_text() for p in paths)) if "together" in doc]
    assert kept
    for together in kept:
        folder = REPO / together["bundles"]
        listed = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
        assert listed == set(together["files"]) and len(listed) >= 3
        assert all(sha256_file(folder / name) == sha for name, sha in together["files"].items())
        variants = together["command"].split("--variants ")[1]
        assert together["command"] == f"./reproduce.sh --bundles {together['bundles']} --variants {variants}"
        verify.run_verify(folder, tmp_path / "report", variants=tuple(variants.split(",")))
        again = _verdicts(json.loads((tmp_path / "report" / "report.json").read_text()))  # as summary records it
        assert again["judged_by"]["tier"] == together["judged_by"]["tier"] == "rerun"
        assert again["verdict"] == together["verdict"]
        judged = again["judged"]
        assert [(c["id"], c["verdict"], c["expected"]) for c in judged] == [
            (c["id"], c["verdict"], c["expected"]) for c in together["judged"]
        ]
        for now, then in zip(judged, together["judged"]):  # a float as the machine that judges rounds it
            assert now["measured"] == (
                pytest.approx(then["measured"], rel=1e-9) if isinstance(then["measured"], float) else then["measured"]
            ), now["id"]


def test_a_summary_onto_a_read_only_file_system_is_2_naming_the_file(judged_run, tmp_path, tmpfs, capsys):
    import subprocess

    disk = tmpfs(tmp_path / "ro")
    (disk / "measured.json").write_text((REPO / "expected" / "measured" / "paper-step1200.json").read_text())
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    before = (disk / "measured.json").read_bytes()
    capsys.readouterr()
    assert cli.main(["summary", str(judged_run), "--out", str(disk / "measured.json")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {disk / 'measured.json'}: cannot be written (Read-only file system); write elsewhere\n", err
    assert (disk / "measured.json").read_bytes() == before


def test_what_a_kept_run_or_ensemble_trained_tells_one_training_from_another():
    files = ("paper-step1200.json", "paper-step12000.json", "ensemble-step1200.json")
    kept = {f: json.loads((REPO / "expected" / "measured" / f).read_text())["runs"] for f in files}
    assert training_of(kept["ensemble-step1200.json"]["yat_b"]) == "an ensemble of 4 of yat_b_s0 (paper)"
    assert training_of(kept["paper-step12000.json"]["paper-yat_b"]) == "yat_b_s0 (paper, 12,000 steps)"
    assert training_of(kept["paper-step1200.json"]["yat_b"]) == "yat_b_s0 (paper, 12,000 steps)"  # stopped: the same
    trained = {training_of(r) for runs in kept.values() for r in runs.values()}
    assert len(trained) == 6  # softmax, yat_b and goat_v, each alone and in an ensemble

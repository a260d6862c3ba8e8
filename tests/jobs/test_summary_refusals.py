"""`summary` never loses what it was given: an output inside, above or equal to a run it reads, a root, a folder
it does not own, text its schema refuses and a name that is not UTF-8 are refused before anything changes,
and two summaries writing one file take turns, each keeping its run."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from pathlib import Path

import pytest
from helpers.reports import cli as process
from helpers.reports import refused

from attngeom import cli


def contents(folder: Path) -> dict[str, str]:
    """Every file under `folder` by its relative path, with its sha256."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def runs_in(two_runs, tmp_path) -> Path:
    """The two judged runs copied into one folder P (P/softmax, P/yat_b) that a test may harm."""
    parent = tmp_path / "P"
    for name, run in two_runs.items():
        shutil.copytree(run, parent / name)
    return parent


def test_a_together_folder_that_holds_the_runs_is_refused_and_they_keep_every_file(runs_in, tmp_path, capsys):
    before = contents(runs_in)
    argv = ["summary", str(runs_in / "softmax"), str(runs_in / "yat_b"), "--out", str(tmp_path / "s.json")]
    refused(capsys, [*argv, "--together", str(runs_in)], f"{runs_in} holds {runs_in / 'softmax'}, which it reads")
    assert contents(runs_in) == before and not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("inside", ["kept", "report/kept"])
def test_a_together_folder_inside_a_run_is_refused_and_the_run_is_unchanged(runs_in, tmp_path, capsys, inside):
    run = runs_in / "softmax"
    before = contents(run)
    argv = ["summary", str(run), "--out", str(tmp_path / "s.json"), "--together", str(run / inside)]
    refused(capsys, argv, f"{run / inside} lies inside {run}, which it reads")
    assert contents(run) == before


def test_a_summary_file_inside_a_run_or_equal_to_it_is_refused(runs_in, capsys):
    run = runs_in / "softmax"
    before = contents(run)
    refused(capsys, ["summary", str(run), "--out", str(run / "s.json")], "lies inside")
    refused(capsys, ["summary", str(run), "--out", str(run)], "is a folder, not a file to write")
    assert contents(run) == before


def test_a_root_or_a_folder_no_together_wrote_is_never_a_together_folder(runs_in, tmp_path, capsys):
    run = runs_in / "softmax"
    argv = ["summary", str(run), "--out", str(tmp_path / "s.json"), "--together"]
    refused(capsys, [*argv, "/"], "/: a file-system root or mount point")
    assert not Path("/softmax").exists()
    foreign = tmp_path / "notes"
    (foreign / "a").mkdir(parents=True)
    (foreign / "a" / "todo.txt").write_text("mine")
    refused(capsys, [*argv, str(foreign)], "holds a/todo.txt, which no --together wrote")
    assert (foreign / "a" / "todo.txt").read_text() == "mine"


def test_a_together_folder_is_kept_again_and_a_killed_calls_leftovers_go(runs_in, tmp_path, capsys):
    run, together = runs_in / "softmax", tmp_path / "kept"
    argv = ["summary", str(run), "--out", str(tmp_path / "s.json"), "--together", str(together)]
    assert cli.main(argv) == 0
    leftover = tmp_path / ".kept.x1y2z3.tmp"
    leftover.mkdir()
    assert cli.main(argv) == 0  # a folder that only --together wrote is its own
    assert not leftover.exists() and sorted(p.name for p in together.iterdir()) == ["softmax"]
    assert json.loads((tmp_path / "s.json").read_text())["together"]["verdict"]["failed"] == 0


def test_text_the_summary_schema_refuses_is_refused_before_the_file_changes(runs_in, tmp_path, capsys):
    out = tmp_path / "s.json"
    assert cli.main(["summary", str(runs_in / "softmax"), "--out", str(out)]) == 0
    before = out.read_bytes()
    long = "w" * 10_001
    refused(capsys, ["summary", str(runs_in / "yat_b"), "--out", str(out), "--what", long], "--what: at most 10,000")
    refused(capsys, ["summary", str(runs_in / "yat_b"), "--out", str(out), "--note", long], "--note: at most 10,000")
    assert out.read_bytes() == before
    assert cli.main(["summary", str(runs_in / "yat_b"), "--out", str(out), "--what", "w" * 10_000]) == 0
    assert cli.main(["bands", str(out)]) == 0  # what summary writes, the readers read


def test_a_run_named_as_a_kept_run_of_another_training_is_refused_and_the_kept_one_stays(runs_in, tmp_path, capsys):
    """Two folders of one name (`member-1` of two ensembles, say) never replace each other's run: only a
    run of the same training (the same run summarised again, a stopped run's continuation) does."""
    out, together = tmp_path / "s.json", tmp_path / "kept"
    assert cli.main(["summary", str(runs_in / "softmax"), "--out", str(out), "--together", str(together)]) == 0
    before, kept = out.read_bytes(), contents(together)
    other = shutil.copytree(runs_in / "yat_b", tmp_path / "Q" / "softmax")  # yat_b's run in a folder named softmax
    says = f"{out}: already keeps 'softmax', a run of softmax_s0 (paper, 12,000 steps), where this one is of yat_b_s0"
    refused(capsys, ["summary", str(other), "--out", str(out), "--together", str(together)], says)
    assert out.read_bytes() == before and contents(together) == kept
    manifest = json.loads((runs_in / "softmax" / "manifest.json").read_text())
    manifest["trajectory"] = (manifest.get("trajectory") or {}) | {"member": 1}  # one ulp away: another trajectory
    shutil.rmtree(other)
    member = shutil.copytree(runs_in / "softmax", tmp_path / "Q" / "softmax")
    (member / "manifest.json").write_text(json.dumps(manifest))
    refused(capsys, ["summary", str(member), "--out", str(out)], "where this one is of softmax_s0, member 1 (paper")
    assert out.read_bytes() == before
    assert (
        cli.main(["summary", str(runs_in / "softmax"), "--out", str(out), "--note", "again"]) == 0
    )  # its own training
    assert json.loads(out.read_text())["runs"]["softmax"]["note"] == "again"


@pytest.mark.parametrize("field", ["train.steps", "seeds", "variants", "preset", "train"])
def test_a_manifest_that_lacks_a_field_of_its_run_is_one_error_line(runs_in, tmp_path, capsys, field):
    run = runs_in / "softmax"
    manifest = json.loads((run / "manifest.json").read_text())
    holder, _, key = ("train", "", field.split(".")[1]) if "." in field else (None, "", field)
    del (manifest["config"][holder] if holder else manifest["config"])[key]
    (run / "manifest.json").write_text(json.dumps(manifest))
    refused(capsys, ["summary", str(run), "--out", str(tmp_path / "s.json")], "missing key(s)")


def test_two_summaries_into_one_file_at_once_each_keep_their_run(runs_in, tmp_path):
    out = tmp_path / "s.json"
    statuses: list[int] = []

    def summarise(name: str) -> None:
        proc = process("summary", str(runs_in / name), "--out", str(out), cwd=runs_in)
        statuses.append(proc.returncode)

    for _ in range(2):
        out.unlink(missing_ok=True)
        threads = [threading.Thread(target=summarise, args=(name,)) for name in ("softmax", "yat_b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(json.loads(out.read_text())["runs"]) == ["softmax", "yat_b"]
    assert statuses == [0, 0, 0, 0]


def test_a_folder_name_that_is_not_utf8_is_one_error_line(tmp_path):
    proc = process("summary", b"run\xff", "--out", "s.json", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr == "error: run\\xff: not UTF-8; name files and folders in UTF-8\n"
    assert list(tmp_path.iterdir()) == []

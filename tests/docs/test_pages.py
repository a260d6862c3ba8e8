"""The docs' measured figures are their files' (`./reproduce.sh docs --check`, on a copy whose
measurement changed), and CITATION.cff is valid CFF 1.2.0 citing the package and the two posts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import REPO

from attngeom import __version__
from attngeom.docs import pages as docs

# CFF 1.2.0 (citation-file-format.github.io/1.2.0/schema): the keys a file may hold at its root and in a
# reference, those it must hold, and the reference types used here.
CFF_ROOT = {
    "abstract", "authors", "cff-version", "commit", "contact", "date-released", "doi", "identifiers", "keywords",
    "license", "license-url", "message", "preferred-citation", "references", "repository", "repository-artifact",
    "repository-code", "title", "type", "url", "version",
}  # fmt: skip
CFF_REQUIRED = {"authors", "cff-version", "message", "title"}
CFF_REFERENCE_REQUIRED = {"authors", "title", "type"}
CFF_PERSON = {"family-names", "given-names", "name-particle", "name-suffix", "affiliation", "email", "orcid", "website"}
POSTS = {
    "https://tahabouhsine.com/blog/the-geometry-of-attention/",
    "https://tahabouhsine.com/blog/the-geometry-of-attention-jax-flax-nnx/",
}


def _authors_ok(authors) -> bool:
    """Each author a person (some of CFF_PERSON, a family or given name among them) or an entity (`name`)."""
    return (
        isinstance(authors, list)
        and bool(authors)
        and all(
            isinstance(a, dict)
            and (set(a) == {"name"} or (set(a) <= CFF_PERSON and {"family-names", "given-names"} & set(a)))
            for a in authors
        )
    )


def test_the_citation_file_is_cff_1_2_0_of_this_version_citing_both_posts():
    doc = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    assert CFF_REQUIRED <= set(doc) <= CFF_ROOT, set(doc) ^ CFF_ROOT
    assert doc["cff-version"] == "1.2.0" and doc["type"] == "software" and doc["version"] == __version__
    assert _authors_ok(doc["authors"]) and isinstance(doc["message"], str) and doc["message"]
    assert str(doc["date-released"])[:4].isdigit() and len(str(doc["date-released"])) == 10  # YYYY-MM-DD
    for ref in doc["references"]:
        assert CFF_REFERENCE_REQUIRED <= set(ref) and ref["type"] == "blog" and _authors_ok(ref["authors"])
    assert {ref["url"] for ref in doc["references"]} == POSTS


def _copy_of_the_checkout(dest: Path) -> Path:
    """The checkout's tracked files (and this work tree's changes to them) copied into `dest`."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    )
    for name in listed.stdout.splitlines():
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


def _docs(root: Path, *args: str) -> subprocess.CompletedProcess:
    venv = os.environ.get("ATTNGEOM_VENV") or str(REPO / ".venv")  # the suite's environment, built from the same lock
    env = dict(os.environ, ATTNGEOM_VENV=str(Path(venv).resolve()))
    return subprocess.run(
        [str(root / "reproduce.sh"), "docs", *args], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_a_changed_measurement_puts_its_block_out_of_date_until_the_docs_are_made_again(tmp_path):
    root = _copy_of_the_checkout(tmp_path / "checkout")
    done = _docs(root, "--check")
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr  # the committed pages are their files'
    kept = root / "expected" / "measured" / "paper-step1200.json"
    doc = json.loads(kept.read_text())
    doc["runs"]["yat_b"]["statistics"]["yat_b_s0"]["run"]["distinct_winners"]["1200"] = 46.0  # was 47.4167
    kept.write_text(json.dumps(doc))
    page = (root / "docs" / "step-1200.md").read_text()
    done = _docs(root, "--check")
    assert done.returncode == 1, done.stdout + done.stderr
    stale = done.stdout.splitlines()
    report = (root / "docs" / "report.md").read_text().splitlines()
    where = {(line.split(":")[0], int(line.split(":")[1])) for line in stale}
    # the block of the runs' table, and the trajectories beside the quotes (a run of that file is one)
    assert {path for path, _ in where} == {str(root / "docs" / "step-1200.md"), str(root / "docs" / "report.md")}, stale
    blocks = {(report if path.endswith("report.md") else page.splitlines())[n - 1] for path, n in where}
    assert any("step1200_runs()" in b for b in blocks) and any("trajectory_spread()" in b for b in blocks), blocks
    assert (root / "docs" / "step-1200.md").read_text() == page  # --check changes nothing
    assert (
        _docs(root).returncode == 0
        and "| yat_b | 45 min | 46 / 51.0417 |" in (root / "docs" / "step-1200.md").read_text()
    )
    assert _docs(root, "--check").returncode == 0


def test_a_block_out_of_date_is_named_by_its_line():
    before = "a\n<!-- [[[cog x ]]] -->\nold\n<!-- [[[end]]] -->\nb\n<!-- [[[cog y ]]] -->\nsame\n<!-- [[[end]]] -->\n"
    after = before.replace("old", "new\nlonger")
    assert docs.stale_blocks(before, after) == [2]
    assert docs.stale_blocks(before, before) == []


def test_every_page_of_docs_is_linked_from_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert pages and all(f"(docs/{name})" in readme for name in pages)
    assert len(readme.splitlines()) <= 200

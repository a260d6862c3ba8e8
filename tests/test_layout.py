"""The package's layout: packages by concern, each importing only those below it, no import circle, argparse
only at the command edge, and the verification free of jax and of the training code."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "attngeom"
LAYERS = ("base", "geometry", "bundles", "measures", "judgement", "report", "training", "jobs", "backends", "docs")
"""The packages from the bottom up: each imports only those before it (and itself); `commands` and the
modules beside the packages (`cli`, `__main__`) stand above them all."""
EDGE = ("commands", "cli")
"""Where argparse may be imported: the command line and its subcommands."""
JAX_SIDE = ("jax", "jaxlib", "flax", "optax")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.with_suffix("").relative_to(root.parent).parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(root: Path) -> dict[str, set[str]]:
    """Each module of the package at `root` -> the modules of the package it imports, at any depth of its
    code (a function's own imports count)."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        out[name] = {m for m in found if m in modules and m not in (name, root.name)}
    return out


def package_of(module: str) -> str:
    """The package a module belongs to (`attngeom.judgement.judge` -> judgement; `attngeom.cli` -> cli)."""
    return module.split(".")[1] if module.count(".") else ""


def level(package: str) -> int:
    return LAYERS.index(package) if package in LAYERS else len(LAYERS)


def against_the_grain(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a package above the importer's, as `importer -> imported`."""
    return sorted(
        f"{a} -> {b}"
        for a, bs in graph.items()
        for b in bs
        if package_of(a) != package_of(b) and level(package_of(b)) > level(package_of(a))
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan): each an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(n: str) -> None:
        index[n] = low[n] = len(index)
        stack.append(n)
        on.add(n)
        for w in sorted(graph.get(n, ())):
            if w not in index:
                visit(w)
                low[n] = min(low[n], low[w])
            elif w in on:
                low[n] = min(low[n], index[w])
        if low[n] == index[n]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == n:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for n in sorted(graph):
        if n not in index:
            visit(n)
    return found


def test_each_package_imports_only_those_below_it():
    graph = imports(PACKAGE)
    assert {package_of(m) for m in graph} - {""} <= {*LAYERS, "commands", "cli", "__main__"}
    assert against_the_grain(graph) == []


def test_no_module_and_no_package_imports_itself_in_a_circle():
    graph = imports(PACKAGE)
    assert cycles(graph) == []
    packages = {package_of(a): set() for a in graph}
    for a, bs in graph.items():
        packages[package_of(a)] |= {package_of(b) for b in bs} - {package_of(a)}
    assert cycles(packages) == []


def test_argparse_is_imported_only_at_the_command_edge():
    users = sorted(
        module_name(p, PACKAGE)
        for p in PACKAGE.rglob("*.py")
        if "argparse"
        in {n.name for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.Import) for n in node.names}
        | {node.module for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.ImportFrom)}
    )
    assert users and all(package_of(m) in EDGE for m in users), users


def test_the_folder_listing_shows_the_packages_and_a_few_modules_beside_them():
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert len(modules) <= 6, modules
    assert packages == sorted([*LAYERS, "commands"])


def test_the_checks_find_an_upward_import_and_a_circle(tmp_path):
    """The rules above can fail: a made-up package with a base module importing a job, and a circle."""
    root = tmp_path / "attngeom"
    for package in ("base", "jobs"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "base" / "files.py").write_text("from attngeom.jobs import work\n")
    (root / "jobs" / "work.py").write_text("def run():\n    from attngeom.jobs.again import x\n")
    (root / "jobs" / "again.py").write_text("from attngeom.jobs import work\nx = 1\n")
    graph = imports(root)
    assert against_the_grain(graph) == ["attngeom.base.files -> attngeom.jobs.work"]
    assert cycles(graph) == [["attngeom.jobs.again", "attngeom.jobs.work"]]


def _loaded(code: str, rule) -> list[str]:
    """The modules, among those `rule` picks, that a fresh interpreter has loaded after running `code`."""
    check = f"import sys; {code}; print('\\n'.join(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", check],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [m for m in proc.stdout.split() if rule(m)]


@pytest.mark.parametrize(
    "code",
    [
        "import attngeom.jobs.verify",
        "import attngeom.cli; attngeom.cli.build_parser()",
        "from attngeom.training import data, device, runs, local_run",
    ],
)
def test_verification_and_the_command_line_never_load_jax(code):
    assert _loaded(code, lambda m: m.split(".")[0] in JAX_SIDE) == []


def test_the_command_line_registers_its_commands_without_their_work():
    loaded = _loaded("import attngeom.cli; attngeom.cli.build_parser()", lambda m: m.startswith("attngeom."))
    assert {package_of(m) for m in loaded} <= {"", "base", "commands", "cli"}, loaded


JUDGEMENT = ("judgement", "measures", "report", "jobs")


@pytest.mark.parametrize(
    "code",
    [
        "import attngeom.training",
        "from attngeom.training import data, device, fidelity, original, progress, local_run, runs, trajectory",
    ],
)
def test_training_never_loads_the_judgement(code):
    """Training sits below the judgement: the rerun job trains, then verifies."""
    assert _loaded(code, lambda m: package_of(m) in JUDGEMENT) == []


def test_the_judgement_check_can_fail():
    """The same check finds the judgement where it is loaded: the rerun job loads verify."""
    assert "attngeom.jobs.verify" in _loaded("import attngeom.jobs.rerun", lambda m: package_of(m) in JUDGEMENT)

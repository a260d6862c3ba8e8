"""Does jax see the GPU with Kaggle's system CUDA on the library path, with and without the kernel's cleanup?

Kaggle's GPU image sets `LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64`, the
second holding CUDA 12.8; the lock's CUDA 12.9 wheels then load the system's nvJitLink and jax
falls back to the CPU. This check installs `requirements-cuda.lock` the way the kernel does
(`kernel_main.interpreter`: pip installs uv, `uv venv`, `uv pip install --require-hashes`), puts a
folder of the CUDA 12.8 libraries of `tests/kaggle-runtime/system-cuda.txt` on the library path
and asks jax for its device twice: with that path as Kaggle sets it, and as the kernel's
`kernel_env` cleans it. `OUTDIR/kaggle_cuda.json` records both answers and the probes' last lines.

    python bench/kaggle_cuda_check.py OUTDIR           exit 0 when the cleaned path gives the GPU
    python bench/kaggle_cuda_check.py --smoke OUTDIR   any machine: this interpreter (the kernel's
                                                       ATTNGEOM_KERNEL_PYTHON path) and a stand-in
                                                       library folder; exit 0 when both probes ran

Offline, pip's and uv's own settings point both installs at a wheel folder (PIP_FIND_LINKS and
PIP_NO_INDEX, UV_FIND_LINKS and UV_OFFLINE), as the Kaggle-like runtime test does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from attngeom.backends import kernel_main  # noqa: E402  (stdlib only, as in the kernel)

SYSTEM_CUDA = REPO / "tests" / "kaggle-runtime" / "system-cuda.txt"
PROBE = "import jax; print(jax.devices()[0].platform)"


def system_cuda(folder: Path, smoke: bool) -> Path:
    """A folder of CUDA 12.8 libraries like Kaggle's /usr/local/cuda/lib64 (smoke: an empty stand-in)."""
    lib64 = folder / "cuda-12.8" / "lib64"
    lib64.mkdir(parents=True)
    if smoke:
        (lib64 / "libnvJitLink.so.12").touch()
        return lib64
    wheels = folder / "cuda-12.8-wheels"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-cache-dir"]
    kernel_main.run(
        "pip install the CUDA 12.8 libraries",
        [*pip, "--require-hashes", "--no-deps", "--target", str(wheels), "-r", str(SYSTEM_CUDA)],
    )
    for lib in wheels.glob("nvidia/*/lib/*.so*"):
        lib.rename(lib64 / lib.name)
    return lib64


def probe(python: str, env: dict) -> dict:
    """The platform jax picks by default under `env`, and the probe's last lines."""
    done = subprocess.run([python, "-c", PROBE], env=env, capture_output=True, text=True, check=False)
    last = [line for line in done.stderr.splitlines() if line.strip()][-3:]
    return {"exit": done.returncode, "platform": done.stdout.strip() or None, "last_lines": last}


def main(argv: list[str]) -> int:
    smoke = argv[:1] == ["--smoke"]
    out = Path(argv[-1] if argv else "").resolve()
    if len(argv) != 1 + smoke:
        print("usage: python bench/kaggle_cuda_check.py [--smoke] OUTDIR", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="attngeom-kaggle-cuda-"))  # gigabytes of wheels: not in OUTDIR
    try:
        return check(out, scratch, smoke)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check(out: Path, scratch: Path, smoke: bool) -> int:
    """Install, probe twice, write `kaggle_cuda.json`; the exit status."""
    lib64 = system_cuda(scratch, smoke)
    repo = scratch / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "attngeom").symlink_to(REPO / "src" / "attngeom")
    (repo / "requirements.lock").symlink_to(REPO / "requirements-cuda.lock")
    if smoke:
        os.environ["ATTNGEOM_KERNEL_PYTHON"] = sys.executable
    python = kernel_main.interpreter(scratch, repo)
    nvidia = "/usr/local/nvidia/lib64"  # the driver's folder on Kaggle; here whatever the machine has
    os.environ["LD_LIBRARY_PATH"] = ":".join(filter(None, [nvidia, str(lib64), os.environ.get("LD_LIBRARY_PATH")]))
    raw = dict(os.environ, PYTHONPATH=str(repo / "src"))
    cleaned = kernel_main.kernel_env(repo, on_kaggle=False)
    doc = {
        "smoke": smoke,
        "system_cuda": sorted(p.name for p in lib64.iterdir()),
        "kaggle_path": {"LD_LIBRARY_PATH": raw["LD_LIBRARY_PATH"], **probe(python, raw)},
        "kernel_path": {"LD_LIBRARY_PATH": cleaned.get("LD_LIBRARY_PATH", ""), **probe(python, cleaned)},
    }
    ran = doc["kaggle_path"]["exit"] == 0 and doc["kernel_path"]["exit"] == 0
    doc["verdict"] = "PASS" if ran and (smoke or doc["kernel_path"]["platform"] == "gpu") else "FAIL"
    (out / "kaggle_cuda.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(
        f"kaggle_cuda: {doc['verdict']}; jax sees {doc['kaggle_path']['platform']} with Kaggle's library path, "
        f"{doc['kernel_path']['platform']} with the kernel's"
    )
    return 0 if doc["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
